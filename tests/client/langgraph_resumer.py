"""The resumer as a process of its own, for the test that kills it:

    python -m tests.client.langgraph_resumer CHECKPOINTS EFFECTS

reads HUMANLAYER_API_BASE/HUMANLAYER_API_KEY, resumes every thread of the run that waits on
the gateway, and prints the outputs by thread as one JSON line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from hitl_client import Client
from hitl_client.langgraph import Resumer
from tests.client.langgraph_graph import RUN_ID, build


def main(checkpoints: str, effects: str) -> None:
    with Client(run_id=RUN_ID) as client, SqliteSaver.from_conn_string(checkpoints) as saver:
        graph = build(client, saver, Path(effects))
        print("resuming", flush=True)
        print(json.dumps(Resumer(graph, client).resume_run(RUN_ID)), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
