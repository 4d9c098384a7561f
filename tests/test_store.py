"""The store on SQLite and PostgreSQL: compare-and-set, outbox claims, leases, settings."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

from gateway.store import Database, migrate, rows, tables, utcnow
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store import records as record_store
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow, changed
from gateway.store.values import as_utc
from gateway.vocabulary import JobKind
from tests.factories import request_row


def insert_new(conn: Connection, call_id: str) -> RequestRow:
    project = project_store.ensure_project(conn, "default")
    assert project.id is not None
    row = request_row(project.id, call_id)
    assert request_store.insert_request(conn, row)
    return row


async def new_request(db: Database, call_id: str = "c1") -> RequestRow:
    return await db.write(insert_new, call_id)


async def test_decide_is_compare_and_set(db: Database) -> None:
    row = await new_request(db)
    first = await db.write(request_store.set_decided, row.rid, "approved", {"comment": "yes"})
    second = await db.write(request_store.set_decided, row.rid, "rejected", {"comment": "no"})
    assert first is not None and first.status == "approved" and first.comment == "yes"
    assert second is None
    stored = await db.read(request_store.get_by_rid, row.rid)
    assert stored is not None and stored.status == "approved" and stored.comment == "yes"


async def test_concurrent_decisions_have_one_winner(db: Database) -> None:
    row = await new_request(db)

    async def decide(i: int) -> bool:
        won = await db.write(request_store.set_decided, row.rid, "approved", {"comment": str(i)})
        return won is not None

    assert sorted(await asyncio.gather(*(decide(i) for i in range(16)))) == [False] * 15 + [True]


async def test_call_id_is_unique_per_project(db: Database) -> None:
    first = await new_request(db, "same")
    duplicate = changed(first, rid="other", run_id="other-run")
    assert await db.write(request_store.insert_request, duplicate) is False
    stored = await db.read(request_store.get_by_call_id, first.project_id, "same")
    assert stored is not None and stored.rid == first.rid and stored.run_id == "r"


def enqueue_many(conn: Connection, count: int) -> list[int]:
    return [
        outbox_store.enqueue(conn, JobKind.WEBHOOK, {"n": i}, max_attempts=3) for i in range(count)
    ]


async def enqueue(db: Database, count: int) -> list[int]:
    return await db.write(enqueue_many, count)


async def claim(
    db: Database, limit: int, lease: timedelta = timedelta(seconds=60), worker: str = "w"
) -> list[int]:
    jobs = await db.write(
        outbox_store.claim, limit=limit, lease=lease, skip_locked=not db.is_sqlite, worker=worker
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
    job = await db.read(outbox_store.get_job, job_id)
    assert job is not None and job.attempts == 2 and job.status == "running"


async def test_only_the_worker_holding_a_lease_renews_or_hands_it_back(db: Database) -> None:
    """A worker whose lease ran out (stalled, or its clock behind) finds its job taken by
    another: its renewal and its hand-back at shutdown leave that worker's claim alone."""
    [job_id] = await enqueue(db, 1)
    assert await claim(db, 1, lease=timedelta(seconds=-1), worker="stalled") == [job_id]
    assert await claim(db, 1, worker="other") == [job_id]
    await db.write(outbox_store.extend_leases, [job_id], timedelta(hours=1), "stalled")
    assert await db.write(outbox_store.release, [job_id], "stalled") == 0
    job = await db.read(outbox_store.get_job, job_id)
    assert job is not None and (job.status, job.claimed_by, job.attempts) == ("running", "other", 2)
    assert job.locked_until is not None
    assert as_utc(job.locked_until) < utcnow() + timedelta(minutes=2)  # not the stalled hour
    assert await db.write(outbox_store.release, [job_id], "other") == 1


def retry_and_bury(conn: Connection, first: int, second: int) -> None:
    outbox_store.retry(conn, first, run_at=utcnow() + timedelta(hours=1), error="503")
    outbox_store.bury(conn, second, error="gone for good")


async def test_retry_waits_and_bury_is_final(db: Database) -> None:
    first, second = await enqueue(db, 2)
    await claim(db, 2)
    await db.write(retry_and_bury, first, second)
    assert await claim(db, 10) == []
    dead = await db.read(outbox_store.list_jobs, project_id=None, status="dead")
    due = await db.read(outbox_store.next_due_at)
    assert [job.id for job in dead] == [second] and dead[0].last_error == "gone for good"
    assert due is not None


async def test_release_leases_returns_running_jobs(db: Database) -> None:
    ids = await enqueue(db, 2)
    await claim(db, 2)
    assert await db.write(outbox_store.release_leases) == 2
    assert await claim(db, 5) == ids


async def test_migrations_match_the_tables(db: Database) -> None:
    await migrate.upgrade(db)  # a second upgrade is a no-op

    def diff(connection: Connection) -> list[object]:
        context = MigrationContext.configure(connection)
        return list(compare_metadata(context, SQLModel.metadata))

    assert await db.read(diff) == []


def pragmas(conn: Connection) -> list[object]:
    names = ("journal_mode", "synchronous", "busy_timeout")
    return [conn.exec_driver_sql(f"PRAGMA {name}").scalar() for name in names]


async def test_sqlite_durability_settings(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path}/s.db")
    await migrate.upgrade(db)
    try:
        assert await db.read(pragmas) == ["wal", 2, 5000]  # synchronous=2 is FULL

        def locked_from_begin(_conn: Connection) -> None:
            # The write transaction holds the write lock from BEGIN, before any statement.
            other = sqlite3.connect(tmp_path / "s.db", timeout=0, isolation_level=None)
            try:
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    other.execute("BEGIN IMMEDIATE")
            finally:
                other.close()

        await db.write(locked_from_begin)
    finally:
        await db.aclose()


def test_each_row_class_has_its_tables_columns_in_order() -> None:
    """rows.py mirrors tables.py: a column added to one and not the other fails here."""
    pairs = {
        "Project": rows.ProjectRow,
        "ApiKey": rows.ApiKeyRow,
        "Request": rows.RequestRow,
        "RequestEvent": rows.EventRow,
        "Vote": rows.VoteRow,
        "Delivery": rows.DeliveryRow,
        "OutboxJob": rows.JobRow,
        "WebhookEndpoint": rows.EndpointRow,
    }
    for name, row in pairs.items():
        table = getattr(tables, name).__table__
        assert [f.name for f in dataclasses.fields(row)] == [c.name for c in table.columns], name


async def test_a_channel_record_expires_and_is_taken_once(db: Database) -> None:
    """What a channel keeps (`gateway.store.records`): its own, kept until it expires; a take
    (an OAuth state spent by its redirect) succeeds once."""
    soon = utcnow() + timedelta(hours=1)
    await db.write(record_store.put, "slack", "oauth_state", "s1", "issued", soon)
    await db.write(record_store.put, "slack", "oauth_state", "gone", "issued", utcnow())
    await db.write(record_store.put, "slack", "installation", "-:T1", "v1", None)
    await db.write(record_store.put, "slack", "installation", "-:T1", "v2", None)  # replaced
    assert await db.read(record_store.get, "slack", "installation", "-:T1") == "v2"
    assert await db.read(record_store.get, "discord", "installation", "-:T1") is None
    assert await db.read(record_store.keys, "slack", "oauth_state", 10) == ["s1"]
    assert await db.read(record_store.get, "slack", "oauth_state", "gone") is None
    assert await db.write(record_store.take, "slack", "oauth_state", "gone") is None
    assert await db.write(record_store.take, "slack", "oauth_state", "s1") == "issued"
    assert await db.write(record_store.take, "slack", "oauth_state", "s1") is None
