"""Channel records: small values a channel keeps by (kind, key), each out of other channels'
reach, optionally expiring (`gateway.seam.records.Records`)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gateway.store.tables import ChannelRecord
from gateway.store.values import utcnow

_record = ChannelRecord.__table__  # type: ignore[attr-defined]
_KEY = ("channel", "kind", "key")


def _one(channel: str, kind: str, key: str) -> sa.ColumnElement[bool]:
    return sa.and_(_record.c.channel == channel, _record.c.kind == kind, _record.c.key == key)


def _live() -> sa.ColumnElement[bool]:
    return sa.or_(_record.c.expires_at.is_(None), _record.c.expires_at > utcnow())


def get(conn: Connection, channel: str, kind: str, key: str) -> str | None:
    query = sa.select(_record.c.value).where(_one(channel, kind, key), _live())
    value = conn.execute(query).scalar_one_or_none()
    return None if value is None else str(value)


def put(
    conn: Connection, channel: str, kind: str, key: str, value: str, expires_at: datetime | None
) -> None:
    """Keep `value`, replacing what the key held."""
    values: dict[str, object] = {"channel": channel, "kind": kind, "key": key, "value": value}
    values |= {"expires_at": expires_at, "updated_at": utcnow()}
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(_record).values(values)
    changed = {name: insert.excluded[name] for name in ("value", "expires_at", "updated_at")}
    conn.execute(insert.on_conflict_do_update(index_elements=_KEY, set_=changed))


def take(conn: Connection, channel: str, kind: str, key: str) -> str | None:
    """Delete the record and return its value if it was there and unexpired: one caller
    gets it, however many ask at once."""
    query = (
        sa.delete(_record)
        .where(_one(channel, kind, key))
        .returning(_record.c.value, _record.c.expires_at)
    )
    row = conn.execute(query).first()
    if row is None or (row.expires_at is not None and row.expires_at <= utcnow()):
        return None
    return str(row.value)


def keys(conn: Connection, channel: str, kind: str, limit: int) -> list[str]:
    query = (
        sa.select(_record.c.key)
        .where(_record.c.channel == channel, _record.c.kind == kind, _live())
        .order_by(_record.c.key)
        .limit(limit)
    )
    return [str(key) for key in conn.execute(query).scalars()]
