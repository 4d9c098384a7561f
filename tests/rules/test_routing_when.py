"""A routing rule with `when`: what the call's arguments say decides who must answer. A wire
over 10,000 goes to team finance, whose two people must both approve; a small one does not
match and goes where a request without a rule goes (the web console), one answer deciding."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import events
from tests.rules.helpers import AGENT_MAILBOX, ANN, BOB, create, respond_as, stored
from tests.services.inprocess import RunningGateway


async def test_a_big_wire_needs_both_people_of_finance(ruled: RunningGateway) -> None:
    agent = await ruled.new_key("default", name="payments agent")
    made = await create(ruled, "wire-big", "wire_money", {"amount": 12000}, key=agent)
    assert made["gateway_status"] == "pending"
    [target] = made["route"]
    assert target["via"] == "rule big-wires" and target["responders"] == [ANN, BOB]
    assert made["policy"]["approvals_required"] == 2
    routed = (await events(ruled, "wire-big"))["events"][1]
    assert routed["detail"] == {"targets": 1, "rule": "rule big-wires"}

    assert (await respond_as(ruled, "ann", "wire-big"))["gateway_status"] == "pending"
    assert (await stored(ruled, "wire-big"))["status"]["approved"] is None
    assert (await respond_as(ruled, "bob", "wire-big"))["gateway_status"] == "approved"
    record = await stored(ruled, "wire-big")
    assert record["status"]["approved"] is True
    approvers = [a["person"] for a in record["policy_progress"]["approvers"]]
    assert sorted(approvers) == ["ann", "bob"]


async def test_a_small_wire_does_not_match_and_one_answer_decides(ruled: RunningGateway) -> None:
    made = await create(ruled, "wire-small", "wire_money", {"amount": 500})
    assert made["gateway_status"] == "pending"
    assert [(t["channel"], t["via"]) for t in made["route"]] == [("web", "default")]
    assert "policy" not in made
    routed = (await events(ruled, "wire-small"))["events"][1]
    assert routed["detail"] == {"targets": 1}  # no rule
    async with ruled.client() as operator:  # the console's people: one answer decides
        answer = await operator.post(
            "/agent/function_calls/wire-small/respond", json={"approved": True}
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["gateway_status"] == "approved"


@pytest.mark.parametrize(
    ("amount", "to_finance"),
    [(10000, False), (10001, True), (12000.5, True), (10000.0, False)],
)
async def test_the_amount_is_compared_as_a_number(
    ruled_sqlite: RunningGateway, amount: float, to_finance: bool
) -> None:
    made = await create(ruled_sqlite, "wire", "wire_money", {"amount": amount})
    vias = [t["via"] for t in made["route"]]
    assert vias == (["rule big-wires"] if to_finance else ["default"])


@pytest.mark.parametrize(
    "channel",
    [
        {"email": {"address": AGENT_MAILBOX}},
        {"any_of": [{"email": {"address": AGENT_MAILBOX}}, {"person": "ann"}]},
    ],
    ids=["own-mailbox", "any-of"],
)
async def test_the_agents_channel_cannot_replace_finance(
    ruled_sqlite: RunningGateway, channel: dict[str, Any]
) -> None:
    """A `when` rule is a floor like any rule: the agent's channel only adds to it."""
    made = await create(ruled_sqlite, "wire-ch", "wire_money", {"amount": 50000}, channel=channel)
    assert made["policy"]["mode"] == "all_of"
    assert (await respond_as(ruled_sqlite, "ann", "wire-ch"))["gateway_status"] == "pending"
    assert (await stored(ruled_sqlite, "wire-ch"))["status"]["approved"] is None
