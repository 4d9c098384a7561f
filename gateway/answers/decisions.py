"""Deciding requests: first wins (compare-and-set), who decided is recorded, and the
decision's side effects (message updates, webhooks) commit in the same transaction. Under an
approval policy an answer is a vote (`gateway.policies.votes`), and only the vote that
resolves the policy decides."""

from __future__ import annotations

import json
from typing import Any

from gateway.answers import edits
from gateway.answers.verbs import Decision, expiry_decision
from gateway.core import Core
from gateway.errors import Conflict, IllegalTransition, InvalidInput, NotAllowed
from gateway.lifecycle import Event, Kind, Status, noun, transition
from gateway.outbox import deliveries, webhooks
from gateway.policies import grants, receipts, votes
from gateway.seam.people import BY_LINK, BY_LIST, Responder, already_decided
from gateway.store import Tx, dumps, utcnow
from gateway.store import outbox as outbox_store
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow, VoteRow, changed
from gateway.vocabulary import AnsweredIn, AuditEvent
from gateway.wire.output import iso


def _first_answer(conn: Tx, rid: str, token: str | None) -> bool:
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


def _after_decision(conn: Tx, core: Core, row: RequestRow, decision: Decision) -> RequestRow:
    """Side effects that must happen exactly when the decision commits; returns the row
    with its signed receipt (which the webhook carries)."""
    detail: dict[str, Any] = {"status": row.status, "by": json.loads(row.user_info_json or "{}")}
    if decision.idempotency is not None:
        detail["idempotency"] = decision.idempotency
    # What was said, in the chain too: an edit of the row's comment afterwards then shows.
    detail |= {k: v for k, v in (("comment", row.comment), ("response", row.response)) if v}
    digest = request_store.add_event(conn, row.rid, AuditEvent.DECIDED, detail)
    row = receipts.sign(conn, core.box, row, digest)
    if decision.edited is not None:
        edits.record(conn, row)
    if decision.grant is not None:
        grants.give(conn, core.config, row, grants.checked(core.config, row, decision.grant))
    deliveries.update_copies(conn, row)
    outbox_store.cancel_timers(conn, row.rid)
    webhooks.enqueue_completed(conn, row, core.settings.webhook_delays)
    return row


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


def _fields(decision: Decision, fn: str | None = None) -> dict[str, Any]:
    user_info = decision.user_info
    if decision.grant is not None:  # said on every copy: "…, and allowed read_file …"
        user_info = user_info | {"allowed": grants.described(decision.grant, fn)}
    fields = {
        "comment": decision.comment,
        "option_name": decision.option_name,
        "response": decision.response,
        "user_info_json": dumps(user_info),
        "responded_at": utcnow(),
    }
    if decision.edited is not None:
        fields["updated_kwargs_json"] = dumps(decision.edited)
    return fields


def _check_extras(core: Core, row: RequestRow, decision: Decision) -> None:
    """A grant or an edit only where the request offers it (NotAllowed), and only as one
    (InvalidInput): checked before anything is written."""
    if decision.grant is not None:
        if decision.user_info.get("by") in (BY_LINK, BY_LIST):  # a bearer of a copy
            raise NotAllowed(
                "a standing grant is given only by a person signed in to the console or "
                "answering as themselves (Slack, Discord, their own email), not through an "
                "emailed link or a shared list's copy: approve this one alone"
            )
        grants.checked(core.config, row, decision.grant)
    if decision.edited is not None:
        edits.checked(core.settings, row, decision.edited)


def _late(row: RequestRow, decision: Decision) -> bool:
    """A person's answer at or after the request's deadline (the gateway's own expiry is
    never late)."""
    by_gateway = decision.user_info.get("channel") == AnsweredIn.GATEWAY
    return not by_gateway and row.expires_at is not None and utcnow() >= row.expires_at


def _expire_now(conn: Tx, core: Core, row: RequestRow) -> RequestRow:
    """The deadline passed and its timer has not run yet (it may be late): apply the expiry
    here, in the transaction that refuses the late answer."""
    assert row.expires_at is not None
    waited = (row.expires_at - row.requested_at).total_seconds()
    expiry = expiry_decision(row, waited, outbox_store.expired_response(conn, row.rid))
    decided = request_store.set_decided(
        conn, row.rid, next_status(row, expiry.event), _fields(expiry)
    )
    assert decided is not None  # called on a locked or still-pending row
    return _after_decision(conn, core, decided, expiry)


def refusal(current: RequestRow) -> str:
    """Why an answer to a decided request changed nothing: the deadline, or who decided."""
    expired = Responder.of(json.loads(current.user_info_json or "{}"))
    if expired is not None and expired.via == AnsweredIn.GATEWAY and current.expires_at:
        return (
            f"{noun(current.kind)} {current.call_id!r} expired at {iso(current.expires_at)}; "
            "answers after its deadline are refused"
        )
    return already_decided(current)


async def decide(core: Core, row: RequestRow, decision: Decision) -> RequestRow:
    """Apply a decision if the request is still pending; Conflict says who won otherwise.

    A decision with an idempotency token that lost to an earlier decision with the same
    token (a retried respond) returns the request as that decision left it."""
    if await _already_ours(core, row, decision):
        return row
    status = next_status(row, decision.event)
    fields = _fields(decision, row.fn)

    def compare_and_set(conn: Tx) -> tuple[RequestRow, bool]:
        """The request as this decision left it and True, or as an earlier one did and
        whether that was this decision's own first attempt (a retry that raced it)."""
        if _late(row, decision):
            current = request_store.lock(conn, row.rid)
            assert current is not None
            if current.status == Status.PENDING:
                return _expire_now(conn, core, current), False
        updated = request_store.set_decided(conn, row.rid, status, fields)
        if updated is None:
            current = request_store.get_by_rid(conn, row.rid)
            assert current is not None
            return current, _first_answer(conn, row.rid, decision.idempotency)
        return _after_decision(conn, core, updated, decision), True

    current, ours = await core.db.write_for(row.rid, compare_and_set)
    if not ours:
        raise Conflict(refusal(current))
    return current


async def submit(core: Core, row: RequestRow, decision: Decision) -> RequestRow:
    """One person's answer, from any channel, the API or the CLI. Under an approval policy
    it is a vote and the request stays pending until the policy resolves (NotAllowed when
    it counts for none of the request's branches); otherwise it is the decision."""
    _check_extras(core, row, decision)
    voting = row.policy_json is not None and decision.event in (Event.APPROVE, Event.REJECT)
    if not voting:
        return await decide(core, row, decision)
    if await _already_ours(core, row, decision):
        return row
    next_status(row, decision.event)  # a decided request: Conflict, before any vote
    if decision.user_info.get("by") == BY_LIST:  # the same person could vote twice
        raise NotAllowed(
            "a reply to a shared list's copy cannot count toward this request's approvals: "
            "answer from your own copy or in the console"
        )

    def vote(conn: Tx) -> tuple[RequestRow | None, bool]:
        current = request_store.lock(conn, row.rid)
        assert current is not None
        if current.status != Status.PENDING:
            return current, _first_answer(conn, row.rid, decision.idempotency)
        if _late(current, decision):
            return _expire_now(conn, core, current), False
        approve = decision.event == Event.APPROVE
        counted = votes.record(
            conn,
            core.config,
            current,
            approve,
            decision.user_info,
            comment=decision.comment,
            option_name=decision.option_name,
            copy=decision.copy,
        )
        if counted is None:
            return None, False
        if counted.reversed:
            return current, False
        if not counted.fresh or counted.verdict is None:  # a repeated click, a copied email
            return current, True
        verdict, rows = counted.verdict, counted.votes
        route = json.loads(current.route_json)
        progress_json = votes.save_progress(conn, row.rid, verdict, rows, route)
        if verdict.decisive is None:
            detail = {"by": decision.user_info, "approve": approve}
            request_store.add_event(conn, row.rid, AuditEvent.VOTED, detail)
            deliveries.update_copies(conn, current)
            return changed(current, progress_json=progress_json), True
        final = _decision_of(votes.decisive_row(verdict, rows), decision)
        decided = request_store.set_decided(
            conn, row.rid, next_status(current, final.event), _fields(final)
        )
        assert decided is not None  # locked and pending
        return _after_decision(conn, core, decided, final), True

    current, ours = await core.db.write_for(row.rid, vote)
    if current is None:
        raise NotAllowed("your answer counts for none of the people this request waits on")
    if not ours and current.status == Status.PENDING:
        raise Conflict("you answered this request the other way already; that answer stands")
    if not ours:
        raise Conflict(refusal(current))
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
