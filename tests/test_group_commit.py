"""Group commit: writes queued together share one transaction and one durable commit; a
failed commit fails every write of its batch and stores none of them; a write that raises
is undone alone."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from gateway.store import Database
from gateway.store import projects as project_store
from tests.factories import create_path, request_body
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway, test_settings


@pytest.fixture
async def gateway(db_url: str) -> AsyncIterator[RunningGateway]:
    """A gateway whose outbox worker and change feed wait to be woken (nothing here queues a
    job): no write of theirs joins the batches these tests count."""
    async with running_gateway(test_settings(db_url, outbox_poll_seconds=60)) as running:
        yield running


@asynccontextmanager
async def writer_held(db: Database) -> AsyncIterator[int]:
    """Keep every writer thread busy until the block ends, so that what is written meanwhile
    queues up and goes into the next batches together; yields how many threads were held."""
    release = threading.Event()
    held: list[asyncio.Future[None]] = []
    for _thread in range(db.writer.threads):
        holding = threading.Event()

        def hold(_conn: Connection, holding: threading.Event = holding) -> None:
            holding.set()
            release.wait(timeout=30)

        held.append(asyncio.ensure_future(db.write(hold)))
        await asyncio.to_thread(holding.wait, 30)  # taken by a thread before the next one
    try:
        yield len(held)
    finally:
        release.set()
        await asyncio.gather(*held)


async def queued(db: Database, count: int) -> None:
    async def enough() -> bool:
        return db.writer.pending() >= count

    await eventually(enough)


def start_all(calls: list[Awaitable[Any]]) -> list[asyncio.Future[Any]]:
    return [asyncio.ensure_future(call) for call in calls]


async def test_writes_queued_together_share_one_commit(gateway: RunningGateway) -> None:
    db = gateway.core.db
    async with writer_held(db) as threads:
        before = db.writer.batches
        writes = start_all([db.write(project_store.ensure_project, f"p{n}") for n in range(50)])
        await queued(db, 50)
    projects = await asyncio.gather(*writes)
    assert {project.name for project in projects} == {f"p{n}" for n in range(50)}
    # The held writes' batches, then the 50 in one batch per thread at most (SQLite: one).
    assert db.writer.batches - before <= 2 * threads


async def test_a_failed_commit_fails_its_whole_batch_and_stores_none_of_it(
    gateway: RunningGateway,
) -> None:
    db = gateway.core.db
    async with gateway.client() as client:
        async with writer_held(db):
            creates = start_all(
                [client.post(create_path(False), json=request_body(f"batch-{n}")) for n in range(8)]
            )
            await queued(db, 8)
            lost = OperationalError("COMMIT", {}, sqlite3.OperationalError("disk I/O error"))
            db.writer.fail_commit(lost, min_writes=2)  # not the held writes, alone in theirs
        answers: list[httpx.Response] = await asyncio.gather(*creates)
        statuses = [answer.status_code for answer in answers]
        # SQLite's one writer takes all 8 into the failing batch; PostgreSQL's writers may
        # share them out, and only the batch that failed may fail.
        assert statuses == [503] * 8 if db.is_sqlite else 503 in statuses
        for n, answer in enumerate(answers):
            stored = (await client.get(f"/function_calls/batch-{n}")).status_code
            assert (answer.status_code, stored) in ((503, 404), (200, 200))
            assert answer.status_code == 200 or answer.headers["retry-after"]
        after = await client.post(create_path(False), json=request_body("after-the-failure"))
        assert after.status_code == 200, after.text


class Refused(Exception):
    pass


def refuse(_conn: Connection, name: str) -> None:
    project_store.ensure_project(_conn, name)  # written, then undone with its savepoint
    raise Refused(name)


async def test_a_write_that_raises_is_undone_alone(gateway: RunningGateway) -> None:
    db = gateway.core.db
    async with writer_held(db):
        writes = start_all(
            [
                db.write(project_store.ensure_project, "kept-1"),
                db.write(refuse, "undone"),
                db.write(project_store.ensure_project, "kept-2"),
            ]
        )
        await queued(db, 3)
    results = await asyncio.gather(*writes, return_exceptions=True)
    assert isinstance(results[1], Refused)
    names = {project.name for project in await db.read(project_store.list_projects)}
    assert {"kept-1", "kept-2"} <= names and "undone" not in names
