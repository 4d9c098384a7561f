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
