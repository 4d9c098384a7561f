"""The web console as a channel: nothing to send (its pages read through the console door);
it serves the console's routes on the gateway's app."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.seam import ChannelContext, ChannelName, RequestView, Sent, Target

if TYPE_CHECKING:
    from fastapi import FastAPI


class WebChannel:
    name = ChannelName.WEB

    def __init__(self, context: ChannelContext) -> None:
        self.context = context

    def missing_settings(self) -> list[str]:
        return []

    def mount(self, app: FastAPI, /) -> None:
        from channels.web.pages import ConsolePages  # FastAPI and Jinja2 load only to serve

        app.include_router(ConsolePages(self.context).router())

    async def start(self) -> None:
        return None

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        return Sent(ref={"url": request.link})

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        return None

    async def aclose(self) -> None:
        return None
