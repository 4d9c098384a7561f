"""Every answer counts for the copy it answered (and for targets that name that person),
nothing else: one Slack click meets one branch of an `all_of` over two Slack channels, one
Discord click one branch over two Discord channels, a Slack click never an email branch.
A team's channel accepts its members only: with no member ids there, it accepts nobody.

Through the real channel stacks: Bolt behind the gateway with signed interaction POSTs
against the fake Slack Web API, discord.py against the fake Discord gateway and REST API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.email.channel import EmailChannel
from channels.registry import ChannelFactory
from tests.channels.discord.helpers import gateway_with_bot
from tests.channels.email.helpers import email_settings
from tests.channels.slack.helpers import click, send, slack_channel
from tests.factories import RequestFactory
from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config
from tests.services.smtp_sink import SmtpSink

CONFIG = """
[people.alice]
email = "alice@example.org"

[teams.night]
members = ["alice"]
slack_channel = "CNIGHT"
"""
TWO_SLACK_CHANNELS = {"all_of": [{"slack": {"channel_or_user_id": c}} for c in ("CA", "CB")]}
SLACK_AND_EMAIL = {
    "all_of": [{"slack": {"channel_or_user_id": "CA"}}, {"email": {"address": "dana@x.net"}}]
}


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def stack(
    db_url: str, tmp_path: Path, slack: FakeSlack, smtp_sink: SmtpSink
) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    email = email_settings(smtp_sink)
    channels: dict[str, ChannelFactory] = {
        "slack": slack_channel(slack),
        "email": lambda context: EmailChannel(context, email),
    }
    async with running_gateway(test_settings(db_url, config=config), channels=channels) as gw:
        yield gw


def post_in(fake: FakeSlack, channel: str) -> str:
    """The ts of the one top-level post in `channel`."""
    [ts] = [ts for (c, ts), m in fake.messages.items() if c == channel and not m.get("thread_ts")]
    return ts


async def wire(gw: RunningGateway, call_id: str) -> Any:
    async with gw.client() as client:
        return (await client.get(f"/function_calls/{call_id}")).json()


async def slack_click(
    gw: RunningGateway, fake: FakeSlack, rid: str, user: str, channel: str
) -> None:
    payload = click(
        fake,
        rid,
        "gw_approve",
        user,
        f"{user}-{channel}",
        channel=channel,
        ts=post_in(fake, channel),
    )
    assert (await send(gw, payload)).status_code == 200


async def counted(gw: RunningGateway, call_id: str, approvals: int) -> Any:
    """The request once its policy counts `approvals` (Bolt acks before it records)."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        seen.update(await wire(gw, call_id))
        return bool((seen.get("policy_progress") or {}).get("approvals") == approvals)

    await eventually(reached, within=5)
    return seen


async def test_one_slack_click_meets_one_of_two_slack_channels(
    stack: RunningGateway, slack: FakeSlack, request_factory: RequestFactory
) -> None:
    made = await request_factory(stack, fn="read_table", channel=TWO_SLACK_CHANNELS, settle=True)
    await slack_click(stack, slack, made.rid, "U0MEL", "CA")
    after_one = await counted(stack, made.call_id, 1)
    assert after_one["gateway_status"] == "pending"
    assert after_one["policy_progress"]["needed"] == 2
    await slack_click(stack, slack, made.rid, "U0NED", "CB")
    await counted(stack, made.call_id, 2)
    assert (await wire(stack, made.call_id))["gateway_status"] == "approved"


async def test_a_slack_click_never_meets_an_email_branch(
    stack: RunningGateway, slack: FakeSlack, request_factory: RequestFactory
) -> None:
    made = await request_factory(stack, fn="read_table", channel=SLACK_AND_EMAIL, settle=True)
    await slack_click(stack, slack, made.rid, "U0MEL", "CA")
    after = await counted(stack, made.call_id, 1)
    assert after["gateway_status"] == "pending"


async def test_a_team_channel_without_member_ids_accepts_nobody(
    stack: RunningGateway, slack: FakeSlack, request_factory: RequestFactory
) -> None:
    made = await request_factory(stack, fn="read_table", channel={"team": "night"}, settle=True)
    await slack_click(stack, slack, made.rid, "U0STRANGER", "CNIGHT")
    await eventually(lambda: _told(slack, "not allowed"), within=5)
    assert (await wire(stack, made.call_id))["gateway_status"] == "pending"


async def _told(fake: FakeSlack, words: str) -> bool:
    return any(words in str(body) for body in fake.responses.values())


# --- Discord

DISCORD_A, DISCORD_B = "500000000000000011", "500000000000000012"
MEL, NED = "600000000000000011", "600000000000000012"


@pytest.fixture
async def discord_fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def discord_gateway(
    tmp_path: Path, discord_fake: FakeDiscord
) -> AsyncIterator[RunningGateway]:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/discord.db")
    async with gateway_with_bot(settings, discord_fake) as running:
        yield running


def message_in(fake: FakeDiscord, channel_id: str) -> str:
    [found] = [m["id"] for m in fake.messages.values() if m["channel_id"] == channel_id]
    return str(found)


async def test_one_discord_click_meets_one_of_two_discord_channels(
    discord_gateway: RunningGateway, discord_fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    channel = {"all_of": [{"discord": {"channel_id": c}} for c in (DISCORD_A, DISCORD_B)]}
    made = await request_factory(discord_gateway, fn="read_table", channel=channel, settle=True)
    first = message_in(discord_fake, DISCORD_A)
    await discord_fake.click(f"gw:approve:{made.rid}", message_id=first, user_id=MEL)
    after_one = await counted(discord_gateway, made.call_id, 1)
    assert after_one["gateway_status"] == "pending"
    second = message_in(discord_fake, DISCORD_B)
    await discord_fake.click(f"gw:approve:{made.rid}", message_id=second, user_id=NED)
    await counted(discord_gateway, made.call_id, 2)
    assert (await wire(discord_gateway, made.call_id))["gateway_status"] == "approved"
