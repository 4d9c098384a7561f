"""Decisions arriving from a channel: who may answer, first wins, who won is named."""

from __future__ import annotations

import pytest

from gateway.decisions import Decision, decide_by_rid
from gateway.errors import Conflict, NotAllowed, NotFound
from gateway.lifecycle import Event
from gateway.store import requests as request_store
from tests.services.inprocess import RunningGateway


async def create(gateway: RunningGateway, call_id: str, channel: dict[str, object]) -> str:
    spec = {"fn": "f", "kwargs": {}, "channel": channel}
    async with gateway.client() as client:
        body = {"run_id": "r", "call_id": call_id, "spec": spec}
        assert (await client.post("/function_calls", json=body)).status_code == 200
    async with gateway.core.db.read() as conn:
        row = await request_store.get_by_call_id(conn, 1, call_id)
    assert row is not None
    return row.rid


def slack_click(user: str) -> Decision:
    return Decision(Event.APPROVE, {"channel": "slack", "user_id": user, "name": user})


async def test_only_allowed_responders_decide(gateway: RunningGateway) -> None:
    slack = {"slack": {"channel_or_user_id": "C1", "allowed_responder_ids": ["U0ALICE"]}}
    rid = await create(gateway, "allowed", slack)
    with pytest.raises(NotAllowed, match="not allowed"):
        await decide_by_rid(
            gateway.core, rid, slack_click("U0MALLORY"), channel="slack", actor_id="U0MALLORY"
        )
    async with gateway.client() as client:
        assert (await client.get("/function_calls/allowed")).json()["gateway_status"] == "pending"
    decided = await decide_by_rid(
        gateway.core, rid, slack_click("U0ALICE"), channel="slack", actor_id="U0ALICE"
    )
    assert decided.status == "approved"


async def test_anyone_in_the_channel_when_no_list(gateway: RunningGateway) -> None:
    rid = await create(gateway, "open", {"slack": {"channel_or_user_id": "C1"}})
    decided = await decide_by_rid(
        gateway.core, rid, slack_click("U0ANY"), channel="slack", actor_id="U0ANY"
    )
    assert decided.status == "approved"


async def test_late_click_is_told_who_decided(gateway: RunningGateway) -> None:
    rid = await create(gateway, "late", {"slack": {"channel_or_user_id": "C1"}})
    await decide_by_rid(
        gateway.core, rid, slack_click("U0ALICE"), channel="slack", actor_id="U0ALICE"
    )
    with pytest.raises(Conflict, match="already approved by U0ALICE in Slack at"):
        await decide_by_rid(
            gateway.core, rid, slack_click("U0BOB"), channel="slack", actor_id="U0BOB"
        )
    with pytest.raises(NotFound):
        await decide_by_rid(
            gateway.core, "no-such-rid", slack_click("U0BOB"), channel="slack", actor_id="U0BOB"
        )
