"""A fake Telegram, and a gateway whose bot polls it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.settings import Settings
from tests.channels.telegram.helpers import ROUTING, gateway_with_bot, users
from tests.fakes.telegram import FakeTelegram
from tests.services.inprocess import RunningGateway, test_settings


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as telegram_fake:
        yield telegram_fake


@pytest.fixture
def people(fake: FakeTelegram) -> dict[int, dict[str, Any]]:
    """Alice, Bob (the ops team) and Mallory (nobody's), as Telegram users."""
    return users(fake)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    config = tmp_path / "routing.toml"
    config.write_text(ROUTING)
    return test_settings(f"sqlite+aiosqlite:///{tmp_path}/telegram.db", config=config)


@pytest.fixture
async def gateway(settings: Settings, fake: FakeTelegram) -> AsyncIterator[RunningGateway]:
    async with gateway_with_bot(settings, fake) as running:
        yield running
