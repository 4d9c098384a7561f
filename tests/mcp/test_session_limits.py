"""MCP sessions per API key, through the official `mcp` client: a key at its cap is refused
(429, naming the limit) while another project's agent still opens sessions, and the count
follows sessions as they end. Before, the SDK's one process-wide limit let a single key
take every session and the other projects got `503 Too many open sessions`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from tests.helpers import eventually
from tests.mcp.helpers import INITIALIZE, VERSION, call, mcp_session
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def gateway_with(tmp_path: Path, **settings: Any) -> AsyncIterator[RunningGateway]:
    url = f"sqlite+aiosqlite:///{tmp_path}/gw.db"
    async with running_gateway(test_settings(url, **settings)) as gateway:
        yield gateway


async def send(
    gateway: RunningGateway,
    key: str,
    body: dict[str, Any] | None,
    *,
    sid: str | None = None,
    method: str = "POST",
) -> httpx.Response:
    """One bare HTTP request to /mcp with `key`, on session `sid` if given."""
    headers = {"Authorization": f"Bearer {key}", **ACCEPT}
    if sid is not None:
        headers |= {"Mcp-Session-Id": sid, "Mcp-Protocol-Version": VERSION}
    async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers) as http:
        return await http.request(method, "/mcp", json=body)


async def initialize(gateway: RunningGateway, key: str) -> httpx.Response:
    """An initialize: the session it opens stays open, idle."""
    return await send(gateway, key, INITIALIZE)


async def ping(
    gateway: RunningGateway, key: str, sid: str, *, method: str = "POST"
) -> httpx.Response:
    """A ping on session `sid` (or, with method="DELETE", its end), with `key`."""
    return await send(gateway, key, PING if method == "POST" else None, sid=sid, method=method)


async def test_a_key_at_its_cap_is_refused_while_another_keys_initialize_works(
    tmp_path: Path,
) -> None:
    async with gateway_with(tmp_path, mcp_sessions_per_key=2) as gateway:
        greedy = await gateway.new_key("greedy")
        other = await gateway.new_key("other")
        async with AsyncExitStack() as held:
            for name in ("one", "two"):  # each from a client naming itself differently
                client = Implementation(name=name, version="1")
                await held.enter_async_context(mcp_session(gateway, greedy, client=client))
            with pytest.raises(ExceptionGroup) as refused:  # the client's task groups wrap it
                async with mcp_session(gateway, greedy):
                    pass
            assert refused.group_contains(MCPError, match="GATEWAY_MCP_SESSIONS_PER_KEY")
            bare = await initialize(gateway, greedy)
            assert bare.status_code == 429, bare.text
            assert "2 MCP sessions" in bare.json()["error"]["message"]

            async with mcp_session(gateway, other) as session:  # another project's agent
                ticket = await call(
                    session, "request_approval", action="deploy", arguments={}, wait_seconds=0
                )
                assert ticket["status"] == "pending"
        async with mcp_session(gateway, greedy) as session:  # its two clients ended theirs
            assert (await session.list_tools()).tools


async def test_a_session_the_sdk_ended_for_idleness_no_longer_counts(tmp_path: Path) -> None:
    settings = {"mcp_sessions_per_key": 1, "mcp_session_idle_seconds": 0.5}
    async with gateway_with(tmp_path, **settings) as gateway:
        agent = await gateway.new_key("default")
        opened = await initialize(gateway, agent)
        assert opened.status_code == 200, opened.text
        assert (await initialize(gateway, agent)).status_code == 429

        async def admitted() -> bool:  # nothing touches the idle session meanwhile
            return (await initialize(gateway, agent)).status_code == 200

        await eventually(admitted, within=10)
        gone = await ping(gateway, agent, opened.headers["mcp-session-id"])
        assert gone.status_code == 404, gone.text  # the SDK had ended it too


async def test_another_keys_404_on_a_session_does_not_free_its_owners_slot(
    tmp_path: Path,
) -> None:
    async with gateway_with(tmp_path, mcp_sessions_per_key=1) as gateway:
        owner = await gateway.new_key("owner")
        intruder = await gateway.new_key("intruder")
        opened = await initialize(gateway, owner)
        sid = opened.headers["mcp-session-id"]
        assert (await ping(gateway, intruder, sid)).status_code == 404
        assert (await ping(gateway, intruder, sid, method="DELETE")).status_code == 404
        assert (await initialize(gateway, owner)).status_code == 429
        assert (await ping(gateway, owner, sid)).status_code == 200  # still the owner's
