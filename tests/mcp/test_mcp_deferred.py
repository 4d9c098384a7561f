"""/mcp opens at its first request (loading the MCP SDK is a fifth of the start): the
gateway starts and serves the HumanLayer API without loading it, the first MCP sessions
load it once and wait for it, then work; a door that cannot open answers 503 and the API
serves on."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import pytest

from gateway.mcp import deferred
from gateway.mcp.door import McpDoor
from tests.factories import request_body
from tests.mcp.helpers import mcp_session
from tests.services.inprocess import RunningGateway, running_gateway, test_settings


async def tool_names(gateway: RunningGateway) -> set[str]:
    async with mcp_session(gateway) as session:
        return {tool.name for tool in (await session.list_tools()).tools}


async def test_the_first_mcp_sessions_open_the_door_once_and_the_api_never_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[str] = []
    loading, release = threading.Event(), threading.Event()

    def held_load() -> type[McpDoor]:  # runs in the loading thread
        loads.append(threading.current_thread().name)
        loading.set()
        release.wait(10)
        return McpDoor

    monkeypatch.setattr(deferred, "load", held_load)
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db")
    try:
        async with running_gateway(settings) as gateway:
            async with gateway.client() as api:
                before = await api.post("/function_calls", json=request_body("before-mcp"))
                assert before.status_code == 200, before.text
                assert loads == []  # starting and serving the API loaded nothing
                sessions = [asyncio.create_task(tool_names(gateway)) for _ in range(2)]
                assert await asyncio.to_thread(loading.wait, 10)  # a request started it
                during = await api.post("/function_calls", json=request_body("while-loading"))
            assert during.status_code == 200, during.text
            assert not any(session.done() for session in sessions)  # both wait for the door
            release.set()
            for names in await asyncio.wait_for(asyncio.gather(*sessions), 20):
                assert {"request_approval", "get_decision", "ask_human", "get_answer"} <= names
            assert len(loads) == 1
    finally:
        release.set()  # never leave the loading thread waiting


async def test_a_door_that_cannot_open_answers_503_and_the_api_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_load() -> type[McpDoor]:
        raise ImportError("No module named 'mcp'")

    monkeypatch.setattr(deferred, "load", broken_load)
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db")
    async with running_gateway(settings) as gateway:
        headers = {"Authorization": f"Bearer {gateway.api_key}"}
        async with httpx.AsyncClient(headers=headers) as http:
            for _ in range(2):  # the failure is kept: every request says so
                refused = await http.post(f"{gateway.base_url}/mcp", json={})
                assert refused.status_code == 503, refused.text
                assert "MCP server is unavailable" in refused.json()["detail"]
        async with gateway.client() as api:
            created = await api.post("/function_calls", json=request_body("without-mcp"))
        assert created.status_code == 200, created.text
    logged = [r for r in caplog.records if "MCP door did not open" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
