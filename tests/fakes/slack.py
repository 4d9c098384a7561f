"""A fake Slack Web API on 127.0.0.1 (aiohttp) for driving the real slack_sdk client.

Point `AsyncWebClient(token=..., base_url=fake.base_url)` at it. Every call to
`/api/{method}` is recorded as a `Call`, including the ones the fake failed on purpose.

Scenarios are picked by the token, as slack_sdk's own mock server does:

- `ratelimited` in the token: the first `failures_before_success` calls to each method in
  `fault_methods` answer HTTP 429 with `Retry-After` and `{"ok": false, "error": "ratelimited"}`;
- `server_error`: the same, with HTTP 500;
- `timeout`: the same, but the answer is held back for `hang_seconds` (released by `stop()`);
- `channel_not_found`: every call that names a `channel` answers that error;
- exactly `xoxb-invalid`: `invalid_auth`; no `Bearer xox…`/`xapp-…` token: `not_authed`.

`oauth.v2.access` is the exception to the token rule: slack_sdk sends it with HTTP Basic
auth (client_id:client_secret) and no bearer token, as Slack expects.

Socket Mode: `apps.connections.open` (with an `xapp-` token) answers `ws://…/link`, a
WebSocket that greets each client with `hello`. `send_envelope()` pushes an `events_api` or
`interactive` envelope to the connected client and `wait_for_ack()` waits for its
`{"envelope_id": …}` acknowledgement; `stop()` closes the sockets.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.server import FakeServer

SCENARIOS = ("ratelimited", "server_error", "timeout", "channel_not_found")
# Form bodies carry these as JSON strings; decode them so tests compare structures.
JSON_FIELDS = ("blocks", "attachments", "view", "metadata")
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
TEAM_ID = "T1"

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass
class Call:
    method: str
    token: str
    params: dict[str, Any]
    # True when the fake answered with an error on purpose (scenario, bad auth, unknown method).
    failed: bool = False
    error: str | None = None


class FakeSlack(FakeServer):
    def __init__(
        self,
        *,
        failures_before_success: int = 1,
        hang_seconds: float = 3.0,
        retry_after: int = 1,
        fault_methods: frozenset[str] = frozenset({"chat.postMessage"}),
    ) -> None:
        super().__init__()
        self.failures_before_success = failures_before_success
        self.hang_seconds = hang_seconds
        self.retry_after = retry_after
        self.fault_methods = fault_methods
        self.calls: list[Call] = []
        self.responses: dict[str, list[dict[str, Any]]] = {}
        # Users known to users.info; unknown ids get a made-up profile.
        self.users: dict[str, dict[str, Any]] = {}
        self._changed = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._failures: dict[tuple[str, str], int] = {}
        # Methods that do their work and then answer 500, as when a response is lost.
        self._accept_then_fail: dict[str, int] = {}
        # What Slack would show: every message by channel and ts (edits applied).
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self._ts = itertools.count(100, 100)
        self._ids = itertools.count(1)
        # Socket Mode: the connected clients, the envelopes sent and what the clients sent back.
        self.envelopes: list[dict[str, Any]] = []
        self.socket_messages: list[dict[str, Any]] = []
        self._methods: dict[str, Handler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "views.open": self._views_open,
            "oauth.v2.access": self._oauth_v2_access,
            "users.info": self._users_info,
            "conversations.info": self._conversations_info,
            "conversations.replies": self._conversations_replies,
            "apps.connections.open": self._apps_connections_open,
        }

    # -- lifecycle -------------------------------------------------------------------------

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/respond/{id}", self._handle_respond)
        app.router.add_get("/link", self._handle_link)
        self._stopping.clear()

    def release(self) -> None:
        self._stopping.set()  # releases requests held back by the timeout scenario

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, id: str) -> str:
        return f"http://127.0.0.1:{self.port}/respond/{id}"

    # -- assertions ------------------------------------------------------------------------

    def calls_to(self, method: str, *, include_failed: bool = True) -> list[Call]:
        return [
            call
            for call in self.calls
            if call.method == method and (include_failed or not call.failed)
        ]

    async def wait_for(
        self, method: str, count: int, within: float = 10, *, include_failed: bool = True
    ) -> list[Call]:
        """Until `count` calls to `method` are recorded (TimeoutError otherwise)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(
                lambda: len(self.calls_to(method, include_failed=include_failed)) >= count
            )
        return self.calls_to(method, include_failed=include_failed)

    def responses_to(self, id: str) -> list[dict[str, Any]]:
        return list(self.responses.get(id, []))

    async def wait_for_response(
        self, id: str, count: int = 1, within: float = 10
    ) -> list[dict[str, Any]]:
        """Until `count` bodies were posted to `response_url(id)` (TimeoutError otherwise)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.responses.get(id, [])) >= count)
        return self.responses_to(id)

    # -- Socket Mode -----------------------------------------------------------------------

    @property
    def socket_connected(self) -> bool:
        return bool(self._sockets)

    async def wait_for_socket(self, within: float = 10) -> None:
        """Until a Socket Mode client is connected (and greeted) (TimeoutError otherwise)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: bool(self._sockets))

    async def wait_for_socket_close(self, within: float = 10) -> None:
        """Until no Socket Mode connection is open."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: not self._sockets)

    async def send_envelope(
        self, type_: str, payload: dict[str, Any], *, accepts_response_payload: bool = True
    ) -> str:
        """Push an envelope (`events_api`, `interactive`, ...) to the newest connected client;
        returns its envelope id. Waits up to 10 s for a client to connect."""
        await self.wait_for_socket()
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": type_,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
        }
        if type_ == "events_api":  # Slack adds these to every events_api envelope
            envelope |= {"retry_attempt": 0, "retry_reason": ""}
        self.envelopes.append(envelope)
        await self._sockets[-1].send_json(envelope)
        return envelope_id

    def acks(self, envelope_id: str) -> list[dict[str, Any]]:
        return [m for m in self.socket_messages if m.get("envelope_id") == envelope_id]

    async def wait_for_ack(self, envelope_id: str, within: float = 10) -> dict[str, Any]:
        """The client's `{"envelope_id": …[, "payload": …]}` for that envelope (TimeoutError
        otherwise)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: bool(self.acks(envelope_id)))
        return self.acks(envelope_id)[0]

    async def _handle_link(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()  # autoping: answers the client's pings
        await socket.prepare(request)
        await socket.send_json(
            {
                "type": "hello",
                "num_connections": 1,
                "debug_info": {
                    "host": "applink-fake",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
                "connection_info": {"app_id": "A1"},
            }
        )
        async with self._changed:
            self._sockets.append(socket)
            self._changed.notify_all()
        try:
            async for message in socket:  # ends when either side closes the socket
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    decoded = json.loads(message.data)
                except json.JSONDecodeError:
                    decoded = None
                if not isinstance(decoded, dict):
                    decoded = {"raw": message.data}
                async with self._changed:
                    self.socket_messages.append(decoded)
                    self._changed.notify_all()
        finally:
            async with self._changed:
                self._sockets.remove(socket)
                self._changed.notify_all()
        return socket

    # -- HTTP ------------------------------------------------------------------------------

    async def _record(self, call: Call) -> None:
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _read_params(request)
        token, basic_client_id = _credentials(request, params)
        if basic_client_id is not None:
            params.setdefault("client_id", basic_client_id)

        async def fail(
            error: str, status: int = 200, headers: dict[str, str] | None = None
        ) -> web.Response:
            await self._record(Call(method, token, params, failed=True, error=error))
            return web.json_response({"ok": False, "error": error}, status=status, headers=headers)

        handler = self._methods.get(method)
        if handler is None:
            return await fail("unknown_method")
        if method == "oauth.v2.access":
            if basic_client_id is None and "client_id" not in params:
                return await fail("invalid_client_id")
        elif not token.startswith(("xox", "xapp-")):
            return await fail("not_authed")
        elif token == "xoxb-invalid":
            return await fail("invalid_auth")
        elif (method == "apps.connections.open") != token.startswith("xapp-"):
            return await fail("not_allowed_token_type")

        if "channel_not_found" in token and "channel" in params:
            return await fail("channel_not_found")
        scenario = next((name for name in SCENARIOS if name in token), None)
        if scenario is not None and method in self.fault_methods:
            key = (token, method)
            failed_so_far = self._failures.get(key, 0)
            if failed_so_far < self.failures_before_success:
                self._failures[key] = failed_so_far + 1
                if scenario == "ratelimited":
                    return await fail("ratelimited", 429, {"Retry-After": str(self.retry_after)})
                if scenario == "server_error":
                    return await fail("internal_error", 500)
                if scenario == "timeout":
                    await self._record(Call(method, token, params, failed=True, error="timeout"))
                    await self._hang()
                    return web.json_response(await handler(params))

        if self._accept_then_fail.get(method):
            self._accept_then_fail[method] -= 1
            await handler(params)  # done, but the caller never hears so
            return await fail("internal_error", 500)
        await self._record(Call(method, token, params))
        return web.json_response(await handler(params))

    def fail_after_accepting(self, method: str, times: int = 1) -> None:
        """The next `times` calls of `method` take effect, then answer HTTP 500."""
        self._accept_then_fail[method] = times

    def thread(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """A thread's replies, oldest first (the parent not included)."""
        replies = [m for (c, _ts), m in self.messages.items() if c == channel]
        return sorted(
            (m for m in replies if m.get("thread_ts") == ts and m["ts"] != ts),
            key=lambda m: float(m["ts"]),
        )

    async def _hang(self) -> None:
        try:
            async with asyncio.timeout(self.hang_seconds):
                await self._stopping.wait()
        except TimeoutError:
            pass

    async def _handle_respond(self, request: web.Request) -> web.Response:
        id = request.match_info["id"]
        body = await request.read()
        try:
            payload = json.loads(body) if body else {}
        except json.JSONDecodeError:
            payload = {"raw": body.decode(errors="replace")}
        async with self._changed:
            self.responses.setdefault(id, []).append(payload)
            self._changed.notify_all()
        return web.Response(text="ok")

    # -- methods ---------------------------------------------------------------------------

    def _next_ts(self) -> str:
        micros = next(self._ts)
        return f"{1_700_000_000 + micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _message(self, params: dict[str, Any], ts: str) -> dict[str, Any]:
        message: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "text": params.get("text", ""),
            "ts": ts,
        }
        for key in ("blocks", "attachments", "thread_ts", "metadata"):
            if key in params:
                message[key] = params[key]
        return message

    async def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://test.slack.com/",
            "team": "Test",
            "user": "bot",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    async def _chat_post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel", ""))
        if channel.startswith("U"):  # posting to a user id lands in the app's DM with them
            channel = "D" + channel[1:]
        ts = self._next_ts()
        message = self._message(params, ts)
        self.messages[(channel, ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    async def _chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        ts = str(params.get("ts", ""))
        key = (str(params.get("channel", "")), ts)
        if key in self.messages:
            kept = {k: v for k, v in self.messages[key].items() if k in ("thread_ts", "metadata")}
            self.messages[key] = self._message(params, ts) | kept
        return {
            "ok": True,
            "channel": params.get("channel"),
            "ts": ts,
            "text": params.get("text", ""),
            "message": self._message(params, ts),
        }

    async def _chat_post_ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "message_ts": self._next_ts()}

    async def _views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        view = params.get("view")
        view = dict(view) if isinstance(view, dict) else {}
        view.update({"id": f"V{next(self._ids):08d}", "team_id": TEAM_ID, "app_id": "A1"})
        return {"ok": True, "view": view}

    async def _oauth_v2_access(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "access_token": f"xoxb-installed-{next(self._ids)}",
            "token_type": "bot",
            "scope": "chat:write,commands,users:read",
            "bot_user_id": "UBOT2",
            "app_id": "A1",
            "team": {"id": "T2", "name": "Other"},
            "enterprise": None,
            "is_enterprise_install": False,
            "authed_user": {"id": "U9"},
        }

    async def _users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user_id = str(params.get("user", ""))
        user = self.users.get(user_id)
        if user is None:
            name = f"User {user_id}"
            user = {
                "id": user_id,
                "team_id": TEAM_ID,
                "name": user_id.lower(),
                "real_name": name,
                "is_bot": False,
                "profile": {
                    "real_name": name,
                    "display_name": name,
                    "email": f"{user_id.lower()}@example.com",
                },
            }
        return {"ok": True, "user": user}

    async def _conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel", ""))
        return {
            "ok": True,
            "channel": {
                "id": channel,
                "name": channel.lower(),
                "is_channel": channel.startswith("C"),
                "is_group": channel.startswith("G"),
                "is_im": channel.startswith("D"),
                "is_private": not channel.startswith("C"),
                "is_archived": False,
            },
        }

    async def _conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel", "")), str(params.get("ts", ""))
        parent = self.messages.get((channel, ts))
        if parent is None:
            return {"ok": False, "error": "thread_not_found"}
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        messages = [parent, *self.thread(channel, ts)]
        if not with_metadata:  # Slack leaves metadata out unless asked for it
            messages = [{k: v for k, v in m.items() if k != "metadata"} for m in messages]
        return {"ok": True, "messages": messages, "has_more": False}

    async def _apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"}


async def _read_params(request: web.Request) -> dict[str, Any]:
    """Query string, then the JSON or form body, as one dict."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.read()
        if body:
            decoded = json.loads(body)
            if isinstance(decoded, dict):
                params.update(decoded)
    elif request.method == "POST":
        form = await request.post()
        params.update({key: value for key, value in form.items() if isinstance(value, str)})
    for key in JSON_FIELDS:
        value = params.get(key)
        if isinstance(value, str):
            with contextlib.suppress(json.JSONDecodeError):
                params[key] = json.loads(value)
    return params


def _credentials(request: web.Request, params: dict[str, Any]) -> tuple[str, str | None]:
    """(bearer token or "", client_id from HTTP Basic auth or None)."""
    authorization = request.headers.get("Authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip(), None
    if scheme.lower() == "basic":
        try:
            client_id = base64.b64decode(value).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            return "", None
        return "", client_id
    return str(params.pop("token", "")), None
