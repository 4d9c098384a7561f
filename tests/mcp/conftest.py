"""The MCP tests' gateway: the plain in-process one on SQLite (the root conftest's)."""

from __future__ import annotations

import pytest

from tests.services.inprocess import RunningGateway


@pytest.fixture
def gateway(sqlite_gateway: RunningGateway) -> RunningGateway:
    return sqlite_gateway
