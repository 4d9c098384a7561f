"""What the store hands out: plain, immutable rows, one class per table in `tables.py`.

The SQLModel classes there are the schema (and Alembic's source); building one costs the
ORM's instrumentation, which the gateway never uses. These are built from a result row in
a few microseconds. Fields are the table's columns, in its order (a test checks both match).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, TypeVar

R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectRow:
    id: int | None = None
    name: str
    default_target: str | None = None
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeyRow:
    id: int | None = None
    project_id: int
    name: str
    key_hash: str
    prefix: str
    target: str | None = None
    created_at: datetime
    revoked_at: datetime | None = None
    scope: str = "agent"
    person: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRow:
    rid: str
    project_id: int
    kind: str
    call_id: str
    run_id: str
    fn: str | None = None
    spec_json: str
    body_hash: str
    sealed_secrets: str | None = None
    route_json: str
    status: str
    comment: str | None = None
    option_name: str | None = None
    response: str | None = None
    user_info_json: str | None = None
    wire_status_json: str | None = None
    requested_at: datetime
    responded_at: datetime | None = None
    policy_json: str | None = None
    progress_json: str | None = None
    expires_at: datetime | None = None
    key_id: int | None = None
    grantable: bool = False
    editable: bool = False
    updated_kwargs_json: str | None = None
    redacted_at: datetime | None = None
    receipt: str | None = None  # the decision's signed receipt (gateway.policies.receipts)

    @property
    def offers_grant(self) -> bool:
        """Whether its approver may give a standing grant: one answer decides it (no
        policy), its rule allowed grants, and it names the key a grant would be for."""
        return self.grantable and self.policy_json is None and self.key_id is not None

    @property
    def offers_edit(self) -> bool:
        """Whether its approver may edit the arguments (one answer decides it)."""
        return self.editable and self.policy_json is None

    @property
    def user_info(self) -> dict[str, Any] | None:
        """Who decided (`status.user_info`), or None while nobody has."""
        return json.loads(self.user_info_json) if self.user_info_json else None


@dataclass(frozen=True, slots=True, kw_only=True)
class GrantRow:
    id: str
    project_id: int
    key_id: int
    fn: str
    scope: str
    run_id: str | None = None
    kwargs_hash: str | None = None
    granted_by_json: str
    person: str
    source_rid: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    uses: int = 0
    last_used_at: datetime | None = None
    noted_uses: int = 0
    note_due: datetime | None = None

    @property
    def granted_by(self) -> dict[str, Any]:
        info: dict[str, Any] = json.loads(self.granted_by_json)
        return info


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRow:
    id: int | None = None
    rid: str
    type: str
    detail_json: str
    at: datetime
    project_id: int | None = None
    seq: int | None = None
    digest: str | None = None
    prev_hash: str | None = None
    hash: str | None = None
    redacted_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRow:
    id: int | None = None
    rid: str
    person: str
    approve: bool
    targets_json: str
    user_info_json: str
    comment: str | None = None
    option_name: str | None = None
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryRow:
    id: int | None = None
    rid: str
    channel: str
    target_json: str
    status: str
    ref_json: str | None = None
    reply_key: str | None = None
    error: str | None = None
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRow:
    id: int | None = None
    kind: str
    rid: str | None = None
    project_id: int | None = None
    payload_json: str
    status: str
    attempts: int = 0
    max_attempts: int
    run_at: datetime
    locked_until: datetime | None = None
    claimed_by: str | None = None
    last_error: str | None = None
    waiting_for: str | None = None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointRow:
    id: int | None = None
    project_id: int
    url: str
    sealed_secret: str
    events_json: str
    enabled: bool = True
    disabled_reason: str | None = None
    source: str
    created_at: datetime


def values(row: Any) -> dict[str, Any]:
    """A row's columns by name (for an insert)."""
    return {field.name: getattr(row, field.name) for field in fields(row)}


def changed(row: R, **updates: Any) -> R:
    """A copy of `row` with some columns replaced."""
    return replace(row, **updates)  # type: ignore[type-var]
