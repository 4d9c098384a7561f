"""Votes: one person's answer to a request under an approval policy."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store import tables
from gateway.store.rows import VoteRow, values

_vote = tables.Vote.__table__  # type: ignore[attr-defined]


def add(conn: Connection, vote: VoteRow) -> None:
    row = values(vote)
    row.pop("id")
    conn.execute(sa.insert(_vote), row)


def list_for(conn: Connection, rid: str) -> list[VoteRow]:
    query = sa.select(_vote).where(_vote.c.rid == rid).order_by(_vote.c.id)
    return [VoteRow(**row._mapping) for row in conn.execute(query).all()]
