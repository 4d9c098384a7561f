"""MCP sessions per API key. The SDK's own session limit is one for the whole process, so a
single key could fill it and every other project's `initialize` got 503. The door counts each
key's sessions from what the HTTP exchange shows (the session id an `initialize` answer
carries, a 404 for a session the SDK ended, a DELETE) and the SDK's documented idle rule
(none of its internals), and refuses a key at its cap with 429 before the SDK sees it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

INVALID_REQUEST = -32600  # JSON-RPC's code, as the SDK's own refusals carry


@dataclass
class Held:
    """One open session: requests in flight (an open GET stream is one), and since when
    none has been."""

    busy: int
    idle_since: float


class SessionLedger:
    """The sessions each API key holds in this process. Idle ones are dropped once the SDK
    ends them (no request in flight for `idle_seconds`), so a key's count never lags."""

    def __init__(
        self, per_key: int, idle_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_key = per_key
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.held: dict[int, dict[str, Held]] = {}
        self.opening: Counter[int] = Counter()  # initialize requests not answered yet

    def count(self, key: int) -> int:
        sessions = self.held.get(key, {})
        now = self.clock()
        for sid, held in list(sessions.items()):
            if not held.busy and now - held.idle_since >= self.idle_seconds:
                del sessions[sid]  # the SDK has ended it: its id answers 404 now
        if not sessions:
            self.held.pop(key, None)  # no entry for a key that holds nothing
        return len(sessions) + self.opening[key]

    def admit(self, key: int) -> bool:
        """Whether `key` may open one more session; if so, it is counted from now on."""
        if self.count(key) >= self.per_key:
            return False
        self.opening[key] += 1
        return True

    def opened(self, key: int, sid: str) -> None:
        """The SDK answered an admitted initialize with this session id (still in flight)."""
        self.held.setdefault(key, {})[sid] = Held(busy=1, idle_since=self.clock())

    def settled(self, key: int, sid: str | None) -> None:
        """An admitted opening request ended (`sid`: the session it opened, if any)."""
        self.opening[key] -= 1
        if self.opening[key] <= 0:
            del self.opening[key]
        if sid is not None:
            self._done(key, sid)

    @contextmanager
    def serving(self, key: int, sid: str) -> Iterator[None]:
        """A request on one of the key's sessions: the session is busy while it runs."""
        held = self.held.get(key, {}).get(sid)
        if held is not None:
            held.busy += 1
        try:
            yield
        finally:
            if held is not None:
                self._done(key, sid)

    def forget(self, key: int, sid: str) -> None:
        """The session ended (the client's DELETE, or the SDK answered 404 for it)."""
        sessions = self.held.get(key, {})
        sessions.pop(sid, None)
        if not sessions:
            self.held.pop(key, None)

    def _done(self, key: int, sid: str) -> None:
        held = self.held.get(key, {}).get(sid)
        if held is not None:
            held.busy -= 1
            held.idle_since = self.clock()

    def refusal(self) -> JSONResponse:
        message = (
            f"this API key already has {self.per_key} MCP sessions open here, its limit "
            "(GATEWAY_MCP_SESSIONS_PER_KEY): end one (DELETE /mcp with its Mcp-Session-Id), "
            f"or let one be idle for {self.idle_seconds:g} s (GATEWAY_MCP_SESSION_IDLE_SECONDS)"
        )
        error = {"code": INVALID_REQUEST, "message": message}
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=429)


def header(scope: Scope, name: str) -> str | None:
    wanted = name.encode()
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == wanted), None)


def session_id(scope: Scope) -> str | None:
    return header(scope, MCP_SESSION_ID_HEADER)


def opens_session(scope: Scope) -> bool:
    """Whether the SDK would open a session for this request: no session id, and a
    handshake-era protocol (2026-07-28 clients send each request alone, sessionless)."""
    version = header(scope, MCP_PROTOCOL_VERSION_HEADER)
    return session_id(scope) is None and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)


class Answer:
    """What the SDK answered: the status, and the session id an opening answer carries."""

    def __init__(self, send: Send, on_session: Callable[[str], None] | None = None) -> None:
        self._send = send
        self._on_session = on_session
        self.status: int | None = None
        self.session: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and self.status < 400

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            headers = {k.decode("latin-1").lower(): v for k, v in message.get("headers", [])}
            sid = headers.get(MCP_SESSION_ID_HEADER)
            if sid is not None and self.ok and self._on_session is not None:
                self.session = sid.decode("latin-1")
                self._on_session(self.session)  # counted before the client can use it
        await self._send(message)


class SessionLimit:
    """The SDK's request handler behind each key's session cap."""

    def __init__(self, handle: ASGIApp, ledger: SessionLedger) -> None:
        self.handle = handle
        self.ledger = ledger

    async def __call__(self, key: int, scope: Scope, receive: Receive, send: Send) -> None:
        if opens_session(scope):
            await self._open(key, scope, receive, send)
            return
        sid = session_id(scope)
        if sid is None:  # a sessionless protocol: nothing to count
            await self.handle(scope, receive, send)
            return
        answer = Answer(send)
        with self.ledger.serving(key, sid):
            await self.handle(scope, receive, answer.send)
        # Gone: the SDK no longer knows it (idle, crashed), or its client ended it.
        if answer.status == 404 or (scope["method"] == "DELETE" and answer.ok):
            self.ledger.forget(key, sid)

    async def _open(self, key: int, scope: Scope, receive: Receive, send: Send) -> None:
        """A request that opens a session: refused with 429 at the key's cap."""
        if not self.ledger.admit(key):
            await self.ledger.refusal()(scope, receive, send)
            return
        answer = Answer(send, on_session=lambda sid: self.ledger.opened(key, sid))
        try:
            await self.handle(scope, receive, answer.send)
        finally:
            self.ledger.settled(key, answer.session)
