"""The change feed on SQLite: each write batch appends what it changed; every process reads
what the others appended once per poll period (one query, however many waiters)."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store.changes import Changes
from gateway.store.tables import ChangeFeed
from gateway.store.values import utcnow

_feed = ChangeFeed.__table__  # type: ignore[attr-defined]
KEEP = timedelta(hours=1)

_INSERT = sa.insert(_feed)
_AFTER = (
    sa.select(_feed.c.seq, _feed.c.rid, _feed.c.jobs, _feed.c["keys"])
    .where(
        _feed.c.seq > sa.bindparam("seq"),
        _feed.c.seq <= sa.bindparam("newest"),
        _feed.c.origin != sa.bindparam("origin"),
    )
    .order_by(_feed.c.seq)
)


def append(conn: Connection, origin: str, changes: Changes) -> None:
    now = utcnow()
    flags = {"origin": origin, "jobs": changes.jobs, "keys": changes.keys, "at": now}
    rows = [flags | {"rid": rid} for rid in sorted(changes.rids)] or [flags | {"rid": None}]
    conn.execute(_INSERT, rows)


def last_seq(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(_feed.c.seq), 0))).scalar_one())


def after(conn: Connection, seq: int, origin: str) -> tuple[int, Changes]:
    """The newest seq, and what other processes than `origin` changed after `seq`."""
    newest = last_seq(conn)
    changes = Changes()
    params = {"seq": seq, "newest": newest, "origin": origin}
    for row in conn.execute(_AFTER, params):
        if row.rid is not None:
            changes.rids.add(str(row.rid))
        changes.jobs = changes.jobs or bool(row.jobs)
        changes.keys = changes.keys or bool(row._mapping["keys"])
    return newest, changes


def prune(conn: Connection) -> None:
    conn.execute(sa.delete(_feed).where(_feed.c.at < utcnow() - KEEP))
