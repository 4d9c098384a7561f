"""`respond` through the API (and the CLI): a respond body becomes a decision by the rules
every channel shares, with the caller as who answered; an Idempotency-Key makes a retried
respond return the first answer."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from gateway.answers.decisions import submit
from gateway.answers.verbs import Decision, decision_for
from gateway.core import Caller, Core
from gateway.errors import InvalidInput, NotAllowed
from gateway.intake import find
from gateway.lifecycle import Kind
from gateway.policies import votes
from gateway.seam.answers import Refusal, Refused
from gateway.seam.callbacks import Verb
from gateway.store.rows import RequestRow
from gateway.vocabulary import AnsweredIn
from gateway.wire.models import FunctionCallStatusIn, HumanContactStatusIn
from gateway.wire.output import to_wire

# Set by the gateway from the key, never by the caller: who the vote is (`votes.person_of`).
IDENTITY = ("channel", "key", "person", "by", "allowed", "grant", "granted_by")


def api_user_info(caller: Caller, given: dict[str, Any] | None) -> dict[str, Any]:
    """Who answered through the API: the key's person when it is bound to one, else the
    project's operator. The caller's `user_info` is kept as display text only."""
    shown = {k: v for k, v in (given or {}).items() if k not in IDENTITY}
    info = {"user_id": f"key:{caller.key.prefix}", "name": caller.key.name} | shown
    info |= {"channel": AnsweredIn.API, "key": caller.key.prefix}
    return info | ({"person": caller.key.person} if caller.key.person else {})


def function_call_decision(
    row: RequestRow, body: FunctionCallStatusIn, user_info: dict[str, Any]
) -> Decision:
    """An API or CLI `respond` to a function call, by the rules every channel shares."""
    if body.approved and body.reject_option_name is not None:
        raise InvalidInput("reject_option_name is only allowed with approved=false")
    verb = Verb.APPROVE if body.approved else Verb.REJECT
    choice = body.reject_option_name
    return _made(decision_for(row, verb, user_info, text=body.comment, choice=choice))


def human_contact_decision(
    row: RequestRow, body: HumanContactStatusIn, user_info: dict[str, Any]
) -> Decision:
    """An API or CLI `respond` to a question, by the rules every channel shares."""
    choice = body.response_option_name
    made = decision_for(row, Verb.ANSWER, user_info, text=body.response, choice=choice)
    if isinstance(made, Refused) and made.why == Refusal.MISSING_TEXT:
        raise InvalidInput("give a response, or a response_option_name")
    return _made(made)


def _made(made: tuple[Decision, Any] | Refused) -> Decision:
    if isinstance(made, Refused):
        raise InvalidInput(made.message)
    return made[0]


def idempotency_token(caller: Caller, key: str | None, body: Any) -> str | None:
    """What makes a respond "the same respond again": the API key that sent it, its
    Idempotency-Key and its body as validated (so spacing and key order do not matter)."""
    if key is None:
        return None
    canonical = json.dumps(
        [caller.key.id, key, body.model_dump(mode="json")], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


async def respond(
    core: Core,
    caller: Caller,
    call_id: str,
    body: FunctionCallStatusIn | HumanContactStatusIn,
    *,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """`POST /agent/function_calls/{call_id}/respond` (or a human contact's): the caller's
    answer, decided by `submit` as any channel's is."""
    kind = Kind.FUNCTION_CALL if isinstance(body, FunctionCallStatusIn) else Kind.HUMAN_CONTACT
    row = await find(core, caller, kind, call_id)
    user_info = api_user_info(caller, _given(body.user_info))
    _sent_to_them(core, row, user_info)
    if isinstance(body, FunctionCallStatusIn):
        decision = function_call_decision(row, body, user_info)
    else:
        decision = human_contact_decision(row, body, user_info)
    token = idempotency_token(caller, idempotency_key, body)
    return to_wire(await submit(core, row, replace(decision, idempotency=token)))


def _sent_to_them(core: Core, row: RequestRow, user_info: dict[str, Any]) -> None:
    """A key bound to a person answers only requests sent to that person (NotAllowed)."""
    person = votes.person_of(core.config, user_info)
    if person == votes.OPERATOR:
        return
    if not votes.counted_targets(core.config, json.loads(row.route_json), user_info, person):
        raise NotAllowed(f"this key answers as {person}, and this request was not sent to them")


def _given(user_info: Any) -> dict[str, Any] | None:
    return None if user_info is None else user_info.model_dump(exclude_none=True)
