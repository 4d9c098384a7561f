"""The built-in web console channel: every request is listed there; nothing to send."""

from __future__ import annotations

from typing import Any

from gateway.routing import Target
from gateway.views import RequestView, Sent


class WebChannel:
    name = "web"

    def missing_settings(self) -> list[str]:
        return []

    async def start(self) -> None:
        return None

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        return Sent(ref={"url": request.link})

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        return None

    async def aclose(self) -> None:
        return None
