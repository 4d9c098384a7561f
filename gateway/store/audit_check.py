"""Reading the audit chain back (`gateway audit verify` and `export`): walk a project's chain
in seq order, recompute every event's digest and link by the rule in `gateway.store.audit`,
and name the first place where the stored history differs from what was chained."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store import audit, tables
from gateway.store.rows import EventRow

PAGE = 2000  # events read at a time

_event = tables.RequestEvent.__table__  # type: ignore[attr-defined]
_head = tables.AuditHead.__table__  # type: ignore[attr-defined]
_checkpoint = tables.AuditCheckpoint.__table__  # type: ignore[attr-defined]
_request = tables.Request.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Checkpoint:
    """A head as published: the project's event `seq` had link `hash` (at `at`, if known)."""

    seq: int
    hash: str
    at: datetime | None = None


@dataclass(frozen=True)
class Break:
    """The first place where the stored chain differs from what was written."""

    kind: str  # edited, deleted, moved, relinked, forked, rewritten, inserted
    what: str  # one sentence: which event, what changed
    seq: int | None  # where the chain breaks (None: an event outside every chain)
    event: EventRow | None  # the event found there, if any
    intact: EventRow | None  # the last event verified intact before it
    checkpoint: Checkpoint | None  # the last checkpoint the intact part still matches


@dataclass(frozen=True)
class Verdict:
    project_id: int
    project: str
    events: int  # events verified intact
    head: Checkpoint
    broken: Break | None


def projects(conn: Connection, name: str | None = None) -> list[tuple[int, str]]:
    query = sa.select(_project.c.id, _project.c.name).order_by(_project.c.id)
    if name is not None:
        query = query.where(_project.c.name == name)
    return [(int(row.id), str(row.name)) for row in conn.execute(query).all()]


def verify(
    conn: Connection, project_id: int, name: str, *, outside: Sequence[Checkpoint] = ()
) -> Verdict:
    """Walk the project's chain up to its head (read first: later events are not ours to
    judge yet); `outside`: checkpoints kept elsewhere, checked like the stored ones."""
    head = _head_of(conn, project_id)
    walk = _Walk(conn, project_id, [*_checkpoints(conn, project_id), *outside])
    after = 0
    while page := _chain_page(conn, project_id, after, head.seq):
        for row in page:
            if (broken := walk.step(row)) is not None:
                return Verdict(project_id, name, walk.count, head, broken)
        after = int(page[-1].seq or 0)
    broken = (
        walk.finish(head)
        or _beyond_head(conn, project_id, head, walk)
        or _first_unchained(conn, project_id, walk)
    )
    return Verdict(project_id, name, walk.count, head, broken)


class _Walk:
    def __init__(self, conn: Connection, project_id: int, checkpoints: list[Checkpoint]) -> None:
        self.conn = conn
        self.project_id = project_id
        self.checkpoints = {cp.seq: cp for cp in sorted(checkpoints, key=_published)}
        self.prev = audit.GENESIS
        self.expected = 1
        self.count = 0
        self.intact: EventRow | None = None
        self.matched: Checkpoint | None = None

    def step(self, row: EventRow) -> Break | None:
        seq = int(row.seq or 0)
        if seq != self.expected:
            return self._gap(row, seq)
        digest = _recomputed_digest(row)
        if digest != row.digest:
            return self.broken("edited", self._edited(row, digest), row)
        if row.prev_hash != self.prev:
            return self._relinked(row)
        link = audit.link_hash(self.project_id, seq, row.prev_hash, digest)
        if link != row.hash:
            what = f"{_named(row)}: its link changed (recomputed {link}, stored {row.hash})"
            return self.broken("edited", what, row)
        if (cp := self.checkpoints.get(seq)) is not None:
            if cp.hash != row.hash:  # links recomputed: nothing up to here is known intact
                what = f"{_named(row)} differs from {_checkpoint_named(cp)}: rewritten since"
                return Break("rewritten", what, seq, row, None, self.matched)
            self.matched = cp
        self.prev, self.expected, self.intact = str(row.hash), seq + 1, row
        self.count += 1
        return None

    def finish(self, head: Checkpoint) -> Break | None:
        last = self.expected - 1
        if head.seq > last:
            what = f"the chain ends at seq {last} but its head is at seq {head.seq}: "
            what += f"the last {head.seq - last} event(s) were deleted"
            return self._break("deleted", what, last + 1, None)
        if head.hash != self.prev:
            what = f"the head (seq {head.seq}) holds {head.hash}, not the last event's link"
            return self._break("edited", what, head.seq, None)
        beyond = [cp for seq, cp in self.checkpoints.items() if seq > last]
        if beyond:
            what = f"{_checkpoint_named(beyond[0])} is beyond the chain's end (seq {last}): "
            what += "events after it were deleted and the head rewound"
            return self._break("rewritten", what, last + 1, None)
        return None

    def _gap(self, row: EventRow, seq: int) -> Break:
        if seq < self.expected:
            what = f"{_named(row)} repeats seq {seq}: the chain forked"
            return self.broken("forked", what, row)
        missing = f"seq {self.expected}" + (f"-{seq - 1}" if seq - 1 > self.expected else "")
        what = f"{missing} missing before {_named(row)}: deleted"
        return self._break("deleted", what, self.expected, row)

    def _edited(self, row: EventRow, digest: str) -> str:
        what = f"{_named(row)}: its content changed (recomputed digest {digest}, stored "
        what += f"{row.digest})"
        source = _find(self.conn, self.project_id, _event.c.digest, digest)
        if source is not None and source.id != row.id:
            what += f"; it now holds the content of event {source.id} (seq {source.seq}): "
            what += "swapped or copied"
        return what

    def _relinked(self, row: EventRow) -> Break:
        before = _find(self.conn, self.project_id, _event.c.hash, str(row.prev_hash))
        if before is not None:
            what = f"{_named(row)} was chained after seq {before.seq} (event {before.id}), "
            what += f"not after seq {int(row.seq or 0) - 1}: events were moved or swapped"
            return self.broken("moved", what, row)
        what = f"{_named(row)}: its prev_hash is no event's link: the event before it "
        what += "was replaced"
        return self.broken("relinked", what, row)

    def broken(self, kind: str, what: str, row: EventRow) -> Break:
        return self._break(kind, what, row.seq, row)

    def _break(self, kind: str, what: str, seq: int | None, row: EventRow | None) -> Break:
        return Break(kind, what, seq, row, self.intact, self.matched)


def _published(cp: Checkpoint) -> tuple[datetime, int]:
    """Stored checkpoints in order; one kept elsewhere (no time) checked last, so it wins."""
    return (cp.at or datetime.max.replace(tzinfo=UTC), cp.seq)


def _recomputed_digest(row: EventRow) -> str:
    try:
        detail = json.loads(row.detail_json)
    except ValueError:
        detail = {"unreadable": row.detail_json}  # cannot match: reported as edited
    if not isinstance(detail, dict):
        detail = {"not an object": detail}
    redacted = row.redacted_at is not None
    return audit.event_digest(row.rid, row.type, row.at, detail, redacted=redacted)


def _named(row: EventRow) -> str:
    return f"event {row.id} (seq {row.seq}, {row.type} on {row.rid} at {audit.timestamp(row.at)})"


def _checkpoint_named(cp: Checkpoint) -> str:
    when = "kept outside" if cp.at is None else f"published {audit.timestamp(cp.at)}"
    return f"the checkpoint of seq {cp.seq} ({when}, {cp.hash})"


def _head_of(conn: Connection, project_id: int) -> Checkpoint:
    query = sa.select(_head.c.seq, _head.c.hash).where(_head.c.project_id == project_id)
    row = conn.execute(query).first()
    return Checkpoint(0, audit.GENESIS) if row is None else Checkpoint(int(row.seq), row.hash)


def _checkpoints(conn: Connection, project_id: int) -> list[Checkpoint]:
    query = sa.select(_checkpoint.c.seq, _checkpoint.c.hash, _checkpoint.c.at).where(
        _checkpoint.c.project_id == project_id
    )
    return [Checkpoint(int(r.seq), r.hash, r.at) for r in conn.execute(query).all()]


def _chain_page(conn: Connection, project_id: int, after: int, upto: int) -> list[EventRow]:
    query = (
        sa.select(_event)
        .where(_event.c.project_id == project_id, _event.c.seq > after, _event.c.seq <= upto)
        .order_by(_event.c.seq)
        .limit(PAGE)
    )
    return [EventRow(**row._mapping) for row in conn.execute(query).all()]


def _find(conn: Connection, project_id: int, column: Any, value: str) -> EventRow | None:
    """The project's chained event whose `column` holds `value` (naming what moved where)."""
    query = sa.select(_event).where(_event.c.project_id == project_id, column == value).limit(1)
    row = conn.execute(query).first()
    return None if row is None else EventRow(**row._mapping)


def _beyond_head(conn: Connection, project_id: int, head: Checkpoint, walk: _Walk) -> Break | None:
    """A chained event past the head (one committed since the head was read moved the head
    too): the head was rewound, or its row deleted, to hide what follows."""
    query = (
        sa.select(_event)
        .where(_event.c.project_id == project_id, _event.c.seq > head.seq)
        .order_by(_event.c.seq)
        .limit(1)
    )
    found = conn.execute(query).first()
    if found is None or _head_of(conn, project_id).seq >= int(found.seq):
        return None
    row = EventRow(**found._mapping)
    what = f"{_named(row)} lies beyond the head (seq {head.seq}): the head was rewound or "
    what += "removed"
    return Break("rewritten", what, row.seq, row, walk.intact, walk.matched)


def _first_unchained(conn: Connection, project_id: int, walk: _Walk) -> Break | None:
    """An event of the project's requests that this chain does not hold (no seq, or another
    project): written around the gateway (every event the gateway writes is linked into its
    request's project's chain before its transaction commits)."""
    outside = sa.or_(
        _event.c.seq.is_(None),
        _event.c.project_id.is_(None),
        _event.c.project_id != _request.c.project_id,
    )
    query = (
        sa.select(_event)
        .join(_request, _request.c.rid == _event.c.rid)
        .where(_request.c.project_id == project_id, outside)
        .order_by(_event.c.id)
        .limit(1)
    )
    found = conn.execute(query).first()
    if found is None:
        return None
    row = EventRow(**found._mapping)
    what = f"event {row.id} ({row.type} on {row.rid} at {audit.timestamp(row.at)}) was "
    what += "inserted outside the chain"
    if row.project_id is not None and row.project_id != project_id:
        what += f" (it names project {row.project_id}, not its request's)"
    return Break("inserted", what, None, row, walk.intact, walk.matched)


def export_page(
    conn: Connection,
    *,
    project_id: int | None,
    since: datetime | None,
    until: datetime | None,
    after: tuple[int, int],
    limit: int = PAGE,
) -> list[tuple[str, EventRow]]:
    """Chained events with their project's name, in (project, seq) order after `after`."""
    key = sa.tuple_(_event.c.project_id, _event.c.seq)
    query = (
        sa.select(_project.c.name, _event)
        .join(_project, _project.c.id == _event.c.project_id)
        .where(key > sa.tuple_(*after))
        .order_by(_event.c.project_id, _event.c.seq)
        .limit(limit)
    )
    if project_id is not None:
        query = query.where(_event.c.project_id == project_id)
    if since is not None:
        query = query.where(_event.c.at >= since)
    if until is not None:
        query = query.where(_event.c.at < until)
    rows = conn.execute(query).all()
    return [
        (row.name, EventRow(**{k: v for k, v in row._mapping.items() if k != "name"}))
        for row in rows
    ]
