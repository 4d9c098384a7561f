"""Rows to the HumanLayer wire shape (FunctionCall / HumanContact JSON)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from gateway.lifecycle import Kind, Status
from gateway.store.rows import RequestRow


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _approved(status: str) -> bool | None:
    return {Status.APPROVED: True, Status.REJECTED: False}.get(Status(status))


def status_of(row: RequestRow) -> dict[str, Any]:
    common: dict[str, Any] = {
        "requested_at": iso(row.requested_at),
        "responded_at": iso(row.responded_at),
        "slack_message_ts": None,  # HumanLayer's field, filled in by a Slack post
        "user_info": json.loads(row.user_info_json) if row.user_info_json else None,
    }
    if row.wire_status_json is not None:
        common |= json.loads(row.wire_status_json)
    if row.kind == Kind.FUNCTION_CALL:
        fields = common | {
            "approved": _approved(row.status),
            "comment": row.comment,
            "reject_option_name": row.option_name,
            "slack_context": None,
        }
        if row.updated_kwargs_json is not None:  # an extension: the arguments as approved
            fields["updated_kwargs"] = json.loads(row.updated_kwargs_json)
        return fields
    return common | {"response": row.response, "response_option_name": row.option_name}


# Address fields only the channel reads: an email thread's Message-IDs carry its reply
# token, and whoever holds one could answer as the recipient.
PRIVATE_ADDRESS = frozenset({"thread"})


def public_target(target: dict[str, Any]) -> dict[str, Any]:
    """A route target as the API, webhooks and MCP show it: no reply tokens."""
    address = target.get("address")
    if not isinstance(address, dict) or not PRIVATE_ADDRESS & address.keys():
        return target
    shown = {k: v for k, v in address.items() if k not in PRIVATE_ADDRESS}
    return target | {"address": shown}


def to_wire(
    row: RequestRow, *, spec: dict[str, Any] | None = None, route: list[Any] | None = None
) -> dict[str, Any]:
    """The FunctionCall / HumanContact JSON; `spec` and `route` when the caller holds them
    already (a create), so their JSON is not parsed back."""
    return {
        "run_id": row.run_id,
        "call_id": row.call_id,
        "spec": json.loads(row.spec_json) if spec is None else spec,
        "status": status_of(row),
        # Extensions the SDK ignores: where the request went, and its lifecycle status.
        "route": [
            public_target(t) for t in (json.loads(row.route_json) if route is None else route)
        ],
        "gateway_status": row.status,
        **_policy_fields(row),
    }


def _policy_fields(row: RequestRow) -> dict[str, Any]:
    """Extensions present only for requests that have them: the approval policy's progress,
    the deadline and the decision's receipt."""
    fields: dict[str, Any] = {}
    if row.policy_json is not None:
        fields["policy"] = json.loads(row.policy_json)
        fields["policy_progress"] = json.loads(row.progress_json) if row.progress_json else None
    if row.expires_at is not None:
        fields["expires_at"] = iso(row.expires_at)
    if row.receipt is not None:  # the decision's signed receipt (gateway.policies.receipts)
        fields["receipt"] = row.receipt
    if row.redacted_at is not None:  # retention replaced its content by hashes
        fields["redacted_at"] = iso(row.redacted_at)
    return fields
