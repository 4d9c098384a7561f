"""`/mcp`, opened by its first request: loading the MCP SDK takes ~0.4 s of CPU, a fifth of
the gateway's start, and neither the start nor the API's first requests pay for it (loading
it beside them in a thread slowed both by a fifth: the import holds the interpreter). The
request that opens the door, and any that come while it opens, wait for it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.core import Core

if TYPE_CHECKING:
    from gateway.mcp.door import McpDoor

log = logging.getLogger(__name__)

PATH = "/mcp"
UNAVAILABLE = JSONResponse(
    {"detail": "the MCP server is unavailable: it did not open, or the gateway is stopping"},
    status_code=503,
)


class DeferredDoor:
    """The route at /mcp: it opens the MCP door on first use and hands it every request."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._door: asyncio.Future[McpDoor] | None = None
        self._serving: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None

    def mount(self, app: FastAPI) -> None:
        # A Route, not a Mount: a Mount answers /mcp with a redirect to /mcp/.
        route = Route(PATH, self, methods=["GET", "POST", "DELETE"], include_in_schema=False)
        app.router.routes.append(route)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Let requests open the door (enter this in the app's lifespan); its sessions end
        when this exits."""
        self._closing = asyncio.Event()
        try:
            yield
        finally:
            self._closing.set()
            if self._serving is not None:
                await self._serving

    def _open(self, closing: asyncio.Event) -> asyncio.Future[McpDoor]:
        """The door, opening it at the first call (one load however many requests ask)."""
        if self._door is None:
            self._door = asyncio.get_running_loop().create_future()
            serving = self._serve(self._door, closing)
            self._serving = asyncio.create_task(serving, name="mcp-door")
        return self._door

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
        closing = self._closing
        assert closing is not None, "the app's lifespan runs before any request"
        if closing.is_set():
            await UNAVAILABLE(scope, receive, send)
            return
        try:
            door = await asyncio.shield(self._open(closing))
        except Exception:  # logged once, where the load failed
            door = None
        if door is None or closing.is_set():  # the sessions' task group may be gone
            await UNAVAILABLE(scope, receive, send)
            return
        await door(scope, receive, send)


def load() -> type[McpDoor]:
    """The door's class, with the MCP SDK it imports."""
    from gateway.mcp.door import McpDoor

    return McpDoor
