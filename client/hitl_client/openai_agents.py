"""The OpenAI Agents SDK adapter: tool calls that a run paused on (`needs_approval`) go to
the gateway; the people's decisions are applied to the run's `RunState` and the run resumes.

    result = await Runner.run(agent, "Refund order A-17")
    result = await resume(client, agent, result)  # until no call waits for approval

Each call's gateway `call_id` is the model's own tool-call id (under `scope` if given), so
calling `resume` again after a crash or a `WaitTimeout` waits on the same requests."""

from __future__ import annotations

import json
import time
from typing import Any, Unpack

from agents import Agent, Runner, RunResult, RunResultStreaming, RunState, ToolApprovalItem
from agents.run_config import RunOptions

from hitl_client._decorate import denial
from hitl_client._wire import scoped_call_id, time_left
from hitl_client.aio import AsyncClient
from hitl_client.models import FunctionCall

PausedRun = RunResult | RunResultStreaming


async def resume(
    client: AsyncClient,
    agent: Agent[Any],
    result: PausedRun,
    *,
    channel: dict[str, Any] | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 (as in AsyncClient.wait)
    scope: str | None = None,
    **run_options: Unpack[RunOptions[Any]],
) -> PausedRun:
    """Decide each pending tool call through the gateway and run on from `agent` (the run's
    starting agent), as often as the run pauses again; the run's final result.
    `run_options` are `Runner.run`'s (run_config, hooks, max_turns...)."""
    while result.interruptions:
        state = await decide(client, result, channel=channel, timeout=timeout, scope=scope)
        result = await Runner.run(agent, state, **run_options)
    return result


async def decide(
    client: AsyncClient,
    result: PausedRun,
    *,
    channel: dict[str, Any] | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 (as in AsyncClient.wait)
    scope: str | None = None,
) -> RunState[Any, Agent[Any]]:
    """Ask the gateway about every call the run paused on (all before waiting, so people see
    them together), wait for each decision, and return the run's state with each approved or
    rejected: pass it to `Runner.run` to go on. Past `timeout` (for them all), WaitTimeout."""
    state = result.to_state()
    items = list(result.interruptions)
    asked = [await _ask(client, item, channel, scope) for item in items]
    deadline = None if timeout is None else time.monotonic() + timeout
    for item, call in zip(items, asked, strict=True):
        apply(state, item, await client.wait(call, timeout=time_left(deadline)))
    return state


def apply(state: RunState[Any, Agent[Any]], item: ToolApprovalItem, call: FunctionCall) -> None:
    """The gateway's decision on `item`, as the SDK takes it. The SDK cannot run a tool with
    other arguments than the model's, so an edit is a rejection that gives the model the
    arguments the person approved: it may call again with them (and a person decides again)."""
    if call.approved and call.arguments == call.spec.kwargs:
        state.approve(item)
    elif call.approved:
        state.reject(item, rejection_message=edited_message(call))
    else:
        state.reject(item, rejection_message=denial(call))


def edited_message(call: FunctionCall) -> str:
    return (
        f"{call.spec.fn} did not run: the person approved it only with these arguments: "
        f"{json.dumps(call.arguments)}. Call it again with exactly these arguments if they "
        "still serve the task."
    )


async def _ask(
    client: AsyncClient,
    item: ToolApprovalItem,
    channel: dict[str, Any] | None,
    scope: str | None,
) -> FunctionCall:
    return await client.create_function_call(
        item.qualified_name or item.name or "tool",
        tool_arguments(item.arguments),
        call_id=scoped_call_id(item.call_id, scope),
        run_id=item.agent.name,
        channel=channel,
    )


def tool_arguments(raw: str | None) -> dict[str, Any]:
    """The model's JSON arguments by name, as the approver reads them (and may edit them)."""
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        parsed = raw
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}
