"""Outbox jobs: written with the state change that caused them, claimed with a lease."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store import tables
from gateway.store.changes import jobs_queued
from gateway.store.rows import JobRow
from gateway.store.values import dumps, utcnow
from gateway.vocabulary import JobKind, JobStatus, Timer

_job = tables.OutboxJob.__table__  # type: ignore[attr-defined]
_INSERT_JOB = sa.insert(_job).returning(_job.c.id)  # built once: it runs for every delivery


def enqueue(
    conn: Connection,
    kind: JobKind,
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
        "status": JobStatus.PENDING,
        "attempts": 0,
        "max_attempts": max_attempts,
        "run_at": run_at or now,
        "created_at": now,
        "updated_at": now,
    }
    job_id = int(conn.execute(_INSERT_JOB, values).scalar_one())
    jobs_queued(conn)
    return job_id


def claim(
    conn: Connection, *, limit: int, lease: timedelta, skip_locked: bool, worker: str = ""
) -> list[JobRow]:
    """Take due jobs (and jobs whose lease ran out after a crash) for one lease period, in
    `worker`'s name: only it renews or hands back their leases."""
    now = utcnow()
    due = sa.or_(
        sa.and_(_job.c.status == JobStatus.PENDING, _job.c.run_at <= now),
        sa.and_(_job.c.status == JobStatus.RUNNING, _job.c.locked_until < now),
    )
    pick = sa.select(_job.c.id).where(due).order_by(_job.c.run_at, _job.c.id).limit(limit)
    if skip_locked:
        pick = pick.with_for_update(skip_locked=True)
    query = (
        sa.update(_job)
        .where(_job.c.id.in_(pick.scalar_subquery()))
        .values(
            status=JobStatus.RUNNING,
            attempts=_job.c.attempts + 1,
            locked_until=now + lease,
            claimed_by=worker,
            updated_at=now,
        )
        .returning(*_job.c)
    )
    rows = (conn.execute(query)).all()
    return sorted((JobRow(**row._mapping) for row in rows), key=lambda job: job.id or 0)


def complete(conn: Connection, job_id: int) -> None:
    values = {"status": JobStatus.DONE, "locked_until": None, "updated_at": utcnow()}
    conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))


def retry(conn: Connection, job_id: int, *, run_at: datetime, error: str) -> None:
    values = {
        "status": JobStatus.PENDING,
        "run_at": run_at,
        "locked_until": None,
        "last_error": error,
        "waiting_for": None,  # it failed for another reason: a reconnect does not hurry it
        "updated_at": utcnow(),
    }
    conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))


def postpone(
    conn: Connection, job_id: int, *, run_at: datetime, error: str, waiting_for: str
) -> None:
    """Try again later without spending an attempt: the channel `waiting_for` was down, and
    `resume_waiting` makes the job due as soon as it connects."""
    values = {
        "status": JobStatus.PENDING,
        "run_at": run_at,
        "attempts": _job.c.attempts - 1,
        "locked_until": None,
        "last_error": error,
        "waiting_for": waiting_for,
        "updated_at": utcnow(),
    }
    conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))


def resume_waiting(conn: Connection, channel: str) -> int:
    """Jobs postponed because `channel` was down are due now that it is up."""
    query = (
        sa.update(_job)
        .where(_job.c.status == JobStatus.PENDING, _job.c.waiting_for == channel)
        .values(run_at=utcnow())
    )
    jobs_queued(conn)
    return int(conn.execute(query).rowcount)


def bury(conn: Connection, job_id: int, *, error: str) -> None:
    """The last attempt failed: the job is dead and stays visible for an operator."""
    values = {
        "status": JobStatus.DEAD,
        "locked_until": None,
        "last_error": error,
        "updated_at": utcnow(),
    }
    conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))


def release_leases(conn: Connection) -> int:
    """At start on SQLite (one process by construction), jobs left running are orphans."""
    query = (
        sa.update(_job)
        .where(_job.c.status == JobStatus.RUNNING)
        .values(status=JobStatus.PENDING, locked_until=None, run_at=utcnow())
    )
    return (conn.execute(query)).rowcount


def release(conn: Connection, job_ids: list[int], worker: str) -> int:
    """Jobs a stopping worker claimed and did not finish are due again at once, attempt given
    back (another replica takes them now, not when the lease runs out). One finished
    meanwhile, or taken by another worker since its lease ran out, stays as it is."""
    now = utcnow()
    query = (
        sa.update(_job)
        .where(_job.c.id.in_(_in_id_order(conn, job_ids, worker)))
        .values(
            status=JobStatus.PENDING,
            attempts=_job.c.attempts - 1,
            locked_until=None,
            run_at=now,
            updated_at=now,
        )
    )
    jobs_queued(conn)
    return int(conn.execute(query).rowcount)


def extend_leases(conn: Connection, job_ids: list[int], lease: timedelta, worker: str) -> None:
    """The worker running these jobs is alive: their leases run `lease` from now (not a
    job another worker has taken since). A job another transaction holds is skipped: it is
    being finished right now, and a renewal must never wait in a lock cycle."""
    query = (
        sa.update(_job)
        .where(_job.c.id.in_(_in_id_order(conn, job_ids, worker, skip_locked=True)))
        .values(locked_until=utcnow() + lease)
    )
    conn.execute(query)


def _in_id_order(
    conn: Connection, job_ids: list[int], worker: str, *, skip_locked: bool = False
) -> sa.ScalarSelect[int]:
    """`worker`'s running jobs among `job_ids`, locked in id order on PostgreSQL (every
    statement that locks several jobs takes them in one order: no deadlock among them)."""
    held = sa.and_(_job.c.status == JobStatus.RUNNING, _job.c.claimed_by == worker)
    pick = sa.select(_job.c.id).where(_job.c.id.in_(job_ids), held).order_by(_job.c.id)
    if conn.dialect.name == "postgresql":
        pick = pick.with_for_update(skip_locked=skip_locked)
    return pick.scalar_subquery()


def next_due_at(conn: Connection) -> datetime | None:
    """When the next job is due: a pending one's time, or a running one's lease end (its
    worker may have died)."""
    pending = sa.select(sa.func.min(_job.c.run_at)).where(_job.c.status == JobStatus.PENDING)
    running = sa.select(sa.func.min(_job.c.locked_until)).where(_job.c.status == JobStatus.RUNNING)
    query = sa.select(pending.scalar_subquery(), running.scalar_subquery())  # one round trip
    times = conn.execute(query).one()
    return min((t for t in times if t is not None), default=None)


def list_jobs(
    conn: Connection, *, project_id: int | None, status: JobStatus | None, limit: int = 100
) -> list[JobRow]:
    query = sa.select(_job).order_by(_job.c.id.desc()).limit(limit)
    if project_id is not None:
        query = query.where(_job.c.project_id == project_id)
    if status is not None:
        query = query.where(_job.c.status == status)
    return [JobRow(**row._mapping) for row in (conn.execute(query)).all()]


def get_job(conn: Connection, job_id: int) -> JobRow | None:
    row = (conn.execute(sa.select(_job).where(_job.c.id == job_id))).first()
    return None if row is None else JobRow(**row._mapping)


def cancel_timers(conn: Connection, rid: str) -> None:
    """A decided request's timers and reminders will not run (delayed deliveries skip)."""
    query = (
        sa.update(_job)
        .where(
            _job.c.rid == rid,
            _job.c.status == JobStatus.PENDING,
            _job.c.kind.in_([JobKind.TIMER, JobKind.REMIND]),
        )
        .values(status=JobStatus.DONE, last_error="cancelled: the request was decided")
    )
    conn.execute(query)


def expired_response(conn: Connection, rid: str) -> str | None:
    """The answer a question's deadline gives (its pending EXPIRE timer's), if any."""
    query = sa.select(_job.c.payload_json).where(
        _job.c.rid == rid,
        _job.c.kind == JobKind.TIMER,
        _job.c.status.in_([JobStatus.PENDING, JobStatus.RUNNING]),  # running: it may be late
    )
    for (payload_json,) in conn.execute(query).all():
        payload = json.loads(payload_json)
        if payload.get("timer") == Timer.EXPIRE:
            response: str | None = payload.get("response")
            return response
    return None


def defer(conn: Connection, job_id: int, *, run_at: datetime) -> None:
    """Run the job at `run_at` instead, its attempt given back: it did not try, as its
    destination was behind (a paced channel's queue, a slow receiver's)."""
    values = {
        "status": JobStatus.PENDING,
        "run_at": run_at,
        "attempts": _job.c.attempts - 1,
        "locked_until": None,
        "updated_at": utcnow(),
    }
    conn.execute(sa.update(_job).where(_job.c.id == job_id).values(values))
