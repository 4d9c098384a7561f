"""Outbox jobs: written with the state change that caused them, claimed with a lease."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.store.engine import dumps, utcnow
from gateway.store.tables import OutboxJob

_job = OutboxJob.__table__  # type: ignore[attr-defined]


async def enqueue(
    conn: AsyncConnection,
    kind: str,
    payload: dict[str, Any],
    *,
    max_attempts: int,
    rid: str | None = None,
    project_id: int | None = None,
    run_at: datetime | None = None,
) -> int:
    now = utcnow()
    values = {
        "kind": kind,
        "rid": rid,
        "project_id": project_id,
        "payload_json": dumps(payload),
        "status": "pending",
        "attempts": 0,
        "max_attempts": max_attempts,
        "run_at": run_at or now,
        "created_at": now,
        "updated_at": now,
    }
    result = await conn.execute(sa.insert(_job).values(values).returning(_job.c.id))
    return int(result.scalar_one())


async def claim(
    conn: AsyncConnection, *, limit: int, lease: timedelta, skip_locked: bool
) -> list[OutboxJob]:
    """Take due jobs (and jobs whose lease ran out after a crash) for one lease period."""
    now = utcnow()
    due = sa.or_(
        sa.and_(_job.c.status == "pending", _job.c.run_at <= now),
        sa.and_(_job.c.status == "running", _job.c.locked_until < now),
    )
    pick = sa.select(_job.c.id).where(due).order_by(_job.c.run_at, _job.c.id).limit(limit)
    if skip_locked:
        pick = pick.with_for_update(skip_locked=True)
    query = (
        sa.update(_job)
        .where(_job.c.id.in_(pick.scalar_subquery()))
        .values(
            status="running",
            attempts=_job.c.attempts + 1,
            locked_until=now + lease,
            updated_at=now,
        )
        .returning(*_job.c)
    )
    rows = (await conn.execute(query)).all()
    return sorted((OutboxJob(**row._mapping) for row in rows), key=lambda job: job.id or 0)


async def complete(conn: AsyncConnection, job_id: int) -> None:
    values = {"status": "done", "locked_until": None, "updated_at": utcnow()}
    await conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))


async def retry(conn: AsyncConnection, job_id: int, *, run_at: datetime, error: str) -> None:
    values = {
        "status": "pending",
        "run_at": run_at,
        "locked_until": None,
        "last_error": error,
        "updated_at": utcnow(),
    }
    await conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))


async def postpone(conn: AsyncConnection, job_id: int, *, run_at: datetime, error: str) -> None:
    """Try again later without spending an attempt (the channel itself was down)."""
    values = {
        "status": "pending",
        "run_at": run_at,
        "attempts": _job.c.attempts - 1,
        "locked_until": None,
        "last_error": error,
        "updated_at": utcnow(),
    }
    await conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))


async def resume_waiting(conn: AsyncConnection, marker: str) -> int:
    """Jobs postponed because a channel was down are due now that it is up."""
    query = (
        sa.update(_job)
        .where(_job.c.status == "pending", _job.c.last_error.startswith(marker, autoescape=True))
        .values(run_at=utcnow())
    )
    return (await conn.execute(query)).rowcount


async def bury(conn: AsyncConnection, job_id: int, *, error: str) -> None:
    """The last attempt failed: the job is dead and stays visible for an operator."""
    values = {"status": "dead", "locked_until": None, "last_error": error, "updated_at": utcnow()}
    await conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))


async def release_leases(conn: AsyncConnection) -> int:
    """At start on SQLite (one process by construction), jobs left running are orphans."""
    query = (
        sa.update(_job)
        .where(_job.c.status == "running")
        .values(status="pending", locked_until=None, run_at=utcnow())
    )
    return (await conn.execute(query)).rowcount


async def next_due_at(conn: AsyncConnection) -> datetime | None:
    query = sa.select(sa.func.min(_job.c.run_at)).where(_job.c.status == "pending")
    value: datetime | None = (await conn.execute(query)).scalar_one_or_none()
    return value


async def list_jobs(
    conn: AsyncConnection, *, project_id: int | None, status: str | None, limit: int = 100
) -> list[OutboxJob]:
    query = sa.select(_job).order_by(_job.c.id.desc()).limit(limit)
    if project_id is not None:
        query = query.where(_job.c.project_id == project_id)
    if status is not None:
        query = query.where(_job.c.status == status)
    return [OutboxJob(**row._mapping) for row in (await conn.execute(query)).all()]


async def get_job(conn: AsyncConnection, job_id: int) -> OutboxJob | None:
    row = (await conn.execute(sa.select(_job).where(_job.c.id == job_id))).first()
    return None if row is None else OutboxJob(**row._mapping)
