"""Bearer API keys: the caller's project comes from the key, never from the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPBearer

from gateway.core import Caller, Core
from gateway.errors import OutOfScope, Unauthorized
from gateway.security.crypto import hash_api_key
from gateway.store import projects as project_store
from gateway.vocabulary import KeyScope


async def get_core(request: Request) -> Core:  # async: FastAPI runs sync deps in threads
    core: Core = request.app.state.core
    return core


class ApiKeyAuth(HTTPBearer):
    """The caller, from `Authorization: Bearer <api key>`. Being FastAPI's HTTPBearer, it also
    declares the scheme in the OpenAPI document; being one dependency, it costs one."""

    async def __call__(self, request: Request) -> Caller:  # type: ignore[override]
        authorization = request.headers.get("authorization")
        if not authorization:
            raise Unauthorized(
                "missing Authorization header; send 'Authorization: Bearer <api key>'"
            )
        token = bearer_token(authorization)
        if token is None:
            raise Unauthorized("the Authorization header must be 'Bearer <api key>'")
        return await find_caller(request.app.state.core, token)


def bearer_token(authorization: str) -> str | None:
    """The key in `Bearer <key>` (any case of "Bearer"), or None for any other shape."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def find_caller(core: Core, token: str) -> Caller:
    key_hash = hash_api_key(token)
    found = core.keys.get(key_hash)
    if found is None:
        generation = core.keys.generation
        found = await core.db.read(project_store.find_key, key_hash)
        if found is not None:
            core.keys.put(key_hash, *found, generation=generation)
    if found is None:
        raise Unauthorized("invalid or revoked API key")
    key, project = found
    return Caller(project=project, key=key, core=core)


api_key = ApiKeyAuth(
    auto_error=False,
    scheme_name="api_key",
    description="A gateway API key (`gateway keys create`), as `Authorization: Bearer <key>`",
)
CoreDep = Annotated[Core, Depends(get_core)]
CallerDep = Annotated[Caller, Security(api_key)]


def require(caller: Caller, needed: KeyScope) -> Caller:
    """The caller, if its key's scope covers `needed`; else 403 naming the scope needed."""
    scope = KeyScope(caller.key.scope)
    if not scope.allows(needed):
        raise OutOfScope(
            f"this API key has the {scope.value!r} scope; this needs a {needed.value!r} key "
            f"(gateway keys create --scope {needed.value})"
        )
    return caller


async def responder(caller: CallerDep) -> Caller:
    return require(caller, KeyScope.RESPONDER)


async def admin(caller: CallerDep) -> Caller:
    return require(caller, KeyScope.ADMIN)


ResponderDep = Annotated[Caller, Depends(responder)]
AdminDep = Annotated[Caller, Depends(admin)]
