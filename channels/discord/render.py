"""Requests as Discord messages: an embed, button specs and the "Approve and allow…" select,
pure functions, no network.

Buttons and the select carry their request in the custom id (`gw:<verb>:<rid>`, at most 100
characters), so a click on a message sent before a restart still lands (read in
`on_interaction`). Agent text is escaped for markdown; mentions are also switched off when
sending (`allowed_mentions` none), so `@everyone` in a kwarg pings nobody. Embed limits
(discord.com/developers/docs/resources/message#embed-object-embed-limits) are kept by
truncating with a link to the request, never by dropping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import discord

from gateway.lifecycle import Kind, Status
from gateway.seam import (
    CUT,
    RequestView,
    Responder,
    Verb,
    describe,
    encode,
    origin_line,
    plain_who,
    reminder_text,
    shorten,
)
from gateway.seam.edits import MAX_FIELDS as MAX_MODAL_INPUTS
from gateway.seam.edits import fits_form
from gateway.vocabulary import AnsweredIn

TITLE_LIMIT = 256
FIELD_NAME_LIMIT = 256
FIELD_VALUE_LIMIT = 1024
DESCRIPTION_LIMIT = 4096
MAX_FIELDS = 25
EMBED_TOTAL_LIMIT = 6000
MAX_BUTTONS = 25  # five rows of five
ROW_WIDTH = 5  # buttons in an action row; a select fills a row alone
MAX_SELECT_OPTIONS = 25
SELECT_TEXT_LIMIT = 100  # an option's label and value
CONTENT_LIMIT = 2000
MAX_MENTIONED_USERS = 100  # allowed_mentions.users holds at most 100 ids
PENDING, APPROVED, REJECTED = 0x5865F2, 0x57F287, 0xED4245

Style = Literal["success", "danger", "secondary", "primary"]


@dataclass(frozen=True)
class ButtonSpec:
    label: str
    style: Style
    custom_id: str


@dataclass(frozen=True)
class SelectSpec:
    """A string select of its own row: (label, value) options, one to choose."""

    placeholder: str
    custom_id: str
    options: tuple[tuple[str, str], ...]


def escape(text: str) -> str:
    """Markdown, mentions and masked links render literally (escape_markdown escapes the
    `[` that opens a `[text](url)` link)."""
    return discord.utils.escape_markdown(discord.utils.escape_mentions(text))


def fit(text: str, link: str | None, limit: int) -> str:
    """`text` (already escaped) within `limit`, pointing at the full request if cut."""
    return shorten(text, limit, more=f"… [see the full request]({link})" if link else CUT)


def _value(value: Any, link: str | None) -> str:
    if isinstance(value, str) and "\n" not in value and len(value) <= 200:
        text = escape(value)
    else:
        rendered = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
        text = "```\n" + rendered.replace("```", "`\u200b``") + "\n```"
    return fit(text or "\u200b", link, FIELD_VALUE_LIMIT)


def _fields(
    embed: discord.Embed, kwargs: dict[str, Any], link: str | None, *, reserve: int = 0
) -> None:
    """One field per kwarg within Discord's limits; what does not fit is pointed to."""
    budget = EMBED_TOTAL_LIMIT - len(embed) - reserve - 120  # room for the "more" field
    items = list(kwargs.items())
    for index, (name, value) in enumerate(items):
        title = fit(escape(name), link, FIELD_NAME_LIMIT)
        room = min(FIELD_VALUE_LIMIT, budget - len(title))
        last_slot = len(embed.fields) == MAX_FIELDS - 1 and index < len(items) - 1
        if room < 80 or last_slot:
            more = f"{len(items) - index} more arguments"
            embed.add_field(name="…", value=f"[{more}]({link})" if link else more, inline=False)
            return
        text = _value(value, link)
        text = text if len(text) <= room else fit(text, link, room)
        embed.add_field(name=title, value=text, inline=False)
        budget -= len(title) + len(text)


def _base(request: RequestView, title: str) -> discord.Embed:
    embed = discord.Embed(
        title=fit(title, None, TITLE_LIMIT),
        url=request.link,
        colour=PENDING,
        timestamp=request.requested_at,
    )
    embed.set_footer(text=f"call {request.call_id}"[:2048])
    origin = origin_line(request)
    if origin is not None:  # a field: a footer would show escape()'s backslashes as typed
        value = fit(escape(origin), request.link, FIELD_VALUE_LIMIT)
        embed.add_field(name="Origin", value=value, inline=False)
    return embed


def _option_buttons(request: RequestView, key: str, style: Style) -> list[ButtonSpec]:
    options = request.spec.get(key) or []
    return [
        ButtonSpec(
            (option.get("title") or option["name"])[:80],
            style,
            encode(Verb.OPTION, request.rid, index),
        )
        for index, option in enumerate(options)
    ]


def approval(request: RequestView) -> tuple[discord.Embed, list[ButtonSpec]]:
    run_id, fn = escape(request.run_id), escape(str(request.spec.get("fn", "")))
    embed = _base(request, f"Agent {run_id} wants to call {fn}")
    _fields(embed, request.spec.get("kwargs") or {}, request.link)
    buttons = [
        ButtonSpec("Approve", "success", encode(Verb.APPROVE, request.rid)),
        *_edit_button(request),
        ButtonSpec("Reject", "danger", encode(Verb.REJECT, request.rid)),
        *_option_buttons(request, "reject_options", "danger"),
    ]
    room = MAX_BUTTONS - (ROW_WIDTH if grant_menu(request) else 0)  # the select's row
    return embed, buttons[:room]


def editable(request: RequestView) -> bool:
    """Whether "Edit and approve" is offered here: a modal of one input per argument (one at
    least, five at most), each within an input's length."""
    kwargs = request.spec.get("kwargs") or {}
    fits = isinstance(kwargs, dict) and bool(kwargs) and fits_form(kwargs, MAX_MODAL_INPUTS)
    return request.editable and fits


def _edit_button(request: RequestView) -> list[ButtonSpec]:
    if not editable(request):
        return []
    return [ButtonSpec("Edit and approve", "primary", encode(Verb.EDIT, request.rid))]


def grant_menu(request: RequestView) -> SelectSpec | None:
    """ "Approve and allow…": one option per grant the request offers, within Discord's caps
    (a value cut short would name no grant, so a long one is left out)."""
    options = [
        (choice.label[:SELECT_TEXT_LIMIT], choice.value)
        for choice in request.grant_choices
        if len(choice.value) <= SELECT_TEXT_LIMIT
    ][:MAX_SELECT_OPTIONS]
    if not options:
        return None
    return SelectSpec("Approve and allow…", encode(Verb.GRANT, request.rid), tuple(options))


def question(request: RequestView) -> tuple[discord.Embed, list[ButtonSpec]]:
    embed = _base(request, f"Agent {escape(request.run_id)} asks")
    msg = escape(str(request.spec.get("msg", "")))
    embed.description = fit(msg, request.link, DESCRIPTION_LIMIT)
    buttons = [
        ButtonSpec("Answer", "primary", encode(Verb.ANSWER, request.rid)),
        *_option_buttons(request, "response_options", "secondary"),
    ]
    return embed, buttons[:MAX_BUTTONS]


def who(responder: Responder) -> str:
    """A Discord user as a mention (shown as a name; allowed_mentions none pings nobody)."""
    if responder.via == AnsweredIn.DISCORD and responder.id.isdigit():
        return f"<@{responder.id}>"
    return escape(plain_who(responder))


_EMOJI = {Status.APPROVED: "✅", Status.REJECTED: "❌", Status.RESPONDED: "💬"}


def outcome(request: RequestView) -> str:
    """The core's outcome sentence, with Discord's mentions and timestamps and an emoji."""
    sentence = describe(request, who=who, when=_when, text=escape)
    return f"{_EMOJI.get(request.status, '⌛')} {sentence}"


def _when(moment: datetime) -> str:
    return f"<t:{int(moment.timestamp())}:f>"


def decided(request: RequestView) -> discord.Embed:
    """The message after a decision: an Outcome field, a new colour, no buttons."""
    embed = _with_field(request, "Outcome", outcome(request))
    embed.colour = {Status.APPROVED: APPROVED, Status.REJECTED: REJECTED}.get(
        request.status, PENDING
    )
    return embed


def in_progress(request: RequestView) -> tuple[discord.Embed, list[ButtonSpec]]:
    """A request some approvers approved and others still may: the posted embed and buttons,
    plus a Progress field ("1 of 2 approvals: …")."""
    embed, buttons = (approval if request.kind == Kind.FUNCTION_CALL else question)(request)
    if request.progress is None:  # nothing counted yet: the post as sent
        return embed, buttons
    return _with_field(request, "Progress", outcome(request)), buttons


def _with_field(request: RequestView, name: str, line: str) -> discord.Embed:
    """The request's embed with one last field, kwargs cut to leave it room."""
    title = (
        f"Agent {escape(request.run_id)} wants to call {escape(str(request.spec.get('fn', '')))}"
        if request.kind == Kind.FUNCTION_CALL
        else f"Agent {escape(request.run_id)} asks"
    )
    embed = _base(request, title)
    if request.kind == Kind.HUMAN_CONTACT:
        msg = escape(str(request.spec.get("msg", "")))
        embed.description = fit(msg, request.link, DESCRIPTION_LIMIT - len(line) - 40)
    else:
        reserve = len(line) + 20
        _fields(embed, request.spec.get("kwargs") or {}, request.link, reserve=reserve)
        if len(embed.fields) == MAX_FIELDS:
            embed.remove_field(MAX_FIELDS - 1)
    embed.add_field(name=name, value=fit(line, request.link, FIELD_VALUE_LIMIT), inline=False)
    return embed


def reminder(request: RequestView, mention: list[str]) -> tuple[str, discord.AllowedMentions]:
    """A reminder's content and the only people it may ping: `mention`, as many as fit."""
    text = escape(reminder_text(request))
    users = [user_id for user_id in mention if user_id.isdigit()][:MAX_MENTIONED_USERS]
    while users and len(text) + sum(len(f"<@{u}> ") for u in users) > CONTENT_LIMIT:
        users.pop()
    mentions = discord.AllowedMentions.none()
    mentions.users = [discord.Object(int(user_id)) for user_id in users]
    return "".join(f"<@{u}> " for u in users) + text, mentions


def button_view(buttons: list[ButtonSpec], menu: SelectSpec | None = None) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for spec in buttons:
        style = getattr(discord.ButtonStyle, spec.style)
        view.add_item(discord.ui.Button(label=spec.label, style=style, custom_id=spec.custom_id))
    if menu is not None:  # after the buttons: the first row left free
        options = [discord.SelectOption(label=label, value=value) for label, value in menu.options]
        view.add_item(
            discord.ui.Select(
                custom_id=menu.custom_id, placeholder=menu.placeholder, options=options
            )
        )
    # Finished, so discord.py does not store it: clicks go to on_interaction alone.
    view.stop()
    return view


def as_it_stands(request: RequestView) -> tuple[discord.Embed, discord.ui.View | None]:
    """The post as the request now stands: its buttons while pending (approved by some,
    under a policy), the outcome without them once decided."""
    if request.status == Status.PENDING:
        embed, buttons = in_progress(request)
        return embed, button_view(buttons, grant_menu(request))
    return decided(request), None
