"""Rows of requests, their deliveries and their audit events."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.lifecycle import Kind, Status
from gateway.store import audit, decided, driver, tables
from gateway.store.changes import request_changed
from gateway.store.rows import DeliveryRow, EventRow, RequestRow, values
from gateway.store.values import dumps, utcnow
from gateway.vocabulary import AuditEvent, ChannelName, DeliveryStatus

_request = tables.Request.__table__  # type: ignore[attr-defined]
_event = tables.RequestEvent.__table__  # type: ignore[attr-defined]
_delivery = tables.Delivery.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]


def _to_request(row: sa.Row[Any] | None) -> RequestRow | None:
    return None if row is None else RequestRow(**row._mapping)


# Hot statements are built once: building one costs more than running it on SQLite.
_INSERT_NEW = driver.Insert(
    _request, [f.name for f in fields(RequestRow)], skip_conflicts=True, returning="rid"
)
_BY_CALL_ID = sa.select(_request).where(
    _request.c.project_id == sa.bindparam("project_id"),
    _request.c.call_id == sa.bindparam("call_id"),
)
_INSERT_DELIVERY = driver.Insert(
    _delivery,
    ("rid", "channel", "target_json", "status", "error", "ref_json", "updated_at"),
    returning="id",
)


def insert_request(conn: Connection, request: RequestRow) -> bool:
    """Insert unless (project, call_id) exists; False means it did (idempotent create)."""
    inserted = _INSERT_NEW.one(conn, values(request)) is not None
    if inserted:
        request_changed(conn, request.rid)
        if request.status != Status.PENDING:  # decided at create: a rule or a grant
            decided.record(conn, request)
    return inserted


def get_by_call_id(conn: Connection, project_id: int, call_id: str) -> RequestRow | None:
    params = {"project_id": project_id, "call_id": call_id}
    return _to_request((conn.execute(_BY_CALL_ID, params)).first())


def get_by_rid(conn: Connection, rid: str) -> RequestRow | None:
    query = sa.select(_request).where(_request.c.rid == rid)
    return _to_request((conn.execute(query)).first())


def set_decided(
    conn: Connection, rid: str, status: Status, fields: dict[str, Any]
) -> RequestRow | None:
    """Compare-and-set: only a pending request changes; None means someone decided first."""
    query = (
        sa.update(_request)
        .where(_request.c.rid == rid, _request.c.status == Status.PENDING)
        .values(status=status, **fields)
        .returning(*_request.c)
    )
    row = _to_request(conn.execute(query).first())
    if row is not None:
        request_changed(conn, rid)
        decided.record(conn, row)
    return row


def lock(conn: Connection, rid: str) -> RequestRow | None:
    """The request, locked until the transaction ends (PostgreSQL: replicas voting on it at
    once take turns; SQLite has one writer anyway)."""
    query = sa.select(_request).where(_request.c.rid == rid)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return _to_request(conn.execute(query).first())


def set_progress(conn: Connection, rid: str, progress_json: str) -> None:
    conn.execute(
        sa.update(_request).where(_request.c.rid == rid).values(progress_json=progress_json)
    )
    request_changed(conn, rid)


def set_policy(conn: Connection, rid: str, policy_json: str) -> None:
    conn.execute(sa.update(_request).where(_request.c.rid == rid).values(policy_json=policy_json))


def get_with_project(conn: Connection, rid: str) -> tuple[RequestRow | None, str | None]:
    """A request by rid, and its project's name."""
    row = get_by_rid(conn, rid)
    if row is None:
        return None, None
    name = conn.execute(sa.select(_project.c.name).where(_project.c.id == row.project_id))
    return row, name.scalar_one_or_none()


def find_by_reply_key(conn: Connection, channel: str, reply_key: str) -> str | None:
    """The rid of the request whose post through `channel` a reply names (`Sent.reply_key`)."""
    query = sa.select(_delivery.c.rid).where(
        _delivery.c.channel == channel, _delivery.c.reply_key == reply_key
    )
    return conn.execute(query.limit(1)).scalar_one_or_none()


def copy_target(conn: Connection, rid: str, channel: str, reply_key: str) -> str | None:
    """The target (its JSON) of the request's post through `channel` named `reply_key`."""
    query = sa.select(_delivery.c.target_json).where(
        _delivery.c.rid == rid, _delivery.c.channel == channel, _delivery.c.reply_key == reply_key
    )
    return conn.execute(query.limit(1)).scalar_one_or_none()


def add_wire_status(conn: Connection, rid: str, fields: dict[str, str]) -> None:
    """Merge HumanLayer status fields a post filled in (`Sent.status_fields`)."""
    query = sa.select(_request.c.wire_status_json).where(_request.c.rid == rid)
    current = conn.execute(query).scalar_one_or_none()
    merged = (json.loads(current) if current else {}) | fields
    update = sa.update(_request).where(_request.c.rid == rid)
    conn.execute(update.values(wire_status_json=dumps(merged)))


def add_to_route(conn: Connection, rid: str, target: dict[str, Any]) -> None:
    """Append a target to a request's route (an escalation's new recipients may answer)."""
    current = (
        conn.execute(sa.select(_request.c.route_json).where(_request.c.rid == rid))
    ).scalar_one()
    route = [*json.loads(current), target]
    conn.execute(sa.update(_request).where(_request.c.rid == rid).values(route_json=dumps(route)))


def list_requests(
    conn: Connection,
    project_id: int,
    kind: Kind,
    *,
    status: Status | None,
    run_id: str | None,
    limit: int,
    offset: int,
) -> tuple[list[RequestRow], int]:
    """One page of a project's requests, newest first, and how many match in all."""
    where = [_request.c.project_id == project_id, _request.c.kind == kind]
    if status is not None:
        where.append(_request.c.status == status)
    if run_id is not None:
        where.append(_request.c.run_id == run_id)
    condition = sa.and_(*where)
    count = sa.select(sa.func.count()).select_from(_request).where(condition)
    total = (conn.execute(count)).scalar_one()
    query = (
        sa.select(_request)
        .where(condition)
        .order_by(_request.c.requested_at.desc(), _request.c.rid)
        .limit(limit)
        .offset(offset)
    )
    rows = (conn.execute(query)).all()
    return [RequestRow(**row._mapping) for row in rows], int(total)


def add_event(
    conn: Connection, rid: str, type_: AuditEvent, detail: dict[str, Any] | None = None
) -> str | None:
    """One audit event; returns its digest (see `add_events`)."""
    return add_events(conn, rid, [(type_, detail or {})])[0]


def add_events(
    conn: Connection,
    rid: str,
    events: Sequence[tuple[AuditEvent, dict[str, Any]]],
    project_id: int | None = None,
) -> list[str | None]:
    """Several audit events, the only way one is written: they are inserted, linked into
    their project's chain, as the transaction commits (`audit.seal`). Returns each
    one's digest, the hash of its content that its link in the project's audit chain
    covers (`gateway.store.audit`; None only when a bench turned the chain off): a receipt
    signed in this transaction can name the event by it. `project_id`: the request's, if
    the caller holds its row (else `seal` looks it up)."""
    now = utcnow()
    new = [audit.new_event(rid, type_, detail, now, project_id) for type_, detail in events]
    audit.queue(conn, [event.row for event in new])
    return [event.digest for event in new]


def list_events(conn: Connection, rid: str) -> list[EventRow]:
    query = sa.select(_event).where(_event.c.rid == rid).order_by(_event.c.id)
    stored = [EventRow(**row._mapping) for row in (conn.execute(query)).all()]
    return stored + [EventRow(**row) for row in audit.queued(conn, rid)]


def trail(
    conn: Connection, project_id: int, call_id: str
) -> tuple[list[EventRow], list[DeliveryRow]] | None:
    """A request's audit events and deliveries (None: no such request in the project)."""
    row = get_by_call_id(conn, project_id, call_id)
    if row is None:
        return None
    return list_events(conn, row.rid), list_deliveries(conn, [row.rid])


def add_delivery(
    conn: Connection,
    rid: str,
    channel: ChannelName,
    target: dict[str, Any],
    *,
    status: DeliveryStatus,
    error: str | None = None,
    ref: dict[str, Any] | None = None,
) -> int:
    values = {
        "rid": rid,
        "channel": channel,
        "target_json": dumps(target),
        "status": status,
        "error": error,
        "ref_json": None if ref is None else dumps(ref),
        "updated_at": utcnow(),
    }
    return int(_INSERT_DELIVERY.one(conn, values))


def get_delivery(conn: Connection, delivery_id: int) -> DeliveryRow | None:
    row = (conn.execute(sa.select(_delivery).where(_delivery.c.id == delivery_id))).first()
    return None if row is None else DeliveryRow(**row._mapping)


def list_deliveries(conn: Connection, rids: Sequence[str]) -> list[DeliveryRow]:
    query = sa.select(_delivery).where(_delivery.c.rid.in_(rids)).order_by(_delivery.c.id)
    return [DeliveryRow(**row._mapping) for row in (conn.execute(query)).all()]


def update_delivery(
    conn: Connection,
    delivery_id: int,
    *,
    status: DeliveryStatus,
    ref: dict[str, Any] | None = None,
    reply_key: str | None = None,
    error: str | None = None,
    at: datetime | None = None,
) -> None:
    values: dict[str, Any] = {"status": status, "error": error, "updated_at": at or utcnow()}
    if ref is not None:
        values["ref_json"] = dumps(ref)
    if reply_key is not None:
        values["reply_key"] = reply_key
    conn.execute(sa.update(_delivery).where(_delivery.c.id == delivery_id).values(values))
