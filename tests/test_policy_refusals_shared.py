"""Slack and Discord say the same things because both ask the answer door: the same refusal
to someone not allowed, the same "already approved by …" to a late click, and the same
progress and outcome sentences on the post, each only escaped for its platform.

Each scenario runs through both channels end to end (the real Bolt app and discord.py bot
against the fake Slack and fake Discord) and compares what the platform was sent with what
the answer door produces for the same request and person.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import discord
import pytest

from channels.discord import interactions as discord_interactions
from channels.discord import render as discord_render
from channels.discord.channel import DiscordChannel
from channels.slack import listeners as slack_listeners
from channels.slack import render as slack_render
from channels.slack.channel import SlackChannel
from channels.slack.settings import SlackSettings
from gateway import seam
from gateway.lifecycle import Status
from gateway.seam.answers import Refusal, Refused
from gateway.seam.people import Responder
from gateway.seam.sentences import describe
from gateway.seam.views import RequestView
from gateway.store import requests as request_store
from gateway.vocabulary import AnsweredIn
from tests.channels.discord.helpers import gateway_with_bot, posted_message
from tests.channels.slack.helpers import click, send, slack_channel
from tests.factories import RequestFactory
from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack
from tests.helpers import detached, events, eventually, outbox_idle
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

CHANNEL_MESSAGE, UPDATE_MESSAGE, EPHEMERAL = 4, 7, 64
QUORUM = 2
# Names with markup in them: the progress line must show them escaped, never as markup.
SLACK_NAMES = {"U0ALICE": "Alice <ops> & co", "U0BOB": "Bob", "U0CAROL": "Carol"}
DISCORD_IDS = ("600000000000000001", "600000000000000002", "600000000000000003")
DISCORD_NAMES = dict(zip(DISCORD_IDS, ("al_ice *ops*", "Bob", "Carol"), strict=True))
DISCORD_CHANNEL = "500000000000000001"


class Driver(abc.ABC):
    """One platform: how its people click, what it shows, and how it formats the core's
    sentences (mentions, dates, escaping), as that platform's documentation says."""

    via: AnsweredIn
    alice: str
    bob: str
    carol: str
    mallory: str  # not among the allowed responders
    pending_emoji: str
    approved_emoji: str

    def __init__(self, gateway: RunningGateway) -> None:
        self.gateway = gateway

    @abc.abstractmethod
    def channel(self) -> dict[str, Any]:
        """spec.channel: this platform, alice/bob/carol allowed, QUORUM approvals needed."""

    @abc.abstractmethod
    async def approve(self, rid: str, call_id: str, user: str) -> None:
        """`user` clicks Approve; returns once the core has counted it."""

    @abc.abstractmethod
    async def refused(self, rid: str, call_id: str, user: str, *, seen: Any = None) -> str:
        """`user` clicks Approve on the post as `seen` (now, if None) and is answered
        privately: that text."""

    def seen(self, call_id: str) -> Any:
        """The post as a person's client shows it now, for a click that comes later."""
        return None

    @abc.abstractmethod
    async def shown(self, call_id: str) -> str:
        """The progress or outcome line the post shows now."""

    @staticmethod
    @abc.abstractmethod
    def escape(text: str) -> str: ...

    @staticmethod
    @abc.abstractmethod
    def who(responder: Responder) -> str: ...

    @staticmethod
    @abc.abstractmethod
    def when(moment: datetime) -> str: ...

    def responder(self, user: str) -> Responder:
        return Responder(self.via, user, f"person {user}")

    def expected_line(self, view: RequestView) -> str:
        """The core's sentence for the request, in this platform's markup."""
        emoji = self.approved_emoji if view.status == Status.APPROVED else self.pending_emoji
        return f"{emoji} {describe(view, who=self.who, when=self.when, text=self.escape)}"

    async def view(self, rid: str) -> RequestView:
        row, project = await self.gateway.core.db.read(request_store.get_with_project, rid)
        assert row is not None and project is not None
        return self.gateway.core.view(row, project)

    async def counted(self, call_id: str, user: str) -> None:
        """Until the audit trail shows `user`'s vote or decision (bounded)."""

        async def recorded() -> bool:
            trail = (await events(self.gateway, call_id))["events"]
            by = [e["detail"].get("by", {}).get("user_id") for e in trail]
            return user in by

        await eventually(recorded, within=10)


class SlackDriver(Driver):
    via = AnsweredIn.SLACK
    alice, bob, carol, mallory = "U0ALICE", "U0BOB", "U0CAROL", "U0MALLORY"
    pending_emoji, approved_emoji = ":hourglass:", ":white_check_mark:"

    def __init__(self, gateway: RunningGateway, fake: FakeSlack) -> None:
        super().__init__(gateway)
        self.fake = fake

    def channel(self) -> dict[str, Any]:
        allowed = [self.alice, self.bob, self.carol]
        slack = {"channel_or_user_id": "C1", "allowed_responder_ids": allowed}
        return {"slack": slack, "approvals_required": QUORUM}

    async def approve(self, rid: str, call_id: str, user: str) -> None:
        reply = await send(self.gateway, click(self.fake, rid, "gw_approve", user=user))
        assert reply.status_code == 200
        await self.counted(call_id, user)

    async def refused(self, rid: str, call_id: str, user: str, *, seen: Any = None) -> str:
        tag = f"refused-{user}"  # Slack's click carries no copy of the message: `seen` unused
        await send(self.gateway, click(self.fake, rid, "gw_approve", user=user, respond_id=tag))
        [told] = await self.fake.wait_for_response(tag)
        assert told["response_type"] == "ephemeral" and told["replace_original"] is False
        text: str = told["text"]
        return text

    async def shown(self, call_id: str) -> str:
        [post] = [m for (ch, _), m in self.fake.messages.items() if ch == "C1" and not _reply(m)]
        blocks = post["blocks"]
        if not [b for b in blocks if b["type"] == "actions"]:  # decided: the line is the text
            assert blocks[-1]["elements"][0]["text"] == post["text"]
            text: str = post["text"]
            return text
        at = next(i for i, b in enumerate(blocks) if b["type"] == "actions")
        line: str = blocks[at - 1]["elements"][0]["text"]  # the progress line, above the buttons
        return line

    @staticmethod
    def escape(text: str) -> str:
        # api.slack.com/reference/surfaces/formatting#escaping: only &, < and >.
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    @staticmethod
    def who(responder: Responder) -> str:
        return f"<@{responder.id}>"

    @staticmethod
    def when(moment: datetime) -> str:
        # api.slack.com/reference/surfaces/formatting#date-formatting
        return (
            f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{moment.isoformat()}>"
        )


def _reply(message: dict[str, Any]) -> bool:
    return bool(message.get("thread_ts")) and message["thread_ts"] != message["ts"]


class NamedDiscord(FakeDiscord):
    """The fake Discord, whose users go by the display names above."""

    def user(self, user_id: str) -> dict[str, Any]:
        found = super().user(user_id)
        if user_id in DISCORD_NAMES:
            found["global_name"] = DISCORD_NAMES[user_id]
        return found


class DiscordDriver(Driver):
    via = AnsweredIn.DISCORD
    alice, bob, carol = DISCORD_IDS
    mallory = "600000000000000009"
    pending_emoji, approved_emoji = "⌛", "✅"

    def __init__(self, gateway: RunningGateway, fake: FakeDiscord) -> None:
        super().__init__(gateway)
        self.fake = fake
        self.callbacks: list[dict[str, Any]] = []  # what each clicker was shown in place

    def channel(self) -> dict[str, Any]:
        allowed = [self.alice, self.bob, self.carol]
        target = {"channel_id": DISCORD_CHANNEL, "allowed_responder_ids": allowed}
        return {"discord": target, "approvals_required": QUORUM}

    async def _click(
        self, rid: str, call_id: str, user: str, seen: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A click carries the message as the person's client shows it; discord.py drops
        one whose message has no such button. `seen`: a client not yet refreshed."""
        message = posted_message(self.fake, call_id)
        current = self.fake.messages[message["id"]]
        self.fake.messages[message["id"]] = seen or current
        try:
            clicked = await self.fake.click(
                f"gw:approve:{rid}", message_id=message["id"], user_id=user
            )
        finally:
            self.fake.messages[message["id"]] = current
        return await self.fake.wait_for_callback(clicked)

    def seen(self, call_id: str) -> Any:
        return copy.deepcopy(posted_message(self.fake, call_id))

    async def approve(self, rid: str, call_id: str, user: str) -> None:
        callback = await self._click(rid, call_id, user)
        assert callback["type"] == UPDATE_MESSAGE, callback
        self.callbacks.append(callback)
        await self.counted(call_id, user)

    async def refused(self, rid: str, call_id: str, user: str, *, seen: Any = None) -> str:
        callback = await self._click(rid, call_id, user, seen)
        assert callback["type"] == CHANNEL_MESSAGE and callback["data"]["flags"] == EPHEMERAL
        text: str = callback["data"]["content"]
        return text

    async def shown(self, call_id: str) -> str:
        return line_of(posted_message(self.fake, call_id))

    @staticmethod
    def escape(text: str) -> str:
        return discord.utils.escape_markdown(discord.utils.escape_mentions(text))

    @staticmethod
    def who(responder: Responder) -> str:
        return f"<@{responder.id}>"

    @staticmethod
    def when(moment: datetime) -> str:
        # discord.com/developers/docs/reference#message-formatting-timestamp-styles
        return f"<t:{int(moment.timestamp())}:f>"


def line_of(message: dict[str, Any]) -> str:
    """The embed's last field: "Progress" while pending, "Outcome" once decided."""
    fields = message["embeds"][0]["fields"]
    assert fields[-1]["name"] in ("Progress", "Outcome"), fields
    value: str = fields[-1]["value"]
    return value


@asynccontextmanager
async def slack_driver(tmp_path: Path) -> AsyncIterator[Driver]:
    async with FakeSlack() as fake:
        for user_id, name in SLACK_NAMES.items():
            profile = {"real_name": name, "display_name": name, "email": f"{user_id}@x.test"}
            fake.users[user_id] = {"id": user_id, "name": user_id.lower(), "real_name": name}
            fake.users[user_id] |= {"is_bot": False, "profile": profile}
        settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/slack.db")
        async with running_gateway(settings, channels={"slack": slack_channel(fake)}) as gateway:
            yield SlackDriver(gateway, fake)


@asynccontextmanager
async def discord_driver(tmp_path: Path) -> AsyncIterator[Driver]:
    async with NamedDiscord() as fake:
        settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/discord.db")
        async with gateway_with_bot(settings, fake) as gateway:
            yield DiscordDriver(gateway, fake)


@pytest.fixture(params=["slack", "discord"])
async def platform(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Driver]:
    make = slack_driver if request.param == "slack" else discord_driver
    async with make(tmp_path) as driver:
        yield driver


async def create(platform: Driver, factory: RequestFactory, call_id: str) -> str:
    made = await factory(platform.gateway, call_id, channel=platform.channel(), settle=True)
    assert made.wire["policy"]["approvals_required"] == QUORUM
    return made.rid


async def settled(platform: Driver) -> None:
    await eventually(lambda: outbox_idle(platform.gateway), within=10)


async def test_someone_not_allowed_gets_the_cores_refusal(
    platform: Driver, request_factory: RequestFactory
) -> None:
    rid = await create(platform, request_factory, "not-allowed")
    expected = await platform.gateway.context().answers.refusal(
        rid, platform.responder(platform.mallory)
    )
    assert isinstance(expected, Refused) and expected.why == Refusal.NOT_ALLOWED

    told = await platform.refused(rid, "not-allowed", platform.mallory)

    assert told == expected.message == "you are not allowed to answer this request"
    trail = [e["type"] for e in (await events(platform.gateway, "not-allowed"))["events"]]
    assert "voted" not in trail and "decided" not in trail
    assert (await platform.view(rid)).status == Status.PENDING


async def test_a_partial_approval_shows_the_cores_progress_line(
    platform: Driver, request_factory: RequestFactory
) -> None:
    rid = await create(platform, request_factory, "partial")

    await platform.approve(rid, "partial", platform.alice)
    await settled(platform)

    view = await platform.view(rid)
    assert view.status == Status.PENDING and view.progress is not None
    assert (view.progress.approvals, view.progress.needed) == (1, QUORUM)
    expected = platform.expected_line(view)
    name = SLACK_NAMES.get(platform.alice) or DISCORD_NAMES[platform.alice]
    place = "Slack" if platform.via == AnsweredIn.SLACK else "Discord"
    assert expected == (
        f"{platform.pending_emoji} 1 of 2 approvals: {platform.escape(name)} ({place})"
    )
    assert platform.escape(name) != name  # the names carry markup: escaping is tested
    assert await platform.shown("partial") == expected
    if isinstance(platform, DiscordDriver):  # the clicker also sees it in place
        [seen] = platform.callbacks
        assert line_of(seen["data"]) == expected


async def test_a_late_click_gets_the_cores_already_decided_refusal(
    platform: Driver, request_factory: RequestFactory
) -> None:
    rid = await create(platform, request_factory, "late")
    await platform.approve(rid, "late", platform.alice)
    await settled(platform)  # the post shows the progress (and its buttons) again
    carol_sees = platform.seen("late")  # the buttons Carol clicks a moment too late
    await platform.approve(rid, "late", platform.bob)  # the second approval decides
    await settled(platform)
    view = await platform.view(rid)
    assert view.status == Status.APPROVED
    assert view.user_info is not None and view.user_info["user_id"] == platform.bob

    expected = await platform.gateway.context().answers.refusal(
        rid, platform.responder(platform.carol)
    )
    assert isinstance(expected, Refused) and expected.why == Refusal.DECIDED
    told = await platform.refused(rid, "late", platform.carol, seen=carol_sees)

    assert told == expected.message
    assert told.startswith("function call 'late' was already approved by Bob in ")
    line = platform.expected_line(view)
    assert line.startswith(f"{platform.approved_emoji} Approved by <@{platform.bob}> at ")
    assert await platform.shown("late") == line
    trail = [e["type"] for e in (await events(platform.gateway, "late"))["events"]]
    assert trail.count("decided") == 1 and trail.count("voted") == 1


# --- regressions: a partial approval keeps Discord's buttons; refusals are escaped


async def test_a_discord_click_that_only_partly_approves_keeps_the_buttons_in_place(
    tmp_path: Path, request_factory: RequestFactory
) -> None:
    async with discord_driver(tmp_path) as platform:
        assert isinstance(platform, DiscordDriver)
        rid = await create(platform, request_factory, "in-place")
        posted = copy.deepcopy(posted_message(platform.fake, "in-place"))

        await platform.approve(rid, "in-place", platform.alice)

        [seen] = platform.callbacks  # the clicked message, as the click's answer edits it
        assert seen["data"]["components"] == posted["components"]
        assert seen["data"]["embeds"][0]["fields"][-1]["name"] == "Progress"


async def test_a_slow_discord_click_answer_does_not_take_the_buttons_away_for_good(
    tmp_path: Path, request_factory: RequestFactory
) -> None:
    async with discord_driver(tmp_path) as platform:
        assert isinstance(platform, DiscordDriver)
        rid = await create(platform, request_factory, "slow-answer")
        # The click's answer is rate-limited for a moment (Discord allows 3 s): the
        # outbox's progress edit lands first.
        platform.fake.fail_next("POST", r"/interactions/\d+/[^/]+/callback", retry_after=1.5)

        await platform.approve(rid, "slow-answer", platform.alice)
        await settled(platform)

        message = posted_message(platform.fake, "slow-answer")
        ids = [b["custom_id"] for row in message["components"] for b in row["components"]]
        assert ids == [f"gw:approve:{rid}", f"gw:reject:{rid}"], "nobody else can approve"
        assert await platform.shown("slow-answer") == platform.expected_line(
            await platform.view(rid)
        )


async def test_a_refusal_shows_the_agents_text_escaped(
    platform: Driver, request_factory: RequestFactory
) -> None:
    call_id = "late-<!here>-*now*"  # Slack markup and Discord markdown, both inert as data
    rid = await create(platform, request_factory, call_id)
    stale = platform.seen(call_id)  # Carol's client, before the decision
    async with platform.gateway.client() as client:
        decided = await client.post(
            f"/agent/function_calls/{call_id}/respond", json={"approved": False, "comment": "no"}
        )
    assert decided.status_code == 200, decided.text  # an operator's answer is a veto
    await settled(platform)
    expected = await platform.gateway.context().answers.refusal(
        rid, platform.responder(platform.carol)
    )
    assert isinstance(expected, Refused) and call_id in expected.message

    told = await platform.refused(rid, call_id, platform.carol, seen=stale)

    assert told == platform.escape(expected.message)


def test_both_channels_take_the_answer_path_and_sentences_from_the_core(
    tmp_path: Path,
) -> None:
    """The answer path and the sentences are the core's own objects in both channels, not
    copies that could drift apart: each channel answers through the door its context gives."""
    slack_context, discord_context = detached("slack"), detached("discord")
    settings = SlackSettings(
        _env_file=None, bot_token="xoxb-t", signing_secret="s", api_url="http://127.0.0.1:9/"
    )
    assert SlackChannel(slack_context, settings).listeners.answers is slack_context.answers
    assert DiscordChannel(discord_context).interactions.answers is discord_context.answers
    for listener in (slack_listeners, discord_interactions):
        assert not hasattr(listener, "answer") and not hasattr(listener, "answerable")
        assert listener.Refused is seam.Refused
    for render in (slack_render, discord_render):
        assert render.describe is seam.describe
        assert render.reminder_text is seam.reminder_text
