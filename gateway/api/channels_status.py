"""`GET /gateway/v1/channels`: each channel's configuration and connection state."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway.api.auth import AdminDep, CoreDep
from gateway.api.statuses import MANAGE
from gateway.runtime.channel_states import channel_states

router = APIRouter()


@router.get("/channels", tags=["health"], responses=MANAGE)
async def channels(core: CoreDep, _caller: AdminDep) -> dict[str, Any]:
    """Whether each channel is configured and, for a platform connection, its state and why
    (`connecting`, `connected`, `retrying: <reason>`, `failed: <reason>`)."""
    return {"channels": [state.to_dict() for state in channel_states(core.channels)]}
