"""Two `gateway serve` replicas on one PostgreSQL database, Telegram in polling mode: Telegram
allows one getUpdates at a time per bot (a second one ends the first with 409), so exactly
one replica polls and the other stands by naming it; when the poller is killed with -9, the
other takes over within 10 s, and a click made meanwhile is handled once, after.

The platform is the fake Telegram Bot API in this process: it records every poll, and counts
the polls that overlapped (`conflicts`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.channels.telegram.helpers import ALICE, ROUTING, data_of, posted_message, users
from tests.factories import request_body
from tests.fakes.telegram import FakeTelegram
from tests.helpers import eventually
from tests.replicas.cluster import Cluster, Replica

pytestmark = pytest.mark.postgres

TAKEOVER_WITHIN = 10.0  # issue 27, as for the other singletons


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as telegram_fake:
        yield telegram_fake


def polling_env(tmp_path: Path, pg_url: str, fake: FakeTelegram) -> dict[str, str]:
    config = tmp_path / "routing.toml"
    config.write_text(ROUTING)
    return {
        "GATEWAY_DATABASE_URL": pg_url,
        "GATEWAY_CONFIG": str(config),
        "TELEGRAM_BOT_TOKEN": FakeTelegram.TOKEN,
        "TELEGRAM_API_URL": fake.api_url,
        "TELEGRAM_MODE": "polling",
        "GATEWAY_CHANNEL_CONNECT_TIMEOUT_SECONDS": "1",
        "GATEWAY_CHANNEL_RETRY_CAP_SECONDS": "1",
        "GATEWAY_OUTBOX_POLL_SECONDS": "0.2",
    }


async def the_poller(replicas: list[Replica]) -> Replica:
    """Once every replica names the same owner of the Telegram connection, and the owner says
    it is connected while the others stand by for it: that owner."""
    found: list[Replica] = []

    async def agreed() -> bool:
        views = await asyncio.gather(*(r.channels() for r in replicas))
        owners = {view["telegram"]["owner"] for view in views}
        owner = next((r for r in replicas if {r.replica_id} == owners), None)
        if owner is None:
            return False
        said = {
            r.replica_id: str(v["telegram"]["connection"])
            for r, v in zip(replicas, views, strict=True)
        }
        others = [said[r.replica_id] for r in replicas if r is not owner]
        found[:] = [owner]
        return said[owner.replica_id].startswith("connected (owned by this replica") and all(
            text == f"standby (owned by {owner.replica_id})" for text in others
        )

    await eventually(agreed, within=TAKEOVER_WITHIN + 5)
    return found[0]


async def create(replica: Replica, call_id: str) -> None:
    async with replica.client() as api:
        body = request_body(call_id, channel={"team": "ops"})
        created = await api.post("/function_calls", json=body)
    assert created.status_code == 200, created.text


async def approved(replica: Replica, call_id: str, wait: float) -> dict[str, Any]:
    async with replica.client() as api:
        response = await api.get(f"/function_calls/{call_id}", params={"wait": wait})
    assert response.status_code == 200, response.text
    status: dict[str, Any] = response.json()["status"]
    return status


async def message_for(fake: FakeTelegram, replica: Replica, call_id: str) -> dict[str, Any]:
    """The request's message, once its delivery is recorded as sent."""

    async def sent() -> bool:
        async with replica.client() as api:
            url = f"{replica.process.base_url}/gateway/v1/calls/{call_id}/events"
            deliveries = (await api.get(url)).json()["deliveries"]
        return [d["status"] for d in deliveries] == ["sent"]

    await eventually(sent)
    return posted_message(fake, call_id)


async def test_one_replica_polls_and_the_other_takes_over_within_10_s_of_a_kill(
    tmp_path: Path, pg_url: str, fake: FakeTelegram
) -> None:
    alice = users(fake)[ALICE]
    cluster = Cluster(tmp_path, polling_env(tmp_path, pg_url, fake))
    try:
        await cluster.start()
        await cluster.start()
        poller = await the_poller(cluster.replicas)
        [standby] = [r for r in cluster.replicas if r is not poller]

        # A click round trip through the poller, created on the replica that stands by.
        await create(standby, "poll-1")
        message = await message_for(fake, standby, "poll-1")
        await fake.click(message, data_of(message, "gw:approve:"), alice)
        assert (await approved(standby, "poll-1", wait=10))["approved"] is True
        assert fake.conflicts == 0, "two replicas polled at once"
        assert len({poll.peer for poll in fake.polls}) == 1, "the standby polled"

        await create(standby, "poll-2")
        second = await message_for(fake, standby, "poll-2")
        await cluster.kill(poller)
        killed_at = time.monotonic()
        await fake.click(second, data_of(second, "gw:approve:"), alice)  # nobody polls now

        assert await the_poller([standby]) is standby
        took = time.monotonic() - killed_at
        assert took < TAKEOVER_WITHIN, f"the standby took over {took:.1f} s after the kill"
        status = await approved(standby, "poll-2", wait=TAKEOVER_WITHIN)
        assert status["approved"] is True and status["user_info"]["user_id"] == str(ALICE)
        assert time.monotonic() - killed_at < TAKEOVER_WITHIN
        assert len(fake.calls_to("answerCallbackQuery")) == 2  # each click handled once
    finally:
        await cluster.stop()
