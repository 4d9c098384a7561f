"""The create routes' common case, served in plain ASGI: FastAPI's request handling (routing
through nested routers, two Request objects, dependency solving, validating the returned
dict) cost more than the create itself (`bench/README.md`, "Where the time goes").

It answers exactly what the FastAPI routes in `routes.py` answer, which stay registered (the
OpenAPI document is theirs): a well-formed JSON body that validates, under a Bearer key, is
created here, with the same checks in the same order (`limits.creator`, `intake.create`) and
its errors answered by the same handlers (`errors.py`). Anything else (no or a malformed
Authorization header, a body that is not JSON or does not validate, another content type)
goes to FastAPI untouched, body included, so every refusal's body is FastAPI's own.
"""

from __future__ import annotations

from typing import Any

import pydantic_core
from pydantic import BaseModel, ValidationError
from starlette.datastructures import State
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway import intake
from gateway.api import errors, limits
from gateway.api.auth import find_caller
from gateway.api.body import JSONTooLarge, replay, strict_loads
from gateway.core import Core
from gateway.errors import GatewayError
from gateway.lifecycle import Kind
from gateway.store.errors import UNAVAILABLE
from gateway.wire.models import FunctionCallIn, HumanContactIn

PREFIX = "/humanlayer/v1"
ROUTES: dict[str, tuple[Kind, type[BaseModel]]] = {
    f"{PREFIX}/function_calls": (Kind.FUNCTION_CALL, FunctionCallIn),
    f"{PREFIX}/human_contacts": (Kind.HUMAN_CONTACT, HumanContactIn),
    f"{PREFIX}/contact_requests": (Kind.HUMAN_CONTACT, HumanContactIn),
}
JSON_TYPES = (b"application/json", b"application/json; charset=utf-8")


class FastCreate:
    def __init__(self, app: ASGIApp, core: Core, state: State) -> None:
        self.app = app
        self.core = core
        self.state = state  # the FastAPI app's: the create-rate buckets live there

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = ROUTES.get(scope["path"]) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read(receive)
        token, parsed, model = _token_and_body(scope, body, route[1])
        if token is None or model is None:  # FastAPI says what is wrong with it
            await self.app(scope, replay(body, receive), send)
            return
        response: Response
        try:
            result = await self._create(token, parsed, route[0], model)
        except GatewayError as error:
            response = errors.gateway_error_response(error)
        except UNAVAILABLE as error:
            response = errors.database_busy_response(error)
        else:
            response = Response(pydantic_core.to_json(result), media_type="application/json")
        await response(scope, receive, send)

    async def _create(self, token: str, parsed: Any, kind: Kind, model: Any) -> dict[str, Any]:
        """`routes.create_*` with `limits.creator`, as FastAPI would run them."""
        caller = await find_caller(self.core, token)
        limits.take_create(self.state, caller)
        limits.check_channel_nodes(parsed, self.core.settings.max_policy_nodes)
        return await intake.create(self.core, caller, kind, model)


def _token_and_body(
    scope: Scope, body: bytes, model: type[BaseModel]
) -> tuple[str | None, Any, BaseModel | None]:
    """The Bearer token and the validated body, or Nones where FastAPI must answer."""
    token: str | None = None
    content_type: bytes | None = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, rest = value.decode("latin-1").partition(" ")
            token = rest.strip() if scheme.lower() == "bearer" and rest.strip() else None
        elif name == b"content-type":
            content_type = value.lower()
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
