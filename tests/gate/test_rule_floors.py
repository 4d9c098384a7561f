"""The operator's rules are a floor: what an agent names in `spec.channel`, or in the MCP
tools' `team`/`person`, adds people to a rule's policy and never replaces it; an agent's
`expires_at` can shorten the rule's deadline, never lengthen it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.seam import AnsweredIn, Refused, Responder, Verb
from gateway.vocabulary import KeyScope
from tests.factories import RequestFactory
from tests.mcp.helpers import call, mcp_session
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

CONFIG = """
[people.alice]
email = "alice@example.com"

[people.bob]
email = "bob@example.com"

[people.sam]
email = "sam@example.com"

[people.intern]
email = "intern@example.com"

[teams.dba]
members = ["alice", "bob"]
approvals_required = 2

[teams.sec]
members = ["sam"]

[teams.interns]
members = ["intern"]

[teams.slow]  # a team an agent may name, with a long deadline and an escalation of its own
members = ["intern"]
expires_after = "100h"
escalate = [{ after = "1h", target = "person:intern" }]

[[rules]]
fn = "drop_*"
policy = { all_of = ["team:dba", "team:sec"] }
expires_after = "1h"

[[rules]]
fn = "purge_*"
target = "team:dba"

[projects.default]
expires_after = "2h"
"""
AGENT_MAILBOX = "agent@evil.example"


@pytest.fixture
async def floors(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


async def approve_as(gateway: RunningGateway, person: str, call_id: str) -> dict[str, Any]:
    key = await gateway.new_key("default", name=person, scope=KeyScope.RESPONDER, person=person)
    async with gateway.client(key) as client:
        answer = await client.post(
            f"/agent/function_calls/{call_id}/respond", json={"approved": True}
        )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def approve_by_email(gateway: RunningGateway, rid: str, address: str) -> str:
    """An approval from `address`, through the answer path the email channel uses."""
    who = Responder(AnsweredIn.EMAIL, address, address, email=address)
    answered = await gateway.context("email").answers.answer(rid, Verb.APPROVE, who)
    assert not isinstance(answered, Refused), answered
    return answered.request.status


async def the_rule_still_decides(gateway: RunningGateway, call_id: str) -> None:
    """dba twice and sec once: only then is it approved."""
    assert (await approve_as(gateway, "alice", call_id))["gateway_status"] == "pending"
    assert (await approve_as(gateway, "bob", call_id))["gateway_status"] == "pending"
    assert (await approve_as(gateway, "sam", call_id))["gateway_status"] == "approved"


async def test_an_agents_person_only_adds_to_the_rule(
    floors: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(floors, fn="drop_users", channel={"person": "intern"})
    assert made.wire["policy"]["mode"] == "all_of"
    assert (await approve_as(floors, "intern", made.call_id))["gateway_status"] == "pending"
    await the_rule_still_decides(floors, made.call_id)


@pytest.mark.parametrize(
    "channel",
    [
        {"email": {"address": AGENT_MAILBOX}},
        {"team": "dba", "email": {"address": AGENT_MAILBOX}},
    ],
    ids=["own-mailbox", "team-and-sibling-email"],
)
async def test_an_agents_own_mailbox_cannot_stand_in_for_the_rule(
    floors: RunningGateway, request_factory: RequestFactory, channel: dict[str, Any]
) -> None:
    made = await request_factory(floors, fn="drop_users", channel=channel)
    assert await approve_by_email(floors, made.rid, AGENT_MAILBOX) == "pending"
    await the_rule_still_decides(floors, made.call_id)


@pytest.mark.parametrize("named", [{"person": "intern"}, {"team": "interns"}])
async def test_the_mcp_person_or_team_argument_only_adds_to_the_rule(
    floors: RunningGateway, named: dict[str, str]
) -> None:
    agent = await floors.new_key("default", name="mcp agent")
    async with mcp_session(floors, agent) as session:
        ticket = await call(
            session,
            "request_approval",
            action="drop_users",
            arguments={"table": "users"},
            wait_seconds=0,
            **named,
        )
    call_id = ticket["call_id"]
    assert (await approve_as(floors, "intern", call_id))["gateway_status"] == "pending"
    await the_rule_still_decides(floors, call_id)


async def test_without_a_rule_the_agents_channel_still_routes(
    floors: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(floors, fn="read_users", channel={"person": "intern"})
    assert (await approve_as(floors, "intern", made.call_id))["gateway_status"] == "approved"


async def test_an_agents_expires_at_cannot_lengthen_the_rules_deadline(
    floors: RunningGateway, request_factory: RequestFactory
) -> None:
    before = datetime.now(UTC)
    far = "9999-12-31T23:59:59+00:00"
    made = await request_factory(floors, fn="drop_users", expires_at=far)
    expires_at = datetime.fromisoformat(made.wire["expires_at"])
    assert timedelta(minutes=59) < expires_at - before < timedelta(minutes=61)

    sooner = before + timedelta(minutes=5)
    made = await request_factory(floors, fn="drop_users", expires_at=sooner.isoformat())
    assert abs(datetime.fromisoformat(made.wire["expires_at"]) - sooner) < timedelta(seconds=1)


async def test_an_agents_team_times_nothing_under_a_rule(
    floors: RunningGateway, request_factory: RequestFactory
) -> None:
    """purge_* has a rule without a deadline: the project's 2 h applies, not the 100 h and
    the escalation of the team the agent added."""
    before = datetime.now(UTC)
    made = await request_factory(floors, fn="purge_logs", channel={"team": "slow"})
    expires_at = datetime.fromisoformat(made.wire["expires_at"])
    assert timedelta(minutes=119) < expires_at - before < timedelta(minutes=121)
    async with floors.client() as admin:
        jobs = await admin.get(f"{floors.base_url}/gateway/v1/jobs", params={"limit": 1000})
    timers = [j for j in jobs.json()["items"] if j["kind"] == "timer"]
    assert len(timers) == 1  # the deadline only: no escalation step of the agent's team
