"""A LangGraph graph whose deploy node needs a person's approval, through a local gateway.
It is plain LangGraph, with no LLM (so no key), and its checkpoints in a SQLite file.

    make run                                    # the gateway; it prints the two exports
    export HUMANLAYER_API_BASE=http://127.0.0.1:8080/humanlayer/v1
    export HUMANLAYER_API_KEY=hlgw_...          # the agent key `make run` printed
    pip install -e 'client[langgraph]'
    python examples/langgraph_approval.py

The node asks the gateway and the thread pauses (`interrupt`); the resumer long-polls the
gateway and resumes the thread with the decision. Approve it, or reject it with a reason, in
the console (or `gateway approve <call_id>`, `gateway reject <call_id> --comment ...`).
Stop the script while it waits (Ctrl-C) and run it again with `--resume`: the thread, kept
in langgraph-example.db, goes on from where it paused, and deploys once."""

from __future__ import annotations

import sys
import uuid
from typing import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from hitl_client import Client
from hitl_client.langgraph import CALL_ID_KEY, Graph, Resumer, request_approval

RUN_ID = "langgraph-example"  # the gateway's run_id: how `--resume` finds the waiting threads
CHECKPOINTS = "langgraph-example.db"


class Deploy(TypedDict, total=False):
    service: str
    env: str
    refused: str
    outcome: str


def build_graph(client: Client, checkpointer: SqliteSaver) -> Graph:
    def deploy(state: Deploy) -> Deploy:
        # On resume this node runs again from its start: what follows the ask runs once.
        call = request_approval(client, "deploy", {"service": state["service"], "env": "prod"})
        if not call.approved:
            return {"refused": call.reason}
        env = call.arguments["env"]  # the approver may have edited it
        return {"env": env, "outcome": f"deployed {state['service']} to {env}"}

    def refuse(state: Deploy) -> Deploy:
        return {"outcome": f"not deployed: {state['refused']}"}

    graph = StateGraph(Deploy)
    graph.add_node("deploy", deploy)
    graph.add_node("refuse", refuse)
    graph.add_edge(START, "deploy")
    graph.add_conditional_edges(
        "deploy", lambda state: "refuse" if "refused" in state else END, ["refuse", END]
    )
    graph.add_edge("refuse", END)
    return graph.compile(checkpointer=checkpointer)


def main(args: list[str]) -> None:
    with (
        Client(run_id=RUN_ID) as client,  # HUMANLAYER_API_BASE, HUMANLAYER_API_KEY
        SqliteSaver.from_conn_string(CHECKPOINTS) as checkpointer,
    ):
        graph = build_graph(client, checkpointer)
        resumer = Resumer(graph, client)
        if args == ["--resume"]:
            for thread_id, done in resumer.resume_run(RUN_ID).items():
                print(f"thread {thread_id}: {done['outcome']}")
            return
        config: RunnableConfig = {"configurable": {"thread_id": f"deploy-{uuid.uuid4().hex[:8]}"}}
        paused = graph.invoke({"service": "billing"}, config)
        for waiting in paused["__interrupt__"]:
            call_id = waiting.value[CALL_ID_KEY]
            print(f"waiting for a person: deploy billing to prod, call_id={call_id}")
            print(f"  in the console, or: gateway approve {call_id}", flush=True)
        done = resumer.resume(config)
        print(f"graph: {done['outcome']}")


if __name__ == "__main__":
    main(sys.argv[1:])
