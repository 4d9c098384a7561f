"""A console form becomes one answer through the core's answer path, as every channel's: the
request page's buttons, "Approve and allow…", "Edit and approve", and the queue's bulk
answer (one answer per request, each through the same path)."""

from __future__ import annotations

from dataclasses import dataclass, field

from channels.web.auth import Viewer
from gateway.lifecycle import Status
from gateway.seam import (
    BY_LINK,
    AnsweredIn,
    Answers,
    Refusal,
    Refused,
    RequestView,
    Responder,
    Verb,
    describe,
)
from gateway.seam.edits import EditProblem, read_edits

# What each button of the request page means; a function call is never rejected without a
# reason on the console (the form asks for one), whatever the API allows.
_VERBS = {
    "approve": Verb.APPROVE,
    "reject": Verb.REJECT,
    "option": Verb.OPTION,
    "answer": Verb.ANSWER,
    "grant": Verb.GRANT,
}
_STATUS = {
    Refusal.NOT_ALLOWED: 403,
    Refusal.DECIDED: 409,
    Refusal.GONE: 404,
    Refusal.UNKNOWN_OPTION: 422,
    Refusal.MISSING_TEXT: 422,
    Refusal.WRONG_VERB: 422,
    Refusal.UNCLEAR: 422,
    Refusal.INVALID: 422,
}
EDIT_PREFIX = "kw."  # the edit form's fields: `kw.<argument>`, apart from csrf, action, t
BULK_VERBS = {"approve": Verb.APPROVE, "reject": Verb.REJECT}


@dataclass(frozen=True)
class FormResult:
    """What a console form's answer did: for the page to say, with its HTTP status."""

    ok: bool
    status: int
    text: str


@dataclass(frozen=True)
class EditAgain:
    """The edit form to show again, nothing decided: what the person typed, and what is
    wrong (next to `field`, or above the form when it is about the whole edit)."""

    status: int
    texts: dict[str, str]
    field: str | None
    message: str


@dataclass
class BulkSummary:
    """What a bulk answer did, by call id: decided, a vote recorded, or refused and why."""

    decided: list[str] = field(default_factory=list)
    voted: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


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
    grant = form.get("grant") or None
    if verb is None:
        return FormResult(False, 422, f"unknown action; use one of {', '.join(_VERBS)}")
    if verb == Verb.OPTION and choice is None:
        return FormResult(False, 422, "choose an option")
    if verb == Verb.REJECT and text is None:
        return FormResult(False, 422, "give a reason to reject")
    if verb == Verb.GRANT and grant is None:
        return FormResult(False, 422, "choose what to allow")
    result = await answers.answer(
        rid, verb, responder(viewer), text=text, choice=choice, grant=grant
    )
    if isinstance(result, Refused):
        return FormResult(False, _STATUS[result.why], result.message)
    return _done(result.request, viewer)


async def edit_form(
    answers: Answers, request: RequestView, form: dict[str, str], viewer: Viewer
) -> FormResult | EditAgain:
    """ "Edit and approve": the arguments read from the form's fields against the request's
    own (never from the form), then one answer; what is wrong shows on the form again."""
    # A browser sends a textarea's line breaks as CRLF; the person typed LF.
    texts = {
        name.removeprefix(EDIT_PREFIX): value.replace("\r\n", "\n")
        for name, value in form.items()
        if name.startswith(EDIT_PREFIX)
    }
    edited = read_edits(request.spec.get("kwargs") or {}, texts)
    if isinstance(edited, EditProblem):
        return EditAgain(422, texts, edited.field, edited.message)
    result = await answers.answer(request.rid, Verb.EDIT, responder(viewer), edited=edited)
    if isinstance(result, Refused) and result.why in (Refusal.INVALID, Refusal.NOT_ALLOWED):
        return EditAgain(_STATUS[result.why], texts, None, result.message)
    if isinstance(result, Refused):
        return FormResult(False, _STATUS[result.why], result.message)
    return _done(result.request, viewer)


async def answer_many(
    answers: Answers, requests: list[RequestView], verb: Verb, reason: str | None, viewer: Viewer
) -> BulkSummary:
    """One answer per request, in turn, by this person with their own rules: under a policy
    it is one vote, and a request they may not answer is refused like a single click."""
    summary = BulkSummary()
    who = responder(viewer)
    for request in requests:
        result = await answers.answer(request.rid, verb, who, text=reason)
        if isinstance(result, Refused):
            summary.refused.append((request.call_id, result.message))
        elif result.request.status == Status.PENDING:
            summary.voted.append(request.call_id)
        else:
            summary.decided.append(request.call_id)
    return summary


def revoker(viewer: Viewer) -> str:
    """Who revoked a grant, as its `revoked_by` records it: "Alice <alice@example.org>"."""
    return f"{viewer.name} <{viewer.email}>" if viewer.email else viewer.name


def _done(request: RequestView, viewer: Viewer) -> FormResult:
    if request.status == Status.PENDING:  # a vote under a policy that did not decide
        return FormResult(True, 200, f"Your vote is recorded: {describe(request)}.")
    allowed = (request.user_info or {}).get("allowed")
    also = f", allowing {allowed}" if allowed else ""
    if request.updated_kwargs is not None:
        also += ", with your edited arguments"
    return FormResult(True, 200, recorded(request.status, viewer.name, also))


def recorded(status: str, name: str, also: str = "") -> str:
    """The notice after a decision; the server composes it, never the URL."""
    return f"Recorded: {status} by {name}{also}."
