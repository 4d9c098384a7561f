"""`gateway webhooks test`: sign and send an `is_test` event right now."""

from __future__ import annotations

import secrets

import httpx

from gateway.core import Core
from gateway.errors import DeliveryError
from gateway.lifecycle import Kind, Status
from gateway.outbox.webhooks import EndpointGone, envelope, new_message_id, post, signed_headers
from gateway.security.crypto import new_rid
from gateway.store import dumps, utcnow
from gateway.store import projects as project_store
from gateway.store.rows import RequestRow
from gateway.vocabulary import AnsweredIn


def sample_request() -> RequestRow:
    spec = {"fn": "send_email", "kwargs": {"to": "ops@example.com"}, "state": {"test": True}}
    return RequestRow(
        rid=new_rid(),
        project_id=0,
        kind=Kind.FUNCTION_CALL.value,
        call_id="test-" + secrets.token_hex(4),
        run_id="gateway-webhook-test",
        fn="send_email",
        spec_json=dumps(spec),
        body_hash="",
        route_json="[]",
        status=Status.APPROVED.value,
        comment="test event",
        requested_at=utcnow(),
        responded_at=utcnow(),
        user_info_json=dumps({"channel": AnsweredIn.CLI, "name": "webhook test"}),
    )


async def send_test_event(core: Core, *, endpoint_id: int | None) -> list[str]:
    endpoints = await core.db.read(project_store.list_webhooks)
    chosen = [e for e in endpoints if endpoint_id is None or e.id == endpoint_id]
    body = dumps(envelope(sample_request(), is_test=True)).encode()
    lines = []
    async with httpx.AsyncClient() as client:
        for endpoint in chosen:
            headers = signed_headers(core.box.open(endpoint.sealed_secret), new_message_id(), body)
            try:
                attempt = await post(
                    client,
                    endpoint.url,
                    body,
                    headers,
                    allow_private=core.settings.webhook_allow_private,
                    timeout_seconds=core.settings.webhook_timeout_seconds,
                )
                lines.append(
                    f"{endpoint.id} {endpoint.url} → {attempt.status_code} "
                    f"({attempt.elapsed_ms:.0f} ms)"
                )
            except (DeliveryError, EndpointGone) as error:
                lines.append(f"{endpoint.id} {endpoint.url} failed: {error}")
    return lines
