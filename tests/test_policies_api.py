"""Approval policies through the real HTTP API: quorum, veto, deadlines, progress in GET.

An API key bound to no person speaks for the project's operator: its answer is one vote that
counts in every branch. Responder keys bound to Alice and Bob (`--person`) are Alice and Bob.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.store import requests as request_store
from gateway.vocabulary import AuditEvent, JobKind, KeyScope
from tests.factories import RequestFactory
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

CONFIG = """
[people.alice]
email = "alice@example.com"

[people.bob]
email = "bob@example.com"

[people.carol]
email = "carol@example.com"

[teams.dba]
members = ["alice", "bob", "carol"]
approvals_required = 2

[[rules]]
fn = "drop_*"
target = "team:dba"
expires_after = "1h"

[[rules]]
fn = "escalating"
target = "team:dba"
escalate = [{ after = 1, target = "person:zed" }]

[[rules]]
kind = "human_contact"
run_id = "fallback-*"
target = "web"
expires_after = 1
expired_response = "carry on with the default"

[[rules]]
kind = "human_contact"
run_id = "expiring-*"
target = "web"
expires_after = 1

[people.zed]
email = "zed@example.com"

[[rules]]
fn = "wipe_*"
policy = { all_of = ["web", { timeout = "1h", target = "person:alice" }] }
"""


@pytest.fixture
async def policies(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


async def person_keys(gateway: RunningGateway, *people: str) -> list[str]:
    """A responder key bound to each person: its answers are that person's votes."""
    return [
        await gateway.new_key("default", name=p, scope=KeyScope.RESPONDER, person=p) for p in people
    ]


async def respond(gateway: RunningGateway, call_id: str, key: str, **body: Any) -> Any:
    async with gateway.client(key) as client:
        answer = await client.post(f"/agent/function_calls/{call_id}/respond", json=body)
    return answer


async def test_a_team_quorum_needs_two_distinct_people(
    policies: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(policies, "q-1", fn="drop_table")
    assert made.wire["policy"]["approvals_required"] == 2
    alice, bob = await person_keys(policies, "alice", "bob")

    first = await respond(policies, "q-1", alice, approved=True, comment="ok")
    assert first.status_code == 200, first.text
    assert first.json()["status"]["approved"] is None  # still pending for the SDK
    assert first.json()["policy_progress"]["approvals"] == 1
    assert first.json()["policy_progress"]["needed"] == 2

    again = await respond(policies, "q-1", alice, approved=True)
    assert again.status_code == 200, again.text
    assert again.json()["status"]["approved"] is None  # one person counts once

    last = await respond(policies, "q-1", bob, approved=True, comment="go")
    assert last.status_code == 200, last.text
    assert last.json()["status"]["approved"] is True
    assert last.json()["status"]["comment"] == "go"
    events = await policies.core.db.read(request_store.list_events, made.rid)
    types = [event.type for event in events]
    # The repeated approval stored nothing: one vote, then the decision.
    assert types.count(AuditEvent.VOTED) == 1 and types.count(AuditEvent.DECIDED) == 1


async def test_any_rejection_vetoes_with_its_reason(
    policies: RunningGateway, request_factory: RequestFactory
) -> None:
    await request_factory(policies, "v-1", fn="drop_table")
    alice, bob = await person_keys(policies, "alice", "bob")
    assert (await respond(policies, "v-1", alice, approved=True)).status_code == 200
    vetoed = await respond(policies, "v-1", bob, approved=False, comment="not today")
    assert vetoed.json()["status"]["approved"] is False
    assert vetoed.json()["status"]["comment"] == "not today"
    late = await respond(policies, "v-1", bob, approved=True)
    assert late.status_code == 409


async def test_rules_give_a_deadline_and_the_request_says_when(
    policies: RunningGateway, request_factory: RequestFactory
) -> None:
    before = datetime.now(UTC)
    made = await request_factory(policies, "d-1", fn="drop_table")
    expires_at = datetime.fromisoformat(made.wire["expires_at"])
    assert timedelta(minutes=59) < expires_at - before < timedelta(minutes=61)
    jobs = await policies.core.db.read(_jobs, made.rid)
    assert [(job.kind, job.run_at) for job in jobs if job.kind == JobKind.TIMER] == [
        (JobKind.TIMER, _naive_or_aware(jobs, expires_at))
    ]


async def test_a_deadline_rejects_with_a_comment_that_says_so(
    policies: RunningGateway, request_factory: RequestFactory
) -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    await request_factory(policies, "d-2", fn="read_table", expires_at=soon)
    async with policies.client() as client:
        waited = await client.get("/function_calls/d-2", params={"wait": 10})
    status = waited.json()["status"]
    assert status["approved"] is False
    assert status["comment"] == "No decision within 1s; expired"
    assert status["user_info"]["channel"] == "gateway"


async def test_raw_composite_channels_become_the_policy(
    policies: RunningGateway, request_factory: RequestFactory
) -> None:
    channel = {
        "all_of": [
            {"email": {"address": "alice@example.com"}},
            {"timeout": 3600, "channel": {"email": {"address": "bob@example.com"}}},
        ]
    }
    made = await request_factory(policies, "c-1", fn="read_table", channel=channel)
    assert made.wire["policy"]["mode"] == "all_of"
    assert [child["delay"] for child in made.wire["policy"]["children"]] == [0.0, 3600.0]
    assert [t["address"]["address"] for t in made.wire["route"]] == [
        "alice@example.com",
        "bob@example.com",
    ]
    assert made.wire["spec"]["channel"]["all_of"][1]["timeout"] == 3600


async def test_both_modes_in_one_channel_are_refused(policies: RunningGateway) -> None:
    body = {
        "run_id": "r",
        "call_id": "bad-1",
        "spec": {
            "fn": "x",
            "channel": {"any_of": [{"team": "dba"}], "all_of": [{"team": "dba"}]},
        },
    }
    async with policies.client() as client:
        refused = await client.post("/function_calls", json=body)
        assert refused.status_code == 422
        assert "any_of or all_of" in refused.text
        assert (await client.get("/function_calls/bad-1")).status_code == 404


def _jobs(conn: Any, rid: str) -> list[Any]:
    from gateway.store import tables

    job = tables.OutboxJob.__table__  # type: ignore[attr-defined]
    import sqlalchemy as sa

    return list(conn.execute(sa.select(job).where(job.c.rid == rid)).all())


def _naive_or_aware(jobs: list[Any], moment: datetime) -> datetime:
    """SQLite hands timestamps back naive (UTC)."""
    sample = jobs[0].run_at
    return moment.replace(tzinfo=None) if sample.tzinfo is None else moment


async def test_an_escalation_step_adds_its_target_who_may_then_decide_alone(
    policies: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(policies, "e-1", fn="escalating")
    assert [t["via"] for t in made.wire["route"]] == ["rule 2"]

    async def escalated() -> dict[str, Any]:
        async with policies.client() as client:
            return dict((await client.get("/function_calls/e-1")).json())

    async def has_zed() -> bool:
        return any(t["via"] == "escalation" for t in (await escalated())["route"])

    await eventually(has_zed, within=10)
    wire = await escalated()
    assert wire["route"][-1]["responders"] == ["zed@example.com"]
    assert wire["policy"]["mode"] == "any_of"  # the team's quorum, or the escalation alone
    assert wire["policy"]["children"][1] == {"target": 1, "delay": 0.0, "approvals_required": 1}
    events = await policies.core.db.read(request_store.list_events, made.rid)
    assert [e.type for e in events].count(AuditEvent.ESCALATED) == 1


async def test_an_unanswered_question_gets_its_fallback_or_expires(
    policies: RunningGateway, request_factory: RequestFactory
) -> None:
    await request_factory(policies, "hc-fallback", contact=True, run_id="fallback-1")
    await request_factory(policies, "hc-expiring", contact=True, run_id="expiring-1")
    async with policies.client() as client:
        fallback = await client.get("/contact_requests/hc-fallback", params={"wait": 10})
        expired = await client.get("/contact_requests/hc-expiring", params={"wait": 10})
    assert fallback.json()["status"]["response"] == "carry on with the default"
    assert fallback.json()["gateway_status"] == "responded"
    assert fallback.json()["status"]["user_info"]["channel"] == "gateway"
    assert expired.json()["status"]["response"] is None
    assert expired.json()["gateway_status"] == "expired"
