"""The Pydantic AI adapter against a live gateway, with a `FunctionModel` (no network): a call
awaiting approval that a person edits runs with the person's arguments; a denied one does not
run and the model reads the person's reason; an approved one runs as the model asked."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, ToolApproved
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from gateway.seam import Answered, AnsweredIn, Responder, Verb
from hitl_client import AsyncClient
from hitl_client.pydantic_ai import decide, handler
from tests.client.helpers import responder_key
from tests.factories import rid_of
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway

OPERATOR = Responder(AnsweredIn.WEB, "operator", "operator")  # the console's operator


class Script:
    """A model that first makes `calls`, then answers with what the tools returned; it keeps
    every conversation it was sent."""

    def __init__(self, *calls: ToolCallPart) -> None:
        self.calls = list(calls)
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        returns = tool_returns(messages[-1])
        if not returns:
            return ModelResponse(parts=list(self.calls))
        return ModelResponse(parts=[TextPart(" | ".join(returns.values()))])


def tool_returns(message: ModelMessage) -> dict[str, str]:
    """What the tools returned, by tool-call id, as the model reads it."""
    if not isinstance(message, ModelRequest):
        return {}
    parts = [part for part in message.parts if isinstance(part, ToolReturnPart)]
    return {part.tool_call_id: part.model_response_str() for part in parts}


def refund(call_id: str, **arguments: Any) -> ToolCallPart:
    return ToolCallPart("refund", arguments, tool_call_id=call_id)


def refunds_agent(script: Script, ran: list[tuple[str, int]], **kwargs: Any) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(
        FunctionModel(script), name="refunds", output_type=[str, DeferredToolRequests], **kwargs
    )

    @agent.tool_plain(requires_approval=True)
    def refund(order: str, amount: int) -> str:
        ran.append((order, amount))
        return f"refunded {amount} on {order}"

    return agent


async def pending(gateway: RunningGateway) -> dict[str, dict[str, Any]]:
    async with gateway.client() as admin:
        items = (await admin.get("/agent/function_calls/pending")).json()["items"]
    return {item["call_id"]: item for item in items}


async def test_an_edited_approval_runs_the_tool_with_the_approvers_arguments(
    gateway: RunningGateway,
) -> None:
    client = AsyncClient(gateway.api_base, await gateway.new_key("default", name="agent"))
    ran: list[tuple[str, int]] = []
    agent = refunds_agent(Script(refund("p-1", order="A-1", amount=900)), ran)
    try:
        paused = await agent.run("Refund A-1")
        assert isinstance(paused.output, DeferredToolRequests) and ran == []
        deciding = asyncio.create_task(
            decide(client, paused.output, run_id=agent.name, scope="conv-3", timeout=10)
        )
        await eventually(lambda: _asked(gateway, "conv-3:p-1", deciding))
        assert (await pending(gateway))["conv-3:p-1"]["run_id"] == "refunds"
        edited = {"order": "A-1", "amount": 100}
        rid = await rid_of(gateway, "conv-3:p-1")
        answer = gateway.context().answers.answer(rid, Verb.EDIT, OPERATOR, edited=edited)
        assert isinstance(await answer, Answered)
        results = await deciding
        assert results.approvals == {"p-1": ToolApproved(override_args=edited)}
        assert results.answered_by == {"p-1": "operator"}  # who decided, as recorded

        done = await agent.run(message_history=paused.all_messages(), deferred_tool_results=results)
        assert ran == [("A-1", 100)]  # never 900
        assert done.output == "refunded 100 on A-1"
    finally:
        await client.aclose()


async def test_a_denial_reaches_the_model_and_an_approval_runs_as_asked(
    gateway: RunningGateway,
) -> None:
    client = AsyncClient(gateway.api_base, await gateway.new_key("default", name="agent"))
    person = AsyncClient(gateway.api_base, await responder_key(gateway))
    ran: list[tuple[str, int]] = []
    script = Script(refund("p-ok", order="A-1", amount=10), refund("p-no", order="B-2", amount=900))
    decided_in_run = HandleDeferredToolCalls(handler=handler(client, timeout=10))
    agent = refunds_agent(script, ran, capabilities=[decided_in_run])
    try:
        running = asyncio.create_task(agent.run("Refund both orders"))
        await eventually(lambda: _asked(gateway, "p-no", running))
        assert (await pending(gateway))["p-no"]["run_id"] == "refunds"  # the agent's name
        await person.respond_function_call("p-ok", approved=True)
        await person.respond_function_call("p-no", approved=False, comment="not this month")
        done = await running

        assert ran == [("A-1", 10)]
        told = tool_returns(script.seen[-1][-1])
        assert told["p-ok"] == "refunded 10 on A-1"
        assert "not this month" in told["p-no"]
        assert done.output == f"{told['p-ok']} | {told['p-no']}"
    finally:
        await client.aclose()
        await person.aclose()


async def _asked(gateway: RunningGateway, call_id: str, task: asyncio.Task[Any]) -> bool:
    if task.done():
        task.result()  # it failed: say how, rather than wait for the request
    return call_id in await pending(gateway)
