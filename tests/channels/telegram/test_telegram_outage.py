"""Telegram down at start (its Bot API behind a door that hangs, or refuses): the API serves
at once, the channel's state says why, and once Telegram is up on the same address the
request that waited goes out, once."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.channels.telegram.helpers import ROUTING, TO_OPS, posted_message, telegram_channel
from tests.factories import request_body
from tests.fakes.telegram import FakeTelegram
from tests.helpers import events, eventually
from tests.services.door import Door
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

pytestmark = pytest.mark.serial  # it times a start

SERVES_WITHIN = 2.0  # seconds from start to the first create answered (issue 27)
# A start is also timed against one with no platform in the same run (a loaded machine is
# slow for both): waiting on a connect would cost a whole connect timeout (1 s).
HELD_UP_AT_MOST = 0.8
DOWN_BECAUSE = {"hangs": r"no answer within 1 s", "refuses": r"(?i)refused|connect"}


@pytest.fixture
async def door() -> AsyncIterator[Door]:
    opened = Door()
    try:
        yield opened
    finally:
        await opened.close()


async def first_create(gateway: RunningGateway, started: float, call_id: str) -> float:
    async with gateway.client() as client:
        created = await client.post("/function_calls", json=request_body(call_id, channel=TO_OPS))
    assert created.status_code == 200, created.text
    return time.monotonic() - started


async def connection(gateway: RunningGateway) -> str:
    async with gateway.client() as client:
        response = await client.get(f"{gateway.base_url}/gateway/v1/channels")
    assert response.status_code == 200, response.text
    [telegram] = [c for c in response.json()["channels"] if c["name"] == "telegram"]
    return str(telegram["connection"])


async def delivery_status(gateway: RunningGateway, call_id: str) -> str:
    [delivery] = (await events(gateway, call_id))["deliveries"]
    return str(delivery["status"])


@pytest.mark.parametrize("outage", ["hangs", "refuses"])
async def test_telegram_down_at_start_holds_nothing_up_and_the_request_goes_out_later(
    outage: str, door: Door, tmp_path: Path
) -> None:
    config = tmp_path / "routing.toml"
    config.write_text(ROUTING)
    fast = {"channel_connect_timeout_seconds": 1, "channel_retry_cap_seconds": 1}
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/a.db", config=config, **fast)
    baseline_settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/b.db", config=config)
    started = time.monotonic()
    async with running_gateway(baseline_settings) as healthy:
        baseline = await first_create(healthy, started, "healthy")
    if outage == "hangs":
        await door.hang()
    async with FakeTelegram() as fake:
        factory = telegram_channel(fake, api_url=door.url("http"))
        started = time.monotonic()
        async with running_gateway(settings, channels={"telegram": factory}) as gateway:
            served = await first_create(gateway, started, "waits-1")
            assert served < max(SERVES_WITHIN, baseline + HELD_UP_AT_MOST), (
                f"first create answered {served:.2f} s after start; {baseline:.2f} s without "
                "Telegram"
            )

            async def says_why() -> bool:
                said = await connection(gateway)
                return said.startswith("retrying: ") and bool(re.search(DOWN_BECAUSE[outage], said))

            await eventually(says_why, within=10)
            assert await delivery_status(gateway, "waits-1") in ("queued", "retrying")
            assert not fake.calls

            await door.open(fake.port)

            async def connected() -> bool:
                return await connection(gateway) == "connected"

            await eventually(connected, within=10)

            async def sent() -> bool:
                return await delivery_status(gateway, "waits-1") == "sent"

            await eventually(sent, within=10)
            posted_message(fake, "waits-1")  # exactly one
            assert len(fake.calls_to("sendMessage")) == 1
