"""The console's Channels page shows each platform connection's state and why it is down."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from channels.discord.channel import DiscordChannel
from channels.discord.settings import DiscordSettings
from channels.web.auth import create_sign_in_link
from gateway.seam.connections import State
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.net import free_port


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: connections are refused
    discord = DiscordSettings(
        _env_file=None,
        bot_token=SecretStr("a-bot-token"),
        api_url=f"{closed}/api/v10",
        gateway_url=closed.replace("http", "ws"),
    )
    settings = test_settings(
        f"sqlite+aiosqlite:///{tmp_path}/gw.db",
        channel_connect_timeout_seconds=1,
        channel_retry_cap_seconds=1,
    )
    channels = {"discord": lambda context: DiscordChannel(context, discord)}
    async with running_gateway(settings, channels=channels) as running:
        bot = running.core.channels["discord"]
        assert isinstance(bot, DiscordChannel) and bot.connection is not None
        await bot.connection.wait_for(State.RETRYING)
        yield running


async def test_the_channels_page_says_why_a_connection_is_down(gateway: RunningGateway) -> None:
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    origin = {"Origin": gateway.base_url}
    async with httpx.AsyncClient(base_url=gateway.base_url, headers=origin) as browser:
        signed_in = await browser.post(link.removeprefix(gateway.base_url))
        assert signed_in.status_code == 303, signed_in.text
        shown: list[str] = []

        async def says_why() -> bool:  # between attempts; an attempt in progress says connecting
            page = await browser.get("/console/channels")
            assert page.status_code == 200
            shown[:] = [connection_cell(page.text, "discord"), connection_cell(page.text, "slack")]
            return shown[0].startswith("retrying: ")

        await eventually(says_why)
    assert re.match(r"retrying: discord unreachable: .*Cannot connect to host", shown[0])
    assert shown[1] == "n/a"  # Slack over HTTP keeps no connection


def connection_cell(html: str, channel: str) -> str:
    row = re.search(rf'<tr data-channel="{channel}">.*?</tr>', html, re.S)
    assert row is not None, html
    cell = re.search(r'<td class="connection">(.*?)(<small>|</td>)', row.group(0), re.S)
    assert cell is not None, row.group(0)
    return cell.group(1).strip()
