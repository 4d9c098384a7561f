"""Retention: a decided request past its project's `retention.decided_after` keeps its
shape but not its content. Each content value is replaced by `{"redacted_sha256": <sha256 of
its canonical JSON>}` (RFC 8785, `gateway.store.canonical`), and the request's `redacted_at`
is set; whoever holds the original can still prove it was that.

What is redacted (`gateway.policies.retention` picks the requests):
- the spec's `kwargs` and `state` (the marker object), and a question's `msg` and `subject`
  (the marker's JSON text: the wire has strings there);
- the decision's `comment` and a question's free-text `response` (text columns: they hold the
  marker's JSON text), and the arguments an approver edited (`updated_kwargs_json`);
- the request's sealed secrets (dropped: they are only needed while it waits);
- each vote's comment, and the content fields of its audit events
  (`gateway.store.audit.redact_events`: the chain still verifies through the field hashes);
- the payloads of its finished outbox jobs (a webhook's body carries the request).

Who decided, when, the outcome, `fn`, `call_id` and `body_hash` stay. A pending request is
never touched (every statement here requires a decided one).

On SQLite every connection has `secure_delete` on (`gateway.store.engine`), so the replaced
bytes are overwritten in the file rather than left in free space, and `truncate_wal` then
empties the write-ahead log, which still holds the pages as they were. On PostgreSQL the old row
versions are dead tuples, out of reach of queries and dumps, until VACUUM reclaims them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.lifecycle import Status
from gateway.store import tables
from gateway.store.audit import REDACTED, redact_events
from gateway.store.canonical import sha256_hex
from gateway.store.changes import request_changed
from gateway.store.values import dumps
from gateway.vocabulary import JobStatus

SPEC_FIELDS = ("kwargs", "state", "msg", "subject")
_TEXT_COLUMNS = ("comment", "response")

_request = tables.Request.__table__  # type: ignore[attr-defined]
_vote = tables.Vote.__table__  # type: ignore[attr-defined]
_job = tables.OutboxJob.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]


def marker(value: Any) -> dict[str, str]:
    """What stands in for a redacted value: its hash."""
    return {REDACTED: sha256_hex(value)}


def _hidden(value: Any) -> Any:
    """A spec member's marker: an object, or its JSON text where the wire has a string."""
    return dumps(marker(value)) if isinstance(value, str) else marker(value)


def _due(project_id: int, before: datetime) -> sa.Select[Any]:
    return sa.select(_request.c.rid).where(
        _request.c.project_id == project_id,
        _request.c.status != Status.PENDING,
        _request.c.responded_at < before,
        _request.c.redacted_at.is_(None),
    )


def due(conn: Connection, project_id: int, before: datetime, limit: int) -> list[str]:
    """Up to `limit` of the project's decided requests answered before `before` and not
    redacted yet, oldest first."""
    query = _due(project_id, before).order_by(_request.c.responded_at).limit(limit)
    return [str(rid) for rid in conn.scalars(query)]


def count_due(conn: Connection, project_id: int, before: datetime) -> int:
    """How many requests `redact` would change (`gateway retention run --dry-run`)."""
    return int(
        conn.execute(
            sa.select(sa.func.count()).select_from(_due(project_id, before).subquery())
        ).scalar_one()
    )


def project_ids(conn: Connection) -> dict[str, int]:
    """Every project's id, by name."""
    return {
        str(name): int(pid) for pid, name in conn.execute(sa.select(_project.c.id, _project.c.name))
    }


def redact(conn: Connection, rids: Sequence[str], at: datetime) -> int:
    """Redact these requests (those still decided and not redacted); returns how many."""
    return sum(_redact_one(conn, rid, at) for rid in rids)


def _redact_one(conn: Connection, rid: str, at: datetime) -> int:
    query = sa.select(_request).where(_request.c.rid == rid)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None or row.status == Status.PENDING or row.redacted_at is not None:
        return 0
    spec = json.loads(row.spec_json)
    values: dict[str, Any] = {
        "spec_json": dumps({k: _hidden(v) if k in SPEC_FIELDS else v for k, v in spec.items()}),
        "sealed_secrets": None,
        "redacted_at": at,
    }
    for column in _TEXT_COLUMNS:
        if row._mapping[column] is not None:
            values[column] = dumps(marker(row._mapping[column]))
    if row.updated_kwargs_json is not None:
        values["updated_kwargs_json"] = dumps(marker(json.loads(row.updated_kwargs_json)))
    conn.execute(sa.update(_request).where(_request.c.rid == rid).values(values))
    for vote_id, comment in conn.execute(
        sa.select(_vote.c.id, _vote.c.comment).where(
            _vote.c.rid == rid, _vote.c.comment.isnot(None)
        )
    ).all():
        hidden = dumps(marker(comment))
        conn.execute(sa.update(_vote).where(_vote.c.id == vote_id).values(comment=hidden))
    redact_events(conn, rid, at)
    _redact_jobs(conn, rid)
    request_changed(conn, rid)
    return 1


def _redact_jobs(conn: Connection, rid: str) -> None:
    finished = _job.c.status.in_((JobStatus.DONE, JobStatus.DEAD))
    jobs = conn.execute(
        sa.select(_job.c.id, _job.c.payload_json).where(_job.c.rid == rid, finished)
    ).all()
    for job_id, payload_json in jobs:
        hidden = dumps(marker(json.loads(payload_json)))
        conn.execute(sa.update(_job).where(_job.c.id == job_id).values(payload_json=hidden))


def truncate_wal(conn: Connection) -> bool:
    """SQLite: move the write-ahead log into the file and empty it, so the pages as they
    were before redaction are gone from it too; False when a reader kept it from finishing
    (the next run tries again). PostgreSQL: nothing to do."""
    if conn.dialect.name != "sqlite":
        return True
    busy = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").first()
    return busy is not None and busy[0] == 0
