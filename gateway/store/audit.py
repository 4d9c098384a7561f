"""The audit chain: every audit event (`request_event`) is linked into one SHA-256 hash chain
per project, so that an event edited, deleted, inserted or moved afterwards shows
(`gateway audit verify`, `gateway.store.audit_check`).

The rule (version 1), over RFC 8785 canonical JSON (`gateway.store.canonical`):
- a field hash: `sha256(canonical(value))` of one top-level member of the event's detail;
- the event's digest, computed as it is written (`add_events` returns it):
  `sha256(canonical({"v": 1, "rid": rid, "type": type, "at": at, "detail": {name: field
  hash, ...}}))`, where `at` is the event's time in UTC as `YYYY-MM-DDTHH:MM:SS.ffffffZ`
  (always six digits: both databases keep microseconds);
- its link, computed as its transaction commits (`seal`): `sha256(canonical({"project":
  project_id, "seq": seq, "prev": prev_hash, "digest": digest}))`; `seq` counts the
  project's events from 1, and `prev_hash` is the link of the event before it (64 zeros for
  the first). The project's head (`audit_head`) holds its last `seq` and link.

Redaction (retention): the detail is hashed field by field so that a field's content can be
dropped and the chain still verify. A redacted event has `redacted_at` set, and each field it
no longer holds is stored as `{"redacted_sha256": <that field's hash>}` (`redacted`): the
hash stands in for the content (in a redacted event, any field of exactly that shape is
read so). Only whole top-level fields are redacted; `rid`, `type`, `at` and the link columns
never change, and no event is deleted.

No fork across replicas, and no deadlock: a new event is queued in its transaction
(`queue`), and `seal` links the transaction's events and inserts them, in one statement,
just before it commits, with each project's head row locked (SELECT … FOR UPDATE, project
id order, at this one point of the transaction). The head lock makes the project's writers
take turns for `seq`, from any replica; taken last and in one order, it never waits in a
cycle with the request locks the writer orders by key (`gateway.store.writer`), nor with
another transaction's head locks. (Linking as each event is written would hold the head
lock from a batch's first event on, while its later writes take request locks: two batches
could wait on each other.) A write that reads its request's trail sees the queued events
too (`queued`). The unique index on (project_id, seq) refuses a fork outright.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store import driver, locks, tables
from gateway.store.canonical import canonical, sha256_hex
from gateway.store.values import as_utc, dumps
from gateway.vocabulary import AuditEvent

VERSION = 1
GENESIS = "0" * 64  # the `prev_hash` of a project's first event
REDACTED = "redacted_sha256"
# The detail fields that carry a request's content (its arguments, a person's free text or
# comment): what retention redacts (`redact_events`). An event type given such a field adds
# it here. No VOTED: its event holds who and which way; the comment is in the `vote` row.
CONTENT_FIELDS: dict[str, tuple[str, ...]] = {
    AuditEvent.EDITED: ("original", "updated"),
    AuditEvent.UNCLEAR_REPLY: ("text",),
    AuditEvent.ESCALATED: ("escalation_msg",),
    AuditEvent.DECIDED: ("comment", "response"),
}
# Turned off only by bench/audit_chain.py, for its baseline without the chain.
CHAINED = True

_event = tables.RequestEvent.__table__  # type: ignore[attr-defined]
_head = tables.AuditHead.__table__  # type: ignore[attr-defined]
_request = tables.Request.__table__  # type: ignore[attr-defined]
_QUEUED = "audit_queued"  # the transaction's new events, in Connection.info, until `seal`
_HEX = re.compile(r"[0-9a-f]{64}")

# --- the rule --------------------------------------------------------------------------


def timestamp(at: datetime) -> str:
    """An event's time as the chain hashes it: `YYYY-MM-DDTHH:MM:SS.ffffffZ`."""
    at = as_utc(at)
    if at.utcoffset():
        at = at.astimezone(UTC)
    return at.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def field_hashes(detail: dict[str, Any], *, redacted: bool = False) -> dict[str, str]:
    """Each top-level field's hash; in a redacted event, a redacted field's stored hash."""
    return {
        name: (_stored_hash(value) if redacted else None) or sha256_hex(value)
        for name, value in detail.items()
    }


def event_digest(
    rid: str, type_: str, at: datetime, detail: dict[str, Any], *, redacted: bool = False
) -> str:
    """sha256 of {"v": 1, "rid", "type", "at", "detail": field hashes}, canonical."""
    fields = canonical(field_hashes(detail, redacted=redacted))
    # The canonical text of that object, written out: members in order, hex needs no escape.
    content = f'{{"at":"{timestamp(at)}","detail":{fields},"rid":{canonical(rid)},'
    content += f'"type":{canonical(type_)},"v":{VERSION}}}'
    return hashlib.sha256(content.encode()).hexdigest()


def link_hash(project_id: int, seq: int, prev_hash: str, digest: str) -> str:
    """sha256 of {"project", "seq", "prev", "digest"}, canonical (written out, as above)."""
    link = f'{{"digest":"{digest}","prev":"{prev_hash}","project":{project_id},"seq":{seq}}}'
    return hashlib.sha256(link.encode()).hexdigest()


def redacted(
    detail: dict[str, Any], names: Sequence[str], *, already: bool = False
) -> dict[str, Any]:
    """`detail` with these fields replaced by their hashes (store it with `redacted_at`);
    `already`: the event was redacted before (its redacted fields stay as they are)."""
    return {
        name: {REDACTED: field_hashes({name: value}, redacted=already)[name]}
        if name in names
        else value
        for name, value in detail.items()
    }


def _stored_hash(value: Any) -> str | None:
    """The hash a redacted field holds instead of its content (None: not redacted)."""
    if isinstance(value, dict) and len(value) == 1:
        held = value.get(REDACTED)
        if isinstance(held, str) and _HEX.fullmatch(held):
            return held
    return None


# --- writing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NewEvent:
    """An audit event as `add_events` queues it, and its digest."""

    row: dict[str, Any]
    digest: str | None


def new_event(
    rid: str, type_: str, detail: dict[str, Any], at: datetime, project_id: int | None = None
) -> NewEvent:
    """The row of a new event, not yet linked: `seal` links and inserts it as its
    transaction commits (in the request's project: looked up then, unless given)."""
    text = dumps(detail)
    row = {"rid": rid, "type": type_, "detail_json": text, "at": at, "project_id": project_id}
    if not CHAINED:
        return NewEvent(row, None)
    # Hashed as it reads back (tuples become lists, keys strings), so verify agrees.
    digest = event_digest(rid, type_, at, json.loads(text))
    return NewEvent(row | {"digest": digest}, digest)


def queue(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Hold new events until the transaction commits (`seal`)."""
    held: list[dict[str, Any]] | None = conn.info.get(_QUEUED)
    if held is None:  # only the writer's transactions seal: elsewhere they would be lost
        raise RuntimeError("audit events are written only in the store's writer")
    held.extend(rows)


def queued(conn: Connection, rid: str) -> list[dict[str, Any]]:
    """The request's events this transaction has queued (a write reading its trail)."""
    return [row for row in conn.info.get(_QUEUED) or () if row["rid"] == rid]


def begin(conn: Connection) -> None:
    """A writer transaction begins: new events queue from here, and those of an earlier
    attempt, which was rolled back, are dropped (the writer runs its writes again)."""
    conn.info[_QUEUED] = []


# Straight to the driver, as are the events' insert: once per batch each, on the hot path.
_PROJECT_OF = {
    "postgresql": "SELECT rid, project_id FROM request WHERE rid = ANY(%s)",
    "sqlite": "SELECT rid, project_id FROM request WHERE rid IN (SELECT value FROM json_each(?))",
}
_HEAD = "SELECT seq, hash FROM audit_head WHERE project_id = ?"
_NEW_HEAD = "INSERT INTO audit_head (project_id, seq, hash) VALUES (?, 0, ?) ON CONFLICT DO NOTHING"
_MOVE_HEAD = "UPDATE audit_head SET seq = ?, hash = ? WHERE project_id = ?"
_COLUMNS = ("rid", "type", "detail_json", "at", "redacted_at")
_LINK_COLUMNS = ("project_id", "seq", "digest", "prev_hash", "hash")
_INSERT = driver.Insert(_event, _COLUMNS + _LINK_COLUMNS)


def seal(conn: Connection) -> None:
    """Link this transaction's queued events into their projects' chains and insert them,
    in one statement. Called once per transaction, just before its commit
    (`gateway.store.engine`'s batch hooks)."""
    rows = conn.info.pop(_QUEUED, None)  # the transaction ends here: nothing queues after
    if not rows:
        return
    if CHAINED:
        _link(conn, rows)
    _INSERT.many(conn, [_UNLINKED | row for row in rows])


_UNLINKED = dict.fromkeys((*_LINK_COLUMNS, "redacted_at"))


def _link(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Give each row its project, place and link, in order; move the heads."""
    project_of = _projects(conn, rows)
    heads = {p: _lock_head(conn, p) for p in sorted(set(project_of.values()))}
    for row in rows:
        project_id = project_of[row["rid"]]
        seq, prev = heads[project_id]
        link = link_hash(project_id, seq + 1, prev, row["digest"])
        row.update(project_id=project_id, seq=seq + 1, prev_hash=prev, hash=link)
        heads[project_id] = (seq + 1, link)
    moves = [(seq, link, p) for p, (seq, link) in heads.items()]
    driver.execute_many(conn, driver.with_marks(conn, _MOVE_HEAD), moves)


def _projects(conn: Connection, rows: list[dict[str, Any]]) -> dict[str, int]:
    """Each row's project: as it was queued, else its request's (one query for them all)."""
    known = {row["rid"]: row["project_id"] for row in rows if row["project_id"] is not None}
    missing = sorted({row["rid"] for row in rows}.difference(known))
    if missing:
        given = missing if conn.dialect.name == "postgresql" else dumps(missing)
        known.update(driver.rows(conn, _PROJECT_OF[conn.dialect.name], (given,)))
    return known


def _lock_head(conn: Connection, project_id: int) -> tuple[int, str]:
    """The project's head, locked until the transaction ends (made at its first event)."""
    query = driver.with_marks(conn, _HEAD)
    if conn.dialect.name == "postgresql":
        query += " FOR UPDATE"
    found = driver.rows(conn, query, (project_id,))
    if not found:  # or another replica just made it
        driver.execute(conn, driver.with_marks(conn, _NEW_HEAD), (project_id, GENESIS))
        found = driver.rows(conn, query, (project_id,))
    seq, link = found[0]
    return int(seq), str(link)


def redact_events(
    conn: Connection, rid: str, at: datetime, names: dict[str, tuple[str, ...]] | None = None
) -> int:
    """Replace the content fields of the request's events by their hashes (`names`, by
    event type: CONTENT_FIELDS unless given), keeping the chain verifiable; returns how many
    events changed."""
    names = CONTENT_FIELDS if names is None else names
    columns = (_event.c.id, _event.c.type, _event.c.detail_json, _event.c.redacted_at)
    changed, changed_queued = [], 0
    for event_id, type_, detail_json, redacted_at in conn.execute(
        sa.select(*columns).where(_event.c.rid == rid)
    ).all():
        detail = json.loads(detail_json)
        fields = [name for name in names.get(type_, ()) if name in detail]
        if fields:
            hidden = redacted(detail, fields, already=redacted_at is not None)
            changed.append({"event_id": event_id, "detail": dumps(hidden), "when": at})
    for row in queued(conn, rid):  # written earlier in this transaction, inserted at commit
        detail = json.loads(row["detail_json"])
        fields = [name for name in names.get(row["type"], ()) if name in detail]
        if fields:
            row.update(detail_json=dumps(redacted(detail, fields)), redacted_at=at)
            changed_queued += 1
    if changed:
        update = sa.update(_event).where(_event.c.id == sa.bindparam("event_id"))
        values: dict[str, Any] = {
            "detail_json": sa.bindparam("detail"),
            "redacted_at": sa.bindparam("when"),
        }
        conn.execute(update.values(values), changed)
    return len(changed) + changed_queued


# --- checkpoints -----------------------------------------------------------------------

_checkpoint = tables.AuditCheckpoint.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]
# The transaction lock under which one replica at a time records checkpoints.
CHECKPOINT_LOCK = 0x6877_6175_6469_7463


@dataclass(frozen=True)
class Published:
    """A project's head as a checkpoint records (and publishes) it."""

    project_id: int
    project: str
    seq: int
    hash: str
    at: datetime


def checkpoint_due_in(conn: Connection, now: datetime, period_seconds: float) -> float:
    """Seconds until the next checkpoint is due (0: now)."""
    last = conn.execute(sa.select(sa.func.max(_checkpoint.c.at))).scalar_one_or_none()
    if last is None:
        return 0.0
    return max(0.0, period_seconds - (now - as_utc(last)).total_seconds())


def heads_grew(conn: Connection) -> bool:
    """Whether some project's chain grew since its last checkpoint."""
    last = (
        sa.select(sa.func.max(_checkpoint.c.seq))
        .where(_checkpoint.c.project_id == _head.c.project_id)
        .scalar_subquery()
    )
    grown = sa.select(_head.c.project_id).where(_head.c.seq > sa.func.coalesce(last, 0))
    return conn.execute(grown.limit(1)).first() is not None


def take_checkpoints(conn: Connection, now: datetime, period_seconds: float) -> list[Published]:
    """Record the head of every project whose chain grew since its last checkpoint, unless
    a checkpoint was recorded less than a period ago (by another replica, say)."""
    locks.take_for_transaction(conn, CHECKPOINT_LOCK)  # replicas take turns here
    if checkpoint_due_in(conn, now, period_seconds) > 0:
        return []
    by_project = sa.select(_checkpoint.c.project_id, sa.func.max(_checkpoint.c.seq))
    latest: dict[int, int] = {
        int(p): int(seq) for p, seq in conn.execute(by_project.group_by(_checkpoint.c.project_id))
    }
    heads = conn.execute(
        sa.select(_head.c.project_id, _project.c.name, _head.c.seq, _head.c.hash)
        .join(_project, _project.c.id == _head.c.project_id)
        .order_by(_head.c.project_id)
    ).all()
    moved = [
        Published(int(h.project_id), str(h.name), int(h.seq), str(h.hash), now)
        for h in heads
        if h.seq > latest.get(h.project_id, 0)
    ]
    if moved:
        rows = [
            {"project_id": p.project_id, "seq": p.seq, "hash": p.hash, "at": now} for p in moved
        ]
        conn.execute(sa.insert(_checkpoint), rows)
    return moved
