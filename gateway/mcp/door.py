"""The MCP front door: the official SDK's MCPServer over streamable HTTP at /mcp, on the
gateway's own app, behind the same Bearer API keys as the HTTP API.

Stateful sessions (the SDK's default), because only a session remembers the client's name
and version from its initialize handshake, which every request records in `spec.origin`.
A session lives in this process: after a restart the client opens a new one (the SDK answers
404 to an unknown session, as the MCP spec asks), and pending tickets live on in the
database. Several replicas need the load balancer to keep a session on one replica
(affinity on the Mcp-Session-Id header). Clients of protocol 2026-07-28 need no session: each
POST stands alone and names its client in `_meta`. Each API key may hold
GATEWAY_MCP_SESSIONS_PER_KEY sessions here (`gateway.mcp.sessions`); one with no request in
flight for GATEWAY_MCP_SESSION_IDLE_SECONDS ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from gateway import __version__
from gateway.api.auth import api_key
from gateway.core import Core
from gateway.mcp import tools
from gateway.mcp.sessions import SessionLedger, SessionLimit

INSTRUCTIONS = (
    "A human-in-the-loop gateway. Before a risky or irreversible action, call "
    "request_approval and act only on status 'approved'. To ask a person something, call "
    "ask_human. A pending result carries a call_id: call get_decision or get_answer with it "
    "until a person has decided; nothing here lets you decide for them."
)


def _annotations(title: str, *, reads_only: bool) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        read_only_hint=reads_only,
        destructive_hint=False,
        idempotent_hint=reads_only,
        open_world_hint=True,  # it reaches people
    )


def build_server() -> MCPServer:
    server: MCPServer = MCPServer(
        "hitl-gateway", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    server.add_tool(
        tools.request_approval,
        annotations=_annotations("Ask a person to approve an action", reads_only=False),
    )
    server.add_tool(
        tools.get_decision, annotations=_annotations("Wait for a decision", reads_only=True)
    )
    server.add_tool(tools.ask_human, annotations=_annotations("Ask a person", reads_only=False))
    server.add_tool(
        tools.get_answer, annotations=_annotations("Wait for an answer", reads_only=True)
    )
    server.add_tool(
        tools.permission_prompt,
        annotations=_annotations("Claude Code permission prompt", reads_only=False),
        structured_output=False,  # Claude Code reads the JSON from the text content
    )
    return server


class McpDoor:
    """The MCP server, its session manager and the authenticating endpoint."""

    def __init__(self, core: Core) -> None:
        self.server = build_server()
        # DNS-rebinding protection guards servers that trust the caller's network; this one
        # trusts only a Bearer key, which a rebound browser page does not have, and is reached
        # under whatever host name the operator gives it.
        settings = core.settings
        self.server.streamable_http_app(
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=settings.max_body_bytes,
            session_idle_timeout=settings.mcp_session_idle_seconds,
        )
        self.sessions: StreamableHTTPSessionManager = self.server.session_manager
        ledger = SessionLedger(settings.mcp_sessions_per_key, settings.mcp_session_idle_seconds)
        self.limit = SessionLimit(self.sessions.handle_request, ledger)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager's task group: enter it inside the app's lifespan."""
        async with self.sessions.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate as the HTTP API does, before any MCP processing: a missing or bad
        key raises Unauthorized, which the app's handler answers 401."""
        caller = await api_key(Request(scope, receive))
        # The SDK binds a session to the principal that opened it: another key using this
        # session id gets 404, as if it did not exist.
        principal = AuthenticatedUser(
            AccessToken(token="", client_id=f"api-key:{caller.key.id}", scopes=[])
        )
        scope = {**scope, "user": principal, tools.CALLER: caller}
        assert caller.key.id is not None  # a key read from the store
        await self.limit(caller.key.id, scope, receive, send)
