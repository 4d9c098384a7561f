"""The MCP front door at /mcp, driven by the official `mcp` client against an in-process
gateway: the tools it lists, who may use them, what they create, and that none decides."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from channels.web.auth import COOKIE, create_sign_in_link
from gateway.mcp import tools
from tests.factories import RequestFactory, rid_of
from tests.helpers import events
from tests.mcp.helpers import (
    INITIALIZE,
    VERSION,
    call,
    mcp_session,
    request_rows,
    text_of,
    tool_error,
    wire,
)
from tests.services.inprocess import RunningGateway

TOOLS = {
    "request_approval": {"action", "arguments"},
    "get_decision": {"call_id"},
    "ask_human": {"question"},
    "get_answer": {"call_id"},
    "permission_prompt": {"tool_name", "input"},
}
CSRF = re.compile(r'name="csrf" value="([^"]*)"')


async def test_the_tools_and_their_required_arguments(gateway: RunningGateway) -> None:
    async with mcp_session(gateway) as session:
        listed = (await session.list_tools()).tools
        info = session.server_info

    assert {tool.name: set(tool.input_schema.get("required", [])) for tool in listed} == TOOLS
    for tool in listed:
        assert tool.description and len(tool.description) > 80, tool.name  # a model reads it
        properties = tool.input_schema["properties"]
        assert all(p.get("description") for p in properties.values()), tool.name
    waits = {t.name: t.input_schema["properties"].get("wait_seconds") for t in listed}
    assert waits["request_approval"]["maximum"] == 55 and waits["get_answer"]["default"] == 45
    assert info is not None and info.name == "hitl-gateway"


async def test_a_request_records_the_client_and_is_an_ordinary_request(
    gateway: RunningGateway,
) -> None:
    client = Implementation(name="claude-code", version="1.0.3\u202e")  # a bidi override too
    async with mcp_session(gateway, client=client) as session:
        ticket = await call(
            session,
            "request_approval",
            action="drop_table",
            arguments={"name": "users"},
            reason="the table is unused since March",
            wait_seconds=0,
        )

    assert ticket["status"] == "pending" and ticket["call_id"].startswith("mcp-")
    stored = await wire(gateway, ticket["call_id"])
    assert stored["run_id"] == "claude-code"
    assert stored["spec"]["fn"] == "drop_table"
    assert stored["spec"]["kwargs"] == {"name": "users"}  # the arguments, exactly
    assert stored["spec"]["state"] is None  # the agent's own state stays its own
    assert stored["spec"]["origin"] == {
        "via": "mcp",
        "client": "claude-code",
        "client_version": "1.0.3",
        "tool": "request_approval",
        "reason": "the table is unused since March",
    }
    assert [target["channel"] for target in stored["route"]] == ["web"]  # nothing configured
    audit = [event["type"] for event in (await events(gateway, ticket["call_id"]))["events"]]
    assert audit[:2] == ["created", "routed"]


async def test_a_sessionless_2026_client_is_authenticated_and_named_too(
    gateway: RunningGateway,
) -> None:
    """Protocol 2026-07-28 has no handshake: clientInfo rides in every request's _meta."""
    client = Implementation(name="modern-agent", version="2.0")
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(
            streamable_http_client(f"{gateway.base_url}/mcp", http_client=http),
            mode="2026-07-28",
            client_info=client,
        ) as modern,
    ):
        result = await modern.call_tool(
            "request_approval", {"action": "deploy", "arguments": {}, "wait_seconds": 0}
        )

    ticket = json.loads(text_of(result))
    origin = (await wire(gateway, ticket["call_id"]))["spec"]["origin"]
    assert (origin["client"], origin["client_version"]) == ("modern-agent", "2.0")


async def test_a_bad_key_is_refused_before_mcp_and_nothing_is_created(
    gateway: RunningGateway,
) -> None:
    for key in ("hlgw_not-a-key", f"{gateway.api_key}x"):
        with pytest.raises(ExceptionGroup) as raised:  # the client's task groups wrap it
            async with mcp_session(gateway, key) as session:
                await session.call_tool("request_approval", {"action": "x", "arguments": {}})
        assert raised.group_contains(MCPError), raised.value

    # Straight to tools/call, as a client that skips the handshake would: 401 all the same.
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "request_approval", "arguments": {"action": "x", "arguments": {}}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=gateway.base_url) as http:
        missing = await http.post("/mcp", json=message, headers=headers)
        wrong = await http.post(
            "/mcp", json=message, headers=headers | {"Authorization": "Bearer hlgw_nope"}
        )
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert wrong.headers["www-authenticate"] == "Bearer"
    assert wrong.json() == {"detail": "invalid or revoked API key"}
    assert await request_rows(gateway) == 0


async def test_a_session_answers_only_the_key_that_opened_it(gateway: RunningGateway) -> None:
    other_key = await gateway.new_key("default", name="second")
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers=_bearer(gateway.api_key))
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        theirs = await http.post("/mcp", json=listing, headers=session | _bearer(other_key))
        ours = await http.post("/mcp", json=listing, headers=session | _bearer(gateway.api_key))

    assert opened.status_code == 200, opened.text
    assert theirs.status_code == 404, theirs.text  # as if the session did not exist
    assert ours.status_code == 200 and "request_approval" in ours.text, ours.text


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_another_projects_ticket_is_not_found(gateway: RunningGateway) -> None:
    other_key = await gateway.new_key("other")
    async with mcp_session(gateway, other_key) as theirs:
        approval = await call(
            theirs, "request_approval", action="deploy", arguments={}, wait_seconds=0
        )
        question = await call(theirs, "ask_human", question="Which region?", wait_seconds=0)
        # Their own key reads them.
        assert (await call(theirs, "get_decision", call_id=approval["call_id"], wait_seconds=0))[
            "status"
        ] == "pending"

    async with mcp_session(gateway) as ours:
        decision = await tool_error(
            ours, "get_decision", call_id=approval["call_id"], wait_seconds=0
        )
        answer = await tool_error(ours, "get_answer", call_id=question["call_id"], wait_seconds=0)
        # The kinds do not mix either.
        crossed = await tool_error(ours, "get_answer", call_id="no-such-call", wait_seconds=0)

    assert f"no function call with call_id {approval['call_id']!r} in this project" in decision
    assert f"no human contact with call_id {question['call_id']!r} in this project" in answer
    assert "no human contact" in crossed


async def test_bad_arguments_are_tool_errors_that_name_the_argument(
    gateway: RunningGateway,
) -> None:
    async with mcp_session(gateway) as session:
        both = await tool_error(
            session, "request_approval", action="a", arguments={}, team="sre", person="alice"
        )
        unknown = await tool_error(
            session, "request_approval", action="a", arguments={}, team="nobody", wait_seconds=0
        )
        spoofed = await tool_error(
            session, "request_approval", action="deploy\u202egnp.exe", arguments={}
        )
        too_long = await tool_error(
            session, "get_decision", call_id="c", wait_seconds=600
        )  # over the 55 s maximum
        twice = await tool_error(session, "ask_human", question="?", options=["a", "a"])

    assert "team or person, not both" in both
    assert "nobody" in unknown
    assert "action:" in spoofed and "U+202E" in spoofed
    assert "wait_seconds" in too_long
    assert "options" in twice and "unique" in twice
    assert await request_rows(gateway) == 0


def _hostile_arguments(tool: Any, pending_call_id: str) -> dict[str, Any]:
    """The tool's required arguments, plus every field that would decide something if a
    tool listened to it, pointing at a pending request."""
    fill: dict[str, Any] = {"string": pending_call_id, "object": {"approved": True}}
    schema = tool.input_schema
    required = {
        name: fill.get(schema["properties"][name].get("type", "string"), pending_call_id)
        for name in schema.get("required", [])
    }
    return required | {
        "approved": True,
        "status": "approved",
        "gateway_status": "approved",
        "decision": "approve",
        "behavior": "allow",
        "comment": "approved by the agent itself",
        "response": "yes",
        "response_option_name": "yes",
        "answer": "yes",
        "call_id": pending_call_id,
        "user_info": {"channel": "slack", "name": "Alice"},
        "wait_seconds": 0,
    }


async def test_no_tool_decides_anything(
    gateway: RunningGateway, request_factory: RequestFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "PERMISSION_WAIT_SECONDS", 0.05)
    approval = await request_factory(gateway, "pending-call")
    question = await request_factory(gateway, "pending-question", contact=True)

    async with mcp_session(gateway) as session:
        listed = (await session.list_tools()).tools
        assert {tool.name for tool in listed} == set(TOOLS)
        for tool in listed:
            for pending in (approval.call_id, question.call_id):
                result = await session.call_tool(tool.name, _hostile_arguments(tool, pending))
                text = text_of(result)
                if tool.name == "permission_prompt":
                    assert json.loads(text)["behavior"] == "deny", text
                elif not result.is_error:  # a ticket, or a read of the pending request
                    assert json.loads(text)["status"] == "pending", text

    async with gateway.client() as api:
        calls = (await api.get("/function_calls")).json()["items"]
        contacts = (await api.get("/contact_requests")).json()["items"]
    assert {item["call_id"] for item in calls} >= {approval.call_id}
    assert {item["call_id"] for item in contacts} >= {question.call_id}
    assert {item["gateway_status"] for item in calls + contacts} == {"pending"}
    for made in (approval, question):
        audit = [event["type"] for event in (await events(gateway, made.call_id))["events"]]
        assert "decided" not in audit and "voted" not in audit, audit


@asynccontextmanager
async def _console(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    """The operator signed in to the web console (a one-time link), as a browser is."""
    async with httpx.AsyncClient(
        base_url=gateway.base_url, headers={"Origin": gateway.base_url}, timeout=30
    ) as client:
        link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
        signed_in = await client.post(urllib.parse.urlsplit(link).path)
        assert signed_in.status_code == 303 and client.cookies.get(COOKIE), signed_in.text
        yield client


async def _answer_in_console(gateway: RunningGateway, call_id: str, text: str) -> None:
    rid = await rid_of(gateway, call_id)
    async with _console(gateway) as browser:
        page = await browser.get(f"/console/requests/{rid}")
        found = CSRF.search(page.text)
        assert found, page.text
        form = {"action": "answer", "answer": text, "csrf": found.group(1)}
        answered = await browser.post(f"/console/requests/{rid}", data=form)
    assert answered.status_code == 303, answered.text


async def test_ask_human_answered_in_the_console(gateway: RunningGateway) -> None:
    async with mcp_session(gateway) as session:
        ticket = await call(
            session,
            "ask_human",
            question="Which region should the replica go to?",
            options=["eu-west-1", "us-east-1"],
            wait_seconds=0.2,  # nobody answers that fast: a ticket
        )
        assert ticket["status"] == "pending"
        waiting = asyncio.create_task(
            call(session, "get_answer", call_id=ticket["call_id"], wait_seconds=20)
        )
        await _answer_in_console(gateway, ticket["call_id"], "eu-central-1, closer to users")
        answer = await waiting

    assert answer["status"] == "answered"
    assert answer["call_id"] == ticket["call_id"]
    assert answer["answer"] == "eu-central-1, closer to users"
    assert answer["answered_in"] == "web"
    assert answer["answered_by"]
    stored = await wire(gateway, ticket["call_id"], contact=True)
    assert [o["name"] for o in stored["spec"]["response_options"]] == ["eu-west-1", "us-east-1"]
    assert stored["spec"]["origin"]["tool"] == "ask_human"
