"""permission_prompt, Claude Code's --permission-prompt-tool, driven with the arguments Claude
Code sends: {"tool_name", "input", "tool_use_id"} (its permission prompt tool input schema;
Claude Code SDK docs, "Custom permission prompt tool"; anthropics/claude-code#1175). It must
answer, as JSON text, {"behavior": "allow", "updatedInput": {...}} or {"behavior": "deny",
"message": "..."}, and a timeout must never allow."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.mcp import tools
from gateway.seam import Answered, Responder, Verb
from gateway.vocabulary import AnsweredIn
from tests.factories import rid_of
from tests.helpers import eventually
from tests.mcp.helpers import call, mcp_session, request_rows, text_of, wire
from tests.services.inprocess import RunningGateway

# What Claude Code passes for a Bash and a Write tool use (the tools' own input shapes).
BASH = {
    "tool_name": "Bash",
    "input": {"command": "rm -rf dist", "description": "Remove the build output"},
    "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
}
WRITE = {
    "tool_name": "Write",
    "input": {"file_path": "/repo/notes.md", "content": "# Notes\n"},
    "tool_use_id": "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
}


async def _prompt(gateway: RunningGateway, arguments: dict[str, Any]) -> dict[str, Any]:
    async with mcp_session(gateway) as session:
        result = await session.call_tool("permission_prompt", arguments)
    assert not result.is_error, text_of(result)
    answer: dict[str, Any] = json.loads(text_of(result))  # JSON text, as Claude Code parses it
    return answer


async def _exists(gateway: RunningGateway, call_id: str) -> bool:
    async with gateway.client() as api:
        return (await api.get(f"/function_calls/{call_id}")).status_code == 200


async def _respond(gateway: RunningGateway, call_id: str, **decision: Any) -> None:
    """A person decides through the HTTP API once the prompt's request exists."""
    await eventually(lambda: _exists(gateway, call_id))  # created by the waiting tool call
    async with gateway.client() as api:
        response = await api.post(f"/agent/function_calls/{call_id}/respond", json=decision)
    assert response.status_code == 200, response.text


async def test_approved_allows_with_the_input_unchanged(gateway: RunningGateway) -> None:
    call_id = f"mcp-{WRITE['tool_use_id']}"
    prompt = asyncio.create_task(_prompt(gateway, WRITE))
    await _respond(gateway, call_id, approved=True)

    assert await prompt == {"behavior": "allow", "updatedInput": WRITE["input"]}
    stored = await wire(gateway, call_id)
    assert stored["spec"]["fn"] == "Write" and stored["spec"]["kwargs"] == WRITE["input"]
    assert stored["spec"]["origin"]["tool"] == "permission_prompt"
    assert stored["spec"]["state"] == {"tool_use_id": WRITE["tool_use_id"]}


async def test_rejected_denies_with_the_persons_comment(gateway: RunningGateway) -> None:
    prompt = asyncio.create_task(_prompt(gateway, BASH))
    await _respond(
        gateway, f"mcp-{BASH['tool_use_id']}", approved=False, comment="not the dist of prod"
    )

    assert await prompt == {"behavior": "deny", "message": "not the dist of prod"}


async def test_a_timeout_denies_and_says_it_is_still_pending(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "PERMISSION_WAIT_SECONDS", 0.3)
    call_id = f"mcp-{BASH['tool_use_id']}"

    answer = await _prompt(gateway, BASH)

    assert answer["behavior"] == "deny", answer
    assert set(answer) == {"behavior", "message"}
    assert call_id in answer["message"] and "pending" in answer["message"]
    assert "ask again" in answer["message"].lower()
    assert (await wire(gateway, call_id))["gateway_status"] == "pending"

    # The same tool use asked again waits on the same request, which a person then approves.
    monkeypatch.setattr(tools, "PERMISSION_WAIT_SECONDS", 20)
    again = asyncio.create_task(_prompt(gateway, BASH))
    await _respond(gateway, call_id, approved=True)
    assert await again == {"behavior": "allow", "updatedInput": BASH["input"]}
    assert await request_rows(gateway) == 1


async def test_input_sent_as_a_json_string_is_read_as_the_object(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code has sent object arguments as JSON text (anthropics/claude-code#5504)."""
    monkeypatch.setattr(tools, "PERMISSION_WAIT_SECONDS", 0)
    answer = await _prompt(gateway, WRITE | {"input": json.dumps(WRITE["input"])})

    assert answer["behavior"] == "deny"
    stored = await wire(gateway, f"mcp-{WRITE['tool_use_id']}")
    assert stored["spec"]["kwargs"] == WRITE["input"]


async def _edit(gateway: RunningGateway, call_id: str, edited: dict[str, Any]) -> None:
    """A person edits the arguments and approves, in Slack, once the request exists."""
    await eventually(lambda: _exists(gateway, call_id))
    alice = Responder(AnsweredIn.SLACK, "U0ALICE", "Alice")
    rid = await rid_of(gateway, call_id)
    answered = await gateway.context("slack").answers.answer(rid, Verb.EDIT, alice, edited=edited)
    assert isinstance(answered, Answered), answered


async def test_approved_with_edited_input_allows_the_edited_input(gateway: RunningGateway) -> None:
    call_id = f"mcp-{BASH['tool_use_id']}"
    edited = {"command": "rm -rf dist/cache", "description": "Remove the cache only"}
    prompt = asyncio.create_task(_prompt(gateway, BASH))
    await _edit(gateway, call_id, edited)

    assert await prompt == {"behavior": "allow", "updatedInput": edited}
    stored = await wire(gateway, call_id)
    assert stored["spec"]["kwargs"] == BASH["input"]  # what the agent asked, kept
    assert stored["status"]["updated_kwargs"] == edited


async def test_request_approval_returns_the_edited_arguments_to_run_with(
    gateway: RunningGateway,
) -> None:
    edited = {"table": "users_copy"}
    async with mcp_session(gateway) as session:
        ticket = await call(
            session,
            "request_approval",
            action="drop_table",
            arguments={"table": "users"},
            wait_seconds=0,
        )
        await _edit(gateway, ticket["call_id"], edited)
        decided = await call(session, "get_decision", call_id=ticket["call_id"], wait_seconds=0)

    assert decided["status"] == "approved" and decided["arguments"] == edited
    assert "edited arguments" in decided["message"]
