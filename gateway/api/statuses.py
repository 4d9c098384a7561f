"""The statuses each operation really answers, for the OpenAPI document: client generators
and schemathesis then agree with the server. Every error body is `{"detail": ...}`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class ErrorItem(BaseModel):
    """One problem with the request, in FastAPI's validation-error shape."""

    model_config = ConfigDict(extra="allow")

    type: str
    loc: list[str | int]
    msg: str
    ctx: dict[str, Any] | None = None


class ErrorBody(BaseModel):
    """Every error: text for most, a list of problems for 422."""

    detail: str | list[ErrorItem]


DESCRIPTIONS = {
    401: "Missing, malformed, invalid or revoked API key (`Authorization: Bearer <api key>`)",
    403: "The person may not answer this request",
    404: "No such request in this project",
    409: "Already decided (HumanLayer's contract), or the call_id is taken by another body",
    413: "The body is larger than GATEWAY_MAX_BODY_BYTES",
    422: "The input breaks a rule; `detail` lists what and where",
    503: "The database is busy or unreachable; retry after `Retry-After` seconds",
}

# The error handlers of gateway.api.errors that any operation may reach: every route touches
# the database (503); routes with a body sit behind BodyLimit (413).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: these error statuses, each with the error body."""
    return {code: {"model": ErrorBody, "description": DESCRIPTIONS[code]} for code in codes}


# What each kind of operation answers besides 200.
CREATE = responses(401, 409, 413, 422, 503)
READ_ONE = responses(401, 404, 422, 503)
LIST = responses(401, 422, 503)
DECIDE = responses(401, 404, 409, 413, 422, 503)
AUTHENTICATED = responses(401, 503)
HEALTH = responses(503)
