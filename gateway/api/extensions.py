"""Gateway extensions beyond HumanLayer's API: audit trail and outbox jobs."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from gateway.api.auth import CallerDep, CoreDep
from gateway.api.statuses import LIST
from gateway.errors import NotFound
from gateway.seam.routes import responses
from gateway.store import outbox as outbox_store
from gateway.store import requests as request_store
from gateway.vocabulary import JobStatus
from gateway.wire.models import is_call_id
from gateway.wire.output import iso

router = APIRouter()
# The query parameter keeps its inline enum in the OpenAPI document (a StrEnum would become
# a named schema); tests/unit/test_vocabulary.py checks it lists exactly JobStatus's values.
JobStatusParam = Literal["pending", "running", "done", "dead"]


@router.get("/calls/{call_id}/events", tags=["audit"], responses=responses(401, 404, 503))
async def call_events(call_id: str, core: CoreDep, caller: CallerDep) -> dict[str, Any]:
    """The audit trail and deliveries of one request (function call or human contact)."""
    found = None
    if is_call_id(call_id):
        found = await core.db.read(request_store.trail, caller.project_id, call_id)
    if found is None:
        raise NotFound(f"no request with call_id {call_id!r} in this project")
    events, deliveries = found
    return {
        "call_id": call_id,
        "events": [
            {"type": e.type, "at": iso(e.at), "detail": json.loads(e.detail_json)} for e in events
        ],
        "deliveries": [
            {
                "id": d.id,
                "channel": d.channel,
                "status": d.status,
                "target": json.loads(d.target_json),
                "error": d.error,
                "updated_at": iso(d.updated_at),
            }
            for d in deliveries
        ],
    }


@router.get("/jobs", tags=["outbox"], responses=LIST)
async def jobs(
    core: CoreDep,
    caller: CallerDep,
    status: JobStatusParam | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """Outbox jobs of this project; `status=dead` lists what gave up after its last attempt."""
    rows = await core.db.scan(
        outbox_store.list_jobs,
        project_id=caller.project_id,
        status=None if status is None else JobStatus(status),
        limit=limit,
    )
    return {
        "items": [
            {
                "id": job.id,
                "kind": job.kind,
                "status": job.status,
                "attempts": job.attempts,
                "max_attempts": job.max_attempts,
                "run_at": job.run_at.isoformat(),
                "last_error": job.last_error,
            }
            for job in rows
        ]
    }
