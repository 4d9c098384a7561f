"""HTTP conformance of the whole app: OPTIONS and 405 answers carry the right `Allow`, and
every operation in /openapi.json lists the error statuses it can answer.

Starlette answers a method a path does not take with the `Allow` of the first route whose
path matches, so `/function_calls` (GET and POST, two routes) claimed `Allow: POST`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import fastapi.routing
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api.statuses import BODY_METHODS
from gateway.seam.routes import DESCRIPTIONS, ErrorBody

# Statuses the app-wide handlers (gateway.api.errors) can give any route that documents none.
FALLBACK_STATUSES = (401, 403, 404, 409, 422, 503)


def _route_path(scope: Scope) -> str:
    """The path the routes see: without the root_path a proxy may have added."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root + "/") else path


def flat_routes(routes: Sequence[BaseRoute]) -> list[Any]:
    """Every route with its full path. FastAPI >= 0.16x keeps included routers nested
    (`iter_route_contexts` flattens them); older versions list the routes themselves."""
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    return list(contexts(routes)) if contexts is not None else list(routes)


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> set[str] | None:
    """Every method some route takes at this path; None when no route or a mount owns it."""
    path = _route_path(scope)
    methods: set[str] = set()
    for route in flat_routes(routes):
        if isinstance(getattr(route, "original_route", route), Mount):
            if route.matches(scope)[0] is not Match.NONE:
                return None  # a sub-app answers for itself
            continue
        regex = getattr(route, "path_regex", None)
        if regex is None or not regex.match(path):
            continue
        if route.methods is None:
            return None  # a route that takes every method
        methods |= set(route.methods)
    return methods | {"OPTIONS"} if methods else None


def _allow(methods: set[str]) -> bytes:
    return ", ".join(sorted(methods)).encode()


class AllowedMethods:
    """OPTIONS answers 204 with `Allow`; a 405 lists every method of the path in `Allow`.

    Only OPTIONS (and the rare 405) pays for this: other requests pass straight through."""

    def __init__(self, app: ASGIApp, routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "OPTIONS":
            methods = allowed_methods(self.routes(), scope)
            if methods is not None:
                headers = [(b"allow", _allow(methods)), (b"content-length", b"0")]
                await send({"type": "http.response.start", "status": 204, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)


def method_not_allowed(app: FastAPI) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The handler of Starlette's 405: JSON, with every method of the path in `Allow`."""

    async def handle(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        headers = dict(error.headers or {})
        if error.status_code == 405:
            methods = allowed_methods(app.router.routes, request.scope)
            if methods is not None:
                headers["Allow"] = _allow(methods).decode()
        return JSONResponse({"detail": error.detail}, error.status_code, headers=headers)

    return handle


def _fallback_responses(method: str) -> dict[str, Any]:
    codes = set(FALLBACK_STATUSES)
    if method in BODY_METHODS:
        codes.add(413)
    ref = {"$ref": "#/components/schemas/ErrorBody"}
    return {
        str(code): {
            "description": DESCRIPTIONS[code],
            "content": {"application/json": {"schema": ref}},
        }
        for code in sorted(codes)
    }


def document_statuses(app: FastAPI, schema: dict[str, Any]) -> None:
    """Give each operation that documents no error status of its own the statuses the
    app-wide handlers can answer (routes mounted by channels, for example)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    error_schema = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(error_schema.pop("$defs", {}))
    components.setdefault("ErrorBody", error_schema)
    for route in flat_routes(app.routes):
        if not isinstance(getattr(route, "original_route", route), APIRoute):
            continue
        if not route.include_in_schema or route.responses:
            continue
        operations = schema.get("paths", {}).get(route.path_format, {})
        for method in route.methods or ():
            operation = operations.get(method.lower())
            if operation is None:
                continue
            for code, response in _fallback_responses(method).items():
                operation.setdefault("responses", {}).setdefault(code, response)


def install(app: FastAPI) -> None:
    """Call last in create_app, after every router and channel has added its routes."""
    if getattr(app.state, "conformance_installed", False):
        return
    app.state.conformance_installed = True
    app.add_middleware(AllowedMethods, routes=lambda: app.router.routes)
    app.add_exception_handler(HTTPException, method_not_allowed(app))
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # FastAPI caches it until the routes change
        document_statuses(app, schema)  # adds only what is missing: the same each time
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
