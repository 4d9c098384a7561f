"""A reverse proxy on 127.0.0.1 in front of a gateway that fails on cue, the way networks and
busy databases do: it answers 503 itself, or forwards a request and then drops the
connection before the answer (the gateway acted; the client never heard), or forges the
answer's fields (a man in the middle, or a store someone edited)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web

from tests.fakes.server import FakeServer

BUSY = "503"  # answer 503 with Retry-After, without forwarding
DROP = "drop"  # forward, then close the connection instead of answering
FORGE = "forge"  # forward, then overwrite the JSON answer's top-level fields with `forged`


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    outcome: str = "forwarded"


@dataclass
class FlakyProxy(FakeServer):
    upstream: str  # the gateway's base URL
    retry_after: str = "1"
    script: dict[str, list[str]] = field(default_factory=dict)  # "POST /path" -> outcomes
    forged: dict[str, Any] = field(default_factory=dict)
    forged_at: dict[str, dict[str, Any]] = field(default_factory=dict)  # "GET /path": its own
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail(self, method: str, path: str, *outcomes: str) -> None:
        """The next requests of `method path` (path without its query) meet `outcomes`."""
        self.script.setdefault(f"{method} {path}", []).extend(outcomes)

    def of(self, method: str, path: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method and s.path == path]

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        seen = Seen(request.method, request.path, dict(request.headers))
        self.seen.append(seen)
        planned = self.script.get(f"{request.method} {request.path}") or []
        seen.outcome = planned.pop(0) if planned else "forwarded"
        if seen.outcome == BUSY:
            headers = {"Retry-After": self.retry_after}
            return web.json_response({"detail": "busy"}, status=503, headers=headers)
        answer = await self._forward(request)
        if seen.outcome == FORGE:
            assert isinstance(answer.body, bytes)  # _forward's, as the gateway sent it
            fields = self.forged_at.get(f"{request.method} {request.path}", self.forged)
            answer.body = json.dumps({**json.loads(answer.body), **fields}).encode()
        if seen.outcome == DROP and request.transport is not None:
            request.transport.abort()  # the gateway has acted; its answer is lost
        return answer

    async def _forward(self, request: web.Request) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        async with httpx.AsyncClient(base_url=self.upstream, timeout=90) as client:
            answer = await client.request(
                request.method,
                request.path_qs,
                content=await request.read(),
                headers=headers,
            )
        kept = {k: v for k, v in answer.headers.items() if k.lower() == "content-type"}
        return web.Response(status=answer.status_code, body=answer.content, headers=kept)
