"""Group commit: one transaction, and one durable commit, for every write queued meanwhile.

Writes are plain functions of a synchronous SQLAlchemy `Connection`, run in the writer thread
inside the batch's transaction. They return expected outcomes (a conflict) rather than raise;
one that raises anyway is undone alone (the batch is rolled back and run again without it)
and its caller gets the error. The batch then commits once; only after the commit is durable
does any caller get its answer. If the commit (or the batch's transaction) fails, every
caller in the batch gets the error and nothing of the batch is stored.

On PostgreSQL several writer threads commit at once, so their transactions must never wait
on each other in a cycle (a deadlock costs `deadlock_timeout`, a second, for every write of
both batches):
- a write names the request it touches (`key`); writes with one key always go to the same
  thread, so two threads never hold one request's rows;
- a batch runs its writes in key order (other processes' batches do too), and keyless writes
  last, so two batches that do share rows take their locks in one order;
- a batch that meets a deadlock or a serialization failure anyway (another process, a
  keyless write) is rolled back, which undid all of it, and run again: no caller sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import queue
import random
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from gateway.store import driver
from gateway.store.changes import Changes, collect

log = logging.getLogger(__name__)

MAX_BATCH = 256  # writes per transaction: enough to share a commit, small enough to stay short
CONFLICT_RETRIES = 8  # a batch that met a deadlock runs again this many times at most
# SQLSTATEs of a transaction the database rolled back to break a cycle: nothing of it stayed.
CONFLICTS = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


@dataclass
class Op:
    call: Callable[[Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    key: str | None = None
    result: Any = None
    error: BaseException | None = None
    changes: Changes = field(default_factory=Changes)


class BatchHooks:
    """What a dialect does around a batch (SQLite's BEGIN IMMEDIATE, PostgreSQL's NOTIFY)."""

    begin_sql = "BEGIN"

    def after_begin(self, conn: Connection) -> None:
        """Runs as each attempt's transaction begins (an earlier attempt's was undone)."""

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
        self._queues: list[queue.SimpleQueue[Op | None]] = [
            queue.SimpleQueue() for _ in range(threads)
        ]
        self._spread = itertools.count()  # keyless writes take the threads in turn
        self.batches = 0  # transactions committed (tests check that writes share them)
        self.conflicts = 0  # batches run again after a deadlock (tests read it)
        self._fault: tuple[int, BaseException] | None = None  # (fewest writes, error)
        self._closed = False
        self._closing = threading.Lock()  # a write is queued before close()'s ends, or refused
        self._threads = [
            threading.Thread(target=self._work, args=(q,), name=f"db-writer-{n}", daemon=True)
            for n, q in enumerate(self._queues)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def threads(self) -> int:
        return len(self._threads)

    async def submit(self, call: Callable[[Connection], Any], key: str | None = None) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._closing:
            if self._closed:  # queued behind the threads' ends, it would wait for ever
                raise RuntimeError("the database writer is closed")
            self._queues[self.thread_of(key)].put(Op(call, loop, future, key))
        return await future

    def thread_of(self, key: str | None) -> int:
        """The writer thread a write with this key runs on (the same one every time)."""
        if key is None:
            return next(self._spread) % len(self._queues)
        return zlib.crc32(key.encode()) % len(self._queues)

    def close(self) -> None:
        """Commit every write queued so far, then end the threads."""
        with self._closing:
            self._closed = True
            for each in self._queues:
                each.put(None)
        for thread in self._threads:
            thread.join(timeout=10)

    def _work(self, source: queue.SimpleQueue[Op | None]) -> None:
        conn: Connection | None = None
        while (batch := _next_batch(source)) is not None:
            conn = self._run(conn, batch)
        if conn is not None:
            with contextlib.suppress(Exception):  # it may have died with the database
                conn.close()

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
                self._run_until_done(conn, batch)
                return conn
            except _Dropped as dropped:
                conn.invalidate()
                conn = None
                if retry:
                    _fail(batch, dropped.error)
        return None

    def _run_until_done(self, conn: Connection, batch: list[Op]) -> None:
        conflicts = 0
        while batch:
            try:
                batch = self._attempt(conn, batch)
            except _Conflict as conflict:
                conflicts += 1
                self.conflicts += 1
                if conflicts > CONFLICT_RETRIES:
                    log.warning("a batch of %d writes met %d deadlocks", len(batch), conflicts)
                    _fail(batch, conflict.error)
                    return
                log.info("a batch of %d writes met a deadlock; running it again", len(batch))
                time.sleep(random.uniform(0, 0.005 * conflicts))  # let the other one finish

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
            self._hooks.after_begin(conn)
            for index, op in enumerate(batch):
                op.changes = Changes()
                if not _run_one(conn, op):
                    _raw(conn, "ROLLBACK")
                    if _is_conflict(op.error):  # the database's doing, not the write's
                        raise _Conflict(op.error)
                    _deliver([op], Changes(), self._on_commit)
                    return batch[:index] + batch[index + 1 :]
                changes.merge(op.changes)
            self._commit(conn, changes, len(batch))
        except _Conflict:
            raise
        except Exception as error:  # BEGIN, COMMIT or ROLLBACK failed: so does the batch
            if _is_conflict(error):  # COMMIT of a serializable transaction: all undone
                _rollback(conn)
                raise _Conflict(error) from error
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
        return sum(each.qsize() for each in self._queues)


def _next_batch(source: queue.SimpleQueue[Op | None]) -> list[Op] | None:
    """The writes queued for one thread, in lock order: by key (stable: one request's writes
    keep their order), keyless ones last."""
    first = source.get()
    if first is None:
        return None
    batch = [first]
    while len(batch) < MAX_BATCH:
        try:
            op = source.get_nowait()
        except queue.Empty:
            break
        if op is None:  # closing: finish this batch, then let the next get() see it
            source.put(None)
            break
        batch.append(op)
    batch.sort(key=lambda op: (op.key is None, op.key or ""))
    return batch


def _is_conflict(error: BaseException | None) -> bool:
    """The database rolled the transaction back to break a deadlock (or a serialization
    conflict): running it again is safe, and will most likely succeed."""
    return getattr(getattr(error, "orig", None), "sqlstate", None) in CONFLICTS


class _Conflict(Exception):
    def __init__(self, error: BaseException | None) -> None:
        super().__init__(str(error))
        self.error = error or RuntimeError("a transaction conflict")


def _run_one(conn: Connection, op: Op) -> bool:
    """Run one write, recording what it changes; False when it raised (its error kept)."""
    collect(conn, op.changes)
    op.error = None  # from an attempt the database rolled back (a deadlock)
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
    machinery costs more than the statement itself here). Whatever the driver's error, it
    fails as the database being unavailable (the API's 503)."""
    try:
        driver.execute(conn, sql)
    except DBAPIError as error:
        if isinstance(error, OperationalError):
            raise
        dropped = error.connection_invalidated
        orig = error.orig or error  # the driver's own (its SQLSTATE tells a conflict)
        raise OperationalError(sql, None, orig, connection_invalidated=dropped) from error


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
