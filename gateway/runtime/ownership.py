"""Singleton ownership across replicas: each connection that must exist once per deployment
(Discord's websocket, Slack Socket Mode, the IMAP watcher) runs on the one replica holding
its PostgreSQL advisory lock.

The locks live on one dedicated connection per replica, outside every pool: PostgreSQL drops
a session's advisory locks when the session ends, so a replica killed with -9 frees them at
once. Every `TRY_EVERY_SECONDS` the replica tries the locks it lacks (`pg_try_advisory_lock`
never waits) and reads who holds the others from `pg_locks`, joined to the holder's
`application_name`, which is its replica id; the same query proves the connection still
works. When it does not (the network is gone, the server restarted), the replica stops
every connection it owned before it tries again.

Fail-over within 10 s: a killed owner's session ends with its process, so a standby wins
at its next try (<= 2 s). An owner cut off without a FIN is ended by the server once idle
for `IDLE_SESSION_SECONDS` (`idle_session_timeout`, PostgreSQL 14+): a standby wins <= 8 s
after the owner last spoke, while the owner itself stops its connections <= 3.5 s after (a
try, then no answer within 1.5 s), before anyone else can start them.

Nothing is stored: the lock is the ownership, and `pg_locks` says who has it, never stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from gateway.runtime.supervisor import Supervisor, shutdown_step
from gateway.seam.connections import explain
from gateway.store import locks
from gateway.store.engine import dedicated_connection

log = logging.getLogger(__name__)

TRY_EVERY_SECONDS = 2.0  # a standby tries the lock, and an owner checks its connection, so often
ANSWER_WITHIN_SECONDS = 1.5  # a lock connection slower to answer is taken for lost
# The server ends a lock session idle this long (an owner that went silent): its locks free.
IDLE_SESSION_SECONDS = 6.0
STOP_WITHIN_SECONDS = 5.0  # a session told to stand by gets this long to close
CLOSE_WITHIN_SECONDS = 1.5  # at shutdown, less: the whole of it must fit in 10 s
CONNECT_WITHIN_SECONDS = 5.0
APPLICATION_NAME_BYTES = 63  # PostgreSQL keeps no more of `application_name` (NAMEDATALEN - 1)
KEY_PREFIX = "hitl-gateway singleton:"

Connect = Callable[[str, str, dict[str, str]], Awaitable[Any]]


def default_replica_id() -> str:
    """`hostname:pid`: unique per process, and names the machine an operator looks at."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lock_key(name: str) -> int:
    """A stable, positive 63-bit advisory lock key for the singleton `name`."""
    digest = hashlib.sha256(f"{KEY_PREFIX}{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def application_name(replica: str) -> str:
    """The replica id as PostgreSQL will keep it (printable ASCII, at most 63 bytes)."""
    printable = "".join(c if " " <= c <= "~" else "?" for c in replica)
    return printable[:APPLICATION_NAME_BYTES]


class Ownership:
    """Runs each held supervisor only while this replica owns its lock."""

    def __init__(
        self,
        url: str,
        *,
        replica: str,
        every: float = TRY_EVERY_SECONDS,
        answer_within: float = ANSWER_WITHIN_SECONDS,
        idle_session: float = IDLE_SESSION_SECONDS,
        connect: Connect = dedicated_connection,
    ) -> None:
        self.url = url
        self.replica = application_name(replica)
        self._every = every
        self._answer_within = answer_within
        self._idle_session = idle_session
        self._connect = connect
        self._held: dict[int, Supervisor] = {}
        self._owned: set[int] = set()
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def __repr__(self) -> str:
        return f"Ownership({self.replica!r}, owns={sorted(self.owns())})"

    def hold(self, supervisors: Iterable[Supervisor]) -> None:
        """Take charge of these connections: they stand by until this replica owns them."""
        for supervisor in supervisors:
            supervisor.hold(self.replica)
            self._held[lock_key(supervisor.name)] = supervisor

    def owns(self) -> list[str]:
        return [self._held[key].name for key in self._owned]

    def start(self) -> None:
        if self._task is None and self._held:
            self._task = asyncio.create_task(self._run(), name="ownership")

    async def aclose(self) -> None:
        """Stop the owned connections, then release their locks (a standby takes over at its
        next try)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        # Each within a bound: the locks go after them regardless.
        closing = [
            shutdown_step(held.name, held.aclose(), CLOSE_WITHIN_SECONDS)
            for held in self._held.values()
        ]
        await asyncio.gather(*closing)
        self._owned.clear()
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                async with asyncio.timeout(self._answer_within):
                    await locks.release_all(conn)
                    await conn.close()
            except Exception as error:  # the session ends anyway, and its locks with it
                log.warning("ownership: could not release the locks cleanly: %s", explain(error))
                conn.terminate()

    # --- the loop

    async def _run(self) -> None:
        while True:
            try:
                await self._round()
            except Exception:  # a bug here must not end fail-over for good
                log.exception("ownership: round failed; trying again")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._every)

    async def _round(self) -> None:
        """Try the missing locks, then run what was won and stop what another replica owns."""
        wanted = [key for key, supervisor in self._held.items() if supervisor.wanted]
        try:
            won, holders = await self._ask(wanted)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # OSError, a timeout, or asyncpg's own error tree
            await self._lost(explain(error))
            return
        for key in won:
            self._owned.add(key)
            log.info("ownership: %s owns %s", self.replica, self._held[key].name)
            self._held[key].take_over()
        for key in wanted:
            if key not in self._owned:
                await self._stand_by(self._held[key], holders.get(key))

    async def _ask(self, wanted: list[int]) -> tuple[list[int], dict[int, str]]:
        """The locks just won, and who holds the others; each answer within its bound, or
        the connection counts as lost."""
        async with asyncio.timeout(CONNECT_WITHIN_SECONDS):
            conn = await self._connection()
        async with asyncio.timeout(self._answer_within):
            missing = [key for key in wanted if key not in self._owned]
            won = await locks.try_locks(conn, missing)
            if len(self._owned) + len(won) == len(wanted):
                await locks.still_held(conn)
                return won, {}
            return won, await locks.holders(conn)

    async def _connection(self) -> Any:
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        settings = {"idle_session_timeout": str(int(self._idle_session * 1000))}
        conn = await self._connect(self.url, self.replica, settings)
        conn.add_termination_listener(lambda _conn: self._wake.set())  # lost: act at once
        self._conn = conn
        return conn

    async def _lost(self, reason: str) -> None:
        """The lock connection failed: whatever this replica owned, it may own no longer."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()
        owned, self._owned = self._owned, set()
        if owned:
            log.warning("ownership: lost the lock connection (%s); standing by", reason)
        for key, supervisor in self._held.items():
            if supervisor.wanted or key in owned:
                await self._stand_by(supervisor, None, f"no lock connection: {reason}")

    async def _stand_by(
        self, supervisor: Supervisor, owner: str | None, reason: str | None = None
    ) -> None:
        try:
            async with asyncio.timeout(STOP_WITHIN_SECONDS):
                await supervisor.stand_by(owner, reason)
        except TimeoutError:
            log.error("ownership: %s took over %g s to stop", supervisor.name, STOP_WITHIN_SECONDS)
