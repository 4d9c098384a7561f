"""Resume points: one row per platform websocket session that a new owner may take up."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store.tables import ResumePoint
from gateway.store.values import utcnow

_point = ResumePoint.__table__  # type: ignore[attr-defined]


def get(conn: Connection, name: str) -> tuple[str, str, int] | None:
    """(session id, resume URL, sequence) saved for `name`, or None."""
    query = sa.select(_point.c.session_id, _point.c.url, _point.c.seq).where(_point.c.name == name)
    row = conn.execute(query).first()
    return None if row is None else (str(row[0]), str(row[1]), int(row[2]))


def save(conn: Connection, name: str, session_id: str, url: str, seq: int) -> None:
    """Save the point; within one session it only moves forward (saves may commit out of
    order)."""
    values = {"session_id": session_id, "url": url, "seq": seq, "saved_at": utcnow()}
    if get(conn, name) is None:
        conn.execute(sa.insert(_point).values({"name": name, **values}))
        return
    newer = sa.or_(_point.c.session_id != session_id, _point.c.seq < seq)
    conn.execute(sa.update(_point).where(_point.c.name == name, newer).values(values))
