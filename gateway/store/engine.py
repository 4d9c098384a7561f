"""The gateway's database: synchronous SQLAlchemy Core in threads, so a request costs one
thread hop for its reads and one for its writes, never one per statement.

- Writes go to a group-committing writer (`writer.py`): one thread on SQLite (one writer,
  BEGIN IMMEDIATE, `synchronous=FULL`), a few on PostgreSQL.
- Reads run in a small pool of threads, each with its own autocommit connection.
- After each durable commit, `on_changes` is called once, on the event loop, with what the
  batch changed. On PostgreSQL the batch also NOTIFYs other processes; on SQLite it appends
  to the change feed, which `follow` reads for changes other processes made (the CLI).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url

from gateway.store import audit, driver, feed
from gateway.store.changes import Changes
from gateway.store.values import dumps
from gateway.store.writer import BatchHooks, Writer

log = logging.getLogger(__name__)

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 5000
CHANGES_CHANNEL = "gateway_changes"
NOTIFY_LIMIT = 7000  # bytes per NOTIFY payload (PostgreSQL's limit is 8000)
LISTENER_NAME = "hitl-gateway-listener"
READERS = 4
PG_WRITERS = 2  # 4 made fewer creates/s than 2 on two cores: GIL hand-offs (bench/README.md)
FEED_PRUNE_SECONDS = 600.0


# What a function handed to `Database.read` or `Database.write` receives: a reader's
# connection, or the writer's open transaction. Outside the store it is only passed on, to
# store functions: the rest of the gateway never issues SQL.
Tx: TypeAlias = Connection


def sync_url(url: str) -> str:
    """The URL of the synchronous driver: sqlite3, or psycopg for PostgreSQL."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.set(drivername="sqlite+pysqlite").render_as_string(hide_password=False)
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Autocommit at the driver: the writer emits BEGIN IMMEDIATE itself (SQLAlchemy's
    # pysqlite docs), and readers never hold a transaction open.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    # Freed space is zeroed (some builds leave it as it was): a row's old bytes, an
    # argument retention redacted (gateway.store.retention) or an earlier update left behind,
    # must not stay readable in the file.
    cursor.execute("PRAGMA secure_delete=ON")
    cursor.close()


def _use_wal(path: str) -> None:
    """WAL is a property of the file: set it once, from one connection, before any other
    opens (two connections switching journal modes at once can fail at once as busy)."""
    conn = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()


def make_engine(url: str, *, for_migrations: bool = False) -> Engine:
    """The synchronous engine; `for_migrations` gives transactional DDL on SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        pool = READERS + PG_WRITERS + 4  # readers, writers, migrations and the odd extra
        # Threads keep their connections; a pooled one is pinged when handed out, so one
        # that died with a database restart is replaced rather than failing a request.
        return sa.create_engine(sync_url(url), pool_size=pool, max_overflow=8, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        _use_wal(parsed.database)
    engine = sa.create_engine(
        sync_url(url),
        pool_size=READERS + 4,
        max_overflow=8,
        connect_args={"check_same_thread": False},  # closed at shutdown by the loop's thread
    )
    event.listen(engine, "connect", _sqlite_pragmas)
    if for_migrations:  # SQLAlchemy's pysqlite recipe: emit BEGIN ourselves
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    return engine


class _AuditHooks(BatchHooks):
    """New audit events wait in the transaction and are sealed as it commits."""

    def after_begin(self, conn: Connection) -> None:
        audit.begin(conn)


class _SqliteHooks(_AuditHooks):
    """The change feed: other processes (the CLI) learn what this one changed, and back."""

    begin_sql = "BEGIN IMMEDIATE"

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def before_commit(self, conn: Connection, changes: Changes) -> None:
        audit.seal(conn)
        if changes:
            feed.append(conn, self.origin, changes)


_NOTIFY = "SELECT pg_notify(%s, %s)"  # straight to the driver: once per batch, on the hot path


class _PostgresHooks(_AuditHooks):
    """NOTIFY is sent by PostgreSQL at commit: every replica hears of the batch."""

    def before_commit(self, conn: Connection, changes: Changes) -> None:
        # One round trip for the head moves, the events and the NOTIFYs: nothing reads them.
        with driver.pipelined(conn):
            audit.seal(conn)  # the head locks, last in the transaction (gateway.store.audit)
            for payload in notify_payloads(changes):
                driver.execute(conn, _NOTIFY, (CHANGES_CHANNEL, payload))


def _bind(
    fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[Connection], T]:
    """`fn` with everything but the connection it will run on."""

    def call(conn: Connection) -> T:
        return fn(conn, *args, **kwargs)

    return call


async def dedicated_connection(
    url: str, application_name: str, settings: dict[str, str] | None = None
) -> Any:
    """A raw asyncpg connection of its own, outside every pool, for what lives as long as
    its session: LISTEN, and the singletons' advisory locks (`gateway.runtime.ownership`)."""
    import asyncpg  # type: ignore[import-untyped]  # only PostgreSQL needs the raw driver

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    server_settings = {"application_name": application_name} | (settings or {})
    return await asyncpg.connect(dsn, server_settings=server_settings)


def ping(conn: Connection) -> None:
    """The database answers (health checks)."""
    conn.exec_driver_sql("SELECT 1")


def notify_payloads(changes: Changes) -> list[str]:
    """`changes` as NOTIFY payloads under PostgreSQL's size limit."""
    flags = {"jobs": changes.jobs, "keys": changes.keys, "all": changes.everything}
    chunks: list[list[str]] = [[]]
    size = 0
    for rid in sorted(changes.rids):
        if size + len(rid) + 3 > NOTIFY_LIMIT:
            chunks.append([])
            size = 0
        chunks[-1].append(rid)
        size += len(rid) + 3  # quotes and a comma
    return [dumps({"rids": chunk} | flags) for chunk in chunks]


def parse_payload(payload: str) -> Changes:
    try:
        body = json.loads(payload)
        return Changes(set(body["rids"]), bool(body["jobs"]), bool(body["keys"]), bool(body["all"]))
    except (ValueError, KeyError, TypeError):
        return Changes(jobs=True, keys=True, everything=True)  # not ours: everyone looks again


class Database:
    """The gateway's store. Only `gateway.store` issues SQL; everything else hands it
    functions of a Connection through `read` and `write`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = make_url(url).get_backend_name() == "sqlite"
        self.engine = make_engine(url)
        self.on_changes: Callable[[Changes], None] = lambda _changes: None
        self.origin = secrets.token_hex(8)  # this process, in the change feed
        hooks = _SqliteHooks(self.origin) if self.is_sqlite else _PostgresHooks()
        self._writer = Writer(
            self.engine,
            hooks,
            threads=1 if self.is_sqlite else PG_WRITERS,
            on_commit=lambda changes: self.on_changes(changes),
        )
        self._readers = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="db-reader")
        self._local = threading.local()
        self._opened: list[Connection] = []
        self._listener: Any = None
        self._follower: asyncio.Task[None] | None = None
        self._reconnect: asyncio.Task[None] | None = None
        self._closing = False

    def __repr__(self) -> str:
        return f"Database({make_url(self.url).render_as_string(hide_password=True)})"

    async def read(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(conn, *args, **kwargs)`: a few rows found by an index (a request by call_id, a
        key). On SQLite it runs right here, on the event loop: such a read takes less time
        than handing it to a thread; on PostgreSQL, on a reader thread (one hop)."""
        if self.is_sqlite:
            return _bind(fn, args, kwargs)(self._connection())
        return await self.scan(fn, *args, **kwargs)

    async def scan(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(conn, *args, **kwargs)` on a reader thread: for reads that may visit many rows
        (pages, counts, searches), which must not hold up the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._read, _bind(fn, args, kwargs))

    def _read(self, call: Callable[[Connection], T]) -> T:
        try:
            return call(self._connection())
        except sa.exc.DBAPIError as error:
            if not error.connection_invalidated:
                raise
            # The database dropped this idle connection (it restarted): read again on a new one.
            return call(self._connection())

    def _connection(self) -> Connection:
        """This thread's own autocommit connection."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            self._local.conn = conn
            self._opened.append(conn)
        return conn

    async def write(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(tx, *args, **kwargs)` in the writer's next batch; returns once that batch
        is durable (or raises what `fn` raised, or why the batch failed).

        `fn` runs on a writer thread, not on the event loop: it must not await, touch the
        loop's objects or call a channel, and it should be quick, since every write of its
        batch waits for it. It may run more than once: when another write of the batch
        raises, the batch is rolled back and run again without that one. So `fn` makes only
        store calls on `tx`, and its caller gets what the run that committed returned; work
        outside the transaction (a post, a log line that counts) belongs before or after."""
        result: T = await self._writer.submit(_bind(fn, args, kwargs))
        return result

    async def write_for(self, key: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`write`, for a write that touches one request's rows: `key` is its rid (or, for a
        create, its project and call_id). Writes with one key run on one writer thread, in
        the order they came, so two threads never wait on each other for that request."""
        result: T = await self._writer.submit(_bind(fn, args, kwargs), key)
        return result

    @property
    def writer(self) -> Writer:
        """The group-committing writer (tests count its batches and inject failures)."""
        return self._writer

    # --- changes made by other processes

    async def follow(self, period: float) -> None:
        """Hear about other processes' changes: PostgreSQL's NOTIFY, or SQLite's feed."""
        if self.is_sqlite:
            self._follower = asyncio.create_task(self._follow_feed(period), name="change-feed")
        else:
            await self._connect_listener()

    async def _follow_feed(self, period: float) -> None:
        last = await self.read(feed.last_seq)
        pruned = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(period)  # one read per period, however many waiters
            try:
                last, news = await self.scan(feed.after, last, self.origin)
                if asyncio.get_running_loop().time() - pruned > FEED_PRUNE_SECONDS:
                    await self.write(feed.prune)
                    pruned = asyncio.get_running_loop().time()
            except sa.exc.OperationalError as error:
                log.warning("change feed: %s", error)
                continue
            if news:
                self.on_changes(news)

    async def _connect_listener(self) -> None:
        conn = await dedicated_connection(self.url, LISTENER_NAME)

        def callback(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            self.on_changes(parse_payload(payload))

        await conn.add_listener(CHANGES_CHANNEL, callback)
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
                self.on_changes(Changes(jobs=True, keys=True, everything=True))
                return

    async def aclose(self) -> None:
        self._closing = True
        for task in (self._reconnect, self._follower):
            if task is not None:
                task.cancel()
        if self._listener is not None:
            await asyncio.shield(self._listener.close())
            self._listener = None
        await asyncio.to_thread(self._writer.close)
        self._readers.shutdown(wait=True)
        for conn in self._opened:
            conn.close()
        self.engine.dispose()
