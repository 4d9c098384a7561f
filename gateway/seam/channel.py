"""The protocols a channel implements. A channel is built by its factory from its
`ChannelContext` (`gateway.seam.context`), and translates: platform event -> one core call,
core outcome -> platform message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gateway.seam.connections import Connection
from gateway.seam.targets import Target
from gateway.seam.views import RequestView, Sent
from gateway.vocabulary import ChannelName

if TYPE_CHECKING:
    from fastapi import FastAPI


class Channel(Protocol):
    name: ChannelName

    def missing_settings(self) -> list[str]:
        """Settings that must be set before this channel can deliver; empty when ready."""
        ...

    async def start(self) -> None:
        """Start what runs in the background (a supervised connection); never waits on it."""
        ...

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        """Post the request; raise gateway.errors.DeliveryError on failure. Runs at least
        once: a retry after a crash must not post twice (check, or use the platform's
        idempotency key)."""
        ...

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        """Show the request's new status on a post `send` made earlier (idempotent)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Remindable(Protocol):
    """A channel that can nudge the people a pending request still waits on."""

    async def remind(
        self,
        request: RequestView,
        target: Target,
        ref: dict[str, Any],
        mention: list[str],
        /,
        *,
        number: int = 1,
    ) -> None:
        """Reply under the post `send` made (its `ref`) with `reminder_text(request)`,
        mentioning `mention` (this target's platform ids or addresses that have not answered).
        `number` counts the request's reminders: a retry of the same one posts it once."""
        ...


@runtime_checkable
class Noted(Protocol):
    """A channel that can add a note under a post it made (a standing grant's uses)."""

    async def note(
        self, request: RequestView, target: Target, ref: dict[str, Any], text: str, /, *, key: str
    ) -> None:
        """Reply under the post `send` made (its `ref`) with `text` (plain words the channel
        escapes for its markup). `key` names the note: a retry posts it once."""
        ...


@runtime_checkable
class Paced(Protocol):
    """A channel that paces its posts to each destination (a platform's rate limit), and
    says how long a post would wait: the outbox lets a waiting post hold none of its shared
    run slots, and puts off a post whose turn is far."""

    def wait_before(self, target: Target, /) -> float:
        """Seconds a `send` or `remind` to `target` would wait for its turn now (0: none).
        The call made right after this reserves its turn before it awaits anything, so that
        the next `wait_before` counts it."""
        ...

    def later_slot(self, target: Target, /) -> float:
        """Seconds until the outbox should try again a post to `target` it puts off now;
        each call gives a later time than the one before, so posts put off together come
        back one at a time."""
        ...


@runtime_checkable
class Routed(Protocol):
    """A channel that serves HTTP routes (Slack's events, the console's pages)."""

    def mount(self, app: FastAPI, /) -> None:
        """Add the routes; everything else the channel needs, it was given when built."""
        ...


@runtime_checkable
class Checkable(Protocol):
    """A channel that can test its connection for `gateway check`."""

    async def check(self) -> str:
        """A line describing the working connection; raise DeliveryError when it fails."""
        ...


@runtime_checkable
class Connected(Protocol):
    """A channel that keeps a platform connection open, under a supervisor
    (`ChannelContext.supervise`). `connection` is None while the channel needs none (not
    configured, Slack over HTTP)."""

    connection: Connection | None
