"""Fair under abuse: a webhook receiver that never answers holds a few of the outbox's jobs
at once, and another project's webhook goes out meanwhile within a second of its decision.
(A crowded Slack channel: tests/channels/slack/test_fairness.py.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from gateway.outbox.lanes import LANE_WIDTH
from gateway.vocabulary import KeyScope
from tests.helpers import add_webhook
from tests.services.inprocess import RunningGateway
from tests.services.net import free_port
from tests.services.receiver import WebhookReceiver

pytestmark = pytest.mark.serial  # times to the second

DECIDED = 40  # requests whose webhooks go to the receiver that hangs
ON_TIME = 1.0


@dataclass
class HangingReceiver(WebhookReceiver):
    """Takes every delivery and answers none until `release` is set."""

    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def _handle(self, request: web.Request) -> web.Response:
        await super()._handle(request)  # recorded; its answer is held back
        await self.release.wait()
        return web.json_response({"ok": True})


@pytest.fixture
async def hanging() -> AsyncIterator[HangingReceiver]:
    hook = HangingReceiver(port=free_port())
    await hook.start()
    try:
        yield hook
    finally:
        hook.release.set()
        await hook.stop()


async def decide(gateway: RunningGateway, call_id: str, key: str | None = None) -> None:
    async with gateway.client(key) as client:
        body = {"run_id": "r", "call_id": call_id, "spec": {"fn": "f", "kwargs": {}}}
        assert (await client.post("/function_calls", json=body)).status_code == 200
        path = f"/agent/function_calls/{call_id}/respond"
        assert (await client.post(path, json={"approved": True})).status_code == 200


async def test_a_hanging_webhook_receiver_delays_no_other_project(
    gateway: RunningGateway, hanging: HangingReceiver, receiver: WebhookReceiver
) -> None:
    other = await gateway.new_key("other", scope=KeyScope.ADMIN)
    await add_webhook(gateway, hanging.url)
    await add_webhook(gateway, receiver.url, project="other")
    for n in range(DECIDED):
        await decide(gateway, f"hung-{n}")
    await hanging.wait_for(LANE_WIDTH, within=10)

    decided = time.time()
    await decide(gateway, "urgent", key=other)
    await receiver.wait_for(1, within=10)
    late = time.time() - decided
    print(f"\nanother project's webhook, seconds after its decision: {late:.3f}")
    assert late <= ON_TIME
    assert len(hanging.received) == LANE_WIDTH  # one receiver: a few at once, not every slot

    hanging.release.set()
    await hanging.wait_for(DECIDED, within=10)  # the rest follow once it answers
