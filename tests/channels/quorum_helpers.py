"""One team posted to Teams, Telegram and Slack at once: its routing config, a gateway with the
three channels over their fakes, and reading each platform's copy of a request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from channels.registry import ChannelFactory
from channels.slack.channel import SlackChannel
from gateway.seam import Answered, Answers, Refused, Responder, Verb
from tests.channels.slack.helpers import slack_channel
from tests.channels.teams.helpers import teams_channel
from tests.channels.telegram.helpers import BOB, GROUP, connected, telegram_channel
from tests.fakes.slack import FakeSlack
from tests.fakes.teams import FakeTeams
from tests.fakes.telegram import FakeTelegram
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config

SLACK_CHANNEL = "C1"
TEAMS_CHANNEL = "19:2b3c4d5e6f708192a3b4c5d6e7f80912@thread.tacv2"
ALICE_SLACK, CAROL_SLACK = "U0ALICE", "U0CAROL"
ALICE_TEAMS = "6f1b2c3d-1111-4a5b-8c9d-0000000000a1"  # AAD object ids
CAROL_TEAMS = "6f1b2c3d-3333-4a5b-8c9d-0000000000c3"
BOB_ID = str(BOB)  # Telegram user ids are numbers; the config keeps them as text
TO_TRIO = {"team": "trio"}

# Alice is known by her Slack and Teams ids, Bob by his Telegram id; any two of the three
# decide, and the team's request goes to its Slack channel, Teams channel and Telegram group.
CONFIG = f"""
[people.alice]
name = "Alice"
slack = "{ALICE_SLACK}"
teams = "{ALICE_TEAMS}"

[people.bob]
name = "Bob"
telegram = "{BOB_ID}"

[people.carol]
name = "Carol"
slack = "{CAROL_SLACK}"
teams = "{CAROL_TEAMS}"

[teams.trio]
members = ["alice", "bob", "carol"]
approvals_required = 2
slack_channel = "{SLACK_CHANNEL}"
teams_channel = "{TEAMS_CHANNEL}"
telegram_chat = "{GROUP}"
"""


@dataclass
class SeenAnswers:
    """The Slack channel's answer door, noting what each answer came back with: Bolt acks a
    click before its listener answers, and a click that adds no vote changes nothing else to
    wait on."""

    door: Answers
    outcomes: list[Answered | Refused] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def answer(
        self, rid: str, verb: Verb, responder: Responder, **details: Any
    ) -> Answered | Refused:
        outcome = await self.door.answer(rid, verb, responder, **details)
        async with self._changed:
            self.outcomes.append(outcome)
            self._changed.notify_all()
        return outcome

    async def nth(self, count: int, within: float = 5) -> Answered | Refused:
        """The `count`th answer's outcome, once it is there."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.outcomes) >= count)
        return self.outcomes[count - 1]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.door, name)  # refusal, option_form, view, find: the door's own


@asynccontextmanager
async def three_platforms(
    tmp_path: Path, slack: FakeSlack, teams: FakeTeams, telegram: FakeTelegram
) -> AsyncIterator[tuple[RunningGateway, SeenAnswers]]:
    """A gateway on SQLite with Slack, Teams and Telegram over their fakes, its Telegram bot
    polling; and what the Slack channel's answers came back with."""
    config = write_config(tmp_path / "routing.toml", CONFIG)
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/quorum.db", config=config)
    channels: dict[str, ChannelFactory] = {
        "slack": slack_channel(slack),
        "teams": teams_channel(teams),
        "telegram": telegram_channel(telegram),
    }
    async with running_gateway(settings, channels=channels) as gateway:
        await connected(gateway)
        listening = gateway.core.channels["slack"]
        assert isinstance(listening, SlackChannel)
        seen = SeenAnswers(listening.listeners.answers)
        listening.listeners.answers = seen
        yield gateway, seen


def slack_post(fake: FakeSlack) -> tuple[str, dict[str, Any]]:
    """The one top-level message in the team's Slack channel, as it reads now, and its ts."""
    [(ts, message)] = [
        (ts, m)
        for (channel, ts), m in fake.messages.items()
        if channel == SLACK_CHANNEL and not m.get("thread_ts")
    ]
    return ts, message


def slack_buttons(message: dict[str, Any]) -> list[str]:
    """The action ids of a Slack message's actions blocks."""
    blocks = message.get("blocks") or []
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def slack_has_actions(message: dict[str, Any]) -> bool:
    return any(block["type"] == "actions" for block in message.get("blocks") or [])
