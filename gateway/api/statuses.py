"""The statuses each operation of the API really answers, for the OpenAPI document (the
error body and `responses()` are `gateway.seam.routes`, shared with channels' routes)."""

from __future__ import annotations

from typing import Any

from gateway.seam.routes import ErrorBody, responses

# The error handlers of gateway.api.errors that any operation may reach: every route touches
# the database (503); routes with a body sit behind BodyLimit (413).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# A create over its API key's rate (gateway.api.limits).
RATE_LIMITED: dict[int | str, dict[str, Any]] = {
    429: {
        "model": ErrorBody,
        "description": "The API key is over its create rate (GATEWAY_CREATES_PER_SECOND, "
        "GATEWAY_CREATE_BURST); retry after `Retry-After` seconds",
        "headers": {
            "Retry-After": {
                "description": "Seconds until the key may create again (at least 1)",
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    }
}

# What each kind of operation answers besides 200.
CREATE = responses(401, 409, 413, 422, 503) | RATE_LIMITED
READ_ONE = responses(401, 404, 422, 503)
LIST = responses(401, 422, 503)
# 403: the key's scope does not cover it, or (respond) the answer counts for nobody.
DECIDE = responses(401, 403, 404, 409, 413, 422, 503)
ESCALATE = DECIDE
# The /gateway/v1 routes, for admin keys only (403 for any other).
MANAGE = responses(401, 403, 503)
MANAGE_ONE = responses(401, 403, 404, 503)
MANAGE_LIST = responses(401, 403, 422, 503)
# A revoke is a DELETE: it sits behind BodyLimit (413) like any route that may carry a body.
REVOKE_ONE = responses(401, 403, 404, 413, 503)
REVOKE = responses(401, 403, 404, 413, 422, 503)
AUTHENTICATED = responses(401, 503)
HEALTH = responses(503)
