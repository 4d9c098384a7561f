"""`gateway grants list|revoke` run as an operator would (`python -m gateway …` in a
subprocess) on the database of a gateway running in-process, whose creates show the effect."""

from __future__ import annotations

import getpass

from gateway.policies import grants
from tests.factories import RequestFactory
from tests.grants.helpers import auto_approved, give_grant
from tests.services.cli import Cli
from tests.services.inprocess import running_gateway
from tests.services.inprocess import test_settings as settings_for

HEADER = "id\tproject\tkey\twhat\tgranted by\texpires\tuses\tlast used"


def rows(stdout: str) -> list[list[str]]:
    lines = stdout.strip().splitlines()
    assert lines[0] == HEADER, stdout
    return [line.split("\t") for line in lines[1:]]


async def test_list_and_revoke_by_id(cli: Cli, request_factory: RequestFactory) -> None:
    async with running_gateway(settings_for(cli.database_url)) as gateway:
        bot = await gateway.new_key("default", name="bot")
        elsewhere = await gateway.new_key("other", name="helper")
        grant = await give_grant(gateway, request_factory, "c1", key=bot)
        other = await give_grant(gateway, request_factory, "c2", key=elsewhere, grant="args:900")
        assert await auto_approved(gateway, request_factory, "c3", key=bot)

        listed = await cli("grants", "list")
        assert listed.returncode == 0, listed
        assert [row[0] for row in rows(listed.stdout)] == [other.id, grant.id]
        shown = rows(listed.stdout)[1]
        assert shown[1:5] == ["default", "bot", "read_file in this run (run-1)", "Alice (slack)"]
        assert shown[5].startswith(grant.created_at.date().isoformat())  # the expiry
        assert shown[6] == "1" and shown[7] != "-"  # c3 used it
        only = await cli("grants", "list", "--project", "other")
        assert [row[0] for row in rows(only.stdout)] == [other.id]
        assert "with these exact arguments" in rows(only.stdout)[0][3]

        unknown = await cli("grants", "revoke", "no-such-grant")
        assert unknown.returncode == 1, unknown
        assert "no grant with id 'no-such-grant'" in unknown.stderr
        foreign = await cli("grants", "revoke", grant.id, "--project", "other")
        assert foreign.returncode == 1, foreign
        assert len(await grants.listing(gateway.core, live_only=True)) == 2

        revoked = await cli("grants", "revoke", grant.id)
        assert revoked.returncode == 0, revoked
        assert f"revoked grant {grant.id}: read_file in this run (run-1)" in revoked.stdout
        assert not await auto_approved(gateway, request_factory, "c4", key=bot)
        live = await cli("grants", "list")
        assert [row[0] for row in rows(live.stdout)] == [other.id]
        every = await cli("grants", "list", "--all")
        state = {row[0]: row[5] for row in rows(every.stdout)}
        assert state[grant.id].startswith("revoked ")
        assert state[grant.id].endswith(f" by cli:{getpass.getuser()}")


async def test_revoke_every_live_grant_of_a_key(cli: Cli, request_factory: RequestFactory) -> None:
    async with running_gateway(settings_for(cli.database_url)) as gateway:
        bot = await gateway.new_key("default", name="bot")
        in_other = await gateway.new_key("other", name="bot")  # the same name elsewhere
        first = await give_grant(gateway, request_factory, "k1", key=bot)
        second = await give_grant(
            gateway, request_factory, "k2", key=bot, grant="key:3600", run_id="run-2"
        )
        kept = await give_grant(gateway, request_factory, "k3", key=in_other)

        ghost = await cli("grants", "revoke", "--key", "ghost")
        assert ghost.returncode == 1, ghost
        assert "no API key named 'ghost' in project 'default'" in ghost.stderr
        neither = await cli("grants", "revoke")
        assert neither.returncode == 2 and "--key" in neither.stderr, neither

        revoked = await cli("grants", "revoke", "--key", "bot")
        assert revoked.returncode == 0, revoked
        assert "revoked 2 grant(s) of key 'bot' in project 'default'" in revoked.stdout
        assert first.id in revoked.stdout and second.id in revoked.stdout
        live = await grants.listing(gateway.core, live_only=True)
        assert [g.id for g in live] == [kept.id]
        assert not await auto_approved(gateway, request_factory, "k4", key=bot, run_id="run-3")
        assert await auto_approved(gateway, request_factory, "k5", key=in_other)

        empty = await cli("grants", "list", "--project", "default")
        assert empty.returncode == 0 and empty.stdout.strip() == "no live grants", empty
