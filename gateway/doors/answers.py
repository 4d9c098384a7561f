"""One answer path for every channel. A channel turns a platform event into one `answer(...)`
and renders what comes back; who answered, what they may do, the request's options, the
refusals and the outcome sentence exist here once."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.answers.decisions import allowed_responders, submit
from gateway.answers.verbs import Refusal, Refused, decision_for, option, options
from gateway.core import Core
from gateway.errors import Conflict, NotAllowed
from gateway.lifecycle import Kind, Status
from gateway.seam.callbacks import Verb
from gateway.seam.people import (
    Responder,
    already_decided,
    plain_when,
    plain_who,
)
from gateway.seam.replies import Reading
from gateway.seam.views import Progress, RequestView
from gateway.store import requests as request_store
from gateway.store.rows import Request
from gateway.vocabulary import AnsweredIn, ChannelName

__all__ = [
    "Answered",
    "Form",
    "Refusal",
    "Refused",
    "answer",
    "answerable",
    "describe",
    "option",
    "option_form",
    "options",
    "origin_line",
    "progress_line",
    "reminder_text",
]


@dataclass(frozen=True)
class Answered:
    request: RequestView  # as the answer left it
    reading: Reading | None = None  # how a free-text reply was read


# --- the outcome sentence


def describe(
    request: RequestView,
    *,
    who: Callable[[Responder], str] = plain_who,
    when: Callable[[datetime], str] = plain_when,
    text: Callable[[str], str] = str,
) -> str:
    """ "Approved by Alice in Slack at …", "Rejected by …: reason", "Answered by …: text",
    "1 of 2 approvals: Alice (Slack)", "Expired at …: No decision within 2h; expired".
    Channels pass `who` and `when` to show people and times their own way, and `text` to
    escape what people and agents wrote for their markup."""
    responder = Responder.of(request.user_info)
    by = who(responder) if responder else "someone"
    at = f" at {when(request.responded_at)}" if request.responded_at else ""
    if request.status == Status.PENDING and request.progress is not None:
        return progress_line(request.progress, text=text)
    if responder is not None and responder.via == AnsweredIn.GATEWAY:
        return f"Expired{at}: {text(request.comment or request.response or 'no decision in time')}"
    if request.status == Status.APPROVED:
        return f"Approved by {by}{at}"
    if request.status == Status.REJECTED:
        return f"Rejected by {by}{at}: {text(request.comment or '')}"
    if request.status == Status.RESPONDED:
        return f"Answered by {by}{at}: {text(request.response or '')}"
    return f"This request is {text(request.status)}; it can no longer be answered"


def progress_line(progress: Progress, *, text: Callable[[str], str] = str) -> str:
    """ "1 of 2 approvals: Alice (Slack), Bob (the web console)"."""
    people = [Responder.of(info) for info in progress.approvers]
    named = ", ".join(text(f"{p.name} ({p.place})") for p in people if p is not None)
    line = f"{progress.approvals} of {progress.needed} approvals"
    return f"{line}: {named}" if named else line


_ORIGINS = {"mcp": "an MCP client", "claude-code-hook": "a Claude Code hook"}


def origin_line(request: RequestView | Mapping[str, Any]) -> str | None:
    """ "Requested through an MCP client: claude-code 1.0.3, tool request_approval"; None for
    a request made through the HTTP API. Takes a view or its spec. Channels escape it: the
    client names itself."""
    spec = request.spec if isinstance(request, RequestView) else request
    origin = spec.get("origin")
    if not origin:
        return None
    line = f"Requested through {_ORIGINS.get(origin.get('via'), 'an agent tool')}"
    client = " ".join(str(origin[k]) for k in ("client", "client_version") if origin.get(k))
    details = [part for part in (client, origin.get("tool") and f"tool {origin['tool']}") if part]
    line = f"{line}: {', '.join(details)}" if details else line
    return f"{line}. Reason: {origin['reason']}" if origin.get("reason") else line


def reminder_text(request: RequestView) -> str:
    """What a reminder says, before the channel's mentions."""
    line = "Reminder: this request is still waiting for a decision"
    if request.progress is not None:
        line += f" ({progress_line(request.progress)})"
    if request.expires_at is not None:
        line += f"; it expires at {plain_when(request.expires_at)}"
    return line


# --- answering


async def answer(
    core: Core,
    rid: str,
    verb: Verb,
    responder: Responder,
    *,
    text: str | None = None,
    choice: int | str | None = None,
) -> Answered | Refused:
    """Apply one person's answer: the decision, or the refusal to tell them."""
    found = await answerable(core, rid, responder)
    if isinstance(found, Refused):
        return found
    row, project = found
    made = decision_for(row, verb, responder, text=text, choice=choice)
    if isinstance(made, Refused):
        return made
    decision, reading = made
    try:
        decided = await submit(core, row, decision)
    except Conflict as conflict:
        return Refused(Refusal.DECIDED, str(conflict))
    except NotAllowed as refused:
        return Refused(Refusal.NOT_ALLOWED, str(refused))
    return Answered(core.view(decided, project), reading)


async def answerable(core: Core, rid: str, responder: Responder) -> tuple[Request, str] | Refused:
    """The pending request this person may answer, with its project; or the refusal. Channels
    also ask before opening a form, so nobody types a reason for nothing."""
    row, project = await core.db.read(request_store.get_with_project, rid)
    if row is None or project is None:
        return Refused(Refusal.GONE, "this request no longer exists")
    channel = _channel_of(responder)
    allowed = allowed_responders(json.loads(row.route_json), channel) if channel else None
    if allowed is not None and responder.id not in allowed:
        return Refused(Refusal.NOT_ALLOWED, "you are not allowed to answer this request")
    if row.status != Status.PENDING:
        return Refused(Refusal.DECIDED, already_decided(row))
    return row, project


@dataclass(frozen=True)
class Form:
    """A form to open before answering: its title and the text it starts with."""

    title: str
    prefill: str | None


async def option_form(core: Core, rid: str, responder: Responder, index: int | None) -> Form | None:
    """An interactive reject option opens a form, prefilled with its prompt_fill, instead
    of answering at once; None when this click answers directly (or is refused: the answer
    path then says why)."""
    found = await answerable(core, rid, responder)
    if isinstance(found, Refused):
        return None
    row, _project = found
    chosen = option(row, index)
    if chosen is None or row.kind != Kind.FUNCTION_CALL or not chosen.get("interactive"):
        return None
    return Form(chosen.get("title") or chosen["name"], chosen.get("prompt_fill"))


def _channel_of(responder: Responder) -> ChannelName | None:
    """The routed channel whose responders this person must be one of (none for the API)."""
    value = str(responder.via)
    return ChannelName(value) if value in ChannelName._value2member_map_ else None
