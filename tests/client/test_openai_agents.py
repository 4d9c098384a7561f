"""The OpenAI Agents SDK adapter against a live gateway, with a scripted `Model` (no network):
a tool with `needs_approval` runs once a person approves it through the gateway; a rejected
one does not run and the model reads why; an edited one never runs with the model's own
arguments, and the model is told the arguments the person approved."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, FunctionTool, Model, ModelResponse, RunConfig, Runner, function_tool
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from gateway.seam import Answered, AnsweredIn, Responder, Verb
from hitl_client import ApiError, AsyncClient, WaitTimeout
from hitl_client.openai_agents import decide, resume
from tests.client.helpers import responder_key
from tests.factories import rid_of
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway

OFFLINE = RunConfig(tracing_disabled=True)  # no trace export to OpenAI
OPERATOR = Responder(AnsweredIn.WEB, "operator", "operator")  # the console's operator


class ScriptedModel(Model):
    """Answers each turn with the next scripted output, and keeps what it was sent."""

    def __init__(self, *turns: list[TResponseOutputItem]) -> None:
        self.turns = list(turns)
        self.inputs: list[list[Any]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],  # the SDK passes it by this name
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self.inputs.append(list(input) if isinstance(input, list) else [input])
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("these tests never stream")


def call(call_id: str, **arguments: Any) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name="refund", arguments=json.dumps(arguments)
    )


def say(text: str) -> ResponseOutputMessage:
    content = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=[content]
    )


def output_for(inputs: list[Any], call_id: str) -> str:
    """What the model was given as the result of its tool call `call_id`."""
    outputs = {
        item["call_id"]: str(item["output"])
        for item in inputs
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
    assert call_id in outputs, f"the model was given no output for {call_id}"
    return outputs[call_id]


def refund_tool(ran: list[tuple[str, int]]) -> FunctionTool:
    @function_tool(needs_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund `amount` on `order`."""
        ran.append((order, amount))
        return f"refunded {amount} on {order}"

    return refund


async def pending(gateway: RunningGateway) -> dict[str, dict[str, Any]]:
    async with gateway.client() as admin:
        items = (await admin.get("/agent/function_calls/pending")).json()["items"]
    return {item["call_id"]: item for item in items}


async def test_an_approved_call_runs_a_rejected_one_does_not_and_the_model_reads_why(
    gateway: RunningGateway,
) -> None:
    client = AsyncClient(gateway.api_base, await gateway.new_key("default", name="agent"))
    person = AsyncClient(gateway.api_base, await responder_key(gateway))
    ran: list[tuple[str, int]] = []
    model = ScriptedModel(
        [call("c-ok", order="A-1", amount=10), call("c-no", order="B-2", amount=900)],
        [say("done")],
    )
    agent = Agent(name="refunds", model=model, tools=[refund_tool(ran)])
    try:
        paused = await Runner.run(agent, "Refund both orders", run_config=OFFLINE)
        assert [item.call_id for item in paused.interruptions] == ["c-ok", "c-no"]
        with pytest.raises(WaitTimeout):  # asked; nobody has answered yet
            await decide(client, paused, timeout=0.2)
        asked = await pending(gateway)
        assert set(asked) == {"c-ok", "c-no"} and ran == []
        assert asked["c-no"]["run_id"] == "refunds"  # the agent's name
        spec = asked["c-no"]["spec"]
        assert (spec["fn"], spec["kwargs"]) == ("refund", {"order": "B-2", "amount": 900})
        with pytest.raises(ApiError) as refused:  # the agent cannot approve its own call
            await client.respond_function_call("c-no", approved=True)
        assert refused.value.status_code == 403

        resuming = asyncio.create_task(
            resume(client, agent, paused, timeout=10, run_config=OFFLINE)
        )
        await person.respond_function_call("c-ok", approved=True)
        await person.respond_function_call("c-no", approved=False, comment="too much at once")
        result = await resuming  # on the same two requests: nobody decides any other

        assert ran == [("A-1", 10)]
        assert result.final_output == "done"
        given = model.inputs[-1]
        assert output_for(given, "c-ok") == "refunded 10 on A-1"
        assert "too much at once" in output_for(given, "c-no")
    finally:
        await client.aclose()
        await person.aclose()


async def test_an_edited_call_never_runs_with_the_models_arguments(
    gateway: RunningGateway,
) -> None:
    client = AsyncClient(gateway.api_base, await gateway.new_key("default", name="agent"))
    person = AsyncClient(gateway.api_base, await responder_key(gateway))
    ran: list[tuple[str, int]] = []
    model = ScriptedModel(
        [call("c-1", order="A-1", amount=900)],
        [call("c-2", order="A-1", amount=100)],  # the model takes up the approved arguments
        [say("done")],
    )
    agent = Agent(name="refunds", model=model, tools=[refund_tool(ran)])
    try:
        paused = await Runner.run(agent, "Refund A-1", run_config=OFFLINE)
        resuming = asyncio.create_task(
            resume(client, agent, paused, scope="run-7", timeout=10, run_config=OFFLINE)
        )
        await eventually(lambda: _asked(gateway, "run-7:c-1", resuming))
        rid = await rid_of(gateway, "run-7:c-1")
        edited = {"order": "A-1", "amount": 100}
        answer = gateway.context().answers.answer(rid, Verb.EDIT, OPERATOR, edited=edited)
        assert isinstance(await answer, Answered)

        await eventually(lambda: _asked(gateway, "run-7:c-2", resuming))
        assert (await pending(gateway))["run-7:c-2"]["spec"]["kwargs"] == edited
        await person.respond_function_call("run-7:c-2", approved=True)
        result = await resuming

        assert ran == [("A-1", 100)]  # never 900
        told = output_for(model.inputs[1], "c-1")
        assert "did not run" in told and '{"order": "A-1", "amount": 100}' in told
        assert result.final_output == "done"
    finally:
        await client.aclose()
        await person.aclose()


async def _asked(gateway: RunningGateway, call_id: str, resuming: asyncio.Task[Any]) -> bool:
    if resuming.done():
        resuming.result()  # it failed: say how, rather than wait for the request
    return call_id in await pending(gateway)
