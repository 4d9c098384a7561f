"""Every error leaves as JSON: the SDK reads the body before checking the status."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from gateway.api.limits import RateLimited
from gateway.errors import GatewayError, InvalidInput, Unauthorized
from gateway.store.errors import UNAVAILABLE

log = logging.getLogger(__name__)


def _validation_detail(error: RequestValidationError) -> list[dict[str, object]]:
    # Drop "input": it may hold a bot token or megabytes of state.
    return [
        {key: value for key, value in item.items() if key in ("type", "loc", "msg", "ctx")}
        for item in error.errors()
    ]


async def on_validation(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    detail = _validation_detail(error)
    for item in detail:
        if "ctx" in item and isinstance(item["ctx"], dict):
            item["ctx"] = {key: str(value) for key, value in item["ctx"].items()}
    return JSONResponse({"detail": detail}, status_code=422)


def gateway_error_response(error: GatewayError) -> JSONResponse:
    if isinstance(error, InvalidInput):
        detail = [{"type": "value_error", "loc": ["body"], "msg": str(error)}]
        return JSONResponse({"detail": detail}, status_code=422)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(error, Unauthorized) else None
    if isinstance(error, RateLimited):
        headers = {"Retry-After": str(error.retry_after)}
    return JSONResponse({"detail": str(error)}, status_code=error.status_code, headers=headers)


def database_busy_response(error: Exception) -> JSONResponse:
    log.warning("database unavailable: %s", type(error).__name__)
    return JSONResponse(
        {"detail": "the database is busy or unreachable; retry shortly"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


async def on_gateway_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, GatewayError)
    return gateway_error_response(error)


async def on_database_busy(_request: Request, error: Exception) -> JSONResponse:
    return database_busy_response(error)


def unexpected_response(error: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=error)
    return JSONResponse({"detail": "internal error; see the gateway log"}, status_code=500)


async def on_unexpected(_request: Request, error: Exception) -> JSONResponse:
    return unexpected_response(error)


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(GatewayError, on_gateway_error)
    for unavailable in UNAVAILABLE:
        app.add_exception_handler(unavailable, on_database_busy)
    app.add_exception_handler(Exception, on_unexpected)
