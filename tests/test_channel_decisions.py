"""Decisions arriving from a channel: who may answer, first wins, who won is named."""

from __future__ import annotations

import pytest

from gateway.decisions import Decision, decide_by_rid
from gateway.errors import Conflict, NotAllowed, NotFound
from gateway.lifecycle import Event
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway


def slack_click(user: str) -> Decision:
    return Decision(Event.APPROVE, {"channel": "slack", "user_id": user, "name": user})


async def test_only_allowed_responders_decide(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    slack = {"slack": {"channel_or_user_id": "C1", "allowed_responder_ids": ["U0ALICE"]}}
    rid = (await request_factory(gateway, "allowed", channel=slack)).rid
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


async def test_anyone_in_the_channel_when_no_list(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    slack = {"slack": {"channel_or_user_id": "C1"}}
    rid = (await request_factory(gateway, "open", channel=slack)).rid
    decided = await decide_by_rid(
        gateway.core, rid, slack_click("U0ANY"), channel="slack", actor_id="U0ANY"
    )
    assert decided.status == "approved"


async def test_late_click_is_told_who_decided(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    slack = {"slack": {"channel_or_user_id": "C1"}}
    rid = (await request_factory(gateway, "late", channel=slack)).rid
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
