"""A gateway with the Slack channel, talking to a fake Slack Web API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.channels.slack.helpers import slack_channel
from tests.fakes.slack import FakeSlack
from tests.services.inprocess import RunningGateway, running_gateway, test_settings


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as slack:
        yield slack


@pytest.fixture
async def gateway(tmp_path: Path, fake: FakeSlack) -> AsyncIterator[RunningGateway]:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/slack.db")
    async with running_gateway(settings, channels={"slack": slack_channel(fake)}) as running:
        yield running
