"""What comes due on a pending request, run by the outbox worker: its deadline fails it
closed (a function call is rejected, a question gets its fallback or expires), a reminder
queues one reminder per post, an escalation step adds its targets. Scheduled with the
request by `gateway.policies.timers`; a request decided meanwhile makes each a no-op."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from gateway.answers.decisions import decide
from gateway.answers.verbs import expiry_decision
from gateway.core import Core
from gateway.errors import Conflict
from gateway.lifecycle import Status
from gateway.outbox import deliveries
from gateway.policies import evaluator
from gateway.store import Tx
from gateway.store import requests as request_store
from gateway.store.rows import JobRow, RequestRow
from gateway.vocabulary import AuditEvent, Timer


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
        await core.db.write_for(row.rid, deliveries.queue_reminders, row.rid, payload["number"])
    else:
        await _escalate(core, row, payload["target"])


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
        events = [escalated, *deliveries.add(tx, current, planned)]
        request_store.add_events(tx, row.rid, events, row.project_id)

    await core.db.write_for(row.rid, add)
