"""Requests as Telegram messages: HTML text and inline buttons, pure functions, no network.

Agent text is data: it is HTML-escaped (parse_mode HTML), so `<b>` or `<a href="tg://user?
id=1">` shows as typed, and a word joiner follows each `@`, so `@channel_admins` or `@all`
is no mention Telegram detects and nobody is notified. Messages stay within Telegram's 4,096
characters, arguments cut with a link to the request, never dropped.

Buttons carry the seam's ids (`gw:approve:<rid>`); the channel signs them into each button's
callback_data when it sends (`channels.telegram.callbacks`).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from gateway.lifecycle import Kind, Status
from gateway.seam import (
    RequestView,
    Verb,
    describe,
    encode,
    origin_line,
    reminder_text,
    shorten,
)

MESSAGE_LIMIT = 4000  # of Telegram's 4,096 characters (after entities are parsed), with room
LABEL_LIMIT = 64  # a button's text: longer ones are cut on phones anyway
SHORT_VALUE = 200  # a one-line string argument up to this long is shown inline
ARGUMENT_LIMIT = 1000  # what one argument may take of the message
NAME_LIMIT = 100
MORE_ROOM = 120  # kept for the "…and N more arguments" line
MAX_MENTIONS = 50
JOINER = "\u2060"  # WORD JOINER: invisible, and ends the @name Telegram would detect
_TAG = re.compile(r"<[^>]*>")
_EMOJI = {Status.APPROVED: "✅", Status.REJECTED: "❌", Status.RESPONDED: "💬"}


@dataclass(frozen=True)
class Button:
    label: str
    id: str  # the seam's button id, signed into callback_data when sent


@dataclass(frozen=True)
class Post:
    text: str  # HTML (parse_mode HTML)
    rows: tuple[tuple[Button, ...], ...] = ()  # the inline keyboard; none: no keyboard


def escape(text: str) -> str:
    """Text as HTML that shows as typed and mentions nobody."""
    return html.escape(text, quote=False).replace("@", "@" + JOINER)


def shown(markup: str) -> int:
    """How long Telegram counts the text of `markup` (UTF-16 code units, tags removed)."""
    return len(html.unescape(_TAG.sub("", markup)).encode("utf-16-le")) // 2


def _fit(raw: str, room: int) -> str:
    """`raw` escaped, cut with "…" so that what Telegram shows of it fits in `room`."""
    limit, text = len(raw), raw
    while (size := shown(escape(text))) > room and limit > 1:
        limit = max(min(limit - 1, limit * room // size), 1)  # escaping may grow it: scale
        text = shorten(raw, limit)
    return escape(text)


def _link(link: str | None, words: str) -> str:
    return f'<a href="{html.escape(link, quote=True)}">{words}</a>' if link else words


def _argument(name: str, value: Any, room: int) -> str:
    title = f"<b>{_fit(name, NAME_LIMIT)}</b>"
    if isinstance(value, str) and "\n" not in value and len(value) <= SHORT_VALUE:
        return f"{title}: {_fit(value, room - shown(title) - 2)}"
    rendered = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    return f"{title}:\n<pre>{_fit(rendered, room - shown(title) - 2)}</pre>"


def _arguments(kwargs: dict[str, Any], link: str | None, budget: int) -> list[str]:
    """One block per argument while they fit; then a line that points at the rest."""
    blocks: list[str] = []
    items = list(kwargs.items())
    for index, (name, value) in enumerate(items):
        room = min(ARGUMENT_LIMIT, budget - MORE_ROOM)
        if room < 80:
            more = f"…and {len(items) - index} more arguments"
            blocks.append(_link(link, more + ": see the full request") if link else more)
            break
        block = _argument(name, value, room)
        blocks.append(block)
        budget -= shown(block) + 1
    return blocks


def _headline(request: RequestView) -> str:
    run_id = _fit(request.run_id, 200)
    if request.kind == Kind.FUNCTION_CALL:
        fn = _fit(str(request.spec.get("fn", "")), 200)
        return f"🤖 <b>Agent {run_id} wants to call {fn}</b>"
    return f"❓ <b>Agent {run_id} asks:</b>"


def _text(request: RequestView, last: list[str]) -> str:
    """The message: headline, origin, the call or question, footer, then `last` lines."""
    top = [_headline(request)]
    origin = origin_line(request)
    if origin is not None:  # the agent's client names itself: escaped like the rest
        top.append(f"<i>{_fit(origin, 500)}</i>")
    footer = [f"call <code>{_fit(request.call_id, 300)}</code>"]
    if request.link:
        footer.append(_link(request.link, "Open the request"))
    budget = MESSAGE_LIMIT - sum(shown(line) + 2 for line in (*top, *footer, *last))
    if request.kind == Kind.FUNCTION_CALL:
        body = _arguments(request.spec.get("kwargs") or {}, request.link, budget)
    else:
        body = [_fit(str(request.spec.get("msg", "")), budget - MORE_ROOM)]
    sections = ["\n".join(top), "\n".join(body), "\n".join(footer), *last]
    return "\n\n".join(section for section in sections if section)


def _hint(request: RequestView) -> str:
    if request.kind == Kind.FUNCTION_CALL:
        return "<i>Reply to this message to approve or reject it in words.</i>"
    return "<i>Reply to this message to answer.</i>"


def _option_rows(request: RequestView) -> list[tuple[Button, ...]]:
    return [
        (Button(str(option.get("title") or option["name"])[:LABEL_LIMIT], _option(request, i)),)
        for i, option in enumerate(request.options)
    ]


def _option(request: RequestView, index: int) -> str:
    return encode(Verb.OPTION, request.rid, index)


def posted(request: RequestView) -> Post:
    """The message `send` posts: an approval's buttons, or a question's options."""
    rows = _option_rows(request)
    if request.kind == Kind.FUNCTION_CALL:
        decide = (
            Button("✅ Approve", encode(Verb.APPROVE, request.rid)),
            Button("❌ Reject…", encode(Verb.REJECT, request.rid)),
        )
        rows = [decide, *rows]
    return Post(_text(request, [_hint(request)]), tuple(rows))


def outcome(request: RequestView) -> str:
    """The core's sentence (outcome or progress), escaped, with an emoji."""
    sentence = describe(request)
    return f"{_EMOJI.get(request.status, '⏳')} {_fit(sentence, 1000)}"


def as_it_stands(request: RequestView) -> Post:
    """The post as the request now stands: its buttons and a progress line while pending
    under a policy; the outcome without buttons once decided."""
    if request.status == Status.PENDING:
        if request.progress is None:  # nothing counted yet: the post as sent
            return posted(request)
        return Post(_text(request, [outcome(request), _hint(request)]), posted(request).rows)
    return Post(_text(request, [f"<b>{outcome(request)}</b>"]))


def prompt(user_id: int, name: str, question: str) -> str:
    """What a ForceReply prompt says: the person who clicked, by a mention (the one ping
    meant: their phone opens the reply), then what to write."""
    return f'<a href="tg://user?id={user_id}">{_fit(name, 100)}</a>, {_fit(question, 500)}'


def reminder(request: RequestView, mention: list[str]) -> str:
    """The people still awaited (numeric Telegram ids only), then the core's reminder."""
    people = [m for m in mention if m.isdigit()][:MAX_MENTIONS]
    links = " ".join(f'<a href="tg://user?id={m}">{m}</a>' for m in people)
    line = _fit(reminder_text(request), 1000)
    return f"{links} {line}" if links else line


def keyboard(post: Post, sign: Callable[[str], str]) -> InlineKeyboardMarkup | None:
    """The inline keyboard, each button's id signed into its callback_data (None: none)."""
    if not post.rows:
        return None
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(button.label, callback_data=sign(button.id)) for button in row]
            for row in post.rows
        ]
    )
