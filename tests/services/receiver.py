"""A webhook receiver on 127.0.0.1 that records what it gets (aiohttp)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


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


@dataclass
class Verified:
    """A delivery whose signature checked out, and what it carried."""

    webhook_id: str
    payload: dict[str, Any]


@dataclass
class VerifyingReceiver(WebhookReceiver):
    """Checks every delivery with the `standardwebhooks` library, as the README tells
    receivers to; a delivery that fails the check is kept apart and answered 400."""

    secret: str = ""
    verified: list[Verified] = field(default_factory=list)
    refused: list[tuple[Received, str]] = field(default_factory=list)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        delivery = Received(dict(request.headers), body)
        try:
            payload = Webhook(self.secret).verify(body, delivery.headers)
        except WebhookVerificationError as error:
            async with self._changed:
                self.refused.append((delivery, str(error)))
                self._changed.notify_all()
            return web.json_response({"ok": False}, status=400)
        async with self._changed:
            self.received.append(delivery)
            self.verified.append(Verified(delivery.headers["webhook-id"], payload))
            self._changed.notify_all()
        return web.json_response({"ok": True})

    async def wait_until(self, check: Callable[[list[Verified]], bool], *, within: float) -> None:
        """Until `check` holds for the verified deliveries (TimeoutError otherwise)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: check(self.verified))


@dataclass
class HoldingReceiver(VerifyingReceiver):
    """Holds the first delivery open, unanswered, until `release` is set (its sender may die
    meanwhile), then answers it 503; checks every later one as `VerifyingReceiver` does."""

    held: list[Received] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def _handle(self, request: web.Request) -> web.Response:
        if self.held:
            return await super()._handle(request)
        body = await request.read()
        async with self._changed:
            self.held.append(Received(dict(request.headers), body))
            self._changed.notify_all()
        await self.release.wait()
        return web.json_response({"ok": False}, status=503)

    async def holding(self, *, within: float) -> Received:
        """Once the first delivery has arrived (and is held): that delivery."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: bool(self.held))
        return self.held[0]
