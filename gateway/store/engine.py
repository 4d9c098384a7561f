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
EVERYONE = "*"  # a decided-channel payload that wakes every waiter
LISTENER_NAME = "hitl-gateway-listener"


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
        self._on_notify: Callable[[str, str], None] = lambda _channel, _payload: None
        self._reconnect: asyncio.Task[None] | None = None
        self._closing = False

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
        """Receive NOTIFYs from every replica (PostgreSQL only), reconnecting if dropped."""
        if self.is_sqlite:
            return
        self._on_notify = on_notify
        await self._connect_listener()

    async def _connect_listener(self) -> None:
        import asyncpg  # type: ignore[import-untyped]  # only PostgreSQL needs the raw driver

        dsn = make_url(self.url).set(drivername="postgresql").render_as_string(hide_password=False)
        conn = await asyncpg.connect(dsn, server_settings={"application_name": LISTENER_NAME})

        def callback(_conn: Any, _pid: int, channel: str, payload: str) -> None:
            self._on_notify(channel, payload)

        for channel in (DECIDED_CHANNEL, OUTBOX_CHANNEL):
            await conn.add_listener(channel, callback)
        conn.add_termination_listener(self._listener_lost)
        self._listener = conn

    def _listener_lost(self, _conn: Any) -> None:
        if not self._closing:
            log.warning("lost the PostgreSQL LISTEN connection; reconnecting")
            self._listener = None
            self._reconnect = asyncio.create_task(self._reconnect_listener())

    async def _reconnect_listener(self) -> None:
        delay = 0.2
        while not self._closing:
            try:
                await self._connect_listener()
            except Exception as error:  # OSError, or asyncpg's own error tree
                log.warning("LISTEN reconnect failed (%s); retrying in %.1f s", error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30)
            else:
                # NOTIFYs sent while we were away are gone: have everyone look again.
                self._on_notify(DECIDED_CHANNEL, EVERYONE)
                self._on_notify(OUTBOX_CHANNEL, "")
                return

    async def aclose(self) -> None:
        self._closing = True
        if self._reconnect is not None:
            self._reconnect.cancel()
        if self._listener is not None:
            await asyncio.shield(self._listener.close())
            self._listener = None
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()
