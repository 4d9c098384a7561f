"""HumanLayer-compatible routes (paths relative to /humanlayer/v1)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query

from gateway import __version__, escalation, intake
from gateway.answers import respond
from gateway.api.auth import AdminDep, CallerDep, ResponderDep
from gateway.api.body import StrictJSONRoute
from gateway.api.limits import CreatorDep
from gateway.api.outputs import FunctionCall, FunctionCallPage, answering
from gateway.api.statuses import AUTHENTICATED, CREATE, DECIDE, ESCALATE, HEALTH, LIST, READ_ONE
from gateway.lifecycle import Kind, Status
from gateway.wire.models import (
    Escalation,
    FunctionCallIn,
    FunctionCallStatusIn,
    HumanContactIn,
    HumanContactStatusIn,
)

router = APIRouter(route_class=StrictJSONRoute)

Wait = Annotated[
    float | None,
    Query(gt=0, le=60, description="Long-poll: answer when decided, or after this many seconds"),
]
MAX_LIMIT = 1000
# Far past any real queue, and well inside the 64-bit integers SQL binds (2**63 was a 500).
MAX_OFFSET = 1_000_000_000
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
RunId = Annotated[str | None, Query(max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[\x20-\x7e]+$",
        description=(
            "Sent again with the same body after a lost answer, returns the first answer "
            "(200 and the stored record) instead of 409. 1-255 printable ASCII characters."
        ),
    ),
]
Wire = dict[str, Any]


@router.post("/function_calls", tags=["function calls"], responses=answering(FunctionCall, CREATE))
async def create_function_call(body: FunctionCallIn, caller: CreatorDep) -> Wire:
    return await intake.create(caller.core, caller, Kind.FUNCTION_CALL, body)


@router.get("/function_calls", tags=["function calls"], responses=answering(FunctionCallPage, LIST))
async def list_function_calls(
    caller: CallerDep,
    status: Status | None = None,
    run_id: RunId = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Wire:
    return await intake.listing(
        caller.core,
        caller,
        Kind.FUNCTION_CALL,
        status=status,
        run_id=run_id,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/function_calls/{call_id}",
    tags=["function calls"],
    responses=answering(FunctionCall, READ_ONE),
)
async def get_function_call(call_id: str, caller: CallerDep, wait: Wait = None) -> Wire:
    return await intake.get(caller.core, caller, Kind.FUNCTION_CALL, call_id, wait=wait)


@router.post(
    "/agent/function_calls/{call_id}/respond",
    tags=["function calls"],
    responses=answering(FunctionCall, DECIDE),
)
async def respond_function_call(
    call_id: str,
    body: FunctionCallStatusIn,
    caller: ResponderDep,
    idempotency_key: IdempotencyKey = None,
) -> Wire:
    return await respond.respond(
        caller.core, caller, call_id, body, idempotency_key=idempotency_key
    )


@router.post(
    "/agent/function_calls/{call_id}/escalate_email",
    tags=["function calls"],
    responses=answering(FunctionCall, ESCALATE),
)
async def escalate_function_call(call_id: str, body: Escalation, caller: AdminDep) -> Wire:
    row = await intake.find(caller.core, caller, Kind.FUNCTION_CALL, call_id)
    return await escalation.escalate(caller.core, row, body)


@router.get(
    "/agent/function_calls/pending",
    tags=["function calls"],
    responses=answering(FunctionCallPage, LIST),
)
async def pending_function_calls(caller: CallerDep, limit: Limit = 100, offset: Offset = 0) -> Wire:
    return await intake.listing(
        caller.core,
        caller,
        Kind.FUNCTION_CALL,
        status=Status.PENDING,
        run_id=None,
        limit=limit,
        offset=offset,
    )


@router.post("/contact_requests", tags=["human contacts"], responses=CREATE)
@router.post("/human_contacts", tags=["human contacts"], responses=CREATE)
async def create_human_contact(body: HumanContactIn, caller: CreatorDep) -> Wire:
    return await intake.create(caller.core, caller, Kind.HUMAN_CONTACT, body)


@router.get("/contact_requests", tags=["human contacts"], responses=LIST)
@router.get("/human_contacts", tags=["human contacts"], responses=LIST)
async def list_human_contacts(
    caller: CallerDep,
    status: Status | None = None,
    run_id: RunId = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Wire:
    return await intake.listing(
        caller.core,
        caller,
        Kind.HUMAN_CONTACT,
        status=status,
        run_id=run_id,
        limit=limit,
        offset=offset,
    )


@router.get("/contact_requests/{call_id}", tags=["human contacts"], responses=READ_ONE)
@router.get("/human_contacts/{call_id}", tags=["human contacts"], responses=READ_ONE)
async def get_human_contact(call_id: str, caller: CallerDep, wait: Wait = None) -> Wire:
    return await intake.get(caller.core, caller, Kind.HUMAN_CONTACT, call_id, wait=wait)


@router.post("/agent/human_contacts/{call_id}/respond", tags=["human contacts"], responses=DECIDE)
async def respond_human_contact(
    call_id: str,
    body: HumanContactStatusIn,
    caller: ResponderDep,
    idempotency_key: IdempotencyKey = None,
) -> Wire:
    return await respond.respond(
        caller.core, caller, call_id, body, idempotency_key=idempotency_key
    )


@router.post(
    "/agent/human_contacts/{call_id}/escalate_email", tags=["human contacts"], responses=ESCALATE
)
async def escalate_human_contact(call_id: str, body: Escalation, caller: AdminDep) -> Wire:
    row = await intake.find(caller.core, caller, Kind.HUMAN_CONTACT, call_id)
    return await escalation.escalate(caller.core, row, body)


@router.get("/agent/human_contacts/pending", tags=["human contacts"], responses=LIST)
async def pending_human_contacts(caller: CallerDep, limit: Limit = 100, offset: Offset = 0) -> Wire:
    return await intake.listing(
        caller.core,
        caller,
        Kind.HUMAN_CONTACT,
        status=Status.PENDING,
        run_id=None,
        limit=limit,
        offset=offset,
    )


@router.get("/project", tags=["project"], responses=AUTHENTICATED)
async def get_project(caller: CallerDep) -> Wire:
    name = caller.project.name
    return {
        "name": name,
        "slug": name,
        "organization": "self-hosted",
        "project_slug": name,
        "org_slug": "self-hosted",
    }


health = APIRouter()


@health.get("/healthz", tags=["health"], responses=HEALTH)
async def healthz() -> Wire:
    """Liveness: no database, so an outage never gets a live process restarted (`/readyz`)."""
    return {"status": "ok"}


@health.get("/version", tags=["health"], responses={200: {"description": "The version"}})
async def version() -> Wire:
    return {"version": __version__}
