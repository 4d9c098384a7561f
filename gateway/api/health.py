"""`/readyz` (readiness) and `/metrics` (Prometheus); `/healthz`, liveness, is in routes.py.

Liveness touches nothing but the event loop: a database outage must not get a healthy
process restarted. Readiness says whether this replica can serve now: the database answers
and its schema is the latest. Channel states are reported (to an admin key or the metrics
token: they name hosts and errors) but never make a replica unready: a platform outage
leaves the API serving (README: "No platform can take the API down").
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from gateway.api.auth import CoreDep, find_caller
from gateway.core import Core
from gateway.errors import Unauthorized
from gateway.runtime.channel_states import channel_states
from gateway.store import migrate, utcnow
from gateway.store.engine import ping
from gateway.store.errors import DatabaseError
from gateway.store.metrics import Snapshot, snapshot
from gateway.vocabulary import KeyScope

log = logging.getLogger(__name__)
T = TypeVar("T")

READY_SECONDS = 2.0  # a database slower than this to answer SELECT 1 is not ready
METRICS_SECONDS = 10.0
OK = "ok"
NOT_CHECKED = "not checked"  # a check after one that failed: not a failure of its own

router = APIRouter()  # /readyz and /metrics, at the root (/healthz: gateway.api.routes)


class Readiness(BaseModel):
    """`ready` or `not ready` and the names of the checks that failed. With an admin key or
    GATEWAY_METRICS_TOKEN also each check's answer and every channel's state, which name
    hosts, errors and missing settings."""

    status: str
    failed: list[str]
    checks: dict[str, str] | None = None
    channels: list[dict[str, Any]] | None = None
    detail: str | None = None  # 503 only: what is not ready


class SingleFlight(Generic[T]):
    """One run at a time, each caller waiting for it at most `within` seconds; callers
    arriving meanwhile share it. A probe of a database that hangs then ties up one reader
    thread, however often the probe is called."""

    def __init__(self, within: float) -> None:
        self.within = within
        self._task: asyncio.Task[T] | None = None

    async def run(self, make: Callable[[], Awaitable[T]]) -> T:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(make())
            self._task.add_done_callback(_retrieve)
        async with asyncio.timeout(self.within):
            return await asyncio.shield(self._task)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A run whose callers all timed out: its outcome is not worth a warning at exit."""
    if not task.cancelled():
        task.exception()


def _flight(request: Request, name: str, within: float) -> SingleFlight[Any]:
    """The app's own flight for `name` (apps in one process, as in tests, share none)."""
    state = request.app.state
    flight: SingleFlight[Any] | None = getattr(state, name, None)
    if flight is None:
        flight = SingleFlight(within)
        setattr(state, name, flight)
    return flight


READINESS: dict[int | str, dict[str, Any]] = {
    503: {"model": Readiness, "description": "Not ready: `failed` names the checks"}
}


@router.get("/readyz", tags=["health"], response_model=Readiness, responses=READINESS)
async def readyz(request: Request, core: CoreDep) -> JSONResponse:
    """Readiness: the database answers within 2 s and its schema is the latest migration.
    Anyone sees the status and which checks failed; an admin key or GATEWAY_METRICS_TOKEN
    (as a Bearer) also sees why, and each channel's state, which never makes it unready."""
    try:
        flight = _flight(request, "readiness", READY_SECONDS)
        checks = await flight.run(lambda: database_checks(core))
    except TimeoutError:
        checks = {"database": f"no answer within {READY_SECONDS:g} s", "schema": NOT_CHECKED}
    failing = {name: why for name, why in checks.items() if why != OK}
    detail = "; ".join(f"{name}: {why}" for name, why in failing.items()) or None
    if failing:
        log.warning("not ready: %s", detail)
    failed = [name for name, why in failing.items() if why != NOT_CHECKED]
    body = Readiness(status="not ready" if failing else "ready", failed=failed)
    if await _shows_details(request, core):
        body.checks, body.detail = checks, detail
        body.channels = [state.to_dict() for state in channel_states(core.channels)]
    return JSONResponse(body.model_dump(exclude_none=True), status_code=503 if failing else 200)


async def _shows_details(request: Request, core: Core) -> bool:
    """Whether the Bearer is GATEWAY_METRICS_TOKEN or an admin key. Any other (or none) sees
    no details and still gets the status: a probe never fails for its credentials."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return False
    metrics_token = core.settings.metrics_token
    if metrics_token is not None and _same(token, metrics_token.get_secret_value()):
        return True
    try:  # the key cache answers without the database; else the lookup gets the probe's bound
        async with asyncio.timeout(READY_SECONDS):
            caller = await find_caller(core, token)
    except (Unauthorized, DatabaseError, TimeoutError):
        return False
    return KeyScope(caller.key.scope).allows(KeyScope.ADMIN)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


async def database_checks(core: Core) -> dict[str, str]:
    """A SELECT 1 through the store's read path, then the schema against the latest head."""
    try:
        await core.db.read(ping)
    except DatabaseError as error:
        return {"database": f"unreachable ({type(error).__name__})", "schema": NOT_CHECKED}
    try:
        behind = await migrate.schema_behind(core.db)
    except DatabaseError as error:
        return {"database": OK, "schema": f"unreadable ({type(error).__name__})"}
    return {"database": OK, "schema": behind or OK}


@router.get("/metrics", include_in_schema=False)
async def prometheus(request: Request, core: CoreDep) -> Response:
    """Prometheus text format; 404 unless GATEWAY_METRICS_ENABLED, and with
    GATEWAY_METRICS_TOKEN only to `Authorization: Bearer <token>`."""
    settings = core.settings
    if not settings.metrics_enabled:
        raise HTTPException(status_code=404, detail="Not Found")
    if settings.metrics_token is not None:
        expected = f"Bearer {settings.metrics_token.get_secret_value()}"
        if not _same(request.headers.get("authorization", ""), expected):
            raise Unauthorized("GET /metrics needs 'Authorization: Bearer <GATEWAY_METRICS_TOKEN>'")
    from gateway.runtime import metrics  # prometheus_client costs every CLI command 40 ms otherwise

    started = time.perf_counter()
    snap: Snapshot | None
    try:
        flight = _flight(request, "metrics", METRICS_SECONDS)
        snap = await flight.run(lambda: core.db.scan(snapshot, utcnow()))
    except (TimeoutError, DatabaseError) as error:
        log.warning("metrics: the database did not answer (%s)", type(error).__name__)
        snap = None
    body = metrics.exposition(core, snap, took=time.perf_counter() - started)
    return Response(body, media_type=metrics.CONTENT_TYPE)
