"""Running a request's due timers (scheduled by `gateway.timers`) and its reminders."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from sqlalchemy.engine import Connection

from gateway.answers.decisions import decide
from gateway.answers.verbs import Decision
from gateway.core import Core
from gateway.errors import Conflict
from gateway.intake import add_targets
from gateway.lifecycle import Event, Kind, Status
from gateway.policies import evaluator
from gateway.policies.routing import SERVED_BY_GATEWAY
from gateway.seam.sentences import spoken
from gateway.seam.targets import Target
from gateway.store import outbox as outbox_store
from gateway.store import requests as request_store
from gateway.store import votes as vote_store
from gateway.store.rows import JobRow, RequestRow
from gateway.vocabulary import AnsweredIn, AuditEvent, DeliveryStatus, JobKind, Timer

REMIND_ATTEMPTS = 4
GATEWAY = {"channel": AnsweredIn.GATEWAY, "user_id": "gateway", "name": "the gateway"}


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
        await core.db.write(_queue_reminders, row.rid, payload["number"])
    else:
        await core.db.write(_escalate, core, row.rid, payload["target"])


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


def _queue_reminders(conn: Connection, rid: str, number: int) -> None:
    """One reminder job per post sent so far, so each is retried on its own."""
    current = request_store.get_by_rid(conn, rid)
    if current is None or current.status != Status.PENDING:
        return
    for delivery in request_store.list_deliveries(conn, [rid]):
        if delivery.status == DeliveryStatus.SENT and delivery.channel not in SERVED_BY_GATEWAY:
            outbox_store.enqueue(
                conn,
                JobKind.REMIND,
                {"delivery_id": delivery.id, "number": number},
                rid=rid,
                project_id=current.project_id,
                max_attempts=REMIND_ATTEMPTS,
            )


def _escalate(conn: Connection, core: Core, rid: str, ref: str) -> None:
    """Add the step's targets: contacted now, and any one of them may decide."""
    current = request_store.get_by_rid(conn, rid)
    if current is None or current.status != Status.PENDING:
        return
    targets = core.config.expand(ref, via="escalation")
    route = json.loads(current.route_json)
    for target in targets:
        request_store.add_to_route(conn, rid, target.model_dump(mode="json"))
    if current.policy_json is not None:
        tree = evaluator.from_dict(json.loads(current.policy_json))
        added = tuple(evaluator.Leaf(len(route) + i) for i in range(len(targets)))
        widened = evaluator.Group(evaluator.Mode.ANY_OF, (tree, *added))
        request_store.set_policy(conn, rid, json.dumps(evaluator.to_dict(widened)))
    audit = [(AuditEvent.ESCALATED, {"target": ref}), *add_targets(conn, core, current, targets)]
    request_store.add_events(conn, rid, audit)


def waiting_on(conn: Connection, rid: str, target: Target) -> list[str]:
    """The target's responders who have not answered yet (everyone, before any vote)."""
    answered = set()
    for vote in vote_store.list_for(conn, rid):
        info = json.loads(vote.user_info_json)
        answered |= {str(info.get(k) or "").lower() for k in ("user_id", "email")}
    return [r for r in target.responders or [] if r.lower() not in answered]
