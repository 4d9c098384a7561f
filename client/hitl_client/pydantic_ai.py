"""The Pydantic AI adapter: tool calls that ended a run with `DeferredToolRequests` (tools
with `requires_approval=True`, or that raised `ApprovalRequired`) go to the gateway, and the
people's decisions come back as `DeferredToolResults` for the next run:

    result = await agent.run("Refund order A-17")
    if isinstance(result.output, DeferredToolRequests):
        results = await decide(client, result.output, run_id=agent.name)
        result = await agent.run(message_history=result.all_messages(),
                                 deferred_tool_results=results)

or, inside the run, `Agent(..., capabilities=[HandleDeferredToolCalls(handler(client))])`.

Each call's gateway `call_id` is the model's own tool-call id (under `scope` if given), so
deciding again after a crash or a `WaitTimeout` waits on the same requests."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolApproved, ToolDenied

from hitl_client._decorate import denial
from hitl_client._wire import scoped_call_id, time_left
from hitl_client.aio import AsyncClient
from hitl_client.models import FunctionCall

Handler = Callable[[RunContext[Any], DeferredToolRequests], Awaitable[DeferredToolResults | None]]


async def decide(
    client: AsyncClient,
    requests: DeferredToolRequests,
    *,
    run_id: str | None = None,
    channel: dict[str, Any] | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 (as in AsyncClient.wait)
    scope: str | None = None,
) -> DeferredToolResults:
    """Ask the gateway about every call awaiting approval (all before waiting, so people see
    them together), wait for each decision and return them: `ToolApproved` (with the approver's
    edited arguments, if any) or `ToolDenied` with their reason. `requests.calls` (external
    calls) are left alone. Past `timeout` (for them all), WaitTimeout."""
    parts = list(requests.approvals)
    asked = [await _ask(client, part, run_id, channel, scope) for part in parts]
    deadline = None if timeout is None else time.monotonic() + timeout
    results = DeferredToolResults()
    for part, made in zip(parts, asked, strict=True):
        call = await client.wait(made, timeout=time_left(deadline))
        results.approvals[part.tool_call_id] = approval(call)
        if who := answered_by(call):
            results.answered_by[part.tool_call_id] = who
    return results


def handler(
    client: AsyncClient,
    *,
    channel: dict[str, Any] | None = None,
    timeout: float | None = None,
    scope: str | None = None,
) -> Handler:
    """For `HandleDeferredToolCalls(handler=...)`: the run waits for the gateway's decisions
    and goes on, instead of ending with `DeferredToolRequests`. The agent's name, if it has
    one, is the gateway's `run_id`."""

    async def handle(
        ctx: RunContext[Any], requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        if not requests.approvals:
            return None  # external calls: for another handler, or the run's output
        run_id = ctx.agent.name if ctx.agent is not None else None
        return await decide(
            client, requests, run_id=run_id, channel=channel, timeout=timeout, scope=scope
        )

    return handle


def approval(call: FunctionCall) -> ToolApproved | ToolDenied:
    if not call.approved:
        return ToolDenied(denial(call))
    edited = call.arguments != call.spec.kwargs
    return ToolApproved(override_args=call.arguments if edited else None)


def answered_by(call: FunctionCall) -> str | None:
    """Who decided, as the gateway recorded them."""
    person = call.status.user_info if call.status else None
    if person is None:
        return None
    return person.email or person.user_id or person.name


async def _ask(
    client: AsyncClient,
    part: ToolCallPart,
    run_id: str | None,
    channel: dict[str, Any] | None,
    scope: str | None,
) -> FunctionCall:
    return await client.create_function_call(
        part.tool_name,
        part.args_as_dict(),
        call_id=scoped_call_id(part.tool_call_id, scope),
        run_id=run_id,
        channel=channel,
    )
