"""What a route answers besides 200, for the OpenAPI document: every error body is
`{"detail": ...}`. A channel that serves HTTP (`Routed`) documents its routes with
`responses(...)`, as the API does, so client generators and schemathesis agree with it."""

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


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: these error statuses, each with the error body."""
    return {code: {"model": ErrorBody, "description": DESCRIPTIONS[code]} for code in codes}
