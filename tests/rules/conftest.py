"""The rules tests' gateways: the routing config of tests.rules.helpers on each database
(`ruled`), or on SQLite alone for the variations of one case (`ruled_sqlite`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.rules.helpers import rules_gateway
from tests.services.inprocess import RunningGateway


@pytest.fixture
async def ruled(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    async with rules_gateway(db_url, tmp_path) as running:
        yield running


@pytest.fixture
async def ruled_sqlite(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    async with rules_gateway(f"sqlite+aiosqlite:///{tmp_path}/gw.db", tmp_path) as running:
        yield running
