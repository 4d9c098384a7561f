"""Webhook delivery: signed, retried on the schedule, 410 disables, dead after the last try."""

from __future__ import annotations

import json
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from gateway.cli.webhook_ping import send_test_event
from gateway.errors import InvalidInput
from gateway.outbox.webhooks import add_endpoint
from gateway.store import projects as project_store
from tests.helpers import add_webhook, events, eventually, jobs, outbox_idle
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.receiver import WebhookReceiver


async def decide_one(gateway: RunningGateway, call_id: str, *, state: Any = None) -> None:
    async with gateway.client() as client:
        spec = {"fn": "f", "kwargs": {"x": 1}, "state": state}
        body = {"run_id": "r", "call_id": call_id, "spec": spec}
        assert (await client.post("/function_calls", json=body)).status_code == 200
        reply = await client.post(
            f"/agent/function_calls/{call_id}/respond", json={"approved": True}
        )
        assert reply.status_code == 200


async def test_retried_until_accepted_with_one_id(
    gateway: RunningGateway, receiver: WebhookReceiver
) -> None:
    receiver.script = [503, 500]
    secret = await add_webhook(gateway, receiver.url)
    await decide_one(gateway, "w1", state={"thread_id": "t-9", "deep": {"list": [1, None]}})
    deliveries = await receiver.wait_for(3)
    await eventually(lambda: outbox_idle(gateway))

    assert len({d.headers["webhook-id"] for d in deliveries}) == 1  # the idempotency key
    for delivery in deliveries:  # every attempt is signed afresh and verifies
        payload = Webhook(secret).verify(delivery.body, delivery.headers)
        assert delivery.headers["svix-signature"] == delivery.headers["webhook-signature"]
    assert payload["type"] == "function_call.completed" and payload["is_test"] is False
    assert payload["event"]["spec"]["state"] == {"thread_id": "t-9", "deep": {"list": [1, None]}}
    assert payload["event"]["status"]["approved"] is True
    trail = [e for e in (await events(gateway, "w1"))["events"] if e["type"] == "webhook_delivered"]
    assert len(trail) == 1 and trail[0]["detail"]["attempt"] == 3


async def test_gone_disables_the_endpoint(
    gateway: RunningGateway, receiver: WebhookReceiver
) -> None:
    receiver.status = 410
    await add_webhook(gateway, receiver.url)
    await decide_one(gateway, "g1")
    await receiver.wait_for(1)
    await eventually(lambda: outbox_idle(gateway))
    [endpoint] = await gateway.core.db.read(project_store.list_webhooks)
    assert endpoint.enabled is False and "410" in (endpoint.disabled_reason or "")
    assert "webhook_endpoint_disabled" in [
        e["type"] for e in (await events(gateway, "g1"))["events"]
    ]

    await decide_one(gateway, "g2")  # nothing is sent to a disabled endpoint
    [webhook_job] = [j for j in await jobs(gateway) if j["kind"] == "webhook"]
    assert webhook_job["status"] == "dead"
    assert len(receiver.received) == 1


async def test_dead_after_the_last_attempt(
    gateway: RunningGateway, receiver: WebhookReceiver
) -> None:
    receiver.status = 500
    await add_webhook(gateway, receiver.url)
    await decide_one(gateway, "d1")
    attempts = len(gateway.core.settings.webhook_delays)
    await receiver.wait_for(attempts)
    await eventually(lambda: outbox_idle(gateway))
    [dead] = await jobs(gateway, status="dead")
    assert dead["kind"] == "webhook" and dead["attempts"] == attempts
    assert "answered 500" in dead["last_error"]
    assert len(receiver.received) == attempts
    assert "webhook_failed" in [e["type"] for e in (await events(gateway, "d1"))["events"]]


async def test_events_filter(gateway: RunningGateway, receiver: WebhookReceiver) -> None:
    project = await gateway.core.db.read(project_store.get_project, "default")
    assert project is not None and project.id is not None
    await add_endpoint(
        gateway.core, project_id=project.id, url=receiver.url, events=["human_contact.completed"]
    )
    await decide_one(gateway, "fc-not-sent")
    async with gateway.client() as client:
        body = {"run_id": "r", "call_id": "hc-sent", "spec": {"msg": "?"}}
        assert (await client.post("/contact_requests", json=body)).status_code == 200
        reply = await client.post("/agent/human_contacts/hc-sent/respond", json={"response": "!"})
        assert reply.status_code == 200
    [delivery] = await receiver.wait_for(1)
    assert json.loads(delivery.body)["event"]["call_id"] == "hc-sent"
    assert [j["kind"] for j in await jobs(gateway)].count("webhook") == 1
    with pytest.raises(InvalidInput, match="unknown webhook events"):
        await add_endpoint(
            gateway.core, project_id=project.id, url=receiver.url, events=["function_call.created"]
        )


async def test_test_event_is_marked(gateway: RunningGateway, receiver: WebhookReceiver) -> None:
    secret = await add_webhook(gateway, receiver.url)
    lines = await send_test_event(gateway.core, endpoint_id=None)
    [delivery] = await receiver.wait_for(1)
    payload = Webhook(secret).verify(delivery.body, delivery.headers)
    assert payload["is_test"] is True and payload["type"] == "function_call.completed"
    assert len(lines) == 1 and "→ 200" in lines[0]


async def test_private_addresses_are_refused(tmp_path: object, receiver: WebhookReceiver) -> None:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/p.db", webhook_allow_private=False)
    async with running_gateway(settings) as gateway:
        project = await gateway.core.db.read(project_store.get_project, "default")
        assert project is not None and project.id is not None
        with pytest.raises(InvalidInput, match="GATEWAY_WEBHOOK_ALLOW_PRIVATE"):
            await add_endpoint(gateway.core, project_id=project.id, url=receiver.url, events=None)
        # Registered while allowed (say, before an operator turned it off): refused at send time.
        await gateway.core.db.write(
            project_store.upsert_webhook,
            project_id=project.id,
            url=receiver.url,
            sealed_secret=gateway.core.box.seal("whsec_" + "A" * 32),
            events=[],
            source="cli",
        )
        await decide_one(gateway, "p1")
        await eventually(lambda: outbox_idle(gateway))
        [dead] = await jobs(gateway, status="dead")
        assert "not a public address" in dead["last_error"]
    assert receiver.received == []
