""" "Edit and approve": the arguments a person approved instead of the agent's, checked once
for every channel and the console before anything is decided."""

from __future__ import annotations

import json
from typing import Any

from gateway.errors import InvalidInput, NotAllowed
from gateway.settings import Settings
from gateway.store import Tx, dumps
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow
from gateway.vocabulary import AuditEvent
from gateway.wire.models import json_shape_problem


def checked(settings: Settings, row: RequestRow, edited: Any) -> str:
    """The edited arguments as stored (their JSON), or why they cannot be: NotAllowed where
    editing is not offered, InvalidInput for what is not a JSON object within the limits."""
    if not row.offers_edit:
        raise NotAllowed("editing the arguments is not offered on this request")
    if not isinstance(edited, dict):
        raise InvalidInput("the edited arguments must be a JSON object")
    problem = json_shape_problem(edited)
    if problem is not None:
        raise InvalidInput(f"the edited arguments: {problem[0]}")
    try:
        stored = dumps(edited)
    except (TypeError, ValueError) as error:  # NaN, Infinity: no JSON
        raise InvalidInput(f"the edited arguments are not JSON: {error}") from None
    if len(stored.encode()) > settings.max_body_bytes:
        raise InvalidInput(f"the edited arguments are over {settings.max_body_bytes} bytes")
    return stored


def record(tx: Tx, row: RequestRow) -> None:
    """The audit event of an edited approval: both versions of the arguments."""
    original = json.loads(row.spec_json).get("kwargs") or {}
    updated = json.loads(row.updated_kwargs_json or "{}")
    keys = original.keys() | updated.keys()
    changed = sorted(k for k in keys if original.get(k) != updated.get(k))
    detail = {"original": original, "updated": updated, "changed": changed}
    request_store.add_event(tx, row.rid, AuditEvent.EDITED, detail)
