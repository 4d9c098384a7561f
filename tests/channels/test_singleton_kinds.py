"""Which supervised connections replicas share: a connection the platform allows once per
bot (Telegram's getUpdates, Discord's websocket) runs on one replica; the Teams token is no
connection, and every replica holds its own."""

from __future__ import annotations

from pathlib import Path

from channels.registry import ChannelFactory
from gateway.app import singletons
from tests.channels.teams.helpers import gateway_settings, teams_channel
from tests.channels.telegram.helpers import telegram_channel
from tests.fakes.teams import FakeTeams
from tests.fakes.telegram import FakeTelegram
from tests.services.inprocess import running_gateway


async def test_the_teams_token_is_no_singleton_and_telegrams_long_poll_is(tmp_path: Path) -> None:
    async with FakeTeams() as teams, FakeTelegram() as telegram:
        channels: dict[str, ChannelFactory] = {
            "teams": teams_channel(teams),
            "telegram": telegram_channel(telegram),
        }
        async with running_gateway(gateway_settings(tmp_path), channels=channels) as gateway:
            held = singletons(gateway.core.channels.values())
            assert [supervisor.name for supervisor in held] == ["telegram"]
