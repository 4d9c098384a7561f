"""Driving the Discord channel in tests: its factory over the fake Discord, a gateway whose
bot is connected, and reading what the bot posted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from channels.discord.channel import DiscordChannel
from channels.discord.settings import DiscordSettings
from gateway.runtime.retry import RetryPolicy
from gateway.seam import ChannelContext, State
from gateway.settings import Settings
from tests.fakes.discord import FakeDiscord
from tests.services.inprocess import RunningGateway, running_gateway

CHANNEL = "500000000000000001"
TEAM_CHANNEL = "500000000000000002"
ALICE, BOB, MALLORY = "600000000000000001", "600000000000000002", "600000000000000003"
UPDATE_MESSAGE, MODAL, CHANNEL_MESSAGE, DEFERRED_UPDATE = 7, 9, 4, 6
EPHEMERAL = 64
TO_CHANNEL = {"discord": {"channel_id": CHANNEL}}
FAST = RetryPolicy(base=0.01, cap=0.02, jitter=0)

ROUTING = f"""
[people.alice]
discord = "{ALICE}"

[people.bob]
discord = "{BOB}"

[teams.ops]
members = ["alice", "bob"]
discord_channel = "{TEAM_CHANNEL}"
"""


def discord_channel(
    fake: FakeDiscord, token: str = FakeDiscord.TOKEN
) -> Callable[[ChannelContext], DiscordChannel]:
    """The Discord channel's factory, logging in to `fake` with `token`."""
    settings = DiscordSettings(
        _env_file=None, bot_token=token, api_url=fake.api_url, gateway_url=fake.gateway_url
    )

    def build(context: ChannelContext) -> DiscordChannel:
        return DiscordChannel(context, settings)

    return build


@asynccontextmanager
async def gateway_with_bot(settings: Settings, fake: FakeDiscord) -> AsyncIterator[RunningGateway]:
    """A gateway whose bot is connected: clicks pushed now reach it."""
    async with running_gateway(settings, channels={"discord": discord_channel(fake)}) as running:
        await fake.wait_ready()
        channel = running.core.channels["discord"]
        assert isinstance(channel, DiscordChannel) and channel.connection is not None
        await asyncio.wait_for(channel.connection.wait_for(State.CONNECTED), timeout=10)
        yield running


def posted_message(fake: FakeDiscord, call_id: str) -> dict[str, Any]:
    """The one message the bot posted for `call_id` (its footer names the call)."""
    posted = [m for m in fake.messages.values() if f"call {call_id}" in footer_text(m)]
    assert len(posted) == 1, f"expected one message for {call_id}, got {len(posted)}"
    return posted[0]


def footer_text(message: dict[str, Any]) -> str:
    """The embed footer, which names the call (`call <call_id>`)."""
    return str(((message.get("embeds") or [{}])[0].get("footer") or {}).get("text", ""))


def custom_ids(message: dict[str, Any]) -> list[str]:
    return [b["custom_id"] for row in message.get("components") or [] for b in row["components"]]


async def get(gateway: RunningGateway, call_id: str, contact: bool = False) -> dict[str, Any]:
    path = "/contact_requests" if contact else "/function_calls"
    async with gateway.client() as client:
        response = await client.get(f"{path}/{call_id}")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def outcome_field(message: dict[str, Any]) -> str:
    fields = message["embeds"][0].get("fields") or []
    return str(next(f["value"] for f in fields if f["name"] == "Outcome"))
