"""Creating and reading requests: validation, routing, idempotency, long-poll."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from datetime import datetime
from typing import Any

from gateway.conditions import Facts
from gateway.core import Caller, Core
from gateway.errors import Conflict, NotFound
from gateway.lifecycle import Event, Kind, Status, noun, transition
from gateway.outbox import deliveries, webhooks
from gateway.outbox.deliveries import Audit, Planned
from gateway.policies import evaluator, grants, plans, receipts
from gateway.policies.plans import Plan
from gateway.policies.timers import schedule as schedule_timers
from gateway.security.crypto import new_rid
from gateway.store import Tx, dumps, utcnow
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow
from gateway.vocabulary import AnsweredIn, AuditEvent
from gateway.wire.models import (
    WRITE_ONLY,
    FunctionCallIn,
    HumanContactIn,
    is_call_id,
    write_only,
)
from gateway.wire.output import to_wire

MAX_WAIT_SECONDS = 60.0

Incoming = FunctionCallIn | HumanContactIn


def _spec_and_secrets(body: Incoming) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec as stored and echoed, and its write-only values, stored sealed."""
    return body.spec.model_dump(mode="json", exclude=WRITE_ONLY), write_only(body.spec.channel)


def fingerprint(kind: Kind, run_id: str, spec_json: str, secrets: dict[str, str]) -> str:
    """What makes a create "the same body again". Byte for byte the JSON of
    {"kind", "run_id", "spec", "secrets"} (stored hashes stay valid), reusing the spec's."""
    canonical = (
        f'{{"kind":{dumps(kind)},"run_id":{dumps(run_id)},'
        f'"spec":{spec_json},"secrets":{dumps(secrets)}}}'
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def facts(caller: Caller, kind: Kind, body: Incoming) -> Facts:
    """The request as the routing config's rules see it."""
    return Facts(
        kind=kind.value,
        fn=getattr(body.spec, "fn", ""),
        run_id=body.run_id,
        kwargs=getattr(body.spec, "kwargs", None) or {},
        project=caller.project.name,
        key=caller.key.name,
        state=body.spec.state or {},
    )


def _plan(core: Core, caller: Caller, kind: Kind, body: Incoming) -> Plan:
    configured = core.config.projects.get(caller.project.name)
    project_target = (configured and configured.default_target) or caller.project.default_target
    return plans.plan(
        core.config,
        channel=body.spec.channel,
        facts=facts(caller, kind, body),
        key_target=caller.key.target,
        project=configured,
        project_target=project_target,
        max_targets=core.settings.max_targets,
    )


def _record_route(tx: Tx, row: RequestRow, plan: Plan, planned: list[Planned]) -> str | None:
    """The request's first audit events; returns the `decided` event's digest when its rule
    decided it (its receipt names that event)."""
    routed: dict[str, Any] = {"targets": len(plan.targets)}
    if plan.rule_label is not None:
        routed["rule"] = plan.rule_label
    audit: Audit = [(AuditEvent.CREATED, {"call_id": row.call_id}), (AuditEvent.ROUTED, routed)]
    if plan.decided:
        audit.append((AuditEvent.DECIDED, {"status": row.status, "by": row.user_info}))
    audit += deliveries.add(tx, row, planned)
    digests = request_store.add_events(tx, row.rid, audit, row.project_id)
    if not plan.decided:  # a decided request has no deadline, reminder or escalation left
        schedule_timers(tx, row, plan.schedule)
        return None
    return digests[2]  # created, routed, decided


def _decided_by_rule(plan: Plan, kind: Kind, at: datetime) -> dict[str, Any]:
    """A row's decision fields when its rule decides it: the gateway, naming the rule."""
    rule = plan.rule
    if rule is None or rule.decide is None:
        return {"status": Status.PENDING.value}
    event = Event.APPROVE if rule.decide == "approve" else Event.REJECT
    who = {"channel": AnsweredIn.GATEWAY, "user_id": "gateway", "name": plan.rule_label}
    return {
        "status": transition(kind, Status.PENDING, event).value,
        # The SDK takes a rejection without a comment for an error: name the rule instead.
        "comment": rule.comment
        or (None if event is Event.APPROVE else f"Rejected by {who['name']}"),
        "user_info_json": dumps({**who, "rule": rule.name}),
        "responded_at": at,
    }


def _same_request(existing: RequestRow, kind: Kind, fingerprint: str) -> RequestRow:
    if existing.kind != kind:
        raise Conflict(f"call_id {existing.call_id!r} is already used by a {noun(existing.kind)}")
    if existing.body_hash != fingerprint:
        raise Conflict(
            f"call_id {existing.call_id!r} already exists with a different body; "
            "use a new call_id for a new request"
        )
    return existing


async def create(core: Core, caller: Caller, kind: Kind, body: Incoming) -> dict[str, Any]:
    """Store a request with its deliveries and outbox jobs in one transaction."""
    spec, secrets = _spec_and_secrets(body)
    spec_json = dumps(spec)
    body_hash = fingerprint(kind, body.run_id, spec_json, secrets)
    planned = _plan(core, caller, kind, body)
    route_wire = [target.model_dump(mode="json") for target in planned.targets]
    requested_at = utcnow()
    row = RequestRow(
        rid=new_rid(),
        project_id=caller.project_id,
        kind=kind.value,
        call_id=body.call_id,
        run_id=body.run_id,
        fn=getattr(body.spec, "fn", None),
        spec_json=spec_json,
        body_hash=body_hash,
        sealed_secrets=core.box.seal(dumps(secrets)) if secrets else None,
        route_json=dumps(route_wire),
        requested_at=requested_at,
        **_decided_by_rule(planned, kind, requested_at),
        policy_json=None if planned.policy is None else dumps(evaluator.to_dict(planned.policy)),
        expires_at=planned.expires_at(requested_at, body.spec.expires_at),
        key_id=caller.key.id,
        grantable=grants.grantable(kind, planned),
        editable=grants.editable(kind, planned),
    )

    planned_deliveries = deliveries.plan(core, row.rid, planned.targets, planned.delays)

    def insert(tx: Tx) -> tuple[RequestRow, bool]:
        """The new row and True, or the one already stored under this call_id (then nothing
        changes). A live standing grant that covers it approves it here: nobody is asked."""
        grant = grants.covering(tx, row, core.granted_keys)
        new = row if grant is None else grants.approved_by(row, grant)
        if not request_store.insert_request(tx, new):
            existing = request_store.get_by_call_id(tx, caller.project_id, body.call_id)
            assert existing is not None  # the insert found it
            return existing, False
        if grant is not None:
            digest = grants.auto_approved(tx, new, grant, len(planned.targets))
        else:
            digest = _record_route(tx, new, planned, planned_deliveries)
        if planned.decided or grant is not None:  # decided at create: signed, and sent
            new = receipts.sign(tx, core.box, new, digest)
            webhooks.enqueue_completed(tx, new, core.settings.webhook_delays)
        return new, True

    stored, fresh = await core.db.write_for(f"{caller.project_id}/{body.call_id}", insert)
    if not fresh:  # the same call_id again: the stored record, if the body is the same
        return to_wire(_same_request(stored, kind, body_hash))
    return to_wire(stored, spec=spec, route=route_wire)


async def find(core: Core, caller: Caller, kind: Kind, call_id: str) -> RequestRow:
    """The caller's request of this kind, or NotFound (also for another project's call)."""
    if not is_call_id(call_id):  # cannot exist; PostgreSQL would also refuse a NUL in text
        raise NotFound(f"no {noun(kind)} with call_id {call_id!r} in this project")
    row = await core.db.read(request_store.get_by_call_id, caller.project_id, call_id)
    if row is None or row.kind != kind:
        raise NotFound(f"no {noun(kind)} with call_id {call_id!r} in this project")
    return row


async def get(
    core: Core, caller: Caller, kind: Kind, call_id: str, *, wait: float | None = None
) -> dict[str, Any]:
    """The request; with `wait`, hold the answer until it is decided, `wait` seconds pass or
    the gateway begins to shut down."""
    row = await find(core, caller, kind, call_id)
    if not wait or row.status != Status.PENDING or core.stopping.is_set():
        return to_wire(row)
    deadline = asyncio.get_running_loop().time() + min(wait, MAX_WAIT_SECONDS)
    with core.waiters.watch(row.rid) as changed:
        row = await find(core, caller, kind, call_id)  # a decision before watch() is seen here
        # A shutdown answers with the state as it is: the agent asks again, another replica.
        while row.status == Status.PENDING and not core.stopping.is_set():
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            # Woken by a commit in this process, a NOTIFY or the change feed: never a poll.
            # asyncio.timeout, not wait_for: no extra task per waiter (10,000 agents wait).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await changed.wait()
            changed.clear()
            row = await find(core, caller, kind, call_id)
    return to_wire(row)


async def listing(
    core: Core,
    caller: Caller,
    kind: Kind,
    *,
    status: Status | None,
    run_id: str | None,
    limit: int,
    offset: int,
) -> dict[str, Any]:
    """A page in the shape the Go SDK and hld decode: {items,total,limit,offset,has_more}."""
    rows, total = await core.db.scan(
        request_store.list_requests,
        caller.project_id,
        kind,
        status=status,
        run_id=run_id,
        limit=limit,
        offset=offset,
    )
    return {
        "items": [to_wire(row) for row in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
        "has_more": offset + len(rows) < total,
    }
