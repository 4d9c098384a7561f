"""/mcp opens once the API already serves (loading the MCP SDK is a fifth of the start): the
HumanLayer API answers while the door loads, and an MCP session opened meanwhile waits for
it, then works."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from gateway.mcp import deferred
from gateway.mcp.door import McpDoor
from tests.factories import request_body
from tests.mcp.helpers import mcp_session
from tests.services.inprocess import RunningGateway, running_gateway, test_settings


async def tool_names(gateway: RunningGateway) -> set[str]:
    async with mcp_session(gateway) as session:
        return {tool.name for tool in (await session.list_tools()).tools}


async def test_the_api_serves_while_the_mcp_door_loads_and_mcp_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loading, release = threading.Event(), threading.Event()

    def held_load() -> type[McpDoor]:  # runs in the loading thread
        loading.set()
        release.wait(10)
        return McpDoor

    monkeypatch.setattr(deferred, "load", held_load)
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db")
    try:
        async with running_gateway(settings) as gateway:
            assert await asyncio.to_thread(loading.wait, 10)
            early = asyncio.create_task(tool_names(gateway))
            async with gateway.client() as api:
                created = await api.post("/function_calls", json=request_body("while-loading"))
            assert created.status_code == 200, created.text
            assert not release.is_set() and not early.done()  # the session waits for the door
            release.set()
            names = await asyncio.wait_for(early, 20)
            assert {"request_approval", "get_decision", "ask_human", "get_answer"} <= names
    finally:
        release.set()  # never leave the loading thread waiting
