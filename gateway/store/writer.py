"""Group commit: one transaction, and one durable commit, for every write queued meanwhile.

Writes are plain functions of a synchronous SQLAlchemy `Connection`, run in the writer thread
inside the batch's transaction. They return expected outcomes (a conflict) rather than raise;
one that raises anyway is undone alone (the batch is rolled back and run again without it)
and its caller gets the error. The batch then commits once; only after the commit is durable
does any caller get its answer. If the commit (or the batch's transaction) fails, every
caller in the batch gets the error and nothing of the batch is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from gateway.store.changes import Changes, collect

log = logging.getLogger(__name__)

MAX_BATCH = 256  # writes per transaction: enough to share a commit, small enough to stay short


@dataclass
class Op:
    call: Callable[[Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    result: Any = None
    error: BaseException | None = None
    changes: Changes = field(default_factory=Changes)


class BatchHooks:
    """What a dialect does around a batch (SQLite's BEGIN IMMEDIATE, PostgreSQL's NOTIFY)."""

    begin_sql = "BEGIN"

    def before_commit(self, conn: Connection, changes: Changes) -> None:
        """Runs inside the batch's transaction, after its writes."""

    def after_commit(self, changes: Changes) -> None:
        """Runs in the writer thread once the batch is durable."""


class Writer:
    def __init__(
        self,
        engine: Engine,
        hooks: BatchHooks,
        *,
        threads: int,
        on_commit: Callable[[Changes], None],
    ) -> None:
        self._engine = engine
        self._hooks = hooks
        self._on_commit = on_commit
        self._queue: queue.SimpleQueue[Op | None] = queue.SimpleQueue()
        self.batches = 0  # transactions committed (tests check that writes share them)
        self._fault: tuple[int, BaseException] | None = None  # (fewest writes, error)
        self._closed = False
        self._closing = threading.Lock()  # a write is queued before close()'s ends, or refused
        self._threads = [
            threading.Thread(target=self._work, name=f"db-writer-{n}", daemon=True)
            for n in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def threads(self) -> int:
        return len(self._threads)

    async def submit(self, call: Callable[[Connection], Any]) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._closing:
            if self._closed:  # queued behind the threads' ends, it would wait for ever
                raise RuntimeError("the database writer is closed")
            self._queue.put(Op(call, loop, future))
        return await future

    def close(self) -> None:
        """Commit every write queued so far, then end the threads."""
        with self._closing:
            self._closed = True
            for _thread in self._threads:
                self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=10)

    def _work(self) -> None:
        conn: Connection | None = None
        while (batch := self._next_batch()) is not None:
            conn = self._run(conn, batch)
        if conn is not None:
            with contextlib.suppress(Exception):  # it may have died with the database
                conn.close()

    def _next_batch(self) -> list[Op] | None:
        first = self._queue.get()
        if first is None:
            return None
        batch = [first]
        while len(batch) < MAX_BATCH:
            try:
                op = self._queue.get_nowait()
            except queue.Empty:
                break
            if op is None:  # closing: finish this batch, then let the next get() see it
                self._queue.put(None)
                break
            batch.append(op)
        return batch

    def _run(self, conn: Connection | None, batch: list[Op]) -> Connection | None:
        """Run the batch; returns the connection to keep for the next one. A connection the
        database dropped while it sat idle (a restart, a network cut) fails at BEGIN, before
        anything of the batch ran: the batch then runs once more, on a new connection."""
        for retry in (False, True):
            try:
                if conn is None or conn.invalidated or conn.closed:
                    conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            except Exception as error:  # the database is unreachable: this batch fails
                log.warning("the writer cannot connect: %s", error)
                _fail(batch, error)
                return None
            try:
                while batch:
                    batch = self._attempt(conn, batch)
                return conn
            except _Dropped as dropped:
                conn.invalidate()
                conn = None
                if retry:
                    _fail(batch, dropped.error)
        return None

    def _attempt(self, conn: Connection, batch: list[Op]) -> list[Op]:
        """Run the batch in one transaction and commit it. Writes do not raise for expected
        outcomes, so a write that raises is rare: the transaction is undone, that write gets
        its error, and the others are returned to run again without it (no savepoints, which
        cost two round trips per write on PostgreSQL)."""
        changes = Changes()
        begun = False
        try:
            _raw(conn, self._hooks.begin_sql)
            begun = True
            for index, op in enumerate(batch):
                op.changes = Changes()
                if not _run_one(conn, op):
                    _raw(conn, "ROLLBACK")
                    _deliver([op], Changes(), self._on_commit)
                    return batch[:index] + batch[index + 1 :]
                changes.merge(op.changes)
            self._commit(conn, changes, len(batch))
        except Exception as error:  # BEGIN, COMMIT or ROLLBACK failed: so does the batch
            if not begun and isinstance(error, OperationalError) and error.connection_invalidated:
                raise _Dropped(error) from error
            log.warning("a batch of %d writes failed: %s", len(batch), error)
            _rollback(conn)
            # The connection may be dead (the database restarted, the network dropped):
            # the next batch opens a new one rather than failing on this one for ever.
            with contextlib.suppress(Exception):
                conn.invalidate()
            _fail(batch, error)
            return []
        if changes:
            self._hooks.after_commit(changes)
        _deliver(batch, changes, self._on_commit)
        return []

    def _commit(self, conn: Connection, changes: Changes, writes: int) -> None:
        self._hooks.before_commit(conn, changes)
        self._maybe_fail(writes)
        _raw(conn, "COMMIT")
        self.batches += 1

    def fail_commit(self, error: BaseException, *, min_writes: int = 1) -> None:
        """Tests: the next batch of at least `min_writes` writes fails at its commit."""
        self._fault = (min_writes, error)

    def _maybe_fail(self, writes: int) -> None:
        fault = self._fault
        if fault is not None and writes >= fault[0]:
            self._fault = None
            raise fault[1]

    def pending(self) -> int:
        """Writes queued and not yet taken into a batch."""
        return self._queue.qsize()


def _run_one(conn: Connection, op: Op) -> bool:
    """Run one write, recording what it changes; False when it raised (its error kept)."""
    collect(conn, op.changes)
    try:
        op.result = op.call(conn)
    except Exception as error:
        op.error = error
        return False
    finally:
        collect(conn, None)
    return True


class _Dropped(Exception):
    """BEGIN found the connection dead: nothing of the batch ran."""

    def __init__(self, error: OperationalError) -> None:
        super().__init__(str(error))
        self.error = error


def _fail(batch: list[Op], error: BaseException) -> None:
    for op in batch:
        op.error = error
    _deliver(batch, Changes(), lambda _changes: None)


def _raw(conn: Connection, sql: str) -> None:
    """A transaction-control statement straight to the driver (SQLAlchemy's execution
    machinery costs more than the statement itself here)."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql)
    except conn.dialect.loaded_dbapi.Error as error:
        # The driver's own error, as SQLAlchemy would have raised it (the API's 503).
        dbapi_conn = conn.connection.dbapi_connection
        dropped = conn.dialect.is_disconnect(error, dbapi_conn, cursor)
        raise OperationalError(sql, None, error, connection_invalidated=dropped) from error
    finally:
        cursor.close()


def _rollback(conn: Connection) -> None:
    try:
        _raw(conn, "ROLLBACK")
    except Exception as error:  # no transaction left to roll back (it failed to begin)
        log.debug("rollback after a failed batch: %s", error)


def _deliver(batch: list[Op], changes: Changes, on_commit: Callable[[Changes], None]) -> None:
    """Hand the results back on each caller's loop: first the signal, then the answers."""
    loops = {id(op.loop): op.loop for op in batch}
    for loop in loops.values():
        ops = [op for op in batch if op.loop is loop]
        try:
            loop.call_soon_threadsafe(_resolve, ops, changes, on_commit)
        except RuntimeError:  # that loop is closed: nobody is waiting any more
            log.debug("%d writes finished after their event loop closed", len(ops))


def _resolve(ops: list[Op], changes: Changes, on_commit: Callable[[Changes], None]) -> None:
    if changes:
        on_commit(changes)
    for op in ops:
        if op.future.done():  # the caller gave up waiting; the write stands
            continue
        if op.error is not None:
            op.future.set_exception(op.error)
        else:
            op.future.set_result(op.result)
