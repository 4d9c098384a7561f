"""The official `mcp` client (streamable HTTP + ClientSession) against a running gateway."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import sqlalchemy as sa
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Implementation, TextContent
from sqlalchemy.engine import Connection

from gateway.store.tables import Request
from tests.services.inprocess import RunningGateway

CLIENT = Implementation(name="test-agent", version="9.9.1")
VERSION = "2025-06-18"  # a handshake-era protocol version, as Claude Code speaks
# An `initialize` as a raw JSON-RPC message, for tests that speak HTTP to /mcp directly.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


@asynccontextmanager
async def mcp_session(
    gateway: RunningGateway, key: str | None = None, *, client: Implementation = CLIENT
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session at /mcp, authenticated with `key` (the test key)."""
    headers = {"Authorization": f"Bearer {key or gateway.api_key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10, read=60)) as http,
        streamable_http_client(f"{gateway.base_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, client_info=client) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, TextContent), content
    return content.text


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's JSON result; fails the test on a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    answer: dict[str, Any] = json.loads(text_of(result))
    return answer


async def tool_error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The message of a tool error (isError); fails the test if the call succeeded."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, text_of(result)
    return text_of(result)


def _count(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(Request)).scalar_one())


async def request_rows(gateway: RunningGateway) -> int:
    """Requests of every kind in every project."""
    return await gateway.core.db.read(_count)


async def wire(gateway: RunningGateway, call_id: str, *, contact: bool = False) -> Any:
    """The request as the HTTP API shows it to the test key."""
    path = "/contact_requests" if contact else "/function_calls"
    async with gateway.client() as api:
        response = await api.get(f"{path}/{call_id}")
    assert response.status_code == 200, response.text
    return response.json()
