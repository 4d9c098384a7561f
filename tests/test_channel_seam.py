"""The channel seam: the dispatcher delivers each routed target through a channel, records
what happened on the delivery row, retries what may succeed, and updates posts later."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from channels.registry import REGISTRY
from gateway.errors import DeliveryError
from gateway.outbox.lanes import LANE_WIDTH
from gateway.seam.channel import Channel
from gateway.seam.targets import Target
from gateway.seam.views import RequestView, Sent
from gateway.vocabulary import ChannelName
from tests.factories import RequestFactory
from tests.helpers import detached, events, eventually, jobs, outbox_idle
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

TO_C1 = {"slack": {"channel_or_user_id": "C1"}}


@dataclass
class RecordingChannel:
    """A channel that records calls; `script` says how each send ends."""

    name: ChannelName = ChannelName.SLACK
    script: list[str] = field(default_factory=list)
    sends: list[tuple[RequestView, Target]] = field(default_factory=list)
    updates: list[tuple[RequestView, dict[str, Any]]] = field(default_factory=list)

    def missing_settings(self) -> list[str]:
        return []

    async def start(self) -> None:
        return None

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        self.sends.append((request, target))
        outcome = self.script.pop(0) if self.script else "ok"
        if outcome == "rate_limited":
            raise DeliveryError("429 ratelimited", retryable=True, retry_after=0.05)
        if outcome == "server_error":
            raise DeliveryError("500 internal_error", retryable=True)
        if outcome == "timeout":
            raise TimeoutError("the platform did not answer")
        if outcome == "refused":
            raise DeliveryError("channel_not_found", retryable=False)
        ts = f"1700000000.{len(self.sends):06d}"
        ref = {"channel": target.address["channel"], "ts": ts}
        return Sent(ref=ref, status_fields={"slack_message_ts": ts})

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        self.updates.append((request, ref))

    async def aclose(self) -> None:
        return None


@pytest.fixture
def channel() -> RecordingChannel:
    return RecordingChannel()


@pytest.fixture
async def gateway(db_url: str, channel: RecordingChannel) -> AsyncIterator[RunningGateway]:
    channels = {"slack": lambda _context: channel}  # a test double: it needs no context
    async with running_gateway(test_settings(db_url), channels=channels) as running:
        yield running


async def delivery(gateway: RunningGateway, call_id: str) -> dict[str, Any]:
    [row] = (await events(gateway, call_id))["deliveries"]
    return dict(row)


async def test_sent_then_updated_after_a_decision(
    gateway: RunningGateway, channel: RecordingChannel, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "s1", channel=TO_C1, kwargs={"x": 1}, settle=True)
    assert (await delivery(gateway, "s1"))["status"] == "sent"
    [(view, target)] = channel.sends
    assert view.call_id == "s1" and view.spec["kwargs"] == {"x": 1} and target.channel == "slack"
    async with gateway.client() as client:
        assert (await client.get("/function_calls/s1")).json()["status"]["slack_message_ts"]
        reply = await client.post("/agent/function_calls/s1/respond", json={"approved": True})
        assert reply.status_code == 200
    await eventually(lambda: outbox_idle(gateway))
    [(updated, ref)] = channel.updates
    assert updated.status == "approved" and updated.user_info is not None
    assert ref == {"channel": "C1", "ts": "1700000000.000001"}


@pytest.mark.parametrize("failure", ["rate_limited", "server_error", "timeout"])
async def test_retryable_failures_are_retried(
    gateway: RunningGateway,
    channel: RecordingChannel,
    request_factory: RequestFactory,
    failure: str,
) -> None:
    channel.script = [failure, failure]
    await request_factory(gateway, "r1", channel=TO_C1, settle=True)
    assert len(channel.sends) == 3
    assert (await delivery(gateway, "r1"))["status"] == "sent"


async def test_refusal_marks_the_delivery_failed(
    gateway: RunningGateway, channel: RecordingChannel, request_factory: RequestFactory
) -> None:
    channel.script = ["refused"]
    await request_factory(gateway, "f1", channel=TO_C1, settle=True)
    row = await delivery(gateway, "f1")
    assert row["status"] == "failed" and "channel_not_found" in row["error"]
    assert "delivery_failed" in [e["type"] for e in (await events(gateway, "f1"))["events"]]
    async with gateway.client() as client:  # still pending, still answerable
        reply = await client.post("/agent/function_calls/f1/respond", json={"approved": True})
    assert reply.status_code == 200 and len(channel.sends) == 1


async def test_decided_before_delivery_is_not_sent(
    gateway: RunningGateway, channel: RecordingChannel, request_factory: RequestFactory
) -> None:
    """A post waiting its turn at its destination (LANE_WIDTH others in flight there) for a
    request decided meanwhile is skipped when its turn comes."""
    gate = asyncio.Event()
    original = channel.send

    async def gated_send(request: RequestView, target: Target, /) -> Sent:
        result = await original(request, target)  # recorded on entry
        await gate.wait()
        return result

    channel.send = gated_send  # type: ignore[method-assign]
    busy = [f"busy-{n}" for n in range(LANE_WIDTH)]
    for call_id in busy:
        await request_factory(gateway, call_id, channel=TO_C1)

    async def lane_full() -> bool:
        return len(channel.sends) == LANE_WIDTH

    await eventually(lane_full)  # every send C1 may have at once is in flight
    await request_factory(gateway, "second", channel=TO_C1)

    async def claimed() -> bool:  # the four in flight, and the one waiting its turn
        running = [job for job in await jobs(gateway, status="running") if job["kind"] == "deliver"]
        return len(running) == LANE_WIDTH + 1

    await eventually(claimed)
    async with gateway.client() as client:
        reply = await client.post("/agent/function_calls/second/respond", json={"approved": True})
        assert reply.status_code == 200
    gate.set()
    await eventually(lambda: outbox_idle(gateway))
    assert sorted(view.call_id for view, _target in channel.sends) == busy
    [row] = (await events(gateway, "second"))["deliveries"]
    assert row["status"] == "skipped" and "approved before delivery" in row["error"]


def test_every_registered_channel_implements_the_seam() -> None:
    for name, factory in REGISTRY.items():
        channel: Channel = factory(detached(name))
        assert channel.name == name
        assert isinstance(channel.missing_settings(), list)
        for method in ("start", "send", "update", "aclose"):
            assert asyncio.iscoroutinefunction(getattr(channel, method)), (name, method)
