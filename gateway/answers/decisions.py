"""Deciding requests: first wins (compare-and-set), who decided is recorded, and the
decision's side effects (message updates, webhooks) commit in the same transaction."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from sqlalchemy.engine import Connection

from gateway.answers.verbs import Decision, decision_for
from gateway.core import Caller, Core
from gateway.errors import Conflict, IllegalTransition, InvalidInput, NotAllowed
from gateway.intake import add_targets, find
from gateway.lifecycle import Event, Kind, Status, noun, transition
from gateway.outbox import webhooks
from gateway.policies import votes
from gateway.policies.routing import SERVED_BY_GATEWAY, channel_targets
from gateway.seam.answers import Refusal, Refused
from gateway.seam.callbacks import Verb
from gateway.seam.people import already_decided
from gateway.seam.targets import Target
from gateway.store import dumps, utcnow
from gateway.store import outbox as outbox_store
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow, VoteRow, changed
from gateway.vocabulary import AnsweredIn, AuditEvent, ChannelName, DeliveryStatus, JobKind
from gateway.wire.models import Escalation, FunctionCallStatusIn, HumanContactStatusIn
from gateway.wire.output import to_wire

UPDATE_ATTEMPTS = 8


def api_user_info(caller: Caller, given: dict[str, Any] | None) -> dict[str, Any]:
    info = {"user_id": f"key:{caller.key.prefix}", "name": caller.key.name} | (given or {})
    return info | {"channel": AnsweredIn.API}


def function_call_decision(
    row: RequestRow, body: FunctionCallStatusIn, user_info: dict[str, Any]
) -> Decision:
    """An API or CLI `respond` to a function call, by the rules every channel shares."""
    if body.approved is None:
        raise InvalidInput("approved must be true or false")
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


def _first_answer(conn: Connection, rid: str, token: str | None) -> bool:
    """Whether the decision on `rid` was made by a respond carrying `token`."""
    if token is None:
        return False
    for event in request_store.list_events(conn, rid):
        if (
            event.type == AuditEvent.DECIDED
            and json.loads(event.detail_json).get("idempotency") == token
        ):
            return True
    return False


def _after_decision(conn: Connection, core: Core, row: RequestRow, decision: Decision) -> None:
    """Side effects that must happen exactly when the decision commits."""
    detail: dict[str, Any] = {"status": row.status, "by": json.loads(row.user_info_json or "{}")}
    if decision.idempotency is not None:
        detail["idempotency"] = decision.idempotency
    request_store.add_event(conn, row.rid, AuditEvent.DECIDED, detail)
    update_copies(conn, row)
    outbox_store.cancel_timers(conn, row.rid)
    webhooks.enqueue_completed(conn, core, row)


def update_copies(conn: Connection, row: RequestRow) -> None:
    """Every post sent so far shows the request as it now stands."""
    for delivery in request_store.list_deliveries(conn, [row.rid]):
        if delivery.status == DeliveryStatus.SENT and delivery.channel not in SERVED_BY_GATEWAY:
            outbox_store.enqueue(
                conn,
                JobKind.UPDATE,
                {"delivery_id": delivery.id},
                rid=row.rid,
                project_id=row.project_id,
                max_attempts=UPDATE_ATTEMPTS,
            )


def next_status(row: RequestRow, event: Event) -> Status:
    """The status `event` leads to; Conflict (409, says who decided) when the request is no
    longer pending, InvalidInput when this kind of request never takes this event."""
    try:
        return transition(Kind(row.kind), Status(row.status), event)
    except IllegalTransition as error:
        if Status(row.status) is not Status.PENDING:
            raise Conflict(already_decided(row)) from None
        # e.g. an approval for a human contact: a caller's bug, not a race someone won.
        raise InvalidInput(
            f"{noun(row.kind)} {row.call_id!r} cannot take a {event.value!r} decision ({error})"
        ) from None


async def _already_ours(core: Core, row: RequestRow, decision: Decision) -> bool:
    """Whether a decided request was decided by this very respond's first attempt (a retry
    with the same Idempotency-Key and body)."""
    if row.status == Status.PENDING or decision.idempotency is None:
        return False
    return bool(await core.db.read(_first_answer, row.rid, decision.idempotency))


def _fields(decision: Decision) -> dict[str, Any]:
    return {
        "comment": decision.comment,
        "option_name": decision.option_name,
        "response": decision.response,
        "user_info_json": dumps(decision.user_info),
        "responded_at": utcnow(),
    }


async def decide(core: Core, row: RequestRow, decision: Decision) -> RequestRow:
    """Apply a decision if the request is still pending; Conflict says who won otherwise.

    A decision with an idempotency token that lost to an earlier decision with the same
    token (a retried respond) returns the request as that decision left it."""
    if await _already_ours(core, row, decision):
        return row
    status = next_status(row, decision.event)
    fields = _fields(decision)

    def compare_and_set(conn: Connection) -> tuple[RequestRow, bool]:
        """The request as this decision left it and True, or as an earlier one did and
        whether that was this decision's own first attempt (a retry that raced it)."""
        updated = request_store.decide(conn, row.rid, status, fields)
        if updated is None:
            current = request_store.get_by_rid(conn, row.rid)
            assert current is not None
            return current, _first_answer(conn, row.rid, decision.idempotency)
        _after_decision(conn, core, updated, decision)
        return updated, True

    current, ours = await core.db.write(compare_and_set)
    if not ours:
        raise Conflict(already_decided(current))
    return current


async def submit(core: Core, row: RequestRow, decision: Decision) -> RequestRow:
    """One person's answer, from any channel, the API or the CLI. Under an approval policy
    it is a vote and the request stays pending until the policy resolves (NotAllowed when
    it counts for none of the request's branches); otherwise it is the decision."""
    voting = row.policy_json is not None and decision.event in (Event.APPROVE, Event.REJECT)
    if not voting:
        return await decide(core, row, decision)
    if await _already_ours(core, row, decision):
        return row
    next_status(row, decision.event)  # a decided request: Conflict, before any vote

    def vote(conn: Connection) -> tuple[RequestRow | None, bool]:
        current = request_store.lock(conn, row.rid)
        assert current is not None
        if current.status != Status.PENDING:
            return current, _first_answer(conn, row.rid, decision.idempotency)
        approve = decision.event == Event.APPROVE
        counted = votes.record(
            conn,
            core.config,
            current,
            approve,
            decision.user_info,
            comment=decision.comment,
            option_name=decision.option_name,
        )
        if counted is None:
            return None, False
        if counted.reversed:
            return current, False
        if not counted.fresh or counted.verdict is None:  # a repeated click, a copied email
            return current, True
        verdict, rows = counted.verdict, counted.votes
        shown = votes.progress(verdict, rows, json.loads(current.route_json))
        progress_json = votes.save_progress(conn, row.rid, shown)
        if verdict.decisive is None:
            detail = {"by": decision.user_info, "approve": approve}
            request_store.add_event(conn, row.rid, AuditEvent.VOTED, detail)
            update_copies(conn, current)
            return changed(current, progress_json=progress_json), True
        final = _decision_of(votes.decisive_row(verdict, rows), decision)
        decided = request_store.decide(
            conn, row.rid, next_status(current, final.event), _fields(final)
        )
        assert decided is not None  # locked and pending
        _after_decision(conn, core, decided, final)
        return decided, True

    current, ours = await core.db.write(vote)
    if current is None:
        raise NotAllowed("your answer counts for none of the people this request waits on")
    if not ours and current.status == Status.PENDING:
        raise Conflict("you answered this request the other way already; that answer stands")
    if not ours:
        raise Conflict(already_decided(current))
    return current


def _decision_of(decisive: VoteRow, this: Decision) -> Decision:
    """The decision the policy's decisive vote makes (it may be an earlier one)."""
    return Decision(
        Event.APPROVE if decisive.approve else Event.REJECT,
        json.loads(decisive.user_info_json),
        comment=decisive.comment,
        option_name=decisive.option_name,
        idempotency=this.idempotency,
    )


async def respond_function_call(
    core: Core,
    caller: Caller,
    call_id: str,
    body: FunctionCallStatusIn,
    *,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    row = await find(core, caller, Kind.FUNCTION_CALL, call_id)
    decision = function_call_decision(row, body, api_user_info(caller, _given(body.user_info)))
    token = idempotency_token(caller, idempotency_key, body)
    return to_wire(await submit(core, row, replace(decision, idempotency=token)))


async def respond_human_contact(
    core: Core,
    caller: Caller,
    call_id: str,
    body: HumanContactStatusIn,
    *,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    row = await find(core, caller, Kind.HUMAN_CONTACT, call_id)
    decision = human_contact_decision(row, body, api_user_info(caller, _given(body.user_info)))
    token = idempotency_token(caller, idempotency_key, body)
    return to_wire(await submit(core, row, replace(decision, idempotency=token)))


def _given(user_info: Any) -> dict[str, Any] | None:
    return None if user_info is None else user_info.model_dump(exclude_none=True)


async def escalate(
    core: Core, caller: Caller, kind: Kind, call_id: str, escalation: Escalation
) -> dict[str, Any]:
    """Send the request again by email, in its thread, with the escalation message on top;
    the merged recipients may answer too."""
    row = await find(core, caller, kind, call_id)
    if row.status != Status.PENDING:
        raise Conflict(already_decided(row))
    if escalation.channel is not None:
        channel_targets(core.config, escalation.channel)  # unknown team/person -> 422
    detail = escalation.model_dump(mode="json", exclude={"channel": {"slack": {"bot_token"}}})

    thread = await core.db.read(_email_thread, row.rid)
    target = escalation_target(json.loads(row.spec_json), escalation, thread)  # may refuse

    def add_escalation(conn: Connection) -> None:
        request_store.add_to_route(conn, row.rid, target.model_dump(mode="json"))
        audit = [(AuditEvent.ESCALATED, detail), *add_targets(conn, core, row, [target])]
        request_store.add_events(conn, row.rid, audit)

    await core.db.write(add_escalation)
    return to_wire(row)


def _email_thread(conn: Connection, rid: str) -> list[str]:
    """Message-IDs of the request's emails so far, oldest first."""
    refs = [
        json.loads(d.ref_json or "{}")
        for d in request_store.list_deliveries(conn, [rid])
        if d.channel == ChannelName.EMAIL and d.status == DeliveryStatus.SENT
    ]
    return [ref["message_id"] for ref in refs if ref.get("message_id")]


def escalation_target(spec: dict[str, Any], escalation: Escalation, thread: list[str]) -> Target:
    """HumanLayer's rules: the escalation channel's address takes over when given; extra
    recipients are the original's, the escalation's and the escalation channel's."""
    original = (spec.get("channel") or {}).get("email") or {}
    override = escalation.channel.email if escalation.channel else None
    address = override.address if override else original.get("address")
    if not address:
        raise InvalidInput(
            "nothing to escalate to: this request has no email channel; "
            "give escalation.channel.email.address"
        )
    escalation_channel = override.additional_recipients or [] if override else []
    extra = [
        *(original.get("additional_recipients") or []),
        *[r.model_dump(mode="json") for r in escalation.additional_recipients or []],
        *[r.model_dump(mode="json") for r in escalation_channel],
    ]
    return Target(
        channel=ChannelName.EMAIL,
        address={
            "address": address,
            "additional_recipients": extra,
            "escalation_msg": escalation.escalation_msg,
            "thread": thread,
        },
        responders=[address, *[r["address"] for r in extra]],
        via="escalation",
    )
