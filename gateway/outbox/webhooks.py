"""Signed webhooks (Standard Webhooks, with Svix's header names too) in HumanLayer's
v1beta2 envelope, delivered through the outbox."""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.core import Core
from gateway.errors import DeliveryError, InvalidInput
from gateway.lifecycle import Kind
from gateway.security.crypto import new_webhook_secret, sign_webhook
from gateway.security.ssrf import check_scheme, pin_public
from gateway.store import Tx, dumps
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store.rows import EndpointRow, RequestRow
from gateway.vocabulary import JobKind
from gateway.wire.output import to_wire

log = logging.getLogger(__name__)

EVENTS = ("function_call.completed", "human_contact.completed")
# Sent only to endpoints that list it by name (not to "all events"): gateway.outbox.checkpoints.
CHECKPOINT_EVENT = "audit.checkpoint"
_EVENT_OF_KIND = {Kind.FUNCTION_CALL: EVENTS[0], Kind.HUMAN_CONTACT: EVENTS[1]}
USER_AGENT = "hitl-gateway-webhooks/1"


class EndpointGone(Exception):
    """The receiver answered 410: stop sending to this endpoint."""


def envelope(row: RequestRow, *, is_test: bool = False) -> dict[str, Any]:
    return {"type": _EVENT_OF_KIND[Kind(row.kind)], "event": to_wire(row), "is_test": is_test}


def new_message_id() -> str:
    return "msg_" + secrets.token_urlsafe(18)


def subscribed(endpoint: EndpointRow, event_type: str) -> bool:
    events: list[str] = json.loads(endpoint.events_json)
    return not events or event_type in events


def enqueue_completed(conn: Tx, row: RequestRow, schedule: Sequence[float]) -> None:
    """One job per subscribed endpoint, given as many attempts as the retry `schedule` has
    delays; the body is fixed now so retries resend it as is."""
    body = dumps(envelope(row))
    event_type = _EVENT_OF_KIND[Kind(row.kind)]
    for endpoint in project_store.list_webhooks(conn, row.project_id, enabled_only=True):
        if subscribed(endpoint, event_type):
            payload = {"endpoint_id": endpoint.id, "msg_id": new_message_id(), "body": body}
            outbox_store.enqueue(
                conn,
                JobKind.WEBHOOK,
                payload,
                rid=row.rid,
                project_id=row.project_id,
                max_attempts=len(schedule),
            )


def signed_headers(secret: str, msg_id: str, body: bytes) -> dict[str, str]:
    timestamp = int(time.time())  # re-stamped on every attempt, as the spec asks
    signature = sign_webhook(secret, msg_id, timestamp, body)
    headers = {"content-type": "application/json", "user-agent": USER_AGENT}
    for prefix in ("webhook", "svix"):
        headers |= {
            f"{prefix}-id": msg_id,
            f"{prefix}-timestamp": str(timestamp),
            f"{prefix}-signature": signature,
        }
    return headers


@dataclass(frozen=True)
class Attempt:
    status_code: int
    elapsed_ms: float


async def post(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    allow_private: bool,
    timeout_seconds: float,
) -> Attempt:
    """One delivery attempt. Raises DeliveryError (retryable or not) or EndpointGone."""
    extensions: dict[str, Any] = {}
    target = check_scheme(url)
    if not allow_private:
        pinned = await pin_public(url)
        target = pinned.url
        headers = headers | {"host": pinned.host}
        extensions["sni_hostname"] = pinned.host
    started = time.perf_counter()
    try:
        response = await client.post(
            target,
            content=body,
            headers=headers,
            timeout=timeout_seconds,
            extensions=extensions,
            follow_redirects=False,
        )
    except httpx.HTTPError as error:
        raise DeliveryError(f"{type(error).__name__}: {error}", retryable=True) from None
    elapsed_ms = (time.perf_counter() - started) * 1000
    if 200 <= response.status_code < 300:
        return Attempt(response.status_code, elapsed_ms)
    if response.status_code == 410:
        raise EndpointGone(f"{url} answered 410 Gone")
    raise DeliveryError(
        f"{url} answered {response.status_code}",
        retryable=True,
        retry_after=_retry_after(response.headers.get("retry-after")),
    )


def _retry_after(value: str | None) -> float | None:
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


async def add_endpoint(
    core: Core,
    *,
    project_id: int,
    url: str,
    events: list[str] | None,
    source: str = "cli",
    secret: str | None = None,
) -> tuple[int, str]:
    """Register (or re-key) an endpoint; returns its id and its whsec_ secret."""
    known = (*EVENTS, CHECKPOINT_EVENT)
    unknown = sorted(set(events or []) - set(known))
    if unknown:
        raise InvalidInput(f"unknown webhook events {unknown}; known: {', '.join(known)}")
    try:
        if core.settings.webhook_allow_private:
            check_scheme(url)
        else:
            await pin_public(url)
    except DeliveryError as error:
        raise InvalidInput(str(error)) from None
    secret = secret or new_webhook_secret()
    endpoint_id = await core.db.write(
        project_store.upsert_webhook,
        project_id=project_id,
        url=url,
        sealed_secret=core.box.seal(secret),
        events=list(events or []),
        source=source,
    )
    return endpoint_id, secret


async def sync_config_webhooks(core: Core) -> None:
    """Register the config file's webhook endpoints, with secrets from the environment."""
    for hook in core.config.webhooks:
        secret = os.environ.get(hook.secret_env)
        if not secret:
            log.error(
                "webhook %s: environment variable %s is not set; skipped", hook.url, hook.secret_env
            )
            continue
        project = await core.db.write(project_store.ensure_project, hook.project)
        assert project.id is not None
        try:
            await add_endpoint(
                core,
                project_id=project.id,
                url=hook.url,
                events=hook.events,
                source="config",
                secret=secret,
            )
        except InvalidInput as error:
            log.error("webhook %s from the config file refused: %s", hook.url, error)
