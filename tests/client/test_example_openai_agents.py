"""examples/openai_agents_approval.py against a live gateway, with a person approving
through the API: the refund runs."""

from __future__ import annotations

import asyncio

from hitl_client import AsyncClient
from tests.client.examples import created, example, finish, first_line
from tests.client.helpers import responder_key
from tests.services.inprocess import RunningGateway

WAITING = r"waiting for a person: refund\(.*\) call_id=(\S+)"


async def test_the_example_waits_for_a_person_and_reports_the_approved_refund(
    sqlite_gateway: RunningGateway,  # what is tested is the script: one database is enough
) -> None:
    gateway = sqlite_gateway
    key = await gateway.new_key("default", name="example")
    async with (
        example("openai_agents_approval.py", gateway, key) as script,
        asyncio.timeout(60),
        AsyncClient(gateway.api_base, await responder_key(gateway)) as person,
    ):
        call_id = (await first_line(script, WAITING)).group(1)
        await created(gateway, call_id)
        await person.respond_function_call(call_id, approved=True, comment="fine")
        output = await finish(script)
    assert "agent: refunded 40 EUR on A-17" in output
