"""examples/langgraph_approval.py against a live gateway: the graph pauses, a person
approves through the API, and the script prints the deployment. Stopped while it waits and
run again with --resume, it resumes the thread its first run left waiting."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from hitl_client import AsyncClient
from tests.client.examples import example, finish, first_line
from tests.client.helpers import responder_key
from tests.services.inprocess import RunningGateway

NAME = "langgraph_approval.py"
WAITING = r"waiting for a person: deploy billing to prod, call_id=(\S+)"


async def test_the_example_waits_for_a_person_and_deploys_once_approved(
    sqlite_gateway: RunningGateway,  # what is tested is the script: one database is enough
) -> None:
    gateway = sqlite_gateway
    key = await gateway.new_key("default", name="example")
    async with (
        example(NAME, gateway, key) as script,
        asyncio.timeout(60),
        AsyncClient(gateway.api_base, await responder_key(gateway)) as person,
    ):
        call_id = (await first_line(script, WAITING)).group(1)  # once the request exists
        await person.respond_function_call(call_id, approved=True, comment="fine")
        output = await finish(script)
    assert "graph: deployed billing to prod" in output


async def test_stopped_while_it_waits_the_example_resumes_with_resume(
    sqlite_gateway: RunningGateway, tmp_path: Path
) -> None:
    gateway = sqlite_gateway
    key = await gateway.new_key("default", name="example")
    async with (
        example(NAME, gateway, key) as first,
        asyncio.timeout(60),
        AsyncClient(gateway.api_base, await responder_key(gateway)) as person,
    ):
        call_id = (await first_line(first, WAITING)).group(1)
        first.kill()  # stopped while it waits; the thread is in langgraph-example.db
        await first.wait()
        await person.respond_function_call(call_id, approved=False, comment="freeze week")
        async with example(NAME, gateway, key, "--resume") as resumed:
            resumed_output = await finish(resumed)
        async with example(NAME, gateway, key, "--resume") as again:
            again_output = await finish(again)
    assert re.fullmatch(r"thread deploy-\w+: not deployed: freeze week\n", resumed_output)
    assert again_output == ""  # nothing waits any more
    assert (tmp_path / "langgraph-example.db").exists()
