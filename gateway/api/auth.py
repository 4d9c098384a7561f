"""Bearer API keys: the caller's project comes from the key, never from the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from gateway.core import Caller, Core
from gateway.crypto import hash_api_key
from gateway.errors import Unauthorized
from gateway.store import projects as project_store


async def get_core(request: Request) -> Core:  # async: FastAPI runs sync deps in threads
    core: Core = request.app.state.core
    return core


async def get_caller(
    core: Annotated[Core, Depends(get_core)],
    authorization: Annotated[str | None, Header()] = None,
) -> Caller:
    if not authorization:
        raise Unauthorized("missing Authorization header; send 'Authorization: Bearer <api key>'")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <api key>'")
    async with core.db.read() as conn:
        found = await project_store.find_key(conn, hash_api_key(token.strip()))
    if found is None:
        raise Unauthorized("invalid or revoked API key")
    key, project = found
    return Caller(project=project, key=key)


CoreDep = Annotated[Core, Depends(get_core)]
CallerDep = Annotated[Caller, Depends(get_caller)]
