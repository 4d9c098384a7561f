"""The rules that turn one answer into a decision, for the API, the CLI and every channel:
what each verb means for each kind of request, options and their prompt_fill, the reason the
gateway writes when none was given, and the refusals when an answer makes no decision."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gateway.lifecycle import Event, Kind, noun
from gateway.seam.answers import Refusal, Refused
from gateway.seam.callbacks import Verb
from gateway.seam.people import Responder, default_rejection
from gateway.seam.replies import Reading, Verdict, read_reply
from gateway.seam.sentences import spoken
from gateway.seam.views import options_of
from gateway.store.rows import RequestRow
from gateway.vocabulary import AnsweredIn


@dataclass(frozen=True)
class Decision:
    event: Event
    user_info: dict[str, Any]
    comment: str | None = None
    option_name: str | None = None
    response: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The hash of an API respond's Idempotency-Key and body (see `idempotency_token`).
    idempotency: str | None = None
    # The route index of the post this answer came from (`Responder.copy`), if known.
    copy: int | None = None
    # "Approve and allow…": the grant's choice value (`gateway.seam.grants`), checked by
    # `gateway.answers.grants.checked` against what the request offers.
    grant: str | None = None
    # "Edit and approve": the arguments the person approved instead of the agent's.
    edited: dict[str, Any] | None = None


# Who decides a request whose deadline passed (`status.user_info`).
GATEWAY = {"channel": AnsweredIn.GATEWAY, "user_id": "gateway", "name": "the gateway"}


def expiry_decision(row: RequestRow, waited: float, response: str | None) -> Decision:
    """Fail closed: a function call is rejected with a comment that says so (the SDK's
    require_approval returns its denial); a question gets its fallback or expires."""
    comment = f"No decision within {spoken(waited)}; expired"
    if row.kind == Kind.FUNCTION_CALL:
        return Decision(Event.REJECT, GATEWAY, comment=comment)
    if response is not None:
        return Decision(Event.RESPOND, GATEWAY, response=response)
    return Decision(Event.EXPIRE, GATEWAY, comment=comment.replace("decision", "answer"))


def options(row: RequestRow) -> list[dict[str, Any]]:
    """The request's reject options (a function call) or response options (a question)."""
    return options_of(row.kind, _spec(row))


def option(row: RequestRow, which: int | str | None) -> dict[str, Any] | None:
    """An option by its place in the list or by its name."""
    listed = options(row)
    if isinstance(which, int):
        return listed[which] if 0 <= which < len(listed) else None
    return next((o for o in listed if o["name"] == which), None)


def decision_for(
    row: RequestRow,
    verb: Verb,
    responder: Responder | dict[str, Any],
    *,
    text: str | None = None,
    choice: int | str | None = None,
    grant: str | None = None,
    edited: dict[str, Any] | None = None,
) -> tuple[Decision, Reading | None] | Refused:
    """The decision one person's answer makes (and how free text was read), by the rules
    every channel and the API share; or the refusal when it cannot make one."""
    text = text if text and text.strip() else None  # blank is none; given text is kept as is
    who = responder.user_info() if isinstance(responder, Responder) else responder
    function_call = row.kind == Kind.FUNCTION_CALL
    if verb == Verb.REPLY:
        return _reply(row, who, text)
    if verb == Verb.OPTION or choice is not None:
        return _option_decision(row, who, text, choice)
    if verb == Verb.APPROVE and function_call:
        return Decision(Event.APPROVE, who, comment=text), None
    if verb == Verb.GRANT and function_call:
        return Decision(Event.APPROVE, who, comment=text, grant=grant or ""), None
    if verb == Verb.EDIT and function_call:
        if edited is None:
            return Refused(Refusal.MISSING_TEXT, "edit the arguments first")
        return Decision(Event.APPROVE, who, comment=text, edited=edited), None
    if verb == Verb.REJECT and function_call:
        return Decision(Event.REJECT, who, comment=text or default_rejection(who)), None
    if verb == Verb.ANSWER and not function_call:
        if text is None:
            return Refused(Refusal.MISSING_TEXT, "type an answer first")
        return Decision(Event.RESPOND, who, response=text), None
    return Refused(Refusal.WRONG_VERB, f"a {noun(row.kind)} cannot be answered with {verb}")


def _reply(
    row: RequestRow, who: dict[str, Any], text: str | None
) -> tuple[Decision, Reading | None] | Refused:
    """Free text: a question's answer; on an approval a plain yes approves, a plain no
    rejects with the text as the reason, and anything else decides nothing (UNCLEAR)."""
    if row.kind == Kind.HUMAN_CONTACT:
        if text is None:
            return Refused(Refusal.MISSING_TEXT, "type an answer first")
        return Decision(Event.RESPOND, who, response=text), None
    reading = read_reply(text or "", signer=_signer(who), grants=True)
    if reading.verdict is Verdict.APPROVE:  # "approve for 1h" also asks for a grant
        grant = reading.grant.value if reading.grant else None
        return Decision(Event.APPROVE, who, grant=grant), reading
    if reading.verdict is Verdict.REJECT:
        return Decision(Event.REJECT, who, comment=text or default_rejection(who)), reading
    return Refused(Refusal.UNCLEAR, reading.sentence)


def _signer(who: dict[str, Any]) -> str | None:
    """The name a reply may be signed with; an address is no name (the email channel reads
    the same reply with the From's display name, or none)."""
    name = str(who.get("name") or "")
    return name if name and "@" not in name else None


def _option_decision(
    row: RequestRow, who: dict[str, Any], text: str | None, choice: int | str | None
) -> tuple[Decision, Reading | None] | Refused:
    """An option: its prompt_fill (or title, or name) unless the person wrote their own."""
    chosen = option(row, choice)
    if chosen is None and isinstance(choice, str):
        known = ", ".join(o["name"] for o in options(row)) or "none"
        return Refused(Refusal.UNKNOWN_OPTION, f"unknown option {choice!r}; options: {known}")
    if chosen is None:
        return Refused(Refusal.UNKNOWN_OPTION, "this option no longer exists")
    if row.kind == Kind.HUMAN_CONTACT:
        response = text or chosen.get("prompt_fill") or chosen.get("title") or chosen["name"]
        return Decision(Event.RESPOND, who, response=response, option_name=chosen["name"]), None
    comment = text or chosen.get("prompt_fill") or default_rejection(who)
    return Decision(Event.REJECT, who, comment=comment, option_name=chosen["name"]), None


def _spec(row: RequestRow) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(row.spec_json)
    return spec
