"""A 2-of-3 quorum across Teams, Telegram and Slack, end to end through each real client library
against its fake: Alice, known by her Teams and Slack ids, approves in both and counts once;
Bob's approval in Telegram decides, and every platform's copy loses its buttons."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.seam import Answered
from tests.channels.quorum_helpers import (
    ALICE_SLACK,
    ALICE_TEAMS,
    BOB_ID,
    SLACK_CHANNEL,
    TEAMS_CHANNEL,
    TO_TRIO,
    SeenAnswers,
    slack_buttons,
    slack_has_actions,
    slack_post,
    three_platforms,
)
from tests.channels.slack.helpers import click, send
from tests.channels.teams.helpers import actions, invoke, post, texts
from tests.channels.telegram.helpers import BOB, GROUP, buttons, data_of, posted_message
from tests.factories import RequestFactory
from tests.fakes.slack import FakeSlack
from tests.fakes.teams import FakeTeams
from tests.fakes.telegram import FakeTelegram
from tests.helpers import events, eventually, outbox_idle
from tests.services.inprocess import RunningGateway


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.users[ALICE_SLACK] = {  # as users.info tells the listener
            "id": ALICE_SLACK,
            "team_id": "T1",
            "name": "alice",
            "real_name": "Alice",
            "is_bot": False,
            "profile": {"real_name": "Alice", "display_name": "Alice"},
        }
        yield fake


@pytest.fixture
async def teams() -> AsyncIterator[FakeTeams]:
    async with FakeTeams() as fake:
        yield fake


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def stack(
    tmp_path: Path, slack: FakeSlack, teams: FakeTeams, telegram: FakeTelegram
) -> AsyncIterator[tuple[RunningGateway, SeenAnswers]]:
    async with three_platforms(tmp_path, slack, teams, telegram) as running:
        yield running


async def wire(gateway: RunningGateway, call_id: str) -> Any:
    async with gateway.client() as client:
        got = await client.get(f"/function_calls/{call_id}")
    assert got.status_code == 200, got.text
    return got.json()


def approvers(answer: Any) -> list[tuple[str, str]]:
    return [(a["channel"], a["user_id"]) for a in answer["policy_progress"]["approvers"]]


async def test_two_of_three_across_teams_telegram_and_slack_counts_alice_once(
    stack: tuple[RunningGateway, SeenAnswers],
    slack: FakeSlack,
    teams: FakeTeams,
    telegram: FakeTelegram,
    request_factory: RequestFactory,
) -> None:
    gateway, slack_answers = stack
    made = await request_factory(gateway, "trio", channel=TO_TRIO, settle=True)
    assert made.wire["policy"]["approvals_required"] == 2
    [card] = teams.posts_in(TEAMS_CHANNEL)  # one copy on each platform
    message = posted_message(telegram, "trio", GROUP)
    ts, slack_copy = slack_post(slack)
    assert slack_buttons(slack_copy) == [f"gw:approve:{made.rid}", f"gw:reject:{made.rid}"]
    trail = await events(gateway, "trio")
    assert sorted(d["channel"] for d in trail["deliveries"] if d["status"] == "sent") == [
        "slack",
        "teams",
        "telegram",
    ]

    # Alice approves in Teams: one of two.
    in_teams = await post(gateway, teams, invoke(teams, card, "Approve", user=ALICE_TEAMS))
    assert in_teams.status_code == 200
    assert "1 of 2 approvals: Alice (Teams)" in texts(in_teams.json()["value"])
    first = await wire(gateway, "trio")
    assert first["gateway_status"] == "pending"
    assert first["policy_progress"]["approvals"] == 1
    assert approvers(first) == [("teams", ALICE_TEAMS)]

    # Alice approves again, in Slack: the same person, counted once.
    clicked = click(slack, made.rid, "gw_approve", user=ALICE_SLACK, channel=SLACK_CHANNEL, ts=ts)
    assert (await send(gateway, clicked)).status_code == 200
    outcome = await slack_answers.nth(1)
    assert isinstance(outcome, Answered), outcome  # taken, not refused: it adds no vote
    again = await wire(gateway, "trio")
    assert again["gateway_status"] == "pending"
    assert again["status"]["approved"] is None
    assert again["policy_progress"]["approvals"] == 1
    assert approvers(again) == [("teams", ALICE_TEAMS)]

    # Bob approves in Telegram: two of two, approved.
    query = await telegram.click(
        message, data_of(telegram.current(message), "gw:approve:"), telegram.user(BOB, "Bob")
    )
    await telegram.wait_for_answer(query)
    approved = await wire(gateway, "trio")
    assert approved["gateway_status"] == "approved"
    assert approved["status"]["approved"] is True
    user_info = approved["status"]["user_info"]
    assert (user_info["channel"], user_info["user_id"]) == ("telegram", BOB_ID)
    assert approved["policy_progress"]["approvals"] == 2
    assert approvers(approved) == [("teams", ALICE_TEAMS), ("telegram", BOB_ID)]
    assert [a["name"] for a in approved["policy_progress"]["approvers"]] == ["Alice", "Bob"]

    # Every copy shows the decision, without buttons.
    await eventually(lambda: outbox_idle(gateway), within=5)
    decided_card = card.card
    assert "Approved by Bob" in texts(decided_card)
    assert not [a for a in actions(decided_card) if a["type"] == "Action.Execute"]
    decided_message = telegram.current(message)
    assert "reply_markup" not in decided_message and buttons(decided_message) == []
    assert "Approved by Bob in Telegram" in decided_message["text"]
    _, decided_post = slack_post(slack)
    assert not slack_has_actions(decided_post), decided_post

    # The audit trail: two voters counted, Alice's Slack click not among them.
    trail = await events(gateway, "trio")
    voted = [e["detail"]["by"] for e in trail["events"] if e["type"] == "voted"]
    decided = [e["detail"]["by"] for e in trail["events"] if e["type"] == "decided"]
    counted = [(by["channel"], by["user_id"]) for by in voted + decided]
    assert counted == [("teams", ALICE_TEAMS), ("telegram", BOB_ID)]
