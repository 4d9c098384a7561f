"""A plain in-process gateway on SQLite for the MCP tests, and the SMTP sink for email."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.smtp_sink import SmtpSink


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    async with running_gateway(test_settings(f"sqlite+aiosqlite:///{tmp_path}/mcp.db")) as gw:
        yield gw


@pytest.fixture
async def smtp_sink() -> AsyncIterator[SmtpSink]:
    sink = SmtpSink()
    try:
        sink.start()
        yield sink
        await sink.wait_until_disconnected()
    finally:
        sink.stop()
