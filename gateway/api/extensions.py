"""Gateway extensions beyond HumanLayer's API: audit trail, outbox jobs and API keys, for
admin keys only (an agent's key reads its requests through the HumanLayer routes)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from gateway.api.auth import AdminDep, CoreDep
from gateway.api.statuses import MANAGE, MANAGE_LIST, MANAGE_ONE
from gateway.errors import NotFound
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.vocabulary import JobStatus
from gateway.wire.models import is_call_id
from gateway.wire.output import iso, public_target

router = APIRouter()
# The query parameter keeps its inline enum in the OpenAPI document (a StrEnum would become
# a named schema); tests/unit/test_vocabulary.py checks it lists exactly JobStatus's values.
JobStatusParam = Literal["pending", "running", "done", "dead"]


@router.get("/calls/{call_id}/events", tags=["audit"], responses=MANAGE_ONE)
async def call_events(call_id: str, core: CoreDep, caller: AdminDep) -> dict[str, Any]:
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
                "target": public_target(json.loads(d.target_json)),
                "error": d.error,
                "updated_at": iso(d.updated_at),
            }
            for d in deliveries
        ],
    }


@router.get("/jobs", tags=["outbox"], responses=MANAGE_LIST)
async def jobs(
    core: CoreDep,
    caller: AdminDep,
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


@router.get("/keys", tags=["keys"], responses=MANAGE)
async def keys(core: CoreDep, caller: AdminDep) -> dict[str, Any]:
    """This project's API keys: what each may do (`scope`) and who it votes as (`person`);
    never the key itself, which is shown once, when made."""
    rows = await core.db.read(project_store.list_keys, caller.project_id)
    return {
        "items": [
            {
                "id": key.id,
                "prefix": key.prefix,
                "name": key.name,
                "scope": key.scope,
                "person": key.person,
                "target": key.target,
                "created_at": iso(key.created_at),
                "revoked_at": iso(key.revoked_at),
            }
            for key, _project in rows
        ]
    }
