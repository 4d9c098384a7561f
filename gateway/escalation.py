"""`escalate_email`: HumanLayer's escalation of a pending request by email. The request is
sent again, in its email thread, to the escalation's address and extra recipients, with the
escalation message on top; the added recipients may answer too."""

from __future__ import annotations

import json
from typing import Any

from gateway.core import Core
from gateway.errors import Conflict, InvalidInput
from gateway.lifecycle import Status
from gateway.outbox import deliveries
from gateway.routing import channel_targets
from gateway.seam.people import already_decided
from gateway.seam.targets import Target
from gateway.store import Tx
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow
from gateway.vocabulary import AuditEvent, ChannelName, DeliveryStatus
from gateway.wire.models import WRITE_ONLY, Escalation
from gateway.wire.output import to_wire


async def escalate(core: Core, row: RequestRow, escalation: Escalation) -> dict[str, Any]:
    """Send the request again by email, in its thread, with the escalation message on top;
    the merged recipients may answer too."""
    if row.status != Status.PENDING:
        raise Conflict(already_decided(row))
    if escalation.channel is not None:
        channel_targets(core.config, escalation.channel)  # unknown team/person -> 422
    detail = escalation.model_dump(mode="json", exclude=WRITE_ONLY)

    thread = await core.db.read(_email_thread, row.rid)
    target = escalation_target(json.loads(row.spec_json), escalation, thread)  # may refuse
    _check_allowed(core, target.responders or [])
    planned = deliveries.plan(core, row.rid, [target])

    def add_escalation(tx: Tx) -> None:
        current = request_store.lock(tx, row.rid)  # a decision may have landed meanwhile
        if current is not None and current.status != Status.PENDING:
            raise Conflict(already_decided(current))
        request_store.add_to_route(tx, row.rid, target.model_dump(mode="json"))
        audit = [(AuditEvent.ESCALATED, detail), *deliveries.add(tx, row, planned)]
        request_store.add_events(tx, row.rid, audit, row.project_id)

    await core.db.write_for(row.rid, add_escalation)
    return to_wire(row)


def _check_allowed(core: Core, addresses: list[str]) -> None:
    """An escalation mails configured people and allowed domains only: the gateway's own
    address must not carry a request to anyone an API caller names."""
    people = {(p.email or "").lower() for p in core.config.people.values()}
    domains = core.settings.allowed_domains
    refused = [
        a
        for a in addresses
        if a.lower() not in people and a.rpartition("@")[2].lower() not in domains
    ]
    if refused:
        raise InvalidInput(
            f"escalate_email mails configured people and GATEWAY_EMAIL_ALLOWED_DOMAINS only; "
            f"not allowed: {', '.join(refused)}"
        )


def _email_thread(tx: Tx, rid: str) -> list[str]:
    """Message-IDs of the request's emails so far, oldest first (the email channel's refs)."""
    refs = [
        json.loads(d.ref_json or "{}")
        for d in request_store.list_deliveries(tx, [rid])
        if d.channel == ChannelName.EMAIL and d.status == DeliveryStatus.SENT
    ]
    # Each recipient's copy had its own Message-ID (the email channel keeps them all).
    ids = [i for ref in refs for i in (ref.get("message_ids") or {}).values()]
    firsts = [ref["message_id"] for ref in refs if ref.get("message_id")]
    return ids + [i for i in firsts if i not in ids]


def escalation_target(spec: dict[str, Any], escalation: Escalation, thread: list[str]) -> Target:
    """HumanLayer's rules: the escalation channel's address takes over when given; extra
    recipients are the original's, the escalation's and the escalation channel's."""
    original = (spec.get("channel") or {}).get("email") or {}
    override = escalation.channel.email if escalation.channel else None
    address = override.address if override else original.get("address")
    if not address:
        # The body is well formed; the stored request is what lacks an address (409, not 422).
        raise Conflict(
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
