"""Standing grants and edited approvals through the one answer path every channel uses: what a
grant covers, where it is refused, that it is never given without a person, and that a
revoke or an expiry counts from the next create."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from gateway.policies import grants
from gateway.seam import Answered, Refusal, Refused, Verb
from gateway.store import tables
from gateway.store.values import utcnow
from tests.factories import RequestFactory
from tests.grants.helpers import ALICE, create
from tests.helpers import events as trail_of
from tests.rules.helpers import rules_gateway
from tests.services.inprocess import RunningGateway

DEEP: Any = 1
for _ in range(70):  # deeper than the 64 levels JSON may nest
    DEEP = [DEEP]


async def events(gateway: RunningGateway, call_id: str) -> dict[str, list[dict[str, Any]]]:
    """A request's audit events by type: the details of each."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event in (await trail_of(gateway, call_id))["events"]:
        found.setdefault(event["type"], []).append(event["detail"])
    return found


async def answer(gateway: RunningGateway, rid: str, verb: Verb, **details: Any) -> Any:
    return await gateway.context("slack").answers.answer(rid, verb, ALICE, **details)


async def test_a_grant_for_this_function_in_this_run_approves_the_next_call_at_once(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    first = await create(gateway, request_factory, "g1", path="/a")
    assert first.wire["status"]["approved"] is None
    view = await gateway.context("slack").answers.view(first.rid)
    assert view is not None and "run:3600" in [c.value for c in view.grant_choices]
    decided = await answer(gateway, first.rid, Verb.GRANT, grant="run:3600")
    assert isinstance(decided, Answered) and decided.request.status == "approved"
    assert decided.request.user_info is not None
    assert decided.request.user_info["allowed"] == "read_file in this run, for 1 hour"
    assert (await events(gateway, "g1"))["granted"]

    again = await create(gateway, request_factory, "g2", path="/other")
    assert again.wire["status"]["approved"] is True  # in the create's own answer
    who = again.wire["status"]["user_info"]
    assert who["channel"] == "grant" and who["name"] == "Alice"
    assert who["granted_by"]["user_id"] == "U0ALICE"
    trail = await events(gateway, "g2")
    assert trail["auto_approved"][0]["grant"] == who["grant"]
    assert "delivered" not in trail  # nobody was contacted

    other_run = await create(gateway, request_factory, "g3", run_id="run-2", path="/a")
    assert other_run.wire["status"]["approved"] is None  # another run goes to people


async def test_exact_arguments_cover_only_the_same_arguments_in_any_order(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    first = await create(gateway, request_factory, "a1", path="/a", mode="r")
    await answer(gateway, first.rid, Verb.GRANT, grant="args:900")
    same = await create(gateway, request_factory, "a2", run_id="run-9", mode="r", path="/a")
    other = await create(gateway, request_factory, "a3", path="/b", mode="r")
    assert same.wire["status"]["approved"] is True
    assert other.wire["status"]["approved"] is None


async def test_a_grant_is_for_the_agent_key_that_asked(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    first = await create(gateway, request_factory, "k1", path="/a")
    await answer(gateway, first.rid, Verb.GRANT, grant="key:3600")
    other_key = await gateway.new_key("default", name="other agent")
    elsewhere = await gateway.new_key("other", name="agent")
    assert (await create(gateway, request_factory, "k2", run_id="x", path="/z")).wire["status"][
        "approved"
    ]
    for key in (other_key, elsewhere):
        made = await create(gateway, request_factory, "k3", key=key, path="/a")
        assert made.wire["status"]["approved"] is None


async def test_revoked_or_expired_grants_send_the_next_call_to_people(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    first = await create(gateway, request_factory, "r1", path="/a")
    await answer(gateway, first.rid, Verb.GRANT, grant="run:3600")
    [grant] = await grants.listing(gateway.core)
    assert (await create(gateway, request_factory, "r2", path="/a")).wire["status"]["approved"]
    revoked = await grants.revoke_ids(gateway.core, [grant.id], "test")
    assert [g.live for g in revoked] == [False]
    assert (await create(gateway, request_factory, "r3", path="/a")).wire["status"][
        "approved"
    ] is None
    assert (await events(gateway, "r1"))["grant_revoked"][0]["grant"] == grant.id

    fourth = await create(gateway, request_factory, "r4", path="/a")
    await answer(gateway, fourth.rid, Verb.GRANT, grant="run:900")
    table = tables.StandingGrant.__table__  # type: ignore[attr-defined]
    past = utcnow() - timedelta(seconds=1)

    def expire(tx: Any) -> None:  # as if 15 minutes went by
        tx.execute(sa.update(table).where(table.c.revoked_at.is_(None)).values(expires_at=past))

    await gateway.core.db.write(expire)
    assert (await create(gateway, request_factory, "r5", path="/a")).wire["status"][
        "approved"
    ] is None
    listed = await grants.listing(gateway.core)
    assert [g.uses for g in listed] == [0, 1]  # newest first: the expired one, the revoked one


@pytest.mark.parametrize(
    "value", ["run:99999999", "run:", "everything:3600", "run:forever", "run:-1", "x"]
)
async def test_a_grant_not_offered_is_refused_and_nothing_is_decided(
    gateway: RunningGateway, request_factory: RequestFactory, value: str
) -> None:
    first = await create(gateway, request_factory, "bad", path="/a")
    refused = await answer(gateway, first.rid, Verb.GRANT, grant=value)
    assert isinstance(refused, Refused) and refused.why == Refusal.INVALID
    assert "is not a grant this gateway offers" in refused.message
    async with gateway.client() as client:
        status = (await client.get("/function_calls/bad")).json()["gateway_status"]
    assert status == "pending"
    assert await grants.listing(gateway.core) == []


QUORUM = """
[people.alice]
slack = "U0ALICE"
[people.bob]
slack = "U0BOB"
[teams.pair]
members = ["alice", "bob"]
slack_channel = "C1"
approvals_required = 2

[[rules]]
fn = "read_file"
run_id = "quorum"
target = "team:pair"

[[rules]]
name = "no-grants"
fn = "read_file"
run_id = "plain"
when = "true"
target = "team:pair"
approvals_required = 1
grants = false
editable = false
"""


@pytest.mark.parametrize("run_id", ["quorum", "plain"])
async def test_no_grant_or_edit_where_one_answer_does_not_decide_or_the_rule_says_no(
    db_url: str, tmp_path: Path, request_factory: RequestFactory, run_id: str
) -> None:
    async with rules_gateway(db_url, tmp_path, QUORUM) as gateway:
        made = await request_factory(gateway, "q", run_id=run_id, fn="read_file", kwargs={})
        view = await gateway.context("slack").answers.view(made.rid)
        assert view is not None and view.grant_choices == () and not view.editable
        crafted = await answer(gateway, made.rid, Verb.GRANT, grant="run:900")
        edited = await answer(gateway, made.rid, Verb.EDIT, edited={"path": "/x"})
        for refused in (crafted, edited):
            assert isinstance(refused, Refused) and refused.why == Refusal.NOT_ALLOWED
        assert await grants.listing(gateway.core) == []
        trail = await events(gateway, "q")
        assert "voted" not in trail and "decided" not in trail  # not even a vote counted


async def test_an_edited_approval_carries_both_versions(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    first = await create(gateway, request_factory, "e1", path="/etc/passwd", lines=10)
    edited = {"path": "/tmp/safe", "lines": 10}
    decided = await answer(gateway, first.rid, Verb.EDIT, edited=edited)
    assert isinstance(decided, Answered) and decided.request.updated_kwargs == edited
    async with gateway.client() as client:
        status = (await client.get("/function_calls/e1")).json()["status"]
    assert status["approved"] is True and status["updated_kwargs"] == edited
    [event] = (await events(gateway, "e1"))["edited"]
    assert event == {
        "original": {"path": "/etc/passwd", "lines": 10},
        "updated": edited,
        "changed": ["path"],
    }


@pytest.mark.parametrize(
    ("edited", "message"),
    [
        ([1, 2], "must be a JSON object"),
        ({"a": float("nan")}, "are not JSON"),
        ({"a": DEEP}, "nested more than"),
    ],
)
async def test_bad_edits_are_refused_and_nothing_is_decided(
    gateway: RunningGateway, request_factory: RequestFactory, edited: Any, message: str
) -> None:
    first = await create(gateway, request_factory, "bad-edit", path="/a")
    refused = await answer(gateway, first.rid, Verb.EDIT, edited=edited)
    assert isinstance(refused, Refused) and refused.why == Refusal.INVALID
    assert message in refused.message
    async with gateway.client() as client:
        status = (await client.get("/function_calls/bad-edit")).json()["gateway_status"]
    assert status == "pending"
