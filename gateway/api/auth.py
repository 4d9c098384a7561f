"""Bearer API keys: the caller's project comes from the key, never from the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.core import Caller, Core
from gateway.crypto import hash_api_key
from gateway.errors import Unauthorized
from gateway.store import projects as project_store

# Declares the scheme in the OpenAPI document (clients and schemathesis send the key); the
# header itself is read below, so each way of getting it wrong has its own 401 message.
bearer = HTTPBearer(
    auto_error=False,
    scheme_name="api_key",
    description="A gateway API key (`gateway keys create`), as `Authorization: Bearer <key>`",
)


async def get_core(request: Request) -> Core:  # async: FastAPI runs sync deps in threads
    core: Core = request.app.state.core
    return core


async def get_caller(
    request: Request,
    core: Annotated[Core, Depends(get_core)],
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    authorization = request.headers.get("authorization")
    if not authorization:
        raise Unauthorized("missing Authorization header; send 'Authorization: Bearer <api key>'")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <api key>'")
    found = await core.db.read(project_store.find_key, hash_api_key(token.strip()))
    if found is None:
        raise Unauthorized("invalid or revoked API key")
    key, project = found
    return Caller(project=project, key=key)


CoreDep = Annotated[Core, Depends(get_core)]
CallerDep = Annotated[Caller, Depends(get_caller)]
