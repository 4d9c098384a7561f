"""`/.well-known/jwks.json`: the public keys that sign decision receipts, anonymous, so
that anyone holding a receipt can verify it offline (`gateway.policies.receipts`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.api.auth import CoreDep
from gateway.policies import receipts
from gateway.store import receipts as receipt_store

router = APIRouter()
# Verifiers may cache the set briefly; a rotated key's receipts name a kid not yet cached,
# which a verifier answers by fetching again.
CACHE_CONTROL = "public, max-age=300"


@router.get("/.well-known/jwks.json", tags=["receipts"], summary="Receipt signing keys (JWKS)")
async def jwks(core: CoreDep) -> JSONResponse:
    """Every receipt signing key, current and retired: public members only."""
    keys = await core.db.read(receipt_store.list_keys)
    body: dict[str, Any] = receipts.jwks(keys)
    return JSONResponse(body, headers={"cache-control": CACHE_CONTROL})
