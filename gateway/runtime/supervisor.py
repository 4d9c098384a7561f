"""Platform connections (Discord's websocket, Slack Socket Mode, IMAP IDLE) as supervised
background tasks: never awaited at start, restarted with backoff whatever they raise, and
always able to say what state they are in and why.

A channel hands a `Session` to `ChannelContext.supervise`, which makes its `Supervisor`
(`gateway.doors.connections`): a coroutine that connects, calls `link.up()` once the
connection works, and runs until the connection ends (by returning or raising).

With several replicas on PostgreSQL, each such connection must exist once per deployment:
`gateway.runtime.ownership` then holds the supervisor (`hold`), and runs it only while this replica
owns the connection's lock (`take_over`); the others `stand_by`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from gateway.runtime.retry import RetryPolicy
from gateway.seam.connections import Health, Session, State, explain, health_after

log = logging.getLogger(__name__)


class Supervisor:
    """Runs one session at a time, forever: connect within `connect_timeout`, back off
    (exponentially, with jitter) after each failure, start again after each disconnect."""

    def __init__(
        self,
        name: str,
        session: Session,
        *,
        connect_timeout: float,
        policy: RetryPolicy,
        on_connected: Callable[[], Coroutine[Any, Any, None]] | None = None,
        singleton: bool = True,
    ) -> None:
        self.name = name
        self.singleton = singleton  # run by one replica among several (gateway.runtime.ownership)
        self._session = session
        self._connect_timeout = connect_timeout
        self._policy = policy
        self._on_connected = on_connected
        self._health = Health(State.CONNECTING)
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failures = 0
        self._wanted = False  # start() was called and aclose() was not
        # Set when replicas share the connection (`hold`): this replica's id, and the id of
        # the replica that owns the connection as last seen (None: nobody, or not known).
        self.replica: str | None = None
        self.owner: str | None = None
        self._ours = False  # this replica holds the connection's lock

    def __repr__(self) -> str:
        return f"Supervisor({self.name!r}, {self._health.describe()!r})"

    @property
    def health(self) -> Health:
        return self._health

    @property
    def wanted(self) -> bool:
        """The channel started this connection (and has not closed it)."""
        return self._wanted

    @property
    def owned(self) -> bool:
        """This process runs the connection: alone (SQLite), or as the replica that owns it."""
        return self.replica is None or self._ours

    def start(self) -> None:
        """Run the connection; when held by an ownership, only once this replica owns it."""
        self._wanted = True
        if self.owned:
            self._launch()

    def _launch(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"{self.name}-connection")

    async def aclose(self) -> None:
        self._wanted = False
        await self._stop()

    async def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # --- ownership, when several replicas share the connection (gateway.runtime.ownership)

    def hold(self, replica: str) -> None:
        """Run only while `replica` (this process) owns the connection; until then, stand by."""
        self.replica = replica
        self.owner = None
        self._ours = False
        self._set(Health(State.STANDBY, "waiting for the lock"))

    def take_over(self) -> None:
        """This replica now owns the connection: run it (if the channel started it)."""
        self.owner = self.replica
        self._ours = True
        if self._wanted:
            self._launch()

    async def stand_by(self, owner: str | None, reason: str | None = None) -> None:
        """Another replica owns the connection (or nobody, or we lost our lock): stop ours."""
        self.owner = owner
        self._ours = False
        await self._stop()
        why = reason or (f"owned by {owner}" if owner else "no owner yet")
        if self._health.state is not State.STANDBY or self._health.reason != why:
            self._set(Health(State.STANDBY, why))

    async def wait_for(self, state: State) -> Health:
        """Wait until the connection reaches `state` (tests and `gateway check` use it)."""
        while self._health.state is not state:
            self._changed.clear()
            await self._changed.wait()
        return self._health

    # --- Link, for the running session

    def up(self) -> None:
        if self._health.state is not State.CONNECTED:
            self._failures = 0
            self._set(Health(State.CONNECTED))
            log.info("%s: connected", self.name)
            if self._on_connected is not None:
                task = asyncio.create_task(self._on_connected())
                task.add_done_callback(_log_failure)

    def down(self, reason: str) -> None:
        self._set(Health(State.RETRYING, reason))
        log.warning("%s: %s", self.name, reason)

    # --- the loop

    async def _run(self) -> None:
        while True:
            self._set(Health(State.CONNECTING))
            try:
                await self._attempt()
                health = Health(State.RETRYING, "the connection closed")
            except asyncio.CancelledError:
                raise
            except Exception as error:  # whatever a platform client raises, never the process
                health = health_after(error)
            if health.state is State.FAILED:
                self._set(health)
                log.error("%s: %s; not retrying", self.name, health.reason)
                return
            self._failures += 1
            delay = self._policy.delay(self._failures)
            self._set(Health(State.RETRYING, f"{health.reason}; next try in {delay:.1f} s"))
            log.warning("%s: %s", self.name, self._health.reason)
            await asyncio.sleep(delay)

    async def _attempt(self) -> None:
        """One session: it must report `up` within the connect timeout, then runs on."""
        session = asyncio.create_task(self._session(self))
        try:
            async with asyncio.timeout(self._connect_timeout):
                while self._health.state is not State.CONNECTED and not session.done():
                    self._changed.clear()
                    await _first_of(self._changed.wait(), session)
        except TimeoutError:
            session.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await session
            raise TimeoutError(f"no answer within {self._connect_timeout:g} s") from None
        except BaseException:
            session.cancel()
            raise
        await session

    def _set(self, health: Health) -> None:
        self._health = health
        self._changed.set()


async def _first_of(event_wait: Awaitable[object], task: asyncio.Task[None]) -> None:
    waiter = asyncio.ensure_future(event_wait)
    try:
        await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("after connecting: %s", explain(task.exception()))  # type: ignore[arg-type]


async def shutdown_step(what: str, step: Awaitable[None], seconds: float) -> None:
    """A step of the shutdown: if it fails or hangs, the next ones run all the same (the
    process must be gone within 10 s of SIGTERM)."""
    try:
        async with asyncio.timeout(seconds):
            await step
    except Exception:
        log.exception("shutdown: %s did not stop cleanly within %g s", what, seconds)
