"""A fake Discord, and a gateway whose bot is logged in to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.settings import Settings
from tests.channels.discord.helpers import ROUTING, gateway_with_bot
from tests.fakes.discord import FakeDiscord
from tests.services.inprocess import RunningGateway, test_settings


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as discord_fake:
        yield discord_fake


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    config = tmp_path / "routing.toml"
    config.write_text(ROUTING)
    return test_settings(f"sqlite+aiosqlite:///{tmp_path}/discord.db", config=config)


@pytest.fixture
async def gateway(settings: Settings, fake: FakeDiscord) -> AsyncIterator[RunningGateway]:
    async with gateway_with_bot(settings, fake) as running:
        yield running
