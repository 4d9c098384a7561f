"""A Pydantic AI agent whose refund tool needs a person's approval, through a local gateway.
Pydantic AI's `FunctionModel` stands in for the LLM, so no model key is needed.

    make run                                    # the gateway; it prints the two exports
    export HUMANLAYER_API_BASE=http://127.0.0.1:8080/humanlayer/v1
    export HUMANLAYER_API_KEY=hlgw_...          # the agent key `make run` printed
    pip install -e 'client[pydantic-ai]'
    python examples/pydantic_ai_approval.py

The run ends with `DeferredToolRequests`; `decide` sends them to the gateway, waits, and
returns `DeferredToolResults` for the next run. Approve it (in the console you may edit the
arguments first), or reject it with a reason (`gateway reject <call_id> --comment ...`): the
script prints what the agent made of it."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from hitl_client import AsyncClient
from hitl_client.pydantic_ai import decide


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The LLM's part, scripted: first ask for the refund, then report what came of it."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if returns:  # the tool's result, or the person's reason for not running it
        return ModelResponse(parts=[TextPart(returns[-1].model_response_str())])
    # No tool_call_id: Pydantic AI makes a fresh one, which the gateway keys its request on.
    return ModelResponse(parts=[ToolCallPart("refund", {"order": "A-17", "amount": 40})])


agent = Agent(
    FunctionModel(scripted_model), name="refunds", output_type=[str, DeferredToolRequests]
)


@agent.tool_plain(requires_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund `amount` euros on `order`."""
    return f"refunded {amount} EUR on {order}"


async def main() -> None:
    paused = await agent.run("Refund order A-17")
    assert isinstance(paused.output, DeferredToolRequests)
    async with AsyncClient() as client:  # HUMANLAYER_API_BASE, HUMANLAYER_API_KEY
        for call in paused.output.approvals:
            arguments = call.args_as_json_str()
            print(
                f"waiting for a person: {call.tool_name}({arguments}) call_id={call.tool_call_id}"
            )
            print(f"  in the console, or: gateway approve {call.tool_call_id}", flush=True)
        results = await decide(client, paused.output, run_id=agent.name)
    done = await agent.run(message_history=paused.all_messages(), deferred_tool_results=results)
    print(f"agent: {done.output}")


if __name__ == "__main__":
    asyncio.run(main())
