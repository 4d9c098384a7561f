"""`/gateway/v1/grants`: the standing grants of the admin key's project, to list and revoke.

A grant is given only by a person approving a request in a channel or the console ("Approve
and allow…"): there is no route that creates one, here or anywhere in the API."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from gateway.api.auth import AdminDep, CoreDep
from gateway.api.statuses import MANAGE_LIST, REVOKE, REVOKE_ONE
from gateway.core import Caller
from gateway.errors import NotFound
from gateway.policies import grants

router = APIRouter()

Live = Annotated[
    bool,
    Query(description="Only grants neither revoked nor expired (default); false lists them all"),
]
KeyName = Annotated[
    str,
    Query(
        min_length=1,
        max_length=255,
        description="The name of the agent's API key whose live grants to revoke",
    ),
]


def revoked_by(caller: Caller) -> str:
    """Who revoked, in the audit trail: the admin key, by its public prefix."""
    return f"key:{caller.key.prefix}"


@router.get("/grants", tags=["grants"], responses=MANAGE_LIST)
async def list_grants(core: CoreDep, caller: AdminDep, live: Live = True) -> dict[str, Any]:
    """This project's standing grants, newest first: what each allows (`fn`, `scope`,
    `run_id`), who gave it, until when, and how often it approved a request."""
    found = await grants.listing(core, project_id=caller.project_id, live_only=live)
    return {"items": [grant.wire() for grant in found]}


@router.delete("/grants/{grant_id}", tags=["grants"], responses=REVOKE_ONE)
async def revoke_grant(grant_id: str, core: CoreDep, caller: AdminDep) -> dict[str, Any]:
    """Revoke one grant of this project: the next create it would have covered goes to people
    again, on every replica. Revoking a grant no longer live changes nothing."""
    revoked = await grants.revoke_ids(
        core, [grant_id], revoked_by(caller), project_id=caller.project_id
    )
    if not revoked:
        raise NotFound(f"no grant with id {grant_id!r} in this project")
    return revoked[0].wire()


@router.delete("/grants", tags=["grants"], responses=REVOKE)
async def revoke_key_grants(key: KeyName, core: CoreDep, caller: AdminDep) -> dict[str, Any]:
    """Revoke every live grant of one agent key (by its name) in this project; the revoked
    ones are listed (none when the key has no live grant)."""
    revoked = await grants.revoke_key(core, caller.project_id, key, revoked_by(caller))
    return {"items": [grant.wire() for grant in revoked]}
