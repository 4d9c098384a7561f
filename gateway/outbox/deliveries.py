"""Deliveries: one per routed target of a request, and the outbox jobs that send, update and
remind through them.

A create, an escalation or an escalation step plans its deliveries first (`plan`: which
channel takes each target, what it still misses), before its transaction; the transaction
then only writes rows and jobs (`add`). No channel code runs on the writer thread."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gateway.core import Core
from gateway.lifecycle import Status
from gateway.seam.targets import Target
from gateway.store import Tx
from gateway.store import outbox as outbox_store
from gateway.store import requests as request_store
from gateway.store import votes as vote_store
from gateway.store.rows import DeliveryRow, RequestRow
from gateway.vocabulary import AuditEvent, ChannelName, DeliveryStatus, JobKind

# The gateway serves these itself (the console reads the store): nothing to send or edit.
SERVED_BY_GATEWAY = frozenset({ChannelName.WEB})
DELIVER_ATTEMPTS = 8
UPDATE_ATTEMPTS = 8
REMIND_ATTEMPTS = 4

Audit = list[tuple[AuditEvent, dict[str, Any]]]


@dataclass(frozen=True)
class Planned:
    """One target's delivery as it will be written: queued for its channel (after `delay`
    seconds), served by the gateway itself (`ref`: its page), or not deliverable (`error`)."""

    target: Target
    status: DeliveryStatus
    delay: float = 0.0
    error: str | None = None
    ref: dict[str, Any] | None = None


def plan(
    core: Core, rid: str, targets: list[Target], delays: list[float] | None = None
) -> list[Planned]:
    """Each target's delivery, decided before the transaction that writes it."""
    return [
        _planned(core, rid, target, delay)
        for target, delay in zip(targets, delays or [0.0] * len(targets), strict=True)
    ]


def _planned(core: Core, rid: str, target: Target, delay: float) -> Planned:
    if target.channel in SERVED_BY_GATEWAY:
        return Planned(target, DeliveryStatus.SENT, ref={"url": core.link(rid)})
    channel = core.channels.get(target.channel)
    if channel is None:
        why = f"this gateway has no {target.channel} channel"
        return Planned(target, DeliveryStatus.UNCONFIGURED, error=why)
    missing = channel.missing_settings()
    if missing:
        why = f"{target.channel} is not configured: set {', '.join(missing)}"
        return Planned(target, DeliveryStatus.UNCONFIGURED, error=why)
    return Planned(target, DeliveryStatus.QUEUED, delay=delay)


def add(tx: Tx, row: RequestRow, planned: list[Planned]) -> Audit:
    """The planned deliveries of a request and the jobs that send them, in the caller's
    transaction; returns the audit entries. A delayed target's delivery is queued for its
    time (the console shows every request)."""
    audit: Audit = []
    for delivery in planned:
        if delivery.status is DeliveryStatus.QUEUED:
            run_at = (
                row.requested_at + timedelta(seconds=delivery.delay) if delivery.delay else None
            )
            queue(tx, row.rid, row.project_id, delivery.target, run_at)
            continue
        delivery_id = request_store.add_delivery(
            tx,
            row.rid,
            delivery.target.channel,
            delivery.target.model_dump(mode="json"),
            status=delivery.status,
            error=delivery.error,
            ref=delivery.ref,
        )
        detail = {"delivery_id": delivery_id, "channel": delivery.target.channel}
        if delivery.status is DeliveryStatus.SENT:
            audit.append((AuditEvent.DELIVERED, detail))
        else:
            audit.append((AuditEvent.DELIVERY_FAILED, detail | {"error": delivery.error}))
    return audit


def queue(tx: Tx, rid: str, project_id: int, target: Target, run_at: datetime | None = None) -> int:
    """A delivery row and the outbox job that sends it (at `run_at`: a delayed branch)."""
    delivery_id = request_store.add_delivery(
        tx, rid, target.channel, target.model_dump(mode="json"), status=DeliveryStatus.QUEUED
    )
    outbox_store.enqueue(
        tx,
        JobKind.DELIVER,
        {"delivery_id": delivery_id},
        rid=rid,
        project_id=project_id,
        max_attempts=DELIVER_ATTEMPTS,
        run_at=run_at,
    )
    return delivery_id


def update_copies(tx: Tx, row: RequestRow) -> None:
    """Every post sent so far shows the request as it now stands."""
    for post in _posts(tx, row.rid):
        outbox_store.enqueue(
            tx,
            JobKind.UPDATE,
            {"delivery_id": post.id},
            rid=row.rid,
            project_id=row.project_id,
            max_attempts=UPDATE_ATTEMPTS,
        )


def queue_reminders(tx: Tx, rid: str, number: int) -> None:
    """One reminder job per post sent so far, so each is retried on its own."""
    current = request_store.get_by_rid(tx, rid)
    if current is None or current.status != Status.PENDING:
        return
    for post in _posts(tx, rid):
        outbox_store.enqueue(
            tx,
            JobKind.REMIND,
            {"delivery_id": post.id, "number": number},
            rid=rid,
            project_id=current.project_id,
            max_attempts=REMIND_ATTEMPTS,
        )


def _posts(tx: Tx, rid: str) -> list[DeliveryRow]:
    """The deliveries a channel sent a post for (the console's page is no post)."""
    return [
        delivery
        for delivery in request_store.list_deliveries(tx, [rid])
        if delivery.status == DeliveryStatus.SENT and delivery.channel not in SERVED_BY_GATEWAY
    ]


def waiting_on(tx: Tx, rid: str, target: Target) -> list[str]:
    """The target's responders who have not answered yet (everyone, before any vote)."""
    answered = set()
    for vote in vote_store.list_for(tx, rid):
        info = json.loads(vote.user_info_json)
        answered |= {str(info.get(k) or "").lower() for k in ("user_id", "email")}
    return [r for r in target.responders or [] if r.lower() not in answered]
