"""Request bodies: a size cap enforced before parsing, and JSON without NaN, lone surrogates
or duplicate keys, within the nesting and size limits of gateway.wire.models."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.settings import Settings
from gateway.wire.models import (
    MAX_JSON_DEPTH,
    MAX_JSON_ITEMS,
    MAX_OBJECT_KEYS,
    describe_path,
    json_shape_problem,
)

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_DEFAULT_MAX_BODY = Settings.model_fields["max_body_bytes"].default

# Every request body's limits, stated in the OpenAPI document (StrictJSONRoute).
BODY_RULES = (
    f"JSON in UTF-8, at most GATEWAY_MAX_BODY_BYTES bytes (default {_DEFAULT_MAX_BODY:,}; "
    f"more is 413), nested at most {MAX_JSON_DEPTH} levels deep (the body itself is level "
    f"1), with at most {MAX_OBJECT_KEYS:,} keys in any one object and {MAX_JSON_ITEMS:,} "
    "values in all (object members plus array items), each key once per object, and no "
    "NaN, Infinity or lone surrogate escapes (else 422)."
)


async def _send_413(send: Send, limit: int) -> None:
    body = json.dumps({"detail": f"request body is larger than {limit} bytes"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Answer 413 for bodies over `limit` bytes, from Content-Length or while reading."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _send_413(send, self.limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _send_413(send, self.limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, replay(b"".join(chunks), receive), send)


def replay(body: bytes, receive: Receive) -> Receive:
    """`receive`, with the body already read given once more."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (use null or a string)")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999 parses to inf, which JSON cannot carry back
        raise ValueError(f"the number {text[:40]} is too large for a 64-bit float")
    return value


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False


class JSONTooLarge(ValueError):
    """Valid JSON beyond the gateway's limits; `path` leads to where (empty: the whole body)."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.path = path


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python keeps the last of duplicate keys, other parsers the first: with
    # {"approved": false, "approved": true} a proxy and the gateway could read two decisions.
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(
                    f"duplicate key {key[:100]!r} in a JSON object; each key may appear once"
                )
            seen.add(key)
    return value


def strict_loads(body: bytes) -> Any:
    """json.loads, minus what JSON itself forbids but Python accepts, within the limits.

    Raises json.JSONDecodeError for what is not JSON, JSONTooLarge for what is too deep or big.
    """
    text = body.decode("utf-8", errors="strict") if isinstance(body, bytes) else body
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:  # hundreds of levels: far past the limit, whatever the stack holds
        raise JSONTooLarge(f"JSON nested more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as error:
        if isinstance(error, json.JSONDecodeError):
            raise
        raise json.JSONDecodeError(str(error), text, 0) from None
    problem = json_shape_problem(value)
    if problem is not None:
        raise JSONTooLarge(*problem)
    if _SURROGATE_ESCAPE.search(body) and _has_lone_surrogate(value):
        raise json.JSONDecodeError("lone UTF-16 surrogate escapes are not valid text", text, 0)
    return value


def refusal(error: JSONTooLarge) -> HTTPException:
    """A 422 shaped like FastAPI's validation errors, naming the limit and where it was hit."""
    where = describe_path(error.path)
    message = f"{error} at {where}" if where else str(error)
    loc = ["body", *error.path[:8]]
    return HTTPException(422, detail=[{"type": "json_too_large", "loc": loc, "msg": message}])


class StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = strict_loads(await self.body())
            except UnicodeDecodeError as error:
                raise json.JSONDecodeError(f"body is not UTF-8: {error}", "", 0) from None
            except JSONTooLarge as error:
                # FastAPI turns other exceptions from here into a bare 400; it re-raises these.
                raise refusal(error) from None
        return self._json

    def parsed(self) -> Any:
        """The body's JSON once FastAPI has read it (None before, or if it was not JSON)."""
        return getattr(self, "_json", None)


class StrictJSONRoute(APIRoute):
    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        if self.body_field is not None and self.openapi_extra is None:
            self.openapi_extra = {"requestBody": {"description": BODY_RULES}}

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict_handler
