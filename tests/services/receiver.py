"""A webhook receiver on 127.0.0.1 that records what it gets (aiohttp)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class WebhookReceiver:
    port: int
    status: int = 200
    # Answers for the first deliveries, in order; `status` after they run out.
    script: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        status = self.script.pop(0) if self.script else self.status
        async with self._changed:
            self.received.append(Received(dict(request.headers), body))
            self._changed.notify_all()
        return web.json_response({"ok": status < 300}, status=status)

    async def start(self) -> WebhookReceiver:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def wait_for(self, count: int, *, within: float = 20) -> list[Received]:
        """Until `count` deliveries have arrived (fails with TimeoutError otherwise)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.received) >= count)
        return list(self.received)
