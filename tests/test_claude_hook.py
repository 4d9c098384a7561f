"""`gateway hook claude-code` run as Claude Code runs it: `python -m gateway hook claude-code`
in a subprocess, the hook's JSON on stdin (copied from Claude Code's hooks reference, see
tests/data/claude_code/SOURCES.md), the decision JSON read from stdout, against a live gateway.

The expected outputs are the documented shapes
(https://code.claude.com/docs/en/hooks#pretooluse-decision-control and
#permissionrequest-decision-control), written out here rather than taken from the module.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.claude_hook import HookInput, call_id_for
from gateway.seam import Answered, Responder, Verb
from gateway.vocabulary import AnsweredIn
from gateway.wire.models import is_call_id
from tests.factories import rid_of
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config
from tests.services.net import free_port

DATA = Path(__file__).parent / "data" / "claude_code"
FIXTURES = {"PreToolUse": "pre_tool_use.json", "PermissionRequest": "permission_request.json"}
EVENTS = list(FIXTURES)
SESSION = "abc123"  # the fixtures' session_id
WITHIN = 8.0  # seconds any one hook run may take here


def hook_input(event: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / FIXTURES[event]).read_text())
    return data


def allow(event: str, reason: str) -> dict[str, Any]:
    if event == "PreToolUse":
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": reason,
            }
        }
    return {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }
    }


def deny(event: str, reason: str) -> dict[str, Any]:
    if event == "PreToolUse":
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    return {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": reason},
        }
    }


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def decision(self) -> Any:
        assert self.returncode == 0, self
        return json.loads(self.stdout)


@dataclass
class Hook:
    workdir: Path
    env: dict[str, str]
    started: list[asyncio.subprocess.Process] = field(default_factory=list)

    async def start(
        self, stdin: dict[str, Any] | str, *args: str, **env: str
    ) -> asyncio.Task[Result]:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            "hook",
            "claude-code",
            *args,
            cwd=self.workdir,
            env=self.env | env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        self.started.append(process)
        text = stdin if isinstance(stdin, str) else json.dumps(stdin)

        async def finish() -> Result:
            stdout, stderr = await process.communicate(text.encode())
            assert process.returncode is not None
            return Result(process.returncode, stdout.decode(), stderr.decode())

        return asyncio.create_task(finish())

    async def __call__(self, stdin: dict[str, Any] | str, *args: str, **env: str) -> Result:
        return await asyncio.wait_for(await self.start(stdin, *args, **env), WITHIN)


@pytest.fixture
async def hook(tmp_path: Path) -> AsyncIterator[Hook]:
    # As Claude Code starts it: only the environment this test gives it.
    prefixes = ("GATEWAY_", "HUMANLAYER_")
    base = {name: value for name, value in os.environ.items() if not name.startswith(prefixes)}
    runner = Hook(workdir=tmp_path, env=base)
    yield runner
    for process in runner.started:  # a failed test leaves no hook behind
        if process.returncode is None:
            process.kill()
            await process.wait()


def client(gateway: RunningGateway, key: str | None = None) -> dict[str, str]:
    return {"HUMANLAYER_API_BASE": gateway.api_base, "HUMANLAYER_API_KEY": key or gateway.api_key}


async def calls(gateway: RunningGateway) -> list[dict[str, Any]]:
    async with gateway.client() as http:
        response = await http.get("/function_calls", params={"run_id": SESSION})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def one_call(gateway: RunningGateway) -> dict[str, Any]:
    async def created() -> bool:
        return len(await calls(gateway)) == 1

    await eventually(created, within=WITHIN)
    [call] = await calls(gateway)
    return call


async def respond(gateway: RunningGateway, call_id: str, **body: Any) -> None:
    async with gateway.client() as http:
        path = f"/agent/function_calls/{call_id}/respond"
        response = await http.post(path, json=body | {"user_info": {"name": "Alice"}})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("event", EVENTS)
async def test_approved_while_the_hook_waits_allows(
    sqlite_gateway: RunningGateway, hook: Hook, event: str
) -> None:
    stdin = hook_input(event)
    running = await hook.start(stdin, "--timeout", "30", **client(sqlite_gateway))
    call = await one_call(sqlite_gateway)
    assert call["run_id"] == SESSION
    assert call["spec"]["fn"] == "Bash"
    assert call["spec"]["kwargs"] == stdin["tool_input"]
    origin = {name: value for name, value in call["spec"]["origin"].items() if value is not None}
    assert origin == {"via": "claude-code-hook", "tool": "Bash"}
    if event == "PreToolUse":  # the same tool use finds the same request
        assert call["call_id"] == "claude-code-toolu_01ABC123..."
    assert not running.done(), "the hook must wait for a person"

    await respond(sqlite_gateway, call["call_id"], approved=True, comment="go ahead")
    result = await asyncio.wait_for(running, WITHIN)

    assert result.decision == allow(event, "Approved by Alice (api): go ahead")


@pytest.mark.parametrize("event", EVENTS)
async def test_rejected_denies_with_the_persons_comment(
    sqlite_gateway: RunningGateway, hook: Hook, event: str
) -> None:
    running = await hook.start(hook_input(event), "--timeout", "30", **client(sqlite_gateway))
    call = await one_call(sqlite_gateway)

    await respond(sqlite_gateway, call["call_id"], approved=False, comment="not on a Friday")
    result = await asyncio.wait_for(running, WITHIN)

    assert result.decision == deny(event, "not on a Friday")


def with_edited_input(expected: dict[str, Any], edited: dict[str, Any]) -> dict[str, Any]:
    """An allow that runs the tool with the person's input: PreToolUse's `updatedInput` beside
    the decision, PermissionRequest's in it (the documented shapes)."""
    output = expected["hookSpecificOutput"]
    if output["hookEventName"] == "PreToolUse":
        return {"hookSpecificOutput": output | {"updatedInput": edited}}
    return {
        "hookSpecificOutput": output | {"decision": output["decision"] | {"updatedInput": edited}}
    }


@pytest.mark.parametrize("event", EVENTS)
async def test_approved_with_edited_input_allows_the_edited_input(
    sqlite_gateway: RunningGateway, hook: Hook, event: str
) -> None:
    running = await hook.start(hook_input(event), "--timeout", "30", **client(sqlite_gateway))
    call = await one_call(sqlite_gateway)
    edited = {"command": "npm test -- --runInBand", "description": "Run the tests"}

    alice = Responder(AnsweredIn.SLACK, "U0ALICE", "Alice")
    rid = await rid_of(sqlite_gateway, call["call_id"])
    answers = sqlite_gateway.context("slack").answers
    assert isinstance(await answers.answer(rid, Verb.EDIT, alice, edited=edited), Answered)
    result = await asyncio.wait_for(running, WITHIN)

    expected = allow(event, "Approved by Alice (slack) with edited input")
    assert result.decision == with_edited_input(expected, edited)


def still_pending(call_id: str) -> str:
    return (
        f"No decision yet: approval request {call_id} is still pending with the gateway. "
        "Ask again (retry the same tool call) to keep waiting for a person's decision."
    )


@pytest.mark.parametrize("event", EVENTS)
async def test_no_decision_in_time_denies_and_stays_pending(
    sqlite_gateway: RunningGateway, hook: Hook, event: str
) -> None:
    result = await hook(hook_input(event), "--timeout", "0.5", **client(sqlite_gateway))

    [call] = await calls(sqlite_gateway)
    assert call["status"]["approved"] is None and call["gateway_status"] == "pending"
    assert result.decision == deny(event, still_pending(call["call_id"]))


@pytest.mark.parametrize("event", EVENTS)
async def test_asking_again_waits_on_the_pending_request(
    tmp_path: Path, hook: Hook, event: str
) -> None:
    access: list[str] = []
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db")
    async with running_gateway(settings, access_log=access) as gateway:
        first = await hook(hook_input(event), "--timeout", "0.5", **client(gateway))
        [pending] = await calls(gateway)
        assert first.decision == deny(event, still_pending(pending["call_id"]))
        retry = hook_input(event)
        if event == "PreToolUse":  # Claude's retry is a new tool use
            retry["tool_use_id"] = "toolu_01RETRY"
        lookups = len([line for line in access if "status=pending" in line])

        running = await hook.start(retry, "--timeout", "30", **client(gateway))

        async def looked_up() -> bool:  # it has found the pending request and waits on it
            return len([line for line in access if "status=pending" in line]) > lookups

        await eventually(looked_up, within=WITHIN)
        await respond(gateway, pending["call_id"], approved=True, comment=None)
        result = await asyncio.wait_for(running, WITHIN)

        assert result.decision == allow(event, "Approved by Alice (api)")
        assert [call["call_id"] for call in await calls(gateway)] == [pending["call_id"]]


async def test_the_same_tool_use_again_gets_the_same_decision(
    sqlite_gateway: RunningGateway, hook: Hook
) -> None:
    stdin = hook_input("PreToolUse")
    running = await hook.start(stdin, "--timeout", "30", **client(sqlite_gateway))
    call = await one_call(sqlite_gateway)
    await respond(sqlite_gateway, call["call_id"], approved=False, comment="use a branch")
    assert (await asyncio.wait_for(running, WITHIN)).decision == deny("PreToolUse", "use a branch")

    again = await hook(stdin, "--timeout", "30", **client(sqlite_gateway))

    assert again.decision == deny("PreToolUse", "use a branch")
    assert len(await calls(sqlite_gateway)) == 1


@pytest.mark.parametrize("event", EVENTS)
async def test_gateway_down_denies_with_a_clear_message(hook: Hook, event: str) -> None:
    base = f"http://127.0.0.1:{free_port()}/humanlayer/v1"  # nothing listens there
    env = {"HUMANLAYER_API_BASE": base, "HUMANLAYER_API_KEY": "hlgw_anything"}

    result = await hook(hook_input(event), "--timeout", "30", **env)

    assert result.decision == deny(
        event,
        f"Denied (fail closed): cannot reach the approval gateway at {base} (ConnectError). "
        "Nothing was approved.",
    )


@pytest.mark.parametrize("event", EVENTS)
async def test_bad_key_denies_and_creates_nothing(
    sqlite_gateway: RunningGateway, hook: Hook, event: str
) -> None:
    env = client(sqlite_gateway, key="hlgw_not-a-key")

    result = await hook(hook_input(event), "--timeout", "30", **env)

    assert result.decision == deny(
        event,
        f"Denied (fail closed): the approval gateway at {sqlite_gateway.api_base} refused the "
        "API key in HUMANLAYER_API_KEY (invalid or revoked API key). Nothing was approved.",
    )
    assert await calls(sqlite_gateway) == []


@pytest.mark.parametrize("event", EVENTS)
async def test_no_key_denies(hook: Hook, event: str) -> None:
    result = await hook(hook_input(event), "--timeout", "30")

    assert result.decision == deny(
        event,
        "Denied (fail closed): HUMANLAYER_API_KEY is not set, so the approval gateway cannot "
        "be asked. Nothing was approved.",
    )


@pytest.mark.parametrize("event", EVENTS)
async def test_a_malformed_hook_input_denies(hook: Hook, event: str) -> None:
    stdin = hook_input(event) | {"tool_input": "npm test"}

    result = await hook(stdin, "--timeout", "30", HUMANLAYER_API_KEY="hlgw_anything")

    assert result.decision == deny(
        event,
        "Denied (fail closed): the hook's input is not what Claude Code sends: tool_input is "
        "missing or not a JSON object. Nothing was approved.",
    )


async def test_input_that_is_no_hook_of_ours_exits_2(hook: Hook) -> None:
    # No event to answer in its shape: exit 2 blocks a PreToolUse call (the docs' table).
    stop = hook_input("PreToolUse") | {"hook_event_name": "Stop"}

    results = [await hook(stop), await hook("not json")]

    assert [(r.returncode, r.stdout) for r in results] == [(2, ""), (2, "")]
    assert "hook_event_name is 'Stop'" in results[0].stderr
    assert "standard input is not JSON" in results[1].stderr


@pytest.mark.parametrize(
    ("tool_use_id", "expected"),
    [
        ("toolu_01ABC123...", "claude-code-toolu_01ABC123..."),
        ("toolu/../x?#%", None),  # would break out of the URL path: hashed instead
        ("t" * 300, None),
    ],
)
def test_call_id_from_the_tool_use(tool_use_id: str, expected: str | None) -> None:
    hook = HookInput("PreToolUse", SESSION, "Bash", {}, tool_use_id)

    call_id = call_id_for(hook)

    assert is_call_id(call_id) and call_id == call_id_for(hook)
    if expected is not None:
        assert call_id == expected
    else:
        assert call_id.startswith("claude-code-") and len(call_id) == len("claude-code-") + 40


def test_the_hook_starts_without_the_servers_imports() -> None:
    """It runs on every tool use: `python -m gateway hook claude-code` imports neither the
    app nor a channel (0.2 s to start instead of 1.2 s)."""
    started = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gateway", "hook", "claude-code"],
        input=b"not json",
        capture_output=True,
        timeout=30,
        check=False,
    )
    imported = started.stderr.decode()
    assert started.returncode == 2  # unreadable input: no event to answer
    assert "gateway.cli.claude_hook" in imported
    assert "gateway.app" not in imported and "channels" not in imported


RULES = r"""
[[rules]]
name = "no-rm-root"
fn = "Bash"
when = 'kwargs.command.matches("^rm\\s+-rf\\s+/\\s*$")'
decide = "reject"
comment = "never rm -rf /"

[[rules]]
name = "tests-run-freely"
fn = "Bash"
when = 'kwargs.command == "npm test"'
decide = "approve"
"""


@pytest.fixture
async def ruled_gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", RULES)
    settings = test_settings(f"sqlite:///{tmp_path / 'ruled.db'}", config=config)
    async with running_gateway(settings) as running:
        yield running


@pytest.mark.parametrize("event", EVENTS)
async def test_the_hook_obeys_the_rules_at_once(
    ruled_gateway: RunningGateway, hook: Hook, event: str
) -> None:
    """A rule decides before any person is asked: the hook has its answer in one run."""
    rm_root = hook_input(event) | {"tool_input": {"command": "rm -rf /"}}
    rm_root.pop("tool_use_id", None)
    denied = await hook(rm_root, "--timeout", "30", **client(ruled_gateway))
    assert denied.decision == deny(event, "never rm -rf /")

    npm_test = hook_input(event) | {"tool_input": {"command": "npm test"}}
    allowed = await hook(npm_test, "--timeout", "30", **client(ruled_gateway))
    assert allowed.decision == allow(event, "Approved by rule tests-run-freely (gateway)")
