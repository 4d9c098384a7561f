"""What a newcomer's first `gateway serve` prints: the key, the console link and one line per
channel; no migration chatter and no warning about channels nobody asked for."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.services.gateway_process import GatewayProcess


async def test_a_first_start_says_one_line_per_channel_and_nothing_of_migrations(
    tmp_path: Path,
) -> None:
    gateway = GatewayProcess(tmp_path, {"GATEWAY_LOG_LEVEL": "info"})
    await asyncio.to_thread(gateway.start, 60)
    await asyncio.to_thread(gateway.stop)
    printed = "".join(gateway.output)
    assert gateway.api_key is not None
    for line in ("web: ready", "slack: not configured", "discord: not configured"):
        assert line in printed, printed
    assert "alembic" not in printed and "Running upgrade" not in printed, printed
    assert "WARNING" not in printed, printed


async def test_a_half_configured_channel_is_still_a_warning(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, {"GATEWAY_LOG_LEVEL": "info", "SLACK_BOT_TOKEN": "xoxb-1"})
    await asyncio.to_thread(gateway.start, 60)
    await asyncio.to_thread(gateway.stop)
    printed = "".join(gateway.output)
    assert "WARNING channels.slack.channel: slack callbacks are off" in printed, printed
