"""The `gateway` command line, run as an operator would: `python -m gateway ...` in a subprocess.

Where a command's effect shows in the API, the test starts the gateway in-process on the same
SQLite file and checks through real HTTP.
"""

from __future__ import annotations

import getpass
import re
from pathlib import Path
from typing import Any

from tests.fakes.discord import FakeDiscord
from tests.services.cli import Cli
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

GOOD_CONFIG = """
[people.alice]
slack = "U1"

[teams.sre]
members = ["alice"]
slack_channel = "C9"

[[rules]]
fn = "drop_*"
target = "team:sre"
"""

UNKNOWN_TEAM_CONFIG = """
[[rules]]
fn = "drop_*"
target = "team:ghost"
"""


async def _project_status(gateway: RunningGateway, key: str) -> tuple[int, dict[str, Any]]:
    async with gateway.client(key) as client:
        response = await client.get("/project")
    return response.status_code, response.json()


async def test_keys_create_list_revoke(cli: Cli) -> None:
    created = await cli("keys", "create", "--project", "acme")
    assert created.returncode == 0, created
    key = created.last_line
    assert key.startswith("hlgw_"), created
    match = re.search(r"created key (\d+) for project 'acme'", created.stdout)
    assert match, created
    key_id = match.group(1)

    async with running_gateway(settings_for(cli.database_url)) as gateway:
        status, project = await _project_status(gateway, key)
        assert status == 200, project
        assert project["name"] == "acme"

        listed = await cli("keys", "list")
        assert listed.returncode == 0, listed
        assert key[:12] in listed.stdout
        assert key not in listed.stdout
        assert key not in listed.stderr
        acme_line = next(line for line in listed.stdout.splitlines() if "acme" in line)
        assert acme_line.startswith(f"{key_id}\t")
        assert acme_line.endswith("active")

        revoked = await cli("keys", "revoke", key_id)
        assert revoked.returncode == 0, revoked
        assert "revoked 1 key(s)" in revoked.stdout

        status, body = await _project_status(gateway, key)
        assert status == 401, body
        # The gateway's own key in the same database is untouched.
        status, body = await _project_status(gateway, gateway.api_key)
        assert status == 200, body


async def test_keys_create_with_unknown_target_team(cli: Cli) -> None:
    result = await cli("keys", "create", "--target", "team:nope")
    assert result.returncode != 0, result
    assert "nope" in result.stderr
    assert "hlgw_" not in result.stdout


async def test_webhooks_add_and_list(cli: Cli) -> None:
    url = "http://127.0.0.1:9/hook"
    added = await cli("webhooks", "add", url)
    assert added.returncode == 0, added
    assert added.last_line.startswith("whsec_"), added

    listed = await cli("webhooks", "list")
    assert listed.returncode == 0, listed
    assert url in listed.stdout
    assert added.last_line not in listed.stdout  # the secret is shown only once

    refused = await cli(
        "webhooks", "add", "http://127.0.0.1:9/other", GATEWAY_WEBHOOK_ALLOW_PRIVATE="false"
    )
    assert refused.returncode != 0, refused
    assert "GATEWAY_WEBHOOK_ALLOW_PRIVATE" in refused.stderr
    assert "whsec_" not in refused.stdout


def _function_call(call_id: str) -> dict[str, Any]:
    return {"run_id": "cli-run", "call_id": call_id, "spec": {"fn": "drop_table", "kwargs": {}}}


def _human_contact(call_id: str) -> dict[str, Any]:
    return {"run_id": "cli-run", "call_id": call_id, "spec": {"msg": "which region?"}}


async def test_decisions_from_the_cli_show_in_the_api(cli: Cli) -> None:
    async with (
        running_gateway(settings_for(cli.database_url)) as gateway,
        gateway.client() as client,
    ):
        for call_id in ("fc-approve", "fc-reject"):
            created = await client.post("/function_calls", json=_function_call(call_id))
            assert created.status_code == 200, created.text
        created = await client.post("/human_contacts", json=_human_contact("hc-respond"))
        assert created.status_code == 200, created.text

        approved = await cli("approve", "fc-approve", "--comment", "ok")
        assert approved.returncode == 0, approved
        rejected = await cli("reject", "fc-reject", "--comment", "no")
        assert rejected.returncode == 0, rejected
        answered = await cli("respond", "hc-respond", "eu-west-1")
        assert answered.returncode == 0, answered

        got = (await client.get("/function_calls/fc-approve")).json()
        assert got["status"]["approved"] is True
        assert got["status"]["comment"] == "ok"
        assert got["status"]["user_info"]["channel"] == "cli"
        assert got["gateway_status"] == "approved"

        got = (await client.get("/function_calls/fc-reject")).json()
        assert got["status"]["approved"] is False
        assert got["status"]["comment"] == "no"
        assert got["status"]["user_info"]["channel"] == "cli"

        got = (await client.get("/human_contacts/hc-respond")).json()
        assert got["status"]["response"] == "eu-west-1"
        assert got["status"]["user_info"]["channel"] == "cli"


async def test_cli_refuses_wrong_decisions_and_lists_pending(cli: Cli) -> None:
    async with (
        running_gateway(settings_for(cli.database_url)) as gateway,
        gateway.client() as client,
    ):
        for call_id in ("fc-decided", "fc-pending"):
            created = await client.post("/function_calls", json=_function_call(call_id))
            assert created.status_code == 200, created.text
        created = await client.post("/human_contacts", json=_human_contact("hc-pending"))
        assert created.status_code == 200, created.text
        decided = await client.post(
            "/agent/function_calls/fc-decided/respond", json={"approved": True}
        )
        assert decided.status_code == 200, decided.text

        no_comment = await cli("reject", "fc-pending")
        assert no_comment.returncode != 0, no_comment
        assert "--comment" in no_comment.stderr

        again = await cli("approve", "fc-decided", "--comment", "ok")
        assert again.returncode != 0, again
        assert "already approved" in again.stderr

        wrong_kind = await cli("approve", "hc-pending")
        assert wrong_kind.returncode != 0, wrong_kind
        assert "human contact" in wrong_kind.stderr
        assert "respond" in wrong_kind.stderr

        pending = await cli("pending")
        assert pending.returncode == 0, pending
        listed = {line.split("\t")[0] for line in pending.stdout.splitlines() if line.strip()}
        assert listed == {"fc-pending", "hc-pending"}

        # None of the refused commands changed anything.
        for path in ("/function_calls/fc-pending", "/human_contacts/hc-pending"):
            got = (await client.get(path)).json()
            assert got["gateway_status"] == "pending", got
        got = (await client.get("/function_calls/fc-decided")).json()
        assert got["status"]["user_info"]["channel"] == "api"


async def test_db_upgrade_check_and_jobs(cli: Cli, tmp_path: Path) -> None:
    upgraded = await cli("db", "upgrade")
    assert upgraded.returncode == 0, upgraded

    good = write_config(tmp_path / "good.toml", GOOD_CONFIG)
    checked = await cli("check", GATEWAY_CONFIG=str(good))
    assert checked.returncode == 0, checked
    assert "FAIL" not in checked.stdout
    assert "1 people, 1 teams, 1 rules" in checked.stdout

    bad = write_config(tmp_path / "bad.toml", UNKNOWN_TEAM_CONFIG)
    checked = await cli("check", GATEWAY_CONFIG=str(bad))
    assert checked.returncode == 1, checked
    assert "ghost" in checked.stdout + checked.stderr

    checked = await cli("check", GATEWAY_CONFIG=str(good), GATEWAY_SECRET_KEY="")
    assert checked.returncode == 1, checked
    assert "GATEWAY_SECRET_KEY" in checked.stdout + checked.stderr

    # A key whose default target the config no longer defines is named.
    made = await cli("keys", "create", "--target", "team:sre", GATEWAY_CONFIG=str(good))
    assert made.returncode == 0, made
    empty = write_config(tmp_path / "empty.toml", "")
    checked = await cli("check", GATEWAY_CONFIG=str(empty))
    assert checked.returncode == 1, checked
    assert "unknown team 'sre' (api key" in checked.stdout

    dead = await cli("jobs", "--status", "dead")
    assert dead.returncode == 0, dead
    assert dead.stdout.strip() == ""  # a fresh database has no job that gave up


async def test_discord_check_and_invite_url_log_in_to_discord(cli: Cli) -> None:
    assert (await cli("db", "upgrade")).returncode == 0
    async with FakeDiscord() as fake:
        env = {"DISCORD_API_URL": fake.api_url, "DISCORD_GATEWAY_URL": fake.gateway_url}
        checked = await cli("check", DISCORD_BOT_TOKEN=fake.TOKEN, **env)
        assert checked.returncode == 0, checked
        assert "ok   channel discord: connected, signed in as" in checked.stdout
        invite = await cli("discord", "invite-url", DISCORD_BOT_TOKEN=fake.TOKEN, **env)
        assert invite.returncode == 0, invite
        assert f"client_id={fake.APPLICATION_ID}" in invite.last_line
        refused = await cli("check", DISCORD_BOT_TOKEN="not-the-token", **env)
    assert refused.returncode == 1, refused
    assert "discord refused the bot token" in refused.stdout + refused.stderr
    assert "not-the-token" not in refused.stdout + refused.stderr


async def test_an_approval_from_the_cli_under_a_quorum_is_one_vote(cli: Cli) -> None:
    quorum = {"email": {"address": "ops@example.com"}, "approvals_required": 2}
    body = _function_call("fc-quorum")
    body["spec"]["channel"] = {"any_of": [quorum]}
    async with (
        running_gateway(settings_for(cli.database_url)) as gateway,
        gateway.client() as client,
    ):
        created = await client.post("/function_calls", json=body)
        assert created.status_code == 200, created.text
        voted = await cli("approve", "fc-quorum", "--comment", "ok")
        assert voted.returncode == 0, voted
        assert voted.stdout.strip() == (
            "fc-quorum: vote recorded, still pending "
            f"(1 of 2 approvals: {getpass.getuser()} (the CLI))"
        )
        got = (await client.get("/function_calls/fc-quorum")).json()
        assert got["gateway_status"] == "pending"
        assert got["policy_progress"]["approvals"] == 1
