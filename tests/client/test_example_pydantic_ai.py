"""examples/pydantic_ai_approval.py against a live gateway, with the console's operator
editing the amount before approving: the refund runs with the edited amount."""

from __future__ import annotations

import asyncio

from gateway.seam import Answered, AnsweredIn, Responder, Verb
from tests.client.examples import created, example, finish, first_line
from tests.factories import rid_of
from tests.services.inprocess import RunningGateway

OPERATOR = Responder(AnsweredIn.WEB, "operator", "operator")  # the console's operator
WAITING = r"waiting for a person: refund\(.*\) call_id=(\S+)"


async def test_the_example_runs_the_refund_as_the_person_edited_it(
    sqlite_gateway: RunningGateway,  # what is tested is the script: one database is enough
) -> None:
    gateway = sqlite_gateway
    key = await gateway.new_key("default", name="example")
    async with example("pydantic_ai_approval.py", gateway, key) as script, asyncio.timeout(60):
        call_id = (await first_line(script, WAITING)).group(1)
        await created(gateway, call_id)
        rid = await rid_of(gateway, call_id)
        edited = {"order": "A-17", "amount": 25}
        answered = await gateway.context().answers.answer(rid, Verb.EDIT, OPERATOR, edited=edited)
        assert isinstance(answered, Answered)
        output = await finish(script)
    assert "agent: refunded 25 EUR on A-17" in output  # not the model's 40
