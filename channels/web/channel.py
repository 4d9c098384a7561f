"""The web console as a channel: nothing to send (the pages read the store); it mounts
the console's routes on the gateway's app."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.seam.targets import Target
from gateway.seam.views import RequestView, Sent
from gateway.vocabulary import ChannelName

if TYPE_CHECKING:
    from fastapi import FastAPI

    from gateway.core import Core


class WebChannel:
    name = ChannelName.WEB

    def missing_settings(self) -> list[str]:
        return []

    def mount(self, app: FastAPI, core: Core, /) -> None:
        from channels.web.pages import router  # the pages import the core; the core imports us

        app.include_router(router)

    async def start(self) -> None:
        return None

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        return Sent(ref={"url": request.link})

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        return None

    async def aclose(self) -> None:
        return None
