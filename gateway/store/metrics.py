"""The figures behind `GET /metrics`, counted from the database at scrape time: four
aggregate queries on one reader connection (a full aggregate each: cost grows with history,
see README "Metrics"). `gateway.runtime.metrics` turns them into Prometheus families."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from gateway.lifecycle import Status
from gateway.store import tables
from gateway.vocabulary import AnsweredIn, JobStatus

# Pending requests older than each of these (seconds): `older_than="1800"` alerts at 30 min.
PENDING_AGES = (0, 60, 300, 1800, 3600, 14400, 86400)
# A person's decision takes seconds to days.
LATENCY_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
STATEMENT_TIMEOUT_MS = 5000  # each scrape query on PostgreSQL; a slow one fails the scrape

_request = tables.Request.__table__  # type: ignore[attr-defined]
_delivery = tables.Delivery.__table__  # type: ignore[attr-defined]
_job = tables.OutboxJob.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Snapshot:
    """The database's figures at one moment (rows as the queries below return them)."""

    requests: list[tuple[Any, ...]]  # kind, status, answered_in, slot, count, latency sum
    routed: list[tuple[Any, ...]]  # kind, channel, created, expired
    deliveries: list[tuple[Any, ...]]  # channel, status, count
    jobs: list[tuple[Any, ...]]  # kind, status, count, attempts, due, oldest due run_at
    now: datetime


def snapshot(conn: Connection, now: datetime) -> Snapshot:
    """Every figure the database holds, in four aggregate queries on one connection."""
    postgres = conn.dialect.name == "postgresql"
    if postgres:  # the reader's own session: bounded here, restored below
        conn.exec_driver_sql(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
    try:
        dialect = conn.dialect.name
        return Snapshot(
            requests=rows(conn, _requests_query(dialect, now)),
            routed=rows(conn, _routed_query(dialect)),
            deliveries=rows(conn, _deliveries_query()),
            jobs=rows(conn, _jobs_query(now)),
            now=now,
        )
    finally:
        if postgres and not conn.invalidated:
            conn.exec_driver_sql("RESET statement_timeout")


def rows(conn: Connection, query: sa.Select[Any]) -> list[tuple[Any, ...]]:
    """A query's rows as plain tuples (also `gateway.store.insights`')."""
    return [tuple(row) for row in conn.execute(query)]


def user_info_field(dialect: str, field: str) -> ColumnElement[Any]:
    """One field of a decision's `user_info` as text (NULL when absent)."""
    # Literal paths, not bound: PostgreSQL must see the GROUP BY expression as the SELECT's.
    column = _request.c.user_info_json
    if dialect == "sqlite":
        return sa.func.json_extract(column, sa.literal_column(f"'$.{field}'"))
    # PostgreSQL refuses to read a document holding the escape \u0000 (stored before the API
    # refused it), even to read another field: the escape becomes \u0001, which keeps any
    # such text valid JSON. The fields read here are the gateway's words.
    readable = sa.func.replace(
        column, sa.literal_column("'\\u0000'"), sa.literal_column("'\\u0001'")
    )
    return sa.func.json_extract_path_text(
        sa.cast(readable, sa.JSON), sa.literal_column(f"'{field}'")
    )


def answered_in(dialect: str) -> ColumnElement[Any]:
    """`user_info.channel` of a decision: where it was made (`gateway`: a rule at create, or
    a deadline passed)."""
    return user_info_field(dialect, "channel")


def latency(dialect: str) -> ColumnElement[Any]:
    """Seconds from creation to decision (SQLite keeps timestamps as UTC text)."""
    decided, created = _request.c.responded_at, _request.c.requested_at
    if dialect == "sqlite":
        return (sa.func.julianday(decided) - sa.func.julianday(created)) * 86400.0
    return sa.extract("epoch", decided - created)


def _count_if(condition: ColumnElement[bool]) -> ColumnElement[Any]:
    return sa.func.sum(sa.case((condition, 1), else_=0))


def _requests_query(dialect: str, now: datetime) -> sa.Select[Any]:
    """Requests by kind, status, answering channel and slot: a pending request's age slot
    (how many of PENDING_AGES it is older than), else its latency bucket's index. One CASE
    per row, not one sum per bucket: the figures are made cumulative in Python."""
    seconds = latency(dialect)
    older = [
        (_request.c.requested_at <= now - timedelta(seconds=age), index)
        for index, age in enumerate(PENDING_AGES)
    ]
    bucket = [(seconds <= bound, index) for index, bound in enumerate(LATENCY_BUCKETS)]
    slot = sa.case(
        (_request.c.status == Status.PENDING, sa.case(*reversed(older), else_=0)),
        else_=sa.case(*bucket, else_=len(LATENCY_BUCKETS)),
    )
    # Grouped by the output names: PostgreSQL would not match bound parameters otherwise.
    return sa.select(
        _request.c.kind,
        _request.c.status,
        answered_in(dialect).label("answered_in"),
        slot.label("slot"),
        sa.func.count(),
        sa.func.coalesce(sa.func.sum(seconds), 0),
    ).group_by(
        _request.c.kind,
        _request.c.status,
        sa.literal_column("answered_in"),
        sa.literal_column("slot"),
    )


def _routed_query(dialect: str) -> sa.Select[Any]:
    expired = sa.and_(
        _request.c.status != Status.PENDING, answered_in(dialect) == AnsweredIn.GATEWAY
    )
    rid = _request.c.rid
    return (
        sa.select(
            _request.c.kind,
            _delivery.c.channel,
            sa.func.count(sa.distinct(rid)),
            sa.func.count(sa.distinct(sa.case((expired, rid)))),
        )
        .select_from(_request.join(_delivery, _delivery.c.rid == rid))
        .group_by(_request.c.kind, _delivery.c.channel)
    )


def _deliveries_query() -> sa.Select[Any]:
    return sa.select(_delivery.c.channel, _delivery.c.status, sa.func.count()).group_by(
        _delivery.c.channel, _delivery.c.status
    )


def _jobs_query(now: datetime) -> sa.Select[Any]:
    due = sa.and_(_job.c.status == JobStatus.PENDING, _job.c.run_at <= now)
    return sa.select(
        _job.c.kind,
        _job.c.status,
        sa.func.count(),
        sa.func.coalesce(sa.func.sum(_job.c.attempts), 0),
        _count_if(due),
        sa.func.min(sa.case((due, _job.c.run_at))),
    ).group_by(_job.c.kind, _job.c.status)
