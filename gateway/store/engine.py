"""Engines and transactions. SQLite: WAL, synchronous=FULL, one writer in BEGIN IMMEDIATE.
PostgreSQL: one pool, and NOTIFY so other replicas learn about decisions and new jobs."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 5000
DECIDED_CHANNEL = "gateway_decided"
OUTBOX_CHANNEL = "gateway_outbox"


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """SQLite hands datetimes back naive; everything stored is UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Autocommit at the driver: writes choose their own BEGIN below (SQLAlchemy sqlite docs).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_engine(url: str, *, writer: bool) -> AsyncEngine:
    parsed = make_url(url)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    if writer:
        # One pooled connection: the process queues its own writers instead of spinning on
        # SQLITE_BUSY, and each write transaction takes the lock at BEGIN IMMEDIATE.
        engine = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=30)
        begin = "BEGIN IMMEDIATE"
        event.listen(engine.sync_engine, "begin", lambda conn: conn.exec_driver_sql(begin))
    else:
        # Readers stay in autocommit: no BEGIN and no ROLLBACK round trip per request
        # (each costs several thread hops through aiosqlite).
        engine = create_async_engine(url, pool_size=8, pool_reset_on_return=None)
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


class Database:
    """The gateway's connection to its store. Only `gateway.store` issues SQL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        if self.is_sqlite:
            self.writer = _sqlite_engine(url, writer=True)
            self.reader = _sqlite_engine(url, writer=False)
        else:
            self.writer = create_async_engine(url, pool_size=10, max_overflow=10)
            self.reader = self.writer
        self._listener: Any = None

    def __repr__(self) -> str:
        return f"Database({make_url(self.url).render_as_string(hide_password=True)})"

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with self.writer.begin() as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.reader.connect() as conn:
            yield conn

    async def notify(self, conn: AsyncConnection, channel: str, payload: str) -> None:
        """Queue a NOTIFY that PostgreSQL sends on commit; SQLite has one process only."""
        if not self.is_sqlite:
            await conn.execute(sa.select(sa.func.pg_notify(channel, payload)))

    async def listen(self, on_notify: Callable[[str, str], None]) -> None:
        """Receive NOTIFYs from every replica (PostgreSQL only)."""
        if self.is_sqlite:
            return
        import asyncpg  # type: ignore[import-untyped]  # only PostgreSQL needs the raw driver

        url = make_url(self.url).set(drivername="postgresql")
        dsn = url.render_as_string(hide_password=False)
        self._listener = await asyncpg.connect(dsn)

        def callback(_conn: Any, _pid: int, channel: str, payload: str) -> None:
            on_notify(channel, payload)

        for channel in (DECIDED_CHANNEL, OUTBOX_CHANNEL):
            await self._listener.add_listener(channel, callback)

    async def aclose(self) -> None:
        if self._listener is not None:
            await asyncio.shield(self._listener.close())
            self._listener = None
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()
