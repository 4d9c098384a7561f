"""A fake Telegram Bot API server on 127.0.0.1 for driving the real python-telegram-bot.

Point `Bot(token, base_url=f"{fake.api_url}/bot")` at it (the gateway's TELEGRAM_API_URL).
Every call to `/bot<token>/<method>` is recorded as a `Call`, the ones it failed on purpose
too. Only `TOKEN` is accepted: any other answers 401 `Unauthorized`, as Telegram does.

What it does as Telegram does:

- `sendMessage`, `editMessageText`, `editMessageReplyMarkup`: the message as Telegram would
  keep it, with the entities Telegram would make: `parse_mode` HTML is parsed (bold, italic,
  code, pre, links; `tg://user?id=N` links become `text_mention`; an unsupported or unclosed
  tag answers 400 "can't parse entities"), and every `@name` left in the text is detected as
  a `mention` entity (stricter than Telegram, which wants 5 characters or more). A message
  over 4,096 characters, callback_data over 64 bytes, and an edit that changes nothing
  ("message is not modified") answer 400. An edit without `reply_markup` removes the
  inline keyboard. `edits_of()` lists the edits that changed a message.
- `getUpdates` long-polls the update queue. An update stays in the queue until a later
  getUpdates confirms it (an `offset` above its id), so what a poller fetched and lost is
  fetched again. A second getUpdates while one is waiting ends the first with 409
  "terminated by other getUpdates request" (`conflicts` counts them); `polls` records
  every poll's client address and span. getUpdates while a webhook is set answers 409.
- `answerCallbackQuery`: once per click, within `answer_within` seconds, else 400.
- `setWebhook`, `deleteWebhook`, `getWebhookInfo`, `getMe`.

Test helpers: `click()` / `reply()` queue a callback query / a reply for getUpdates (and
return the update); `callback_update()` / `reply_update()` only build one (to post to the
gateway's webhook); `fail_next()` makes the next calls of a method fail (429 with
`retry_after` by default); `wait_for()`, `wait_for_answer()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from aiohttp import web

from tests.fakes.server import FakeServer

Json = dict[str, Any]

TEXT_LIMIT = 4096  # UTF-16 code units, after entities are parsed
CALLBACK_DATA_LIMIT = 64  # bytes
ANSWER_WITHIN_SECONDS = 15.0
# Fields python-telegram-bot sends JSON-encoded inside a form body.
JSON_FIELDS = ("reply_markup", "link_preview_options", "reply_parameters", "allowed_updates")
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)
TERMINATED = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)
WEBHOOK_ACTIVE = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to "
    "delete the webhook first"
)
_MENTION = re.compile(r"(?<![A-Za-z0-9_@])@[A-Za-z0-9_]{1,32}")
_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "a": "text_link",
    "span": "spoiler",
}


class ApiError(Exception):
    def __init__(self, status: int, description: str, parameters: Json | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


@dataclass
class Call:
    method: str
    params: Json
    status: int = 200
    description: str | None = None  # why it failed


@dataclass
class Poll:
    peer: str  # the client's address and port
    started: float
    ended: float | None = None
    returned: int = 0  # updates it returned
    conflict: bool = False  # ended by a newer getUpdates


@dataclass
class _Fault:
    method: str
    status: int
    count: int
    retry_after: int


@dataclass
class _Waiting:
    poll: Poll
    superseded: bool = False


@dataclass
class _Query:
    created: float
    answered: bool = False


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class _Html(HTMLParser):
    """Telegram's HTML: the text and its entities, or ApiError for what it refuses."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text = ""
        self.entities: list[Json] = []
        self._open: list[tuple[str, Json]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        kind = _TAGS.get(tag)
        if kind is None:
            raise ApiError(
                400, f'Bad Request: can\'t parse entities: Unsupported start tag "{tag}"'
            )
        entity: Json = {"type": kind, "offset": utf16(self.text)}
        href = dict(attrs).get("href")
        if tag == "a":
            user = re.fullmatch(r"tg://user\?id=(\d+)", href or "")
            if user is not None:
                entity = {"type": "text_mention", "offset": entity["offset"]}
                entity["user"] = {"id": int(user[1]), "is_bot": False, "first_name": "?"}
            else:
                entity["url"] = href or ""
        self._open.append((tag, entity))

    def handle_endtag(self, tag: str) -> None:
        if not self._open or self._open[-1][0] != tag:
            why = f'Unexpected end tag "{tag}"'
            raise ApiError(400, f"Bad Request: can't parse entities: {why}")
        _tag, entity = self._open.pop()
        entity["length"] = utf16(self.text) - entity["offset"]
        if entity["length"]:
            self.entities.append(entity)

    def handle_data(self, data: str) -> None:
        self.text += data

    def parsed(self, markup: str) -> tuple[str, list[Json]]:
        self.feed(markup)
        self.close()
        if self._open:
            raise ApiError(400, "Bad Request: can't parse entities: unclosed start tag")
        return self.text, sorted(self.entities, key=lambda e: e["offset"])


def entities_of(text: str, parse_mode: str | None) -> tuple[str, list[Json]]:
    """The text Telegram shows and its entities: the markup's, then detected mentions."""
    entities: list[Json] = []
    if parse_mode is None:
        shown = text
    elif parse_mode.upper() == "HTML":
        shown, entities = _Html().parsed(text)
    else:
        raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode} in this fake")
    code = [
        (e["offset"], e["offset"] + e["length"]) for e in entities if e["type"] in ("code", "pre")
    ]
    for found in _MENTION.finditer(shown):
        offset = utf16(shown[: found.start()])
        if not any(start <= offset < end for start, end in code):
            entities.append({"type": "mention", "offset": offset, "length": utf16(found[0])})
    return shown, sorted(entities, key=lambda e: e["offset"])


class FakeTelegram(FakeServer):
    TOKEN = "123456789:fake-telegram-token_AAA"
    BOT_ID = 123456789
    BOT_USERNAME = "gw_test_bot"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []
        self.messages: dict[tuple[int, int], Json] = {}
        self.edits: dict[tuple[int, int], list[Json]] = {}
        self.callback_answers: dict[str, Json] = {}
        self.users: dict[int, Json] = {}
        self.webhook: Json | None = None
        self.polls: list[Poll] = []
        self.conflicts = 0
        self.answer_within = ANSWER_WITHIN_SECONDS
        self._queue: list[Json] = []  # updates not yet confirmed
        self._update_ids = itertools.count(10_000)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._query_ids = itertools.count(900_000)
        self._queries: dict[str, _Query] = {}
        self._waiting: list[_Waiting] = []
        self._faults: list[_Fault] = []
        self._accept_then_fail: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------------------

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        self._stopping = False

    def release(self) -> None:
        self._stopping = True  # waiting polls return at once

    async def stop(self) -> None:
        async with self._changed:
            self.release()
            self._changed.notify_all()
        await super().stop()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- people and chats ------------------------------------------------------------------

    def user(self, user_id: int, first_name: str, username: str | None = None) -> Json:
        """A person the fake knows (their private chat's name comes from here)."""
        user: Json = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            user["username"] = username
        self.users[user_id] = user
        return user

    def chat(self, chat_id: int) -> Json:
        if chat_id > 0:
            person = self.users.get(chat_id, {"first_name": f"User {chat_id}"})
            return {"id": chat_id, "type": "private", "first_name": person["first_name"]}
        return {"id": chat_id, "type": "supergroup", "title": f"Group {chat_id}"}

    def bot_user(self) -> Json:
        return {
            "id": self.BOT_ID,
            "is_bot": True,
            "first_name": "Gateway",
            "username": self.BOT_USERNAME,
        }

    # -- assertions ------------------------------------------------------------------------

    def calls_to(self, method: str, *, ok_only: bool = False) -> list[Call]:
        return [c for c in self.calls if c.method == method and (c.status == 200 or not ok_only)]

    async def wait_for(
        self, method: str, count: int = 1, within: float = 10, *, ok_only: bool = True
    ) -> list[Call]:
        """Until `count` calls to `method` are recorded (TimeoutError otherwise)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(
                lambda: len(self.calls_to(method, ok_only=ok_only)) >= count
            )
        return self.calls_to(method, ok_only=ok_only)

    def messages_in(self, chat_id: int) -> list[Json]:
        """The messages the bot sent to a chat, oldest first."""
        return [
            m
            for (chat, _id), m in sorted(self.messages.items())
            if chat == chat_id and m["from"]["id"] == self.BOT_ID
        ]

    def edits_of(self, message: Json) -> list[Json]:
        return list(self.edits.get((message["chat"]["id"], message["message_id"]), []))

    def current(self, message: Json) -> Json:
        """The message as it reads now (after any edits)."""
        return self.messages[(message["chat"]["id"], message["message_id"])]

    async def wait_for_answer(self, query_id: str, within: float = 10) -> Json:
        """The bot's answerCallbackQuery for a click (TimeoutError otherwise)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: query_id in self.callback_answers)
        return self.callback_answers[query_id]

    def pending_updates(self) -> int:
        return len(self._queue)

    # -- what people do --------------------------------------------------------------------

    def callback_update(self, message: Json, data: str, user: Json) -> Json:
        """A click on `message` with this callback_data, as Telegram would send it."""
        query_id = str(next(self._query_ids))
        self._queries[query_id] = _Query(time.monotonic())
        query = {
            "id": query_id,
            "from": user,
            "message": self.current(message),
            "chat_instance": f"ci{message['chat']['id']}",
            "data": data,
        }
        return {"update_id": next(self._update_ids), "callback_query": query}

    def reply_update(self, message: Json, text: str, user: Json) -> Json:
        """`user` replying `text` to `message` in its chat (kept as Telegram keeps it)."""
        chat_id = message["chat"]["id"]
        replied_to = {k: v for k, v in self.current(message).items() if k != "reply_to_message"}
        said = self._store(chat_id, {"from": user, "text": text, "reply_to_message": replied_to})
        return {"update_id": next(self._update_ids), "message": said}

    async def push(self, update: Json, *more: Json) -> Json:
        """Queue updates for getUpdates, at once (one poll returns them together)."""
        async with self._changed:
            self._queue.extend((update, *more))
            self._changed.notify_all()
        return update

    async def click(self, message: Json, data: str, user: Json) -> str:
        """Queue a click; returns the callback query's id."""
        update = await self.push(self.callback_update(message, data, user))
        return str(update["callback_query"]["id"])

    async def reply(self, message: Json, text: str, user: Json) -> Json:
        """Queue a reply; returns the person's message."""
        update = await self.push(self.reply_update(message, text, user))
        return dict(update["message"])

    def fail_next(
        self, method: str, *, status: int = 429, count: int = 1, retry_after: int = 1
    ) -> None:
        """The next `count` calls of `method` fail (429: with `retry_after` seconds)."""
        self._faults.append(_Fault(method, status, count, retry_after))

    # -- HTTP ------------------------------------------------------------------------------

    async def _record(self, call: Call) -> None:
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _read_params(request)
        try:
            if request.match_info["token"] != self.TOKEN:
                raise ApiError(401, "Unauthorized")
            handler = getattr(self, f"_{_snake(method)}", None)
            if handler is None:
                raise ApiError(404, "Not Found")
            self._fault(method)
            if method == "getUpdates":
                result = await self._get_updates(params, _peer(request))
            else:
                async with self._changed:
                    result = handler(params)
                    self._changed.notify_all()
                self._lost(method)
        except ApiError as error:
            await self._record(Call(method, params, error.status, error.description))
            body: Json = {
                "ok": False,
                "error_code": error.status,
                "description": error.description,
            }
            if error.parameters:
                body["parameters"] = error.parameters
            return web.json_response(body, status=error.status)
        await self._record(Call(method, params))
        return web.json_response({"ok": True, "result": result})

    def fail_after_accepting(self, method: str, times: int = 1) -> None:
        """The next `times` calls of `method` take effect, then answer 500 (a lost answer)."""
        self._accept_then_fail[method] = times

    def _lost(self, method: str) -> None:
        if self._accept_then_fail.get(method):
            self._accept_then_fail[method] -= 1
            raise ApiError(500, "Internal Server Error")

    def _fault(self, method: str) -> None:
        fault = next((f for f in self._faults if f.method == method and f.count > 0), None)
        if fault is None:
            return
        fault.count -= 1
        if fault.status == 429:
            raise ApiError(
                429,
                f"Too Many Requests: retry after {fault.retry_after}",
                {"retry_after": fault.retry_after},
            )
        raise ApiError(fault.status, "Internal Server Error")

    # -- methods ---------------------------------------------------------------------------

    def _get_me(self, params: Json) -> Json:
        return self.bot_user() | {"can_join_groups": True, "supports_inline_queries": False}

    def _store(self, chat_id: int, fields: Json) -> Json:
        ids = self._message_ids.setdefault(chat_id, itertools.count(1))
        message_id = next(ids)
        message = {"message_id": message_id, "date": int(time.time()), "chat": self.chat(chat_id)}
        message |= fields
        self.messages[(chat_id, message_id)] = message
        return message

    def _content(self, params: Json) -> Json:
        """The text, entities and keyboard a send or an edit asks for, as Telegram keeps them."""
        text = str(params.get("text") or "")
        shown, entities = entities_of(text, params.get("parse_mode"))
        if not shown.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16(shown) > TEXT_LIMIT:
            raise ApiError(400, "Bad Request: message is too long")
        content: Json = {"text": shown}
        if entities:
            content["entities"] = entities
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            _check_keyboard(markup)
            content["reply_markup"] = markup
        return content

    def _send_message(self, params: Json) -> Json:
        chat_id = _int(params.get("chat_id"))
        content = self._content(params) | {"from": self.bot_user()}
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and markup.get("force_reply"):
            content["force_reply"] = markup  # not shown in a Message; kept for tests
        reply = params.get("reply_parameters")
        if isinstance(reply, dict):
            replied = self.messages.get((chat_id, _int(reply.get("message_id"))))
            if replied is not None:
                content["reply_to_message"] = {
                    k: v for k, v in replied.items() if k != "reply_to_message"
                }
            elif not reply.get("allow_sending_without_reply"):
                raise ApiError(400, "Bad Request: message to be replied not found")
        return self._store(chat_id, content)

    def _edited(self, params: Json, content: Json) -> Json:
        key = (_int(params.get("chat_id")), _int(params.get("message_id")))
        message = self.messages.get(key)
        if message is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        before = {k: message.get(k) for k in ("text", "entities", "reply_markup")}
        after = {k: content.get(k) for k in ("text", "entities", "reply_markup")}
        if before == after:
            raise ApiError(400, NOT_MODIFIED)
        kept = {k: v for k, v in message.items() if k not in ("text", "entities", "reply_markup")}
        edited = kept | {k: v for k, v in after.items() if v is not None}
        edited["edit_date"] = int(time.time())
        self.messages[key] = edited
        self.edits.setdefault(key, []).append(edited)
        return edited

    def _edit_message_text(self, params: Json) -> Json:
        return self._edited(params, self._content(params))

    def _edit_message_reply_markup(self, params: Json) -> Json:
        key = (_int(params.get("chat_id")), _int(params.get("message_id")))
        message = self.messages.get(key, {})
        content = {k: message.get(k) for k in ("text", "entities")}
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            _check_keyboard(markup)
            content["reply_markup"] = markup
        return self._edited(params, content)

    def _answer_callback_query(self, params: Json) -> bool:
        query_id = str(params.get("callback_query_id"))
        query = self._queries.get(query_id)
        too_old = query is None or time.monotonic() - query.created > self.answer_within
        if query is None or query.answered or too_old:
            raise ApiError(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        if len(str(params.get("text") or "")) > 200:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        query.answered = True
        self.callback_answers[query_id] = params
        return True

    def _set_webhook(self, params: Json) -> bool:
        self.webhook = {
            "url": str(params.get("url") or ""),
            "secret_token": params.get("secret_token"),
            "allowed_updates": params.get("allowed_updates"),
        }
        return True

    def _delete_webhook(self, params: Json) -> bool:
        self.webhook = None
        if params.get("drop_pending_updates") is True:
            self._queue.clear()
        return True

    def _get_webhook_info(self, params: Json) -> Json:
        url = self.webhook["url"] if self.webhook else ""
        return {"url": url, "has_custom_certificate": False, "pending_update_count": 0}

    async def _get_updates(self, params: Json, peer: str) -> list[Json]:
        if self.webhook is not None:
            raise ApiError(409, WEBHOOK_ACTIVE)
        offset = params.get("offset")
        limit = _int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        waiting = _Waiting(Poll(peer, time.monotonic()))
        self.polls.append(waiting.poll)
        async with self._changed:
            if offset is not None:  # confirms every update before it
                self._queue = [u for u in self._queue if u["update_id"] >= _int(offset)]
            for other in self._waiting:
                other.superseded = True
                self.conflicts += 1
            self._waiting.append(waiting)
            self._changed.notify_all()
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._changed.wait_for(
                            lambda: bool(self._queue) or waiting.superseded or self._stopping
                        )
            finally:
                self._waiting.remove(waiting)
                waiting.poll.ended = time.monotonic()
            if waiting.superseded:
                waiting.poll.conflict = True
                raise ApiError(409, TERMINATED)
            updates = [u for u in self._queue if offset is None or u["update_id"] >= _int(offset)]
            waiting.poll.returned = len(updates[:limit])
            return updates[:limit]


def _check_keyboard(markup: Json) -> None:
    for row in markup.get("inline_keyboard") or []:
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= CALLBACK_DATA_LIMIT:
                raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
            if not button.get("text"):
                raise ApiError(
                    400, "Bad Request: text buttons are unallowed in the inline keyboard"
                )


def _snake(method: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", method).lower()


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"Bad Request: invalid number {value!r}") from None


def _peer(request: web.Request) -> str:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return f"{peer[0]}:{peer[1]}" if peer else "?"


async def _read_params(request: web.Request) -> Json:
    """Query string, then the JSON or form body, as one dict (JSON fields decoded)."""
    params: Json = dict(request.query)
    if request.content_type == "application/json":
        body = await request.read()
        if body:
            decoded = json.loads(body)
            if isinstance(decoded, dict):
                params.update(decoded)
    elif request.method == "POST":
        form = await request.post()
        params.update({key: value for key, value in form.items() if isinstance(value, str)})
        params.update({k: v == "true" for k, v in params.items() if v in ("true", "false")})
    for key in JSON_FIELDS:
        value = params.get(key)
        if isinstance(value, str):
            with contextlib.suppress(json.JSONDecodeError):
                params[key] = json.loads(value)
    return params
