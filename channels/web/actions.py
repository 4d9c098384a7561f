"""A console form becomes one answer through the core's answer path, as every channel's."""

from __future__ import annotations

from dataclasses import dataclass

from channels.web.auth import Viewer
from gateway.lifecycle import Status
from gateway.seam import BY_LINK, AnsweredIn, Answers, Refusal, Refused, Responder, Verb, describe

# What each button of the request page means; a function call is never rejected without a
# reason on the console (the form asks for one), whatever the API allows.
_VERBS = {
    "approve": Verb.APPROVE,
    "reject": Verb.REJECT,
    "option": Verb.OPTION,
    "answer": Verb.ANSWER,
}
_STATUS = {
    Refusal.NOT_ALLOWED: 403,
    Refusal.DECIDED: 409,
    Refusal.GONE: 404,
    Refusal.UNKNOWN_OPTION: 422,
    Refusal.MISSING_TEXT: 422,
    Refusal.WRONG_VERB: 422,
    Refusal.UNCLEAR: 422,
}


@dataclass(frozen=True)
class FormResult:
    """What a console form's answer did: for the page to say, with its HTTP status."""

    ok: bool
    status: int
    text: str


def responder(viewer: Viewer) -> Responder:
    extra = {"by": BY_LINK} if viewer.by_link else {}
    return Responder(AnsweredIn.WEB, viewer.actor_id, viewer.name, email=viewer.email, extra=extra)


async def answer_form(
    answers: Answers, rid: str, form: dict[str, str], viewer: Viewer
) -> FormResult:
    """Apply the form's answer; the outcome says what happened, in words for the page."""
    verb = _VERBS.get(form.get("action", ""))
    text = (form.get("reason") or form.get("answer") or "").strip() or None
    choice = form.get("option") or None
    if verb is None:
        return FormResult(False, 422, f"unknown action; use one of {', '.join(_VERBS)}")
    if verb == Verb.OPTION and choice is None:
        return FormResult(False, 422, "choose an option")
    if verb == Verb.REJECT and text is None:
        return FormResult(False, 422, "give a reason to reject")
    result = await answers.answer(rid, verb, responder(viewer), text=text, choice=choice)
    if isinstance(result, Refused):
        return FormResult(False, _STATUS[result.why], result.message)
    if result.request.status == Status.PENDING:  # a vote under a policy that did not decide
        return FormResult(True, 200, f"Your vote is recorded: {describe(result.request)}.")
    return FormResult(True, 200, recorded(result.request.status, viewer.name))


def recorded(status: str, name: str) -> str:
    """The notice after a decision; the server composes it, never the URL."""
    return f"Recorded: {status} by {name}."
