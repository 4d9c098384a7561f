"""The store on SQLite and PostgreSQL: compare-and-set, outbox claims, leases, settings."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

from gateway.store import Database, dumps, migrate, utcnow
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.tables import Request


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    database = Database(db_url)
    await migrate.upgrade(database)
    try:
        yield database
    finally:
        await database.aclose()


async def new_request(db: Database, call_id: str = "c1") -> Request:
    async with db.write() as conn:
        project = await project_store.ensure_project(conn, "default")
        assert project.id is not None
        row = Request(
            rid=f"rid-{call_id}",
            project_id=project.id,
            kind="function_call",
            call_id=call_id,
            run_id="r",
            fn="f",
            spec_json=dumps({"fn": "f", "kwargs": {}}),
            body_hash="h",
            route_json="[]",
            status="pending",
            requested_at=utcnow(),
        )
        assert await request_store.insert_request(conn, row)
    return row


async def test_decide_is_compare_and_set(db: Database) -> None:
    row = await new_request(db)
    async with db.write() as conn:
        first = await request_store.decide(conn, row.rid, "approved", {"comment": "yes"})
    async with db.write() as conn:
        second = await request_store.decide(conn, row.rid, "rejected", {"comment": "no"})
    assert first is not None and first.status == "approved" and first.comment == "yes"
    assert second is None
    async with db.read() as conn:
        stored = await request_store.get_by_rid(conn, row.rid)
    assert stored is not None and stored.status == "approved" and stored.comment == "yes"


async def test_concurrent_decisions_have_one_winner(db: Database) -> None:
    row = await new_request(db)

    async def decide(i: int) -> bool:
        async with db.write() as conn:
            return (
                await request_store.decide(conn, row.rid, "approved", {"comment": str(i)})
                is not None
            )

    assert sorted(await asyncio.gather(*(decide(i) for i in range(16)))) == [False] * 15 + [True]


async def test_call_id_is_unique_per_project(db: Database) -> None:
    first = await new_request(db, "same")
    async with db.write() as conn:
        duplicate = first.model_copy(update={"rid": "other", "run_id": "other-run"})
        assert await request_store.insert_request(conn, duplicate) is False
        stored = await request_store.get_by_call_id(conn, first.project_id, "same")
    assert stored is not None and stored.rid == first.rid and stored.run_id == "r"


async def enqueue(db: Database, count: int) -> list[int]:
    async with db.write() as conn:
        return [
            await outbox_store.enqueue(conn, "webhook", {"n": i}, max_attempts=3)
            for i in range(count)
        ]


async def claim(db: Database, limit: int, lease: timedelta = timedelta(seconds=60)) -> list[int]:
    async with db.write() as conn:
        jobs = await outbox_store.claim(
            conn, limit=limit, lease=lease, skip_locked=not db.is_sqlite
        )
    return [job.id for job in jobs if job.id is not None]


async def test_claims_take_each_due_job_once(db: Database) -> None:
    ids = await enqueue(db, 5)
    first, second, third = await claim(db, 3), await claim(db, 3), await claim(db, 3)
    assert first == ids[:3] and second == ids[3:] and third == []


async def test_concurrent_claimers_get_disjoint_jobs(db: Database) -> None:
    ids = await enqueue(db, 40)
    batches = await asyncio.gather(*(claim(db, 5) for _ in range(8)))
    claimed = [job_id for batch in batches for job_id in batch]
    assert sorted(claimed) == ids  # every job once, none twice


async def test_expired_lease_is_claimable_again(db: Database) -> None:
    """A worker killed mid-job leaves it running; once the lease runs out it is retried."""
    [job_id] = await enqueue(db, 1)
    assert await claim(db, 1, lease=timedelta(seconds=-1)) == [job_id]
    assert await claim(db, 1) == [job_id]
    async with db.read() as conn:
        job = await outbox_store.get_job(conn, job_id)
    assert job is not None and job.attempts == 2 and job.status == "running"


async def test_retry_waits_and_bury_is_final(db: Database) -> None:
    first, second = await enqueue(db, 2)
    await claim(db, 2)
    async with db.write() as conn:
        await outbox_store.retry(conn, first, run_at=utcnow() + timedelta(hours=1), error="503")
        await outbox_store.bury(conn, second, error="gone for good")
    assert await claim(db, 10) == []
    async with db.read() as conn:
        dead = await outbox_store.list_jobs(conn, project_id=None, status="dead")
        due = await outbox_store.next_due_at(conn)
    assert [job.id for job in dead] == [second] and dead[0].last_error == "gone for good"
    assert due is not None


async def test_release_leases_returns_running_jobs(db: Database) -> None:
    ids = await enqueue(db, 2)
    await claim(db, 2)
    async with db.write() as conn:
        assert await outbox_store.release_leases(conn) == 2
    assert await claim(db, 5) == ids


async def test_migrations_match_the_tables(db: Database) -> None:
    await migrate.upgrade(db)  # a second upgrade is a no-op

    def diff(connection: sa.Connection) -> list[object]:
        context = MigrationContext.configure(connection)
        return list(compare_metadata(context, SQLModel.metadata))

    async with db.read() as conn:
        assert await conn.run_sync(diff) == []


async def test_sqlite_durability_settings(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path}/s.db")
    await migrate.upgrade(db)
    try:
        async with db.read() as conn:
            pragmas = [
                (await conn.exec_driver_sql(f"PRAGMA {name}")).scalar()
                for name in ("journal_mode", "synchronous", "busy_timeout")
            ]
        assert pragmas == ["wal", 2, 5000]  # synchronous=2 is FULL
        async with db.write():
            # The write transaction holds the write lock from BEGIN, before any statement.
            other = sqlite3.connect(tmp_path / "s.db", timeout=0, isolation_level=None)
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
            other.close()
    finally:
        await db.aclose()
