"""The statuses each operation of the API really answers, for the OpenAPI document (the
error body and `responses()` are `gateway.seam.routes`, shared with channels' routes)."""

from __future__ import annotations

from gateway.seam.routes import responses

# The error handlers of gateway.api.errors that any operation may reach: every route touches
# the database (503); routes with a body sit behind BodyLimit (413).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# What each kind of operation answers besides 200.
CREATE = responses(401, 409, 413, 422, 503)
READ_ONE = responses(401, 404, 422, 503)
LIST = responses(401, 422, 503)
# 403: the key's scope does not cover it, or (respond) the answer counts for nobody.
DECIDE = responses(401, 403, 404, 409, 413, 422, 503)
ESCALATE = DECIDE
# The /gateway/v1 routes, for admin keys only (403 for any other).
MANAGE = responses(401, 403, 503)
MANAGE_ONE = responses(401, 403, 404, 503)
MANAGE_LIST = responses(401, 403, 422, 503)
AUTHENTICATED = responses(401, 503)
HEALTH = responses(503)
