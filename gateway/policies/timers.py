"""A request's timers: its deadline, reminders and escalation steps, scheduled and fired.

Each is an outbox job (`JobKind.TIMER`) written in the transaction that creates the request
(`schedule`), due at its time: durable across a kill -9, claimed by one worker, and
cancelled with the decision (`outbox.cancel_timers`). The outbox worker runs it (`fire`); a
timer that still runs after a decision finds the request decided and does nothing.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timedelta
from typing import Any

from gateway.answers.decisions import decide
from gateway.answers.verbs import Decision
from gateway.core import Core
from gateway.errors import Conflict
from gateway.lifecycle import Event, Kind, Status
from gateway.outbox import deliveries
from gateway.policies import evaluator
from gateway.policies.plans import Schedule
from gateway.seam.sentences import spoken
from gateway.store import Tx
from gateway.store import outbox as outbox_store
from gateway.store import requests as request_store
from gateway.store.rows import JobRow, RequestRow
from gateway.vocabulary import AnsweredIn, AuditEvent, JobKind, Timer

TIMER_ATTEMPTS = 8
# Who decides a request whose deadline passed (`status.user_info`).
GATEWAY = {"channel": AnsweredIn.GATEWAY, "user_id": "gateway", "name": "the gateway"}


def schedule(conn: Tx, row: RequestRow, plan: Schedule) -> None:
    """The request's timers, in the transaction that creates it. Reminders and escalation
    steps due at or after the deadline are left out: nothing is pending by then."""
    due: list[tuple[datetime, dict[str, Any]]] = []
    if row.expires_at is not None:
        waited = (row.expires_at - row.requested_at).total_seconds()
        response = plan.expired_response if row.kind == Kind.HUMAN_CONTACT else None
        expire = {"timer": Timer.EXPIRE, "waited": waited, "response": response}
        due.append((row.expires_at, expire))

    def at(seconds: float) -> datetime:
        return row.requested_at + timedelta(seconds=seconds)

    for number, seconds in enumerate(plan.reminders(), start=1):
        due.append((at(seconds), {"timer": Timer.REMIND, "number": number}))
    for step in plan.escalate:
        due.append((at(step.after), {"timer": Timer.ESCALATE, "target": step.target}))
    deadline = row.expires_at if row.expires_at is not None else None
    for run_at, payload in due:
        if deadline is not None and payload["timer"] != Timer.EXPIRE and run_at >= deadline:
            continue
        outbox_store.enqueue(
            conn,
            JobKind.TIMER,
            payload,
            rid=row.rid,
            project_id=row.project_id,
            max_attempts=TIMER_ATTEMPTS,
            run_at=run_at,
        )


async def fire(core: Core, job: JobRow) -> None:
    """Run a due timer; a decided request makes it a no-op."""
    assert job.rid is not None
    row = await core.db.read(request_store.get_by_rid, job.rid)
    if row is None or row.status != Status.PENDING:
        return
    payload = json.loads(job.payload_json)
    if payload["timer"] == Timer.EXPIRE:
        await _expire(core, row, payload)
    elif payload["timer"] == Timer.REMIND:
        await core.db.write(deliveries.queue_reminders, row.rid, payload["number"])
    else:
        await _escalate(core, row, payload["target"])


def expiry_decision(row: RequestRow, waited: float, response: str | None) -> Decision:
    """Fail closed: a function call is rejected with a comment that says so (the SDK's
    require_approval returns its denial); a question gets its fallback or expires."""
    comment = f"No decision within {spoken(waited)}; expired"
    if row.kind == Kind.FUNCTION_CALL:
        return Decision(Event.REJECT, GATEWAY, comment=comment)
    if response is not None:
        return Decision(Event.RESPOND, GATEWAY, response=response)
    return Decision(Event.EXPIRE, GATEWAY, comment=comment.replace("decision", "answer"))


async def _expire(core: Core, row: RequestRow, payload: dict[str, Any]) -> None:
    decision = expiry_decision(row, payload["waited"], payload.get("response"))
    with contextlib.suppress(Conflict):  # a person decided meanwhile: their decision stands
        await decide(core, row, decision)


async def _escalate(core: Core, row: RequestRow, ref: str) -> None:
    """Add the step's targets: contacted now, and any one of them may decide."""
    targets = core.config.expand(ref, via="escalation")
    planned = deliveries.plan(core, row.rid, targets)

    def add(tx: Tx) -> None:
        current = request_store.get_by_rid(tx, row.rid)
        if current is None or current.status != Status.PENDING:
            return
        route = json.loads(current.route_json)
        for target in targets:
            request_store.add_to_route(tx, row.rid, target.model_dump(mode="json"))
        if current.policy_json is not None:
            tree = evaluator.from_dict(json.loads(current.policy_json))
            added = tuple(evaluator.Leaf(len(route) + i) for i in range(len(targets)))
            widened = evaluator.Group(evaluator.Mode.ANY_OF, (tree, *added))
            request_store.set_policy(tx, row.rid, json.dumps(evaluator.to_dict(widened)))
        escalated = (AuditEvent.ESCALATED, {"target": ref})
        request_store.add_events(tx, row.rid, [escalated, *deliveries.add(tx, current, planned)])

    await core.db.write(add)
