"""Long-poll: GET ...?wait=S answers as soon as the request is decided."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway import intake
from gateway.answers import decisions
from gateway.answers.verbs import Decision
from gateway.app import build_core
from gateway.lifecycle import Event
from gateway.store import Database
from gateway.store import requests as request_store
from gateway.store.engine import LISTENER_NAME
from gateway.store.rows import RequestRow
from tests.factories import RequestFactory
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway, test_settings


async def waiting(gateway: RunningGateway, count: int = 1) -> None:
    async def registered() -> bool:
        return len(gateway.core.waiters) >= count

    await eventually(registered)


async def test_waiter_returns_when_decided(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    async with gateway.client() as client:
        await request_factory(gateway, "lp")
        started = time.monotonic()
        waiter = asyncio.create_task(client.get("/function_calls/lp", params={"wait": 30}))
        await waiting(gateway)
        reply = await client.post("/agent/function_calls/lp/respond", json={"approved": True})
        assert reply.status_code == 200
        answer = (await waiter).json()
    assert answer["status"]["approved"] is True
    assert time.monotonic() - started < 15  # far inside the 30 s it would otherwise wait
    assert len(gateway.core.waiters) == 0  # nothing left registered


async def test_contact_waiter_returns_when_answered(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    async with gateway.client() as client:
        await request_factory(gateway, "lp-hc", contact=True)
        waiter = asyncio.create_task(client.get("/human_contacts/lp-hc", params={"wait": 30}))
        await waiting(gateway)
        await client.post("/agent/human_contacts/lp-hc/respond", json={"response": "yes"})
        assert (await waiter).json()["status"]["response"] == "yes"


async def test_wait_expires_with_the_pending_record(
    sqlite_gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    async with sqlite_gateway.client() as client:
        await request_factory(sqlite_gateway, "slow")
        started = time.monotonic()
        answer = await client.get("/function_calls/slow", params={"wait": 0.5})
    assert answer.status_code == 200 and answer.json()["status"]["approved"] is None
    assert time.monotonic() - started >= 0.5


async def test_decided_request_answers_at_once(
    sqlite_gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    async with sqlite_gateway.client() as client:
        await request_factory(sqlite_gateway, "done")
        await client.post("/agent/function_calls/done/respond", json={"approved": True})
        started = time.monotonic()
        answer = await client.get("/function_calls/done", params={"wait": 30})
    assert answer.json()["status"]["approved"] is True and time.monotonic() - started < 5


async def test_decision_by_another_process_reaches_the_waiter(
    sqlite_gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    """The CLI decides in its own process: no in-process wake-up, the waiter re-reads."""
    other = build_core(sqlite_gateway.core.settings)
    try:
        async with sqlite_gateway.client() as client:
            await request_factory(sqlite_gateway, "cli")
            waiter = asyncio.create_task(client.get("/function_calls/cli", params={"wait": 30}))
            await waiting(sqlite_gateway)
            rows, _ = await other.db.read(
                request_store.list_requests,
                1,
                "function_call",
                status="pending",
                run_id=None,
                limit=1,
                offset=0,
            )
            info = {"channel": "cli", "name": "ops"}
            await decisions.decide(other, rows[0], Decision(Event.APPROVE, info))
            answer = (await waiter).json()
        assert answer["status"]["user_info"] == info
    finally:
        await other.db.aclose()


async def test_decision_on_another_replica_wakes_the_waiter(
    pg_url: str, request_factory: RequestFactory
) -> None:
    """Two replicas on one PostgreSQL: the decision's NOTIFY wakes the other's waiter."""
    slow_poll = {"outbox_poll_seconds": 60}  # no re-read fallback within the test
    async with (
        running_gateway(test_settings(pg_url, **slow_poll)) as replica_a,
        running_gateway(test_settings(pg_url, **slow_poll)) as replica_b,
    ):
        async with replica_a.client() as a, replica_b.client(replica_a.api_key) as b:
            await request_factory(replica_a, "x-replica")
            started = time.monotonic()
            waiter = asyncio.create_task(a.get("/function_calls/x-replica", params={"wait": 30}))
            await waiting(replica_a)
            reply = await b.post("/agent/function_calls/x-replica/respond", json={"approved": True})
            assert reply.status_code == 200
            answer = (await waiter).json()
        assert answer["status"]["approved"] is True
        assert time.monotonic() - started < 15


async def test_decision_just_before_the_waiter_registers_is_seen(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, request_factory: RequestFactory
) -> None:
    """A decision that commits between the first read and watch() must not be missed."""
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/race.db", outbox_poll_seconds=60)
    async with running_gateway(settings) as gateway:
        first_read = intake.find
        reads = 0

        async def read_then_someone_decides(*args: Any, **kwargs: Any) -> RequestRow:
            nonlocal reads
            row = await first_read(*args, **kwargs)
            reads += 1
            if reads == 1:  # the handler's first read saw "pending"; now a person decides
                info = {"channel": "cli", "name": "ops"}
                await decisions.decide(gateway.core, row, Decision(Event.APPROVE, info))
            return row

        async with gateway.client() as client:
            await request_factory(gateway, "edge")
            monkeypatch.setattr(intake, "find", read_then_someone_decides)
            started = time.monotonic()
            answer = await client.get("/function_calls/edge", params={"wait": 10})
        assert answer.json()["status"]["approved"] is True
        assert time.monotonic() - started < 5  # not the 10 s wait, nor a 60 s re-read slice


async def test_a_dropped_listen_connection_is_reopened(
    pg_url: str, request_factory: RequestFactory
) -> None:
    """PostgreSQL kills the LISTEN connections; the replicas reconnect and still wake."""
    slow_poll = {"outbox_poll_seconds": 60}
    async with (
        running_gateway(test_settings(pg_url, **slow_poll)) as replica_a,
        running_gateway(test_settings(pg_url, **slow_poll)) as replica_b,
    ):
        killer = Database(pg_url)
        try:
            listeners = sa.text(
                "SELECT pid FROM pg_stat_activity WHERE application_name = :name"
            ).bindparams(name=LISTENER_NAME)

            def listener_pids(conn: Connection) -> list[int]:
                return list(conn.execute(listeners).scalars())

            def terminate(conn: Connection, pids: list[int]) -> None:
                for pid in pids:
                    conn.execute(sa.select(sa.func.pg_terminate_backend(pid)))

            async def pids() -> list[int]:
                return await killer.read(listener_pids)

            before = await pids()
            assert len(before) == 2
            await killer.read(terminate, before)

            async def reconnected() -> bool:
                now = await pids()
                return len(now) == 2 and not set(now) & set(before)

            await eventually(reconnected)
        finally:
            await killer.aclose()
        async with replica_a.client() as a, replica_b.client(replica_a.api_key) as b:
            await request_factory(replica_a, "after-drop")
            started = time.monotonic()
            waiter = asyncio.create_task(a.get("/function_calls/after-drop", params={"wait": 30}))
            await waiting(replica_a)
            await b.post("/agent/function_calls/after-drop/respond", json={"approved": True})
            assert (await waiter).json()["status"]["approved"] is True
        assert time.monotonic() - started < 15
