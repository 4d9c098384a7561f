"""An OpenAI Agents SDK agent whose refund tool needs a person's approval, through a local
gateway. A scripted model stands in for the LLM, so no OpenAI key is needed.

    make run                                    # the gateway; it prints the two exports
    export HUMANLAYER_API_BASE=http://127.0.0.1:8080/humanlayer/v1
    export HUMANLAYER_API_KEY=hlgw_...          # the agent key `make run` printed
    pip install -e 'client[openai-agents]'
    python examples/openai_agents_approval.py

The run pauses on the tool call; `resume` sends it to the gateway and waits. Approve it, or
reject it with a reason, in the console (or `gateway approve <call_id>`, `gateway reject
<call_id> --comment ...`, Slack...): the script prints what the agent made of it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, function_tool
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from hitl_client import AsyncClient
from hitl_client.openai_agents import resume

OFFLINE = RunConfig(tracing_disabled=True)  # nothing is sent to OpenAI, not even traces


@function_tool(needs_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund `amount` euros on `order`."""
    return f"refunded {amount} EUR on {order}"


class ScriptedModel(Model):
    """The LLM's part, scripted: first ask for the refund, then report what came of it."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],  # the SDK passes it by this name
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        outputs = tool_outputs(input)
        if not outputs:  # a fresh id per run: the gateway keys its request on it
            arguments = json.dumps({"order": "A-17", "amount": 40})
            call_id = f"call_{uuid.uuid4().hex}"
            ask = ResponseFunctionToolCall(
                type="function_call", call_id=call_id, name="refund", arguments=arguments
            )
            return ModelResponse(output=[ask], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=outputs[-1], annotations=[])
        message = ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("this example does not stream")


def tool_outputs(given: str | list[TResponseInputItem]) -> list[str]:
    """What the tools returned so far (an approved call's result, or why it did not run)."""
    items: list[Any] = given if isinstance(given, list) else []
    return [
        str(item["output"])
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


async def main() -> None:
    agent = Agent(name="refunds", model=ScriptedModel(), tools=[refund])
    paused = await Runner.run(agent, "Refund order A-17", run_config=OFFLINE)
    async with AsyncClient() as client:  # HUMANLAYER_API_BASE, HUMANLAYER_API_KEY
        for item in paused.interruptions:
            print(f"waiting for a person: {item.name}({item.arguments}) call_id={item.call_id}")
            print(f"  in the console, or: gateway approve {item.call_id}", flush=True)
        done = await resume(client, agent, paused, run_config=OFFLINE)
    print(f"agent: {done.final_output}")


if __name__ == "__main__":
    asyncio.run(main())
