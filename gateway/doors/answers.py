"""One answer path for every channel. A channel turns a platform event into one `answer(...)`
and renders what comes back; who answered, what they may do, the request's options and the
refusals exist here once (the sentences that describe the outcome: `gateway.seam.sentences`)."""

from __future__ import annotations

import json

from gateway.answers.decisions import allowed_responders, submit
from gateway.answers.verbs import decision_for, option
from gateway.core import Core
from gateway.errors import Conflict, NotAllowed
from gateway.lifecycle import Kind, Status
from gateway.seam.answers import Answered, Form, Refusal, Refused
from gateway.seam.callbacks import Verb
from gateway.seam.people import Responder, already_decided
from gateway.store import requests as request_store
from gateway.store.rows import Request
from gateway.vocabulary import ChannelName

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
