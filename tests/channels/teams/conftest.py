"""A gateway with the Teams channel, talking to a fake Teams (Bot Connector, token endpoint,
OpenID metadata), and the routing config that names Alice, Bob and Carol by AAD object id."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.channels.teams.helpers import gateway_settings, teams_channel
from tests.fakes.teams import FakeTeams
from tests.services.inprocess import RunningGateway, running_gateway


@pytest.fixture
async def fake() -> AsyncIterator[FakeTeams]:
    async with FakeTeams() as teams:
        yield teams


@pytest.fixture
async def gateway(tmp_path: Path, fake: FakeTeams) -> AsyncIterator[RunningGateway]:
    channels = {"teams": teams_channel(fake)}
    async with running_gateway(gateway_settings(tmp_path), channels=channels) as running:
        yield running
