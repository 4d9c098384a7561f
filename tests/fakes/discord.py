"""A fake Discord (REST API + gateway WebSocket) on 127.0.0.1 for driving the real discord.py.

Point discord.py at it with two process-global class attributes, set before `login()`:

    discord.http.Route.BASE = fake.api_url
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)

`Route.BASE` also covers interaction callbacks and webhooks. Set
`client._connection.guild_ready_timeout` low: READY has no guilds, and `on_ready` otherwise
waits 2 s for them.

REST (under `/api/v10`): every request is recorded as a `Call` in `calls`, including the
ones the fake failed on purpose. Only `Authorization: Bot fake-bot-token` is accepted; any
other token answers 401 (so `login()` raises `LoginFailure`). Interaction callbacks and
webhooks carry no token, as with Discord. Answers are JSON with a Content-Type of exactly
`application/json`: discord.py compares it for equality, and `; charset=utf-8` makes it see
a string. Unknown routes answer 404 JSON.

Scenarios:

- `enforce_nonce`: a message posted again with the same nonce in the same channel gets the
  first message back instead of a new one (Discord keeps nonces for a few minutes).
- `dm_blocked`: user ids whose DMs fail. Opening the DM channel works; posting to it answers
  403 `{"code": 50007}` (discord.py raises `Forbidden`), as Discord does.
- `fail_next(method, path_regex, status=429, ...)`: the next `count` matching requests fail.
  A 429 looks like Discord's (body `retry_after`, `X-RateLimit-*` headers and a `Via`
  header, without which discord.py takes it for a Cloudflare ban and gives up); discord.py
  waits it out and retries. It also retries a 500/502 after 1 s.
- `click()` / `submit_modal()`: push an INTERACTION_CREATE (button or select; modal submit).
  The bot's callback is recorded in `callbacks`. As with Discord, a callback more than 3 s
  (`answer_within`) after the click answers 404 "Unknown interaction" (10062). An
  UPDATE_MESSAGE (7) callback, an `@original` edit and `PATCH /channels/{c}/messages/{m}`
  change the stored message and are listed by `edits_of()`.
- `dispatch(event, data)`: push any other gateway event (MESSAGE_CREATE, ...).
- `drop_connection()`: the fake closes the gateway socket (code 4000); discord.py reconnects
  and RESUMEs. Dispatches pushed meanwhile are queued for the session and replayed on RESUME.
  `disconnected()` holds the reconnection back until its block exits, so a test can push
  events while the bot is surely offline.
- A client that IDENTIFIES instead starts a new session. Dispatches queued for the old
  session are not delivered, as with Discord; they are kept in `dropped_dispatches`.
- A client that closes its socket with code 1000 or 1001 ends its session, as with Discord:
  a RESUME of it gets INVALID_SESSION. Any other close (or a dropped TCP connection, as
  when the process is killed) leaves it resumable, from another process too; `replays`
  lists how many dispatches each RESUME replayed. `forget_session()` expires it.

Gateway: one session at a time. Dispatches go to the connection that identified or resumed
last. A RESUME with another session id gets INVALID_SESSION (op 9, `d: false`) and
discord.py then identifies. Frames are TEXT and uncompressed: discord.py asks for
zlib-stream but only decompresses binary frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import BodyPartReader, WSMsgType, web

from tests.fakes.server import FakeServer

# Exactly this: discord.py's json_or_text() compares the header for equality.
JSON = "application/json"
API_PREFIX = "/api/v10"
DISCORD_EPOCH_MS = 1_420_070_400_000
EPHEMERAL = 64
LOADING = 128
PERMISSIONS = "2251799813685247"
# Interaction callback types that answer with a new message / with the clicked message.
NEW_MESSAGE_CALLBACKS = (4, 5)
SAME_MESSAGE_CALLBACKS = (6, 7)
INTERACTION_ANSWER_SECONDS = 3.0
ENDS_SESSION = (1000, 1001)  # a client closing with these cannot resume afterwards

Json = dict[str, Any]


@dataclass
class Call:
    method: str
    path: str  # without the /api/v10 prefix or the query string
    json_body: Any  # the JSON body (the `payload_json` part of a multipart body), or None
    authorized: bool  # carried `Authorization: Bot fake-bot-token`
    status: int
    query: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fault:
    method: str
    path_regex: str
    status: int
    count: int
    retry_after: float
    code: int | None


@dataclass
class _Request:
    params: dict[str, str]  # the route's named groups
    body: Json
    query: dict[str, str]
    uploads: dict[str, tuple[str, int]]  # multipart file index -> (filename, size)


@dataclass
class _Interaction:
    id: str
    token: str
    type: int
    channel_id: str
    message_id: str | None  # the message the component was on
    response_type: int | None = None
    original_id: str | None = None  # the message `@original` names
    created: float = field(default_factory=time.monotonic)


Handler = Callable[[_Request], Awaitable[web.Response]]


@dataclass
class _Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    needs_token: bool = True


class FakeDiscord(FakeServer):
    # Distinct ids (Discord often reuses the application id for the bot user) so that a
    # mix-up between them shows in tests.
    BOT_USER_ID = "1100000000000000001"
    APPLICATION_ID = "1100000000000000002"
    GUILD_ID = "1100000000000000003"
    CHANNEL_ID = "1100000000000000004"  # a guild text channel; any other id works too
    OWNER_ID = "1100000000000000005"
    TOKEN = "fake-bot-token"

    def __init__(self, *, heartbeat_interval_ms: int = 41250) -> None:
        super().__init__()
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.calls: list[Call] = []
        self.messages: dict[str, Json] = {}
        self._nonces: dict[tuple[str, str], str] = {}  # (channel, nonce) -> message id
        self.allowed_mentions: dict[str, Json | None] = {}  # message id -> as requested
        self.edits: dict[str, list[Json]] = {}
        self.callbacks: list[Json] = []  # {"interaction_id", "type", "data"}
        self.dm_blocked: set[str] = set()
        self.dm_channels: dict[str, Json] = {}  # user id -> DM channel
        self.identify_count = 0
        self.resume_count = 0
        self.replays: list[int] = []  # how many dispatches each RESUME replayed
        # Discord forgets an interaction not answered within 3 s (a later callback gets 404).
        self.answer_within = INTERACTION_ANSWER_SECONDS
        self.dropped_dispatches: list[Json] = []
        self._faults: list[_Fault] = []
        self._interactions: dict[str, _Interaction] = {}
        start = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
        self._ids = itertools.count(start)
        self._changed = asyncio.Condition()
        # Serialises the session state (seq, log, live socket) and the frames sent, so that
        # a replay on RESUME and a concurrent dispatch cannot interleave.
        self._gateway_lock = asyncio.Lock()
        self._reconnect_allowed = asyncio.Event()
        self._reconnect_allowed.set()
        self._session_id: str | None = None
        self._seq = 0
        self._log: list[Json] = []  # every dispatch of the session, for replays
        self._queued: list[Json] = []  # dispatches not sent: no client was connected
        self._live: web.WebSocketResponse | None = None
        self._routes = self._make_routes()

    def _make_routes(self) -> list[_Route]:
        user, channel, message = r"(?P<user_id>\d+)", r"(?P<channel_id>\d+)", r"(?P<message_id>\d+)"
        hook = r"/webhooks/(?P<application_id>\d+)/(?P<token>[^/]+)"
        hook_message = hook + r"/messages/(?P<message_id>@original|\d+)"
        routes = [
            ("GET", r"/users/@me", self._get_me, True),
            ("GET", r"/oauth2/applications/@me", self._get_application, True),
            ("GET", rf"/users/{user}", self._get_user, True),
            ("POST", r"/users/@me/channels", self._open_dm, True),
            ("GET", rf"/channels/{channel}", self._get_channel, True),
            ("POST", rf"/channels/{channel}/messages", self._post_message, True),
            ("GET", rf"/channels/{channel}/messages/{message}", self._get_message, True),
            ("PATCH", rf"/channels/{channel}/messages/{message}", self._edit_message, True),
            (
                "POST",
                r"/interactions/(?P<interaction_id>\d+)/(?P<token>[^/]+)/callback",
                self._interaction_callback,
                False,
            ),
            ("POST", hook, self._post_followup, False),
            ("GET", hook_message, self._get_webhook_message, False),
            ("PATCH", hook_message, self._edit_webhook_message, False),
        ]
        return [_Route(m, re.compile(p), h, token) for m, p, h, token in routes]

    # -- lifecycle -------------------------------------------------------------------------

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/gateway", self._handle_gateway)
        app.router.add_route("*", "/{tail:.*}", self._handle_rest)

    def release(self) -> None:
        self._reconnect_allowed.set()  # releases handlers held by disconnected()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # -- test helpers ----------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        path_regex: str,
        *,
        status: int = 429,
        count: int = 1,
        retry_after: float = 0.2,
        code: int | None = None,
    ) -> None:
        """Fail the next `count` requests whose method matches and whose path (without
        `/api/v10`, e.g. `/channels/123/messages`) matches `path_regex` in full."""
        self._faults.append(_Fault(method.upper(), path_regex, status, count, retry_after, code))

    def messages_in(self, channel_id: str) -> list[Json]:
        return [m for m in self.messages.values() if m["channel_id"] == channel_id]

    def edits_of(self, message_id: str) -> list[Json]:
        """The edit bodies applied to a message, oldest first."""
        return list(self.edits.get(message_id, []))

    async def wait_for_call(self, predicate: Callable[[Call], bool], timeout: float = 10) -> Call:  # noqa: ASYNC109
        """The first recorded call that matches (TimeoutError if none comes)."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: any(map(predicate, self.calls)))
        return next(call for call in self.calls if predicate(call))

    async def wait_for_callback(self, interaction_id: str, timeout: float = 10) -> Json:  # noqa: ASYNC109
        """The bot's answer to an interaction: `{"interaction_id", "type", "data"}`."""

        def find() -> Json | None:
            return next((c for c in self.callbacks if c["interaction_id"] == interaction_id), None)

        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: find() is not None)
        callback = find()
        assert callback is not None
        return callback

    async def wait_ready(self, timeout: float = 10) -> None:  # noqa: ASYNC109
        """Until a client has identified or resumed and is still connected."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: self._live is not None)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- gateway ---------------------------------------------------------------------------

    async def drop_connection(self, code: int = 4000) -> None:
        """Close the client's gateway socket from the server side; discord.py resumes."""
        async with self._gateway_lock:
            socket, self._live = self._live, None
        if socket is None:
            raise RuntimeError("no gateway client is connected")
        await socket.close(code=code, message=b"dropped by FakeDiscord")
        await self._notify()

    @contextlib.asynccontextmanager
    async def disconnected(self, code: int = 4000) -> AsyncIterator[None]:
        """Drop the connection and hold the client's RESUME (or IDENTIFY) until the block
        exits; dispatches pushed inside the block are queued."""
        self._reconnect_allowed.clear()
        try:
            await self.drop_connection(code)
            yield
        finally:
            self._reconnect_allowed.set()

    async def dispatch(self, event: str, data: Json) -> int:
        """Push a dispatch (op 0) to the session; returns its sequence number. Without a
        connected client it is queued until the client resumes."""
        async with self._gateway_lock:
            if self._session_id is None:
                raise RuntimeError("no gateway session yet: await wait_ready() first")
            return await self._emit(event, data)

    async def _emit(self, event: str, data: Json) -> int:
        """Send a dispatch (the gateway lock is held)."""
        self._seq += 1
        frame = {"op": 0, "t": event, "s": self._seq, "d": data}
        self._log.append(frame)
        if self._live is None or not await _send(self._live, frame):
            self._live = None
            self._queued.append(frame)
        return self._seq

    async def _handle_gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        try:
            hello = {"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}}
            await _send(socket, hello)
            async for message in socket:  # ends when either side closes the socket
                if message.type is WSMsgType.TEXT:
                    await self._on_gateway_message(socket, json.loads(message.data))
        finally:
            if socket in self._sockets:
                self._sockets.remove(socket)
            async with self._gateway_lock:
                if self._live is socket:
                    self._live = None
                    if socket.close_code in ENDS_SESSION:  # the client said goodbye
                        self._end_session()
            await self._notify()
        return socket

    def forget_session(self) -> None:
        """Discord no longer has the session (it expired): a RESUME of it is refused."""
        self._end_session()

    def _end_session(self) -> None:
        """No RESUME of this session any more (the gateway lock is held)."""
        self.dropped_dispatches.extend(self._queued)
        self._session_id, self._queued = None, []

    async def _on_gateway_message(self, socket: web.WebSocketResponse, message: Json) -> None:
        op, data = message.get("op"), message.get("d") or {}
        if op == 1:  # without the ack, discord.py reconnects after its heartbeat timeout
            await _send(socket, {"op": 11, "d": None})
        elif op == 2:
            self.identify_count += 1
            await self._identify(socket, data)
        elif op == 6:
            await self._resume(socket, data)
        await self._notify()

    async def _identify(self, socket: web.WebSocketResponse, data: Json) -> None:
        if data.get("token") != self.TOKEN:
            await socket.close(code=4004, message=b"Authentication failed.")
            return
        await self._reconnect_allowed.wait()
        async with self._gateway_lock:
            self._end_session()
            self._session_id, self._seq, self._log = uuid.uuid4().hex, 0, []
            self._live = socket
            await self._emit("READY", self._ready_payload())

    async def _resume(self, socket: web.WebSocketResponse, data: Json) -> None:
        if data.get("token") != self.TOKEN:
            await socket.close(code=4004, message=b"Authentication failed.")
            return
        await self._reconnect_allowed.wait()
        async with self._gateway_lock:
            if self._session_id is None or data.get("session_id") != self._session_id:
                await _send(socket, {"op": 9, "d": False})
                return
            self._live = socket
            after = data.get("seq") or 0
            missed = [f for f in self._log if f["s"] > after]
            for frame in missed:
                await _send(socket, frame)
            self.replays.append(len(missed))
            self._queued = []
            self.resume_count += 1
            # discord.py writes into RESUMED's `d`, so it must be an object.
            await self._emit("RESUMED", {})

    def _ready_payload(self) -> Json:
        return {
            "v": 10,
            "user": self._bot_user() | {"verified": True, "mfa_enabled": False},
            "guilds": [],
            "private_channels": [],
            "session_id": self._session_id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": self.APPLICATION_ID, "flags": 0},
        }

    # -- interactions ----------------------------------------------------------------------

    async def click(
        self,
        custom_id: str,
        *,
        message_id: str,
        user_id: str,
        guild: bool = True,
        component_type: int = 2,
        values: list[str] | None = None,
    ) -> str:
        """A user clicks a component (button: 2; selects: 3, 5-8 with `values`) on a stored
        message; returns the interaction id."""
        message = self.messages[message_id]
        payload = self._interaction(3, user_id, message["channel_id"], message_id, guild)
        payload["data"] = {"custom_id": custom_id, "component_type": component_type}
        if values is not None:
            payload["data"]["values"] = values
        await self.dispatch("INTERACTION_CREATE", payload)
        return str(payload["id"])

    async def submit_modal(
        self,
        custom_id: str,
        values: dict[str, str],
        *,
        user_id: str,
        message_id: str | None = None,
        guild: bool = True,
    ) -> str:
        """A user submits a modal of text inputs (`custom_id -> value`); pass the message
        the modal was opened from, if any. Returns the interaction id."""
        channel_id = self.messages[message_id]["channel_id"] if message_id else self.CHANNEL_ID
        payload = self._interaction(5, user_id, channel_id, message_id, guild)
        rows = [
            {"type": 1, "components": [{"type": 4, "custom_id": key, "value": value}]}
            for key, value in values.items()
        ]
        payload["data"] = {"custom_id": custom_id, "components": rows}
        await self.dispatch("INTERACTION_CREATE", payload)
        return str(payload["id"])

    def _interaction(
        self, type_: int, user_id: str, channel_id: str, message_id: str | None, guild: bool
    ) -> Json:
        """An INTERACTION_CREATE payload without `data`; registers the interaction."""
        interaction = _Interaction(
            self._snowflake(), uuid.uuid4().hex, type_, channel_id, message_id
        )
        self._interactions[interaction.id] = interaction
        payload: Json = {
            "id": interaction.id,
            "application_id": self.APPLICATION_ID,
            "type": type_,
            "token": interaction.token,
            "version": 1,
            # interactions.py reads it unconditionally (KeyError without it).
            "attachment_size_limit": 10 * 1024 * 1024,
            "channel": self._channel(channel_id),
            "channel_id": channel_id,
            "locale": "en-US",
            "app_permissions": PERMISSIONS,
            "entitlements": [],
            "authorizing_integration_owners": {},
            "context": 0 if guild else 1,
        }
        if message_id is not None:
            payload["message"] = copy.deepcopy(self.messages[message_id])
        if guild:
            payload |= {"guild_id": self.GUILD_ID, "guild_locale": "en-US"}
            payload["member"] = self._member(user_id)
        else:
            payload["user"] = self.user(user_id)
        return payload

    def _member(self, user_id: str) -> Json:
        return {
            "user": self.user(user_id),
            "roles": [],
            "joined_at": _now(),
            "deaf": False,
            "mute": False,
            "permissions": PERMISSIONS,
            "flags": 0,
            "nick": None,
            "avatar": None,
            "pending": False,
            "premium_since": None,
            "communication_disabled_until": None,
        }

    # -- REST ------------------------------------------------------------------------------

    async def _handle_rest(self, request: web.Request) -> web.Response:
        path = request.path.removeprefix(API_PREFIX)
        body, uploads = await _read_body(request)
        authorized = request.headers.get("Authorization") == f"Bot {self.TOKEN}"
        query = dict(request.query)
        response = await self._respond(request.method, path, authorized, body, query, uploads)
        call = Call(request.method, path, body, authorized, response.status, query)
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()
        return response

    async def _respond(
        self,
        method: str,
        path: str,
        authorized: bool,
        body: Json | None,
        query: dict[str, str],
        uploads: dict[str, tuple[str, int]],
    ) -> web.Response:
        for route in self._routes:
            match = route.pattern.fullmatch(path)
            if route.method != method or match is None:
                continue
            if route.needs_token and not authorized:
                return _error(401, 0, "401: Unauthorized")
            fault = self._take_fault(method, path)
            if fault is not None:
                return _fault_response(fault)
            return await route.handler(_Request(match.groupdict(), body or {}, query, uploads))
        return _error(404, 0, "404: Not Found")

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.count > 0 and fault.method == method and re.fullmatch(fault.path_regex, path):
                fault.count -= 1
                return fault
        return None

    async def _get_me(self, request: _Request) -> web.Response:
        return _json(self._bot_user() | {"verified": True, "mfa_enabled": False})

    async def _get_application(self, request: _Request) -> web.Response:
        # appinfo.py reads id, name, description, icon, bot_public, bot_require_code_grant,
        # owner and verify_key. A non-null interactions_endpoint_url makes discord.py warn
        # that it will receive no interactions.
        return _json(
            {
                "id": self.APPLICATION_ID,
                "name": "Fake Bot",
                "description": "",
                "icon": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": self.user(self.OWNER_ID),
                "team": None,
                "verify_key": "0" * 64,
                "flags": 0,
                "bot": self._bot_user(),
                "interactions_endpoint_url": None,
                "redirect_uris": [],
                "rpc_origins": [],
                "tags": [],
            }
        )

    async def _get_user(self, request: _Request) -> web.Response:
        return _json(self.user(request.params["user_id"]))

    async def _open_dm(self, request: _Request) -> web.Response:
        user_id = str(request.body.get("recipient_id", ""))
        if user_id not in self.dm_channels:
            self.dm_channels[user_id] = {
                "id": self._snowflake(),
                "type": 1,
                "recipients": [self.user(user_id)],
                "last_message_id": None,
                "flags": 0,
            }
        return _json(self.dm_channels[user_id])

    async def _get_channel(self, request: _Request) -> web.Response:
        return _json(self._channel(request.params["channel_id"]))

    async def _post_message(self, request: _Request) -> web.Response:
        channel_id = request.params["channel_id"]
        recipient = self._dm_recipient(channel_id)
        if recipient in self.dm_blocked:
            return _error(403, 50007, "Cannot send messages to this user")
        nonce = request.body.get("nonce") if request.body.get("enforce_nonce") else None
        if nonce is not None and (channel_id, nonce) in self._nonces:
            # Discord answers a repeated nonce with the message it already created.
            return _json(self.messages[self._nonces[channel_id, nonce]])
        message = self._create_message(channel_id, request)
        if nonce is not None:
            self._nonces[channel_id, nonce] = message["id"]
        return _json(message)

    async def _get_message(self, request: _Request) -> web.Response:
        message = self.messages.get(request.params["message_id"])
        if message is None or message["channel_id"] != request.params["channel_id"]:
            return _error(404, 10008, "Unknown Message")
        return _json(message)

    async def _edit_message(self, request: _Request) -> web.Response:
        message = self.messages.get(request.params["message_id"])
        if message is None or message["channel_id"] != request.params["channel_id"]:
            return _error(404, 10008, "Unknown Message")
        return _json(await self._apply_edit(message, request))

    async def _interaction_callback(self, request: _Request) -> web.Response:
        interaction = self._interactions.get(request.params["interaction_id"])
        if interaction is None or interaction.token != request.params["token"]:
            return _error(404, 10062, "Unknown interaction")
        if time.monotonic() - interaction.created > self.answer_within:
            return _error(404, 10062, "Unknown interaction")
        if interaction.response_type is not None:
            return _error(400, 40060, "Interaction has already been acknowledged.")
        type_, data = int(request.body.get("type", 0)), request.body.get("data") or {}
        if type_ in SAME_MESSAGE_CALLBACKS and interaction.message_id is None:
            return _error(400, 50035, "Invalid Form Body: the interaction has no message")
        interaction.response_type = type_
        message: Json | None = None
        if type_ in NEW_MESSAGE_CALLBACKS:
            if type_ == 5:  # the "thinking…" placeholder a later @original edit fills in
                data = {"flags": (data.get("flags") or 0) | LOADING}
            message = self._create_message(interaction.channel_id, _Request({}, data, {}, {}))
            interaction.original_id = message["id"]
        elif type_ in SAME_MESSAGE_CALLBACKS:
            interaction.original_id = interaction.message_id
            assert interaction.message_id is not None
            if type_ == 7:
                edit = _Request({}, data, {}, request.uploads)
                message = await self._apply_edit(self.messages[interaction.message_id], edit)
        async with self._changed:
            self.callbacks.append({"interaction_id": interaction.id, "type": type_, "data": data})
            self._changed.notify_all()
        return _json(self._callback_response(interaction, type_, message))

    def _callback_response(
        self, interaction: _Interaction, type_: int, message: Json | None
    ) -> Json:
        # discord.py sends ?with_response=1 and parses this (Discord answers 204 without it).
        flags = message["flags"] if message else 0
        resource: Json = {"type": type_}
        if message is not None:
            resource["message"] = message
        return {
            "interaction": {
                "id": interaction.id,
                "type": interaction.type,
                "response_message_id": interaction.original_id,
                "response_message_loading": bool(flags & LOADING),
                "response_message_ephemeral": bool(flags & EPHEMERAL),
            },
            "resource": resource,
        }

    async def _post_followup(self, request: _Request) -> web.Response:
        interaction = self._webhook_interaction(request)
        if interaction is None:
            return _error(404, 10015, "Unknown Webhook")
        message = self._create_message(interaction.channel_id, request)
        message["webhook_id"] = message["application_id"] = self.APPLICATION_ID
        if request.query.get("wait", "").lower() not in ("1", "true"):
            return web.Response(status=204)
        return _json(message)

    async def _get_webhook_message(self, request: _Request) -> web.Response:
        message = self._webhook_message(request)
        if message is None:
            return _error(404, 10008, "Unknown Message")
        return _json(message)

    async def _edit_webhook_message(self, request: _Request) -> web.Response:
        message = self._webhook_message(request)
        if message is None:
            return _error(404, 10008, "Unknown Message")
        return _json(await self._apply_edit(message, request))

    def _webhook_interaction(self, request: _Request) -> _Interaction | None:
        if request.params["application_id"] != self.APPLICATION_ID:
            return None
        token = request.params["token"]
        return next((i for i in self._interactions.values() if i.token == token), None)

    def _webhook_message(self, request: _Request) -> Json | None:
        """The message `/webhooks/{app}/{token}/messages/{id|@original}` names."""
        interaction = self._webhook_interaction(request)
        if interaction is None:
            return None
        message_id = request.params["message_id"]
        if message_id == "@original":
            message_id = interaction.original_id or ""
        return self.messages.get(message_id)

    # -- payloads --------------------------------------------------------------------------

    def _snowflake(self) -> str:
        return str(next(self._ids))

    def user(self, user_id: str) -> Json:
        """The made-up but stable user behind an id."""
        if user_id == self.BOT_USER_ID:
            return self._bot_user()
        return {
            "id": user_id,
            "username": f"user{user_id}",
            "global_name": f"User {user_id}",
            "discriminator": "0",
            "avatar": None,
            "bot": False,
            "public_flags": 0,
            "flags": 0,
        }

    def _bot_user(self) -> Json:
        return {
            "id": self.BOT_USER_ID,
            "username": "fake-bot",
            "global_name": None,
            "discriminator": "0",
            "avatar": None,
            "bot": True,
            "public_flags": 0,
            "flags": 0,
        }

    def _dm_recipient(self, channel_id: str) -> str | None:
        return next((u for u, c in self.dm_channels.items() if c["id"] == channel_id), None)

    def _channel(self, channel_id: str) -> Json:
        """A DM channel opened through the API, else a text channel of the guild."""
        recipient = self._dm_recipient(channel_id)
        if recipient is not None:
            return self.dm_channels[recipient]
        return {
            "id": channel_id,
            "type": 0,
            "guild_id": self.GUILD_ID,
            "name": f"channel{channel_id}",
            "position": 0,
            "permissions": PERMISSIONS,
            "flags": 0,
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
        }

    def _create_message(self, channel_id: str, request: _Request) -> Json:
        body = request.body
        message_id = self._snowflake()
        attachments = self._attachments(body.get("attachments"), request.uploads, [])
        message = {
            "id": message_id,
            "channel_id": channel_id,
            "author": self._bot_user(),
            "type": 0,
            "content": body.get("content") or "",
            "embeds": body.get("embeds") or [],
            "components": body.get("components") or [],
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": bool(body.get("tts")),
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": attachments,
            "pinned": False,
            "flags": body.get("flags") or 0,
        }
        self.messages[message_id] = message
        self.allowed_mentions[message_id] = body.get("allowed_mentions")
        return message

    async def _apply_edit(self, message: Json, request: _Request) -> Json:
        body = request.body
        for key, empty in (("content", ""), ("embeds", []), ("components", [])):
            if key in body:
                message[key] = body[key] if body[key] is not None else empty
        # An edit cannot make a message (non-)ephemeral, and it fills in a "thinking…" one.
        if "flags" in body:
            new_flags = (body["flags"] or 0) & ~EPHEMERAL
            message["flags"] = (message["flags"] & EPHEMERAL) | new_flags
        message["flags"] &= ~LOADING
        if "attachments" in body:
            old = message["attachments"]
            message["attachments"] = self._attachments(body["attachments"], request.uploads, old)
        message["edited_timestamp"] = _now()
        async with self._changed:
            self.edits.setdefault(message["id"], []).append(body)
            self._changed.notify_all()
        return message

    def _attachments(
        self,
        entries: list[Json] | None,
        uploads: dict[str, tuple[str, int]],
        existing: list[Json],
    ) -> list[Json]:
        """Attachment objects: `entries` name kept attachments by id, new uploads by the
        index of their multipart `files[n]` part."""
        kept = {attachment["id"]: attachment for attachment in existing}
        result = []
        for entry in entries or []:
            key = str(entry.get("id"))
            if key in kept:
                result.append(kept[key])
            elif key in uploads:
                filename, size = uploads[key]
                attachment_id = self._snowflake()
                url = f"http://127.0.0.1:{self.port}/attachments/{attachment_id}/{filename}"
                result.append(
                    {
                        "id": attachment_id,
                        "filename": filename,
                        "size": size,
                        "url": url,
                        "proxy_url": url,
                    }
                )
        return result


async def _send(socket: web.WebSocketResponse, frame: Json) -> bool:
    """Send one TEXT frame; False if the socket is closing."""
    try:
        await socket.send_str(json.dumps(frame))
    except ConnectionResetError:
        return False
    return True


async def _read_body(request: web.Request) -> tuple[Json | None, dict[str, tuple[str, int]]]:
    """The JSON body (or a multipart's `payload_json`) and the multipart's files by index."""
    if request.content_type.startswith("multipart/"):
        payload: Json | None = None
        uploads: dict[str, tuple[str, int]] = {}
        async for part in await request.multipart():
            assert isinstance(part, BodyPartReader)  # Discord's uploads are flat parts
            data = await part.read()
            name = part.name or ""
            if name == "payload_json":
                payload = json.loads(data)
            elif match := re.fullmatch(r"files\[(\d+)\]", name):
                uploads[match[1]] = (part.filename or "file", len(data))
        return payload, uploads
    raw = await request.read()
    if not raw:
        return None, {}
    try:
        decoded = json.loads(raw)
    except json.JSONDecodeError:
        return {"raw": raw.decode(errors="replace")}, {}
    return (decoded if isinstance(decoded, dict) else {"json": decoded}), {}


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _json(data: Json, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # body=bytes: with text=... aiohttp would append "; charset=utf-8".
    return web.Response(
        body=json.dumps(data).encode(), status=status, content_type=JSON, headers=headers
    )


def _error(status: int, code: int, message: str) -> web.Response:
    return _json({"code": code, "message": message}, status)


def _fault_response(fault: _Fault) -> web.Response:
    if fault.status != 429:
        code = fault.code if fault.code is not None else 0
        return _error(fault.status, code, f"{fault.status}: injected by FakeDiscord")
    body: Json = {"message": "You are being rate limited.", "retry_after": fault.retry_after}
    body["global"] = False
    if fault.code is not None:
        body["code"] = fault.code
    headers = {
        "Retry-After": str(math.ceil(fault.retry_after)),
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset-After": f"{fault.retry_after:.3f}",
        "X-RateLimit-Bucket": "fake-" + re.sub(r"\W", "", fault.path_regex)[:16],
        "X-RateLimit-Scope": "user",
        # discord.py treats a 429 without `Via` as a Cloudflare ban and raises.
        "Via": "1.1 google",
    }
    return _json(body, 429, headers)
