"""Claude Code's permission prompt (the MCP permission_prompt tool) under decide rules: a
tool use a reject rule matches is denied at once with the rule's comment, one an approve
rule matches is allowed with its input unchanged, and anything else still waits."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.mcp import tools
from tests.helpers import events
from tests.mcp.helpers import mcp_session, request_rows, text_of
from tests.rules.helpers import decided_by, rules_gateway, stored
from tests.services.inprocess import RunningGateway

NO_RM_RF = "no rm -rf from an agent: ask in #ops"
CONFIG = f"""
[[rules]]
name = "no-rm-rf"
fn = "Bash"
when = 'kwargs.command.startsWith("rm -rf")'
decide = "reject"
comment = "{NO_RM_RF}"

[[rules]]
name = "notes-are-fine"
fn = "Write"
when = 'kwargs.file_path.startsWith("/repo/notes")'
decide = "approve"
comment = "notes are fine"
"""
RM_RF = {
    "tool_name": "Bash",
    "input": {"command": "rm -rf dist", "description": "Remove the build output"},
    "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
}
NOTES = {
    "tool_name": "Write",
    "input": {"file_path": "/repo/notes.md", "content": "# Notes\n"},
    "tool_use_id": "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
}
LS = {
    "tool_name": "Bash",
    "input": {"command": "ls dist", "description": "List the build output"},
    "tool_use_id": "toolu_01LSq90qw90lq917835lq9x",
}


@pytest.fixture
async def prompted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[RunningGateway]:
    # A tool use no rule decides would wait this long; a decided one returns at once.
    monkeypatch.setattr(tools, "PERMISSION_WAIT_SECONDS", 0.2)
    db = f"sqlite+aiosqlite:///{tmp_path}/gw.db"
    async with rules_gateway(db, tmp_path, CONFIG) as running:
        yield running


async def prompt(gateway: RunningGateway, arguments: dict[str, Any]) -> dict[str, Any]:
    async with mcp_session(gateway) as session:
        result = await session.call_tool("permission_prompt", arguments)
    assert not result.is_error, text_of(result)
    answer: dict[str, Any] = json.loads(text_of(result))
    return answer


async def test_a_reject_rule_denies_with_its_comment(prompted: RunningGateway) -> None:
    assert await prompt(prompted, RM_RF) == {"behavior": "deny", "message": NO_RM_RF}
    call_id = f"mcp-{RM_RF['tool_use_id']}"
    record = await stored(prompted, call_id)
    assert record["spec"]["fn"] == "Bash"
    assert record["status"]["user_info"] == decided_by("no-rm-rf")
    assert (await events(prompted, call_id))["deliveries"] == []

    # Asked again, the same tool use gets the same answer from the same record.
    assert await prompt(prompted, RM_RF) == {"behavior": "deny", "message": NO_RM_RF}
    assert await request_rows(prompted) == 1


async def test_an_approve_rule_allows_with_the_input_unchanged(prompted: RunningGateway) -> None:
    answer = await prompt(prompted, NOTES)
    assert answer == {"behavior": "allow", "updatedInput": NOTES["input"]}
    record = await stored(prompted, f"mcp-{NOTES['tool_use_id']}")
    assert record["status"]["user_info"] == decided_by("notes-are-fine")


async def test_a_tool_use_no_rule_matches_is_left_pending(prompted: RunningGateway) -> None:
    answer = await prompt(prompted, LS)
    assert answer["behavior"] == "deny"
    assert "pending" in answer["message"].lower()
    record = await stored(prompted, f"mcp-{LS['tool_use_id']}")
    assert record["gateway_status"] == "pending" and record["status"]["user_info"] is None
