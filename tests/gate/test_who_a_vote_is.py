"""Who a vote is: never what the caller's `user_info` says. A responder key is its bound
person or, bound to nobody, the project's operator; the CLI, the API and the console's
operator sign-in are that one operator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.seam import AnsweredIn, Refused, Responder, Verb
from gateway.vocabulary import KeyScope
from tests.factories import RequestFactory
from tests.services.cli import Cli
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

# Two of the three DBAs must approve a drop_*; nobody else counts.
CONFIG = """
[people.alice]
email = "alice@example.com"

[people.bob]
email = "bob@example.com"

[people.carol]
email = "carol@example.com"

[people.zed]
email = "zed@example.com"

[teams.dba]
members = ["alice", "bob", "carol"]
approvals_required = 2

[[rules]]
fn = "drop_*"
target = "team:dba"
"""


@pytest.fixture
async def quorum(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


async def respond(gateway: RunningGateway, key: str, call_id: str, **body: Any) -> Any:
    async with gateway.client(key) as client:
        return await client.post(f"/agent/function_calls/{call_id}/respond", json=body)


async def test_user_info_variations_on_one_key_are_one_voter(
    quorum: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(quorum, fn="drop_table")
    key = await quorum.new_key("default", name="front end", scope=KeyScope.RESPONDER)
    for user_info in (
        {"user_id": "agent-1"},
        {"user_id": "agent-2", "name": "Someone Else"},
        {"email": "bob@example.com", "channel": "slack", "user_id": "U-BOB"},
        {"person": "carol", "key": "hlgw_other"},
    ):
        voted = await respond(quorum, key, made.call_id, approved=True, user_info=user_info)
        assert voted.status_code == 200, voted.text
        assert voted.json()["status"]["approved"] is None  # still one approval of two
        assert voted.json()["policy_progress"]["approvals"] == 1


async def test_an_alias_email_in_user_info_cannot_suppress_alices_veto(
    quorum: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(quorum, fn="drop_table")
    agent_side = await quorum.new_key("default", name="front end", scope=KeyScope.RESPONDER)
    posing = {"email": "alice@example.com", "name": "Alice"}
    assert (
        await respond(quorum, agent_side, made.call_id, approved=True, user_info=posing)
    ).status_code == 200
    alice = await quorum.new_key("default", scope=KeyScope.RESPONDER, person="alice")
    veto = await respond(quorum, alice, made.call_id, approved=False, comment="no, not users")
    assert veto.status_code == 200, veto.text
    assert veto.json()["status"]["approved"] is False
    assert veto.json()["status"]["comment"] == "no, not users"


async def test_two_keys_bound_to_two_people_meet_the_quorum(
    quorum: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(quorum, fn="drop_table")
    alice = await quorum.new_key("default", scope=KeyScope.RESPONDER, person="alice")
    bob = await quorum.new_key("default", scope=KeyScope.RESPONDER, person="bob")
    assert (await respond(quorum, alice, made.call_id, approved=True)).status_code == 200
    done = await respond(quorum, bob, made.call_id, approved=True)
    assert done.json()["status"]["approved"] is True


async def test_the_operator_is_one_voter_through_the_cli_the_api_and_the_console(
    cli: Cli, request_factory: RequestFactory, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with running_gateway(settings_for(cli.database_url, config=config)) as gateway:
        made = await request_factory(gateway, fn="drop_table")
        by_cli = await cli("approve", made.call_id, GATEWAY_CONFIG=str(config))
        assert by_cli.returncode == 0, by_cli
        other_admin = await gateway.new_key("default", name="another", scope=KeyScope.ADMIN)
        for key in (gateway.api_key, other_admin):
            by_api = await respond(gateway, key, made.call_id, approved=True)
            assert by_api.status_code == 200, by_api.text
        operator = Responder(AnsweredIn.WEB, "operator", "operator")
        by_console = await gateway.context().answers.answer(made.rid, Verb.APPROVE, operator)
        assert not isinstance(by_console, Refused), by_console
        assert by_console.request.status == "pending"
        async with gateway.client() as client:
            got = (await client.get(f"/function_calls/{made.call_id}")).json()
        assert got["policy_progress"]["approvals"] == 1
        assert got["gateway_status"] == "pending"


@pytest.mark.parametrize("fn", ["drop_table", "read_table"])  # the team's / the console's
async def test_a_key_bound_to_a_person_answers_only_what_was_sent_to_them(
    quorum: RunningGateway, request_factory: RequestFactory, fn: str
) -> None:
    made = await request_factory(quorum, fn=fn)
    zed = await quorum.new_key("default", scope=KeyScope.RESPONDER, person="zed")
    refused = await respond(quorum, zed, made.call_id, approved=True)
    assert refused.status_code == 403, refused.text
    assert "not sent to them" in refused.text
    async with quorum.client() as client:
        assert (await client.get(f"/function_calls/{made.call_id}")).json()[
            "gateway_status"
        ] == "pending"
