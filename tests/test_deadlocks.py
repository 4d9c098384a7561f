"""PostgreSQL's writer threads never deadlock each other, and a batch that meets a deadlock
anyway (another process) is run again: nobody sees it."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from gateway.store import writer as writer_module
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.postgres import ThrowawayPostgres

pytestmark = pytest.mark.postgres

ROUNDS = 10
PER_ROUND = 60  # requests raced together, each by RACERS decisions, in one shuffled burst
RACERS = 3
BATCH = 40  # writes per batch here: a burst fills the next batch of every writer thread


@pytest.fixture
async def pg_gateway(pg_url: str) -> AsyncIterator[RunningGateway]:
    async with running_gateway(test_settings(pg_url, outbox_poll_seconds=60)) as gateway:
        yield gateway


def create_body(call_id: str) -> dict[str, object]:
    return {"run_id": "race", "call_id": call_id, "spec": {"fn": "wire", "kwargs": {}}}


async def create_all(client: httpx.AsyncClient, call_ids: list[str]) -> None:
    for start in range(0, len(call_ids), 100):
        chunk = call_ids[start : start + 100]
        replies = await asyncio.gather(
            *(client.post("/function_calls", json=create_body(c)) for c in chunk)
        )
        assert {reply.status_code for reply in replies} == {200}


def log_since(server: ThrowawayPostgres, offset: int) -> str:
    with (server.root / "server.log").open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


def log_size(server: ThrowawayPostgres) -> int:
    return Path(server.root / "server.log").stat().st_size


async def test_racing_decisions_never_deadlock(
    postgres_server: ThrowawayPostgres, pg_gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round holds every writer thread while 180 decisions queue in shuffled order, so
    that the threads' next batches are full and run at once: batches that shared requests
    would lock them in different orders."""
    monkeypatch.setattr(writer_module, "MAX_BATCH", BATCH)
    writer = pg_gateway.core.db.writer
    assert writer.threads > 1  # the race is between writer threads
    call_ids = [f"race-{n}" for n in range(ROUNDS * PER_ROUND)]
    async with pg_gateway.client() as client:
        await create_all(client, call_ids)
    offset = log_size(postgres_server)
    queued = count_decisions(pg_gateway, monkeypatch)
    codes: dict[str, list[int]] = {c: [] for c in call_ids}
    shuffle = random.Random(24)
    for start in range(0, len(call_ids), PER_ROUND):
        burst = [(c, who) for c in call_ids[start : start + PER_ROUND] for who in range(RACERS)]
        shuffle.shuffle(burst)
        release = threading.Event()
        holding = asyncio.gather(*(hold(writer, release) for _ in range(writer.threads)))
        limits = httpx.Limits(max_connections=len(burst))
        async with pg_gateway.client(limits=limits) as client:

            async def answer(call_id: str, who: int) -> None:
                body = {"approved": who % 2 == 0, "comment": f"racer {who}"}
                reply = await client.post(f"/agent/function_calls/{call_id}/respond", json=body)
                codes[call_id].append(reply.status_code)

            answers = asyncio.gather(*(answer(c, who) for c, who in burst))

            async def all_queued(expected: int = start * RACERS + len(burst)) -> bool:
                return len(queued) == expected

            await eventually(all_queued, within=60)
            release.set()
            await holding
            await answers

    wrong = [(c, each) for c, each in codes.items() if sorted(each) != [200] + [409] * (RACERS - 1)]
    assert wrong == []
    assert "deadlock detected" not in log_since(postgres_server, offset)
    assert writer.conflicts == 0


def count_decisions(gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of the writes queued for one request (a decision's), as they queue."""
    queued: list[str] = []
    write_for = gateway.core.db.write_for

    def counting(key: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        queued.append(key)
        return write_for(key, fn, *args, **kwargs)

    monkeypatch.setattr(gateway.core.db, "write_for", counting)
    return queued


async def hold(writer: writer_module.Writer, release: threading.Event) -> None:
    """Keep a writer thread (keyless writes take the threads in turn) until `release`."""
    await writer.submit(lambda _tx: release.wait(30))


def _same_thread_pair(gateway: RunningGateway, rids: list[str]) -> tuple[str, str]:
    """Two requests whose writes go to one writer thread (so into one batch), in key order."""
    writer = gateway.core.db.writer
    by_thread: dict[int, list[str]] = {}
    for rid in rids:
        by_thread.setdefault(writer.thread_of(rid), []).append(rid)
    first, second = sorted(next(group for group in by_thread.values() if len(group) >= 2))[:2]
    return first, second


async def _rids(gateway: RunningGateway, dsn: str, call_ids: list[str]) -> dict[str, str]:
    async with gateway.client() as client:
        await create_all(client, call_ids)

    def read() -> dict[str, str]:
        query = "SELECT rid, call_id FROM request WHERE call_id = ANY(%s)"
        with psycopg.connect(dsn, autocommit=True) as conn:
            return dict(conn.execute(query, (call_ids,)).fetchall())

    return await asyncio.to_thread(read)


def _backend_waits_on_a_lock(dsn: str, besides: int) -> bool:
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> %s"
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, (besides,)).fetchone()
    return row is not None and row[0] > 0


async def test_a_batch_that_meets_a_deadlock_runs_again(
    postgres_server: ThrowawayPostgres, pg_gateway: RunningGateway
) -> None:
    dsn = postgres_server.dsn(str(make_url(pg_gateway.core.db.url).database))
    by_rid = await _rids(pg_gateway, dsn, [f"lock-{n}" for n in range(12)])
    first, second = _same_thread_pair(pg_gateway, list(by_rid))
    writer = pg_gateway.core.db.writer
    offset = log_size(postgres_server)

    # Another session holds the second request's row; it will ask for the first's, which the
    # gateway's batch takes first: a cycle. Its deadlock_timeout is long, so PostgreSQL
    # breaks the cycle in the gateway's session (1 s), as it would for either side.
    other: psycopg.Connection[Any] = await asyncio.to_thread(lambda: psycopg.connect(dsn))
    try:
        await asyncio.to_thread(other.execute, "SET deadlock_timeout = '60s'")
        lock = "SELECT 1 FROM request WHERE rid = %s FOR UPDATE"
        await asyncio.to_thread(other.execute, lock, (second,))

        # Hold the writer thread so that both decisions queue and share its next batch.
        release = threading.Event()
        held = asyncio.ensure_future(
            pg_gateway.core.db.write_for(first, lambda _tx: release.wait(10))
        )
        async with pg_gateway.client() as client:
            replies = [
                asyncio.ensure_future(
                    client.post(
                        f"/agent/function_calls/{by_rid[rid]}/respond", json={"approved": True}
                    )
                )
                for rid in (second, first)
            ]

            async def queued() -> bool:
                return writer.pending() == 2

            await eventually(queued)
            release.set()
            await held
            await eventually(
                lambda: asyncio.to_thread(_backend_waits_on_a_lock, dsn, other.info.backend_pid)
            )
            # The gateway's batch holds the first row and waits for the second: close the cycle.
            await asyncio.to_thread(other.execute, lock, (first,))
            await asyncio.to_thread(other.rollback)
            done = await asyncio.gather(*replies)
    finally:
        await asyncio.to_thread(other.close)

    assert [reply.status_code for reply in done] == [200, 200], [r.text for r in done]
    # Once, or again if the retry raced the other session taking the first row (a new cycle).
    assert writer.conflicts >= 1
    assert "deadlock detected" in log_since(postgres_server, offset)  # it did happen
