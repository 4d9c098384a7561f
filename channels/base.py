"""The seam every channel implements: four methods, and a name."""

from __future__ import annotations

from typing import Any, Protocol

from gateway.routing import Target
from gateway.views import RequestView, Sent


class Channel(Protocol):
    name: str

    def missing_settings(self) -> list[str]:
        """Settings that must be set before this channel can deliver; empty when ready."""
        ...

    async def start(self) -> None: ...

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        """Post the request; raise gateway.errors.DeliveryError on failure."""
        ...

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        """Show the request's new status on a post `send` made earlier (idempotent)."""
        ...

    async def aclose(self) -> None: ...
