"""`/mcp`, opened once the API already serves: loading the MCP SDK takes ~0.4 s, a fifth of
the gateway's start, and the HumanLayer API must not wait for it (a function call can be
created within 2 s of start). A request to /mcp that comes sooner waits until it is open."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.core import Core

if TYPE_CHECKING:
    from gateway.mcp.door import McpDoor

log = logging.getLogger(__name__)

PATH = "/mcp"


class DeferredDoor:
    def __init__(self, core: Core) -> None:
        self.core = core
        self._door: asyncio.Future[McpDoor] | None = None

    def mount(self, app: FastAPI) -> None:
        # A Route, not a Mount: a Mount answers /mcp with a redirect to /mcp/.
        route = Route(PATH, self, methods=["GET", "POST", "DELETE"], include_in_schema=False)
        app.router.routes.append(route)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Open the door beside the app (enter it in the app's lifespan); its sessions end
        when this exits."""
        self._door = asyncio.get_running_loop().create_future()
        closing = asyncio.Event()
        task = asyncio.create_task(self._serve(self._door, closing), name="mcp-door")
        try:
            yield
        finally:
            closing.set()
            await task

    async def _serve(self, opened: asyncio.Future[McpDoor], closing: asyncio.Event) -> None:
        try:
            # In a thread: the event loop serves the API meanwhile.
            door = (await asyncio.to_thread(load))(self.core)
        except Exception as error:
            log.exception("the MCP door did not open: /mcp is unavailable")
            opened.set_exception(error)
            return
        async with door.running():
            opened.set_result(door)
            await closing.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._door is not None, "the app's lifespan opens the door before any request"
        door = await asyncio.shield(self._door)
        await door(scope, receive, send)


def load() -> type[McpDoor]:
    """The door's class, with the MCP SDK it imports."""
    from gateway.mcp.door import McpDoor

    return McpDoor
