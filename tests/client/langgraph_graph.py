"""The graph the LangGraph tests run, in the test and in the resumer's own process alike: a
node asks for approval to deploy, deploys (a line appended to a file: the side effect that
must happen once), or leaves the reason for the rejection path."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from hitl_client import Client
from hitl_client.langgraph import Graph, request_approval

RUN_ID = "deploy-bot"


class Deploy(TypedDict, total=False):
    env: str
    deployed: str
    refused: str
    outcome: str


def build(client: Client, checkpointer: BaseCheckpointSaver[Any], effects: Path) -> Graph:
    def deploy(state: Deploy) -> Deploy:
        call = request_approval(client, "deploy", {"env": state["env"]})
        if not call.approved:
            return {"refused": call.reason}
        env = call.arguments["env"]
        with effects.open("a") as file:
            file.write(f"deployed to {env}\n")
        return {"deployed": env, "outcome": f"deployed to {env}"}

    def refuse(state: Deploy) -> Deploy:
        return {"outcome": f"not deployed: {state['refused']}"}

    def after_deploy(state: Deploy) -> str:
        return "refuse" if "refused" in state else END

    graph = StateGraph(Deploy)
    graph.add_node("deploy", deploy)
    graph.add_node("refuse", refuse)
    graph.add_edge(START, "deploy")
    graph.add_conditional_edges("deploy", after_deploy, ["refuse", END])
    graph.add_edge("refuse", END)
    return graph.compile(checkpointer=checkpointer)


def side_effects(effects: Path) -> list[str]:
    return effects.read_text().splitlines() if effects.exists() else []
