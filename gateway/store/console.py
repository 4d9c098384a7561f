"""What the web console reads and writes: sign-in links, sessions, the queue, history, health."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.lifecycle import Status
from gateway.seam.console import Filters, LiveSession, LoginUse
from gateway.store import outbox as outbox_store
from gateway.store import requests as request_store
from gateway.store import tables
from gateway.store import votes as vote_store
from gateway.store.rows import DeliveryRow, EventRow, JobRow, RequestRow, VoteRow
from gateway.store.values import dumps, utcnow
from gateway.vocabulary import DeliveryStatus, JobKind, JobStatus

_login = tables.ConsoleLogin.__table__  # type: ignore[attr-defined]
_session = tables.ConsoleSession.__table__  # type: ignore[attr-defined]
_request = tables.Request.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]
_delivery = tables.Delivery.__table__  # type: ignore[attr-defined]
_job = tables.OutboxJob.__table__  # type: ignore[attr-defined]
_vote = tables.Vote.__table__  # type: ignore[attr-defined]


def create_login(conn: Connection, token_hash: str, email: str | None, ttl: timedelta) -> datetime:
    now = utcnow()
    values = {"token_hash": token_hash, "email": email, "created_at": now, "expires_at": now + ttl}
    conn.execute(sa.insert(_login).values(values))
    return now + ttl


def use_login(conn: Connection, token_hash: str) -> LoginUse:
    """Spend a sign-in link: only once, and only before it expires."""
    now = utcnow()
    spend = (
        sa.update(_login)
        .where(_login.c.token_hash == token_hash)
        .where(_login.c.used_at.is_(None))
        .where(_login.c.expires_at > now)
        .values(used_at=now)
        .returning(_login.c.email)
    )
    spent = (conn.execute(spend)).first()
    if spent is not None:
        return LoginUse(ok=True, email=spent[0])
    found = (conn.execute(sa.select(_login).where(_login.c.token_hash == token_hash))).first()
    if found is None:
        return LoginUse(ok=False, reason="this sign-in link is not valid")
    if found.used_at is not None:
        return LoginUse(ok=False, reason="this sign-in link was used already; ask for a new one")
    return LoginUse(ok=False, reason="this sign-in link has expired; ask for a new one")


def create_session(
    conn: Connection,
    sid_hash: str,
    *,
    email: str | None,
    name: str,
    projects: Sequence[str] | None,
    ttl: timedelta,
) -> None:
    now = utcnow()
    # Expired sessions are dead already; dropping them here keeps the table small.
    conn.execute(sa.delete(_session).where(_session.c.expires_at < now))
    values = {
        "sid_hash": sid_hash,
        "email": email,
        "name": name,
        "projects_json": None if projects is None else dumps(list(projects)),
        "created_at": now,
        "expires_at": now + ttl,
    }
    conn.execute(sa.insert(_session).values(values))


def live_session(conn: Connection, sid_hash: str) -> LiveSession | None:
    """The session if it is neither revoked nor expired: one read by primary key."""
    query = sa.select(
        _session.c.email,
        _session.c.name,
        _session.c.projects_json,
        _session.c.flash,
        _session.c.flash_path,
    ).where(
        _session.c.sid_hash == sid_hash,
        _session.c.revoked_at.is_(None),
        _session.c.expires_at > utcnow(),
    )
    row = (conn.execute(query)).first()
    if row is None:
        return None
    projects = None if row.projects_json is None else tuple(json.loads(row.projects_json))
    return LiveSession(row.email, row.name, projects, row.flash, row.flash_path)


def revoke_session(conn: Connection, sid_hash: str) -> bool:
    revoke = (
        sa.update(_session)
        .where(_session.c.sid_hash == sid_hash, _session.c.revoked_at.is_(None))
        .values(revoked_at=utcnow(), flash=None, flash_path=None)
    )
    return bool((conn.execute(revoke)).rowcount)


def revoke_sessions_of(conn: Connection, email: str | None) -> int:
    """End every live session of one person (`email=None`: every operator session)."""
    person = _session.c.email.is_(None) if email is None else _session.c.email == email
    revoke = (
        sa.update(_session)
        .where(person, _session.c.revoked_at.is_(None))
        .values(revoked_at=utcnow(), flash=None, flash_path=None)
    )
    return int((conn.execute(revoke)).rowcount)


def set_flash(conn: Connection, sid_hash: str, path: str, text: str) -> None:
    query = (
        sa.update(_session)
        .where(_session.c.sid_hash == sid_hash, _session.c.revoked_at.is_(None))
        .values(flash=text, flash_path=path)
    )
    conn.execute(query)


def take_flash(conn: Connection, sid_hash: str, path: str, text: str) -> bool:
    """Clear the notice `text` for `path` if it is still there: True for one caller only."""
    query = (
        sa.update(_session)
        .where(
            _session.c.sid_hash == sid_hash,
            _session.c.flash_path == path,
            _session.c.flash == text,
        )
        .values(flash=None, flash_path=None)
    )
    return bool((conn.execute(query)).rowcount)


def search_requests(
    conn: Connection,
    *,
    projects: Sequence[str] | None,
    pending: bool,
    filters: Filters,
    limit: int = 200,
) -> list[tuple[RequestRow, str]]:
    """Requests with their project's name, newest first (`projects=None`: every project)."""
    query = (
        sa.select(_request, _project.c.name.label("project_name"))
        .join(_project, _project.c.id == _request.c.project_id)
        .order_by(_request.c.requested_at.desc(), _request.c.rid)
        .limit(limit)
    )
    status = _request.c.status
    query = query.where(status == Status.PENDING if pending else status != Status.PENDING)
    if projects is not None:
        query = query.where(_project.c.name.in_(projects))
    for column, value in (
        (_project.c.name, filters.project),
        (_request.c.kind, filters.kind),
        (_request.c.run_id, filters.run_id),
        (_request.c.fn, filters.fn),
    ):
        if value:
            query = query.where(column == value)
    if filters.text:
        pattern = f"%{filters.text}%"
        columns = (_request.c.call_id, _request.c.run_id, _request.c.fn, _request.c.comment)
        query = query.where(sa.or_(*(c.ilike(pattern) for c in (*columns, _request.c.response))))
    rows = (conn.execute(query)).all()
    return [(_as_request(row), str(row.project_name)) for row in rows]


def _as_request(row: sa.Row[object]) -> RequestRow:
    values = dict(row._mapping)
    values.pop("project_name")
    return RequestRow(**values)


def project_name(conn: Connection, project_id: int) -> str | None:
    query = sa.select(_project.c.name).where(_project.c.id == project_id)
    name = (conn.execute(query)).scalar_one_or_none()
    return None if name is None else str(name)


def last_delivery_errors(conn: Connection) -> dict[str, tuple[str, datetime]]:
    """Each channel's most recent failed delivery: its error and when."""
    query = (
        sa.select(_delivery.c.channel, _delivery.c.error, _delivery.c.updated_at)
        .where(_delivery.c.status == DeliveryStatus.FAILED)
        .order_by(_delivery.c.updated_at.desc())
        .limit(500)
    )
    latest: dict[str, tuple[str, datetime]] = {}
    for channel, error, at in (conn.execute(query)).all():
        latest.setdefault(str(channel), (str(error or ""), at))
    return latest


def webhook_jobs(
    conn: Connection, project_ids: Sequence[int] | None, limit: int = 200
) -> list[JobRow]:
    """Recent webhook deliveries (outbox jobs), newest first."""
    webhooks = _job.c.kind == JobKind.WEBHOOK
    query = sa.select(_job).where(webhooks).order_by(_job.c.id.desc()).limit(limit)
    if project_ids is not None:
        query = query.where(_job.c.project_id.in_(project_ids))
    return [JobRow(**row._mapping) for row in (conn.execute(query)).all()]


def project_ids(conn: Connection, names: Sequence[str]) -> list[int]:
    query = sa.select(_project.c.id).where(_project.c.name.in_(names))
    return [int(value) for value in (conn.execute(query)).scalars()]


def deliveries_and_events(conn: Connection, rid: str) -> tuple[list[DeliveryRow], list[EventRow]]:
    return request_store.list_deliveries(conn, [rid]), request_store.list_events(conn, rid)


def with_votes(conn: Connection, rid: str) -> tuple[RequestRow | None, list[VoteRow]]:
    """A request and, under an approval policy, its votes (none without one)."""
    row = request_store.get_by_rid(conn, rid)
    if row is None or row.policy_json is None:
        return row, []
    return row, vote_store.list_for(conn, rid)


def voted_on(conn: Connection, rids: Sequence[str], person: str) -> set[str]:
    """Which of `rids` this voter (`gateway.policies.votes.person_of`) has voted on: one query."""
    if not rids:
        return set()
    query = sa.select(_vote.c.rid).where(_vote.c.rid.in_(list(rids)), _vote.c.person == person)
    return {str(rid) for rid in conn.execute(query).scalars()}


def next_timer(conn: Connection, rid: str) -> JobRow | None:
    """The request's next timer still to run (deadline, reminder or escalation), if any."""
    query = (
        sa.select(_job)
        .where(_job.c.rid == rid, _job.c.kind == JobKind.TIMER, _job.c.status == JobStatus.PENDING)
        .order_by(_job.c.run_at, _job.c.id)
        .limit(1)
    )
    row = conn.execute(query).first()
    return None if row is None else JobRow(**row._mapping)


def redeliver_webhook(conn: Connection, job_id: int, sees: Callable[[str], bool]) -> bool:
    """Queue a webhook delivery again, with the same message id (receivers dedupe on it);
    False when there is no such delivery the viewer (`sees`) may see."""
    job = outbox_store.get_job(conn, job_id)
    if job is None or job.kind != JobKind.WEBHOOK or job.project_id is None:
        return False
    project = project_name(conn, job.project_id)
    if project is None or not sees(project):
        return False
    outbox_store.enqueue(
        conn,
        JobKind.WEBHOOK,
        json.loads(job.payload_json),
        rid=job.rid,
        project_id=job.project_id,
        max_attempts=job.max_attempts,
    )
    return True
