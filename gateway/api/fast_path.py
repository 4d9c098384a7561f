"""The hot routes' common case, served in plain ASGI: creates, and reads with their long-poll.
FastAPI's request handling (routing through nested routers, two Request objects, dependency
solving, validating the returned dict) cost more CPU than the create itself, and more memory
than the rest of a waiting agent's long-poll (`bench/README.md`, "Where the time goes").

It answers exactly what the FastAPI routes in `routes.py` answer, which stay registered (the
OpenAPI document is theirs). A create whose well-formed JSON body validates, or a read with
no or a well-formed `wait`, under a Bearer key, is served here with the same checks in the
same order (`limits.creator`, `intake.create`, `intake.get`) and its errors answered by the
same handlers (`errors.py`). Anything else (no or a malformed Authorization header, a body
that is not JSON or does not validate, another content type, an odd query) goes to FastAPI
untouched, body included, so every refusal's body is FastAPI's own.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import Any

import pydantic_core
from pydantic import BaseModel, ValidationError
from starlette.datastructures import State
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway import intake
from gateway.api import errors, limits
from gateway.api.auth import bearer_token, find_caller
from gateway.api.body import JSONTooLarge, replay, strict_loads
from gateway.core import Core
from gateway.errors import GatewayError
from gateway.lifecycle import Kind
from gateway.store.errors import UNAVAILABLE
from gateway.wire.models import FunctionCallIn, HumanContactIn

PREFIX = "/humanlayer/v1"
CREATES: dict[str, tuple[Kind, type[BaseModel]]] = {
    f"{PREFIX}/function_calls": (Kind.FUNCTION_CALL, FunctionCallIn),
    f"{PREFIX}/human_contacts": (Kind.HUMAN_CONTACT, HumanContactIn),
    f"{PREFIX}/contact_requests": (Kind.HUMAN_CONTACT, HumanContactIn),
}
READS = {  # GET {collection}/{call_id}
    f"{PREFIX}/function_calls/": Kind.FUNCTION_CALL,
    f"{PREFIX}/human_contacts/": Kind.HUMAN_CONTACT,
}
JSON_TYPES = (b"application/json", b"application/json; charset=utf-8")
WAIT = re.compile(rb"wait=(\d{1,2}(?:\.\d{1,6})?)")  # `routes.Wait`, in its plain spellings
MAX_WAIT = 60.0


class FastPath:
    def __init__(self, app: ASGIApp, core: Core, state: State) -> None:
        self.app = app
        self.core = core
        self.state = state  # the FastAPI app's: the create-rate buckets live there

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method") if scope["type"] == "http" else None
        if method == "POST" and (route := CREATES.get(scope["path"])) is not None:
            await self._post(route, scope, receive, send)
        elif method == "GET" and (read := _read_route(scope)) is not None:
            await self._get(*read, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _post(
        self, route: tuple[Kind, type[BaseModel]], scope: Scope, receive: Receive, send: Send
    ) -> None:
        body = await _read(receive)
        token, parsed, model = _token_and_body(scope, body, route[1])
        if token is None or model is None:  # FastAPI says what is wrong with it
            await self.app(scope, replay(body, receive), send)
            return
        await _answer(self._create(token, parsed, route[0], model), scope, receive, send)

    async def _get(
        self,
        kind: Kind,
        call_id: str,
        wait: float | None,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        token = _bearer(scope)
        if token is None:
            await self.app(scope, receive, send)
            return
        await _answer(self._read(token, kind, call_id, wait), scope, receive, send)

    async def _read(self, token: str, kind: Kind, call_id: str, wait: float | None) -> Any:
        """`routes.get_*`, as FastAPI would run it."""
        caller = await find_caller(self.core, token)
        return await intake.get(self.core, caller, kind, call_id, wait=wait)

    async def _create(self, token: str, parsed: Any, kind: Kind, model: Any) -> dict[str, Any]:
        """`routes.create_*` with `limits.creator`, as FastAPI would run them."""
        caller = await find_caller(self.core, token)
        limits.admit_create(self.state, caller, parsed)
        return await intake.create(self.core, caller, kind, model)


async def _answer(result: Awaitable[Any], scope: Scope, receive: Receive, send: Send) -> None:
    """The result as JSON (as FastAPI renders a route's dict), or the error as its handler
    answers it."""
    response: Response
    try:
        response = Response(pydantic_core.to_json(await result), media_type="application/json")
    except GatewayError as error:
        response = errors.gateway_error_response(error)
    except UNAVAILABLE as error:
        response = errors.database_busy_response(error)
    except Exception as error:  # a bug: answered as FastAPI's handler answers it
        response = errors.unexpected_response(error)
    await response(scope, receive, send)


def _read_route(scope: Scope) -> tuple[Kind, str, float | None] | None:
    """The kind, call_id and wait of a read this path serves, or None (FastAPI's to answer)."""
    path: str = scope["path"]
    collection, slash, call_id = path.rpartition("/")
    kind = READS.get(collection + slash)
    if kind is None or not call_id:
        return None
    query: bytes = scope["query_string"]
    if not query:
        return kind, call_id, None
    found = WAIT.fullmatch(query)
    if found is None:
        return None
    wait = float(found.group(1))
    return (kind, call_id, wait) if 0 < wait <= MAX_WAIT else None


def _bearer(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return bearer_token(value.decode("latin-1"))
    return None


def _token_and_body(
    scope: Scope, body: bytes, model: type[BaseModel]
) -> tuple[str | None, Any, BaseModel | None]:
    """The Bearer token and the validated body, or Nones where FastAPI must answer."""
    token = _bearer(scope)
    content_type = next((v.lower() for k, v in scope["headers"] if k == b"content-type"), None)
    if token is None or (content_type is not None and content_type not in JSON_TYPES):
        return None, None, None
    try:
        parsed = strict_loads(body)
        return token, parsed, model.model_validate(parsed)
    except (ValueError, JSONTooLarge, ValidationError, RecursionError):
        return None, None, None


async def _read(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            return b"".join(chunks)
