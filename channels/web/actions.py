"""A console form becomes a decision through the core's rules (first wins), as the API's."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from channels.web.auth import Viewer
from gateway.core import Core
from gateway.decisions import (
    Decision,
    answerable,
    function_call_decision,
    human_contact_decision,
)
from gateway.decisions import (
    decide as core_decide,
)
from gateway.errors import GatewayError, InvalidInput
from gateway.lifecycle import Kind
from gateway.models import FunctionCallStatusIn, HumanContactStatusIn
from gateway.store.rows import Request
from gateway.vocabulary import ChannelName

# Each kind takes only its own verbs: a function call is never rejected without a reason.
CALL_VERBS = ("approve", "reject", "option")
ANSWER_VERBS = ("answer", "option")


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status: int
    text: str


async def decide(core: Core, rid: str, form: dict[str, str], viewer: Viewer) -> Outcome:
    """Apply the form's answer; the outcome says what happened, in words for the page."""
    try:
        row = await answerable(core, rid, channel=ChannelName.WEB, actor_id=viewer.actor_id)
        decided = await core_decide(core, row, _decision(row, form, viewer))
    except GatewayError as error:
        return Outcome(False, error.status_code, str(error))
    except ValidationError as error:
        return Outcome(False, 422, error.errors()[0]["msg"])
    return Outcome(True, 200, recorded(decided.status, viewer.name))


def recorded(status: str, name: str) -> str:
    """The notice after a decision; the server composes it, never the URL."""
    return f"Recorded: {status} by {name}."


def _decision(row: Request, form: dict[str, str], viewer: Viewer) -> Decision:
    verb = form.get("action", "")
    allowed = ANSWER_VERBS if row.kind == Kind.HUMAN_CONTACT else CALL_VERBS
    if verb not in allowed:
        raise InvalidInput(f"unknown action {verb!r}; use one of {', '.join(allowed)}")
    text = (form.get("reason") or form.get("answer") or "").strip() or None
    option = form.get("option") or None
    if verb == "option" and option is None:
        raise InvalidInput("choose an option")
    if verb == "reject" and text is None:
        raise InvalidInput("give a reason to reject")
    if verb == "answer" and text is None:
        raise InvalidInput("type an answer first")
    who = viewer.user_info
    if row.kind == Kind.HUMAN_CONTACT:
        answer = HumanContactStatusIn(response=text, response_option_name=option)
        return human_contact_decision(row, answer, who)
    chosen = option if verb == "option" else None
    body = FunctionCallStatusIn(approved=verb == "approve", comment=text, reject_option_name=chosen)
    return function_call_decision(row, body, who)
