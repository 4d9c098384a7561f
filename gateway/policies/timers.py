"""A request's timers: its deadline, reminders and escalation steps.

Each is an outbox job (`JobKind.TIMER`) written in the transaction that creates the request,
due at its time: durable across a kill -9, claimed by one worker, and cancelled with the
decision (`outbox.cancel_timers`). The outbox worker runs it when due (`gateway.runtime.due`);
a timer that still runs after a decision finds the request decided and does nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from gateway.lifecycle import Kind
from gateway.policies.plans import Schedule
from gateway.store import Tx
from gateway.store import outbox as outbox_store
from gateway.store.rows import RequestRow
from gateway.vocabulary import JobKind, Timer

TIMER_ATTEMPTS = 8


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
