"""Fair under abuse: one request with 60 Slack targets in one channel goes out at Slack's pace
(one post a second there), and meanwhile another project's delivery, deadline and webhook each
happen within a second of when they are due."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from channels.slack.channel import SlackChannel
from gateway.seam import ChannelContext
from tests.channels.slack.helpers import slack_settings
from tests.factories import RequestFactory
from tests.fakes.slack import Call, FakeSlack
from tests.helpers import add_webhook
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.receiver import WebhookReceiver

pytestmark = pytest.mark.serial  # times to the second

PACE = 1.0  # seconds between posts to one Slack channel (the channel's own pacing)
TARGETS = 60
ON_TIME = 1.0  # seconds: how late another project's work may run after it is due
DEADLINE_IN = 2.0
WITHIN = 10.0  # seconds any one wait may take before the test fails
JITTER = 0.3  # seconds a post may take to reach Slack on a busy machine, after its turn


class TimedSlack(FakeSlack):
    """The fake Slack Web API, noting when each call arrived (wall clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: list[tuple[float, Call]] = []

    async def _record(self, call: Call) -> None:
        self.arrived.append((time.time(), call))
        await super()._record(call)

    def posts_to(self, channel: str) -> list[float]:
        return [
            at
            for at, call in self.arrived
            if call.method == "chat.postMessage" and call.params.get("channel") == channel
        ]

    async def first_post_to(self, channel: str) -> float:
        async with asyncio.timeout(WITHIN), self._changed:
            await self._changed.wait_for(lambda: bool(self.posts_to(channel)))
        return self.posts_to(channel)[0]


@pytest.fixture
async def fake() -> AsyncIterator[TimedSlack]:
    async with TimedSlack() as slack:
        yield slack


@pytest.fixture
async def gateway(db_url: str, fake: TimedSlack) -> AsyncIterator[RunningGateway]:
    slack = slack_settings(fake)

    def paced(context: ChannelContext) -> SlackChannel:
        return SlackChannel(context, slack)  # its own pacing, as in production

    # The abuse this test is about, allowed in: more targets than the default cap.
    settings = test_settings(db_url, max_targets=TARGETS)
    async with running_gateway(settings, channels={"slack": paced}) as running:
        yield running


def crowd(channel: str) -> dict[str, Any]:
    """TARGETS targets, all the one Slack `channel` (any_of takes 20 branches, so nested)."""
    twenty = {"any_of": [{"slack": {"channel_or_user_id": channel}}] * 20}
    return {"any_of": [twenty] * (TARGETS // 20)}


async def decided_at(gateway: RunningGateway, key: str, call_id: str) -> tuple[float, str]:
    """When the long-poll saw `call_id` decided, and its status."""
    async with gateway.client(key) as client:
        reply = await client.get(f"/function_calls/{call_id}", params={"wait": WITHIN})
    return time.time(), str(reply.json()["gateway_status"])


async def webhook_at(receiver: WebhookReceiver) -> float:
    await receiver.wait_for(1, within=WITHIN)
    return time.time()


async def test_a_crowded_slack_channel_delays_no_other_project(
    gateway: RunningGateway,
    fake: TimedSlack,
    receiver: WebhookReceiver,
    request_factory: RequestFactory,
) -> None:
    other = await gateway.new_key("other")
    await add_webhook(gateway, receiver.url, project="other")
    await request_factory(gateway, "crowd", channel=crowd("C1"))
    await fake.first_post_to("C1")  # the crowd is being posted, one a second

    expires_at = datetime.now(UTC) + timedelta(seconds=DEADLINE_IN)
    created = time.time()
    await request_factory(
        gateway,
        "urgent",
        key=other,
        channel={"slack": {"channel_or_user_id": "C2"}},
        expires_at=expires_at.isoformat(),
    )
    delivered = await fake.first_post_to("C2")
    (expired, status), hooked = await asyncio.gather(
        decided_at(gateway, other, "urgent"), webhook_at(receiver)
    )

    due = expires_at.timestamp()
    late = {"delivery": delivered - created, "deadline": expired - due, "webhook": hooked - due}
    print(f"\nanother project's work, seconds late: {late}")
    assert status == "rejected"  # a function call fails closed at its deadline
    assert all(seconds <= ON_TIME for seconds in late.values()), late
    # The crowd kept Slack's pace meanwhile: a post a second (as they arrived), never faster.
    crowd_posts = fake.posts_to("C1")
    gaps = [later - earlier for earlier, later in itertools.pairwise(crowd_posts)]
    print(f"the crowd's posts so far: {len(crowd_posts)}, gaps {min(gaps):.2f}-{max(gaps):.2f} s")
    assert len(crowd_posts) >= DEADLINE_IN / PACE
    assert min(gaps) >= PACE - JITTER
    assert max(gaps) <= PACE + ON_TIME
