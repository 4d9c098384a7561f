"""Deadlines are enforced where decisions happen: with the deadline's timer held back on
purpose (as a busy outbox holds it), an answer after `expires_at` is refused, and the expiry
is applied on the spot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from gateway.seam import AnsweredIn, Refused, Responder, Verb
from gateway.store import Tx, tables
from gateway.vocabulary import JobKind, JobStatus, KeyScope
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

CONFIG = """
[people.alice]
email = "alice@example.com"

[people.bob]
email = "bob@example.com"

[teams.dba]
members = ["alice", "bob"]
approvals_required = 2

[[rules]]
fn = "drop_*"
target = "team:dba"
"""
_job = tables.OutboxJob.__table__  # type: ignore[attr-defined]
LATER = datetime(2100, 1, 1, tzinfo=UTC)


@pytest.fixture
async def deadlines(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


async def hold_back_the_timers(gateway: RunningGateway, rid: str) -> None:
    """The deadline's timer is late: it will not run before the test is over."""

    def postpone(tx: Tx) -> int:
        query = (
            sa.update(_job)
            .where(_job.c.rid == rid, _job.c.kind == JobKind.TIMER)
            .where(_job.c.status == JobStatus.PENDING)
            .values(run_at=LATER)
        )
        return int(tx.execute(query).rowcount)

    assert await gateway.core.db.write(postpone) == 1  # it had not run yet


async def made_late(
    gateway: RunningGateway, request_factory: RequestFactory, **spec: Any
) -> tuple[str, str, datetime]:
    """A request whose deadline, 2 s away, passes with its timer held back; returned 1 s
    after the deadline."""
    expires_at = datetime.now(UTC) + timedelta(seconds=2)
    made = await request_factory(gateway, expires_at=expires_at.isoformat(), **spec)
    await hold_back_the_timers(gateway, made.rid)
    # The scenario is a wall-clock one: the answer comes 1 s after the deadline.
    await asyncio.sleep((expires_at + timedelta(seconds=1) - datetime.now(UTC)).total_seconds())
    return made.call_id, made.rid, expires_at


@pytest.mark.parametrize("fn", ["read_table", "drop_table"])  # first answer / under a policy
async def test_an_approval_one_second_after_the_deadline_is_refused(
    deadlines: RunningGateway, request_factory: RequestFactory, fn: str
) -> None:
    call_id, _rid, _at = await made_late(deadlines, request_factory, fn=fn)
    # A DBA under the drop_* rule; the operator for a request sent to the console.
    alice = await deadlines.new_key("default", scope=KeyScope.RESPONDER, person="alice")
    key = alice if fn == "drop_table" else deadlines.api_key
    async with deadlines.client(key) as client:
        late = await client.post(
            f"/agent/function_calls/{call_id}/respond", json={"approved": True}
        )
        assert late.status_code == 409, late.text
        assert "expired at" in late.json()["detail"]
        got = (await client.get(f"/function_calls/{call_id}")).json()
    assert got["status"]["approved"] is False  # the expiry, applied on the spot
    assert got["status"]["user_info"]["channel"] == "gateway"
    assert got["status"]["comment"].endswith("; expired")


async def test_a_late_click_in_a_channel_is_refused_and_the_request_expires(
    deadlines: RunningGateway, request_factory: RequestFactory
) -> None:
    call_id, rid, _at = await made_late(deadlines, request_factory, fn="read_table")
    clicked = await deadlines.context().answers.answer(
        rid, Verb.APPROVE, Responder(AnsweredIn.WEB, "operator", "operator")
    )
    assert isinstance(clicked, Refused), clicked
    assert "expired at" in clicked.message
    async with deadlines.client() as client:
        got = (await client.get(f"/function_calls/{call_id}")).json()
    assert got["gateway_status"] == "rejected"


async def test_a_question_answered_late_gets_no_answer_but_expires(
    deadlines: RunningGateway, request_factory: RequestFactory
) -> None:
    call_id, _rid, _at = await made_late(deadlines, request_factory, contact=True)
    async with deadlines.client() as client:
        late = await client.post(
            f"/agent/human_contacts/{call_id}/respond", json={"response": "go ahead"}
        )
        assert late.status_code == 409, late.text
        got = (await client.get(f"/human_contacts/{call_id}")).json()
    assert got["gateway_status"] == "expired"
    assert got["status"].get("response") != "go ahead"


async def test_an_answer_before_the_deadline_still_decides(
    deadlines: RunningGateway, request_factory: RequestFactory
) -> None:
    soon = datetime.now(UTC) + timedelta(hours=1)
    made = await request_factory(deadlines, fn="read_table", expires_at=soon.isoformat())
    async with deadlines.client() as client:
        answered = await client.post(
            f"/agent/function_calls/{made.call_id}/respond", json={"approved": True}
        )
    assert answered.json()["status"]["approved"] is True
