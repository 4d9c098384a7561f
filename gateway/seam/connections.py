"""A channel's long-lived platform connection (Discord's websocket, Slack Socket Mode, IMAP
IDLE), as the channel sees it: the session it hands to the gateway's supervisor, what the
session reports (`Link`), and the state every page and command shows."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from gateway.errors import ChannelDown, DeliveryError


class State(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RETRYING = "retrying"
    FAILED = "failed"  # will not work without an operator (a refused token): no more tries
    STANDBY = "standby"  # another replica owns the connection (or none does yet): not ours


@dataclass(frozen=True)
class Health:
    state: State
    reason: str | None = None
    since: datetime = field(default_factory=lambda: datetime.now(UTC))

    def describe(self) -> str:
        """`connected`, or `retrying: <why>`, `standby (owned by <replica>)` and the like."""
        if self.reason is None:
            return self.state.value
        if self.state is State.STANDBY:
            return f"{self.state.value} ({self.reason})"
        return f"{self.state.value}: {self.reason}"


class Link(Protocol):
    """What a session reports to its supervisor."""

    def up(self) -> None:
        """The connection works (again)."""

    def down(self, reason: str) -> None:
        """The connection dropped and the platform's client is re-establishing it itself."""


# A coroutine that connects, calls `link.up()` once the connection works, and runs until the
# connection ends (by returning or raising); the supervisor starts it again with backoff.
Session = Callable[[Link], Coroutine[Any, Any, None]]


class Connection(Protocol):
    """A supervised connection, as `ChannelContext.supervise` returns it."""

    @property
    def name(self) -> str: ...
    @property
    def health(self) -> Health: ...
    @property
    def owned(self) -> bool:
        """This process runs the connection: alone, or as the replica that owns it."""
        ...

    @property
    def wanted(self) -> bool:
        """The channel started the connection (and has not closed it)."""
        ...

    @property
    def owner(self) -> str | None:
        """With several replicas, the one that owns the connection (None: not known)."""
        ...

    @property
    def replica(self) -> str | None:
        """With several replicas, this one's id (None: a single process)."""
        ...

    def start(self) -> None: ...
    async def aclose(self) -> None: ...
    async def wait_for(self, state: State) -> Health: ...


def explain(error: BaseException) -> str:
    """Why a connection attempt failed, in words an operator can act on."""
    if isinstance(error, DeliveryError):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def health_after(error: BaseException) -> Health:
    """A refused credential will fail the same way again; anything else is worth retrying."""
    fatal = isinstance(error, DeliveryError) and not error.retryable
    return Health(State.FAILED if fatal else State.RETRYING, explain(error))


def require_up(name: str, connection: Connection | None) -> None:
    """Raise ChannelDown unless the connection is up (a send waits in the outbox then).

    On a replica that stands by, the connection lives on the replica that owns it: the
    platform's web API works from here all the same."""
    if connection is None or connection.health.state is State.STANDBY:
        return
    if connection.health.state is not State.CONNECTED:
        raise ChannelDown(name, connection.health.describe())


@dataclass(frozen=True)
class ChannelState:
    """What the console, `gateway check` and the API say about one channel."""

    name: str
    missing: list[str]  # settings to set before it can deliver; empty when configured
    # `connected`, `retrying: <why>`...; None without a connection. With several replicas,
    # `standby (owned by <replica>)`, or on the owner `connected (owned by this replica, <id>)`.
    connection: str | None
    since: datetime | None
    owner: str | None = None  # the replica that owns the connection (several replicas only)
    replica: str | None = None  # the replica answering (several replicas only)

    @property
    def configured(self) -> bool:
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "configured": self.configured,
            "missing": self.missing,
            "connection": self.connection,
            "since": self.since.isoformat() if self.since else None,
            "owner": self.owner,
            "replica": self.replica,
        }
