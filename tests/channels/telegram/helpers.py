"""Driving the Telegram channel in tests: its factory over the fake Telegram, a gateway whose
bot polls (or serves its webhook), and reading what the bot posted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from channels.telegram.channel import SECRET_HEADER, TelegramChannel
from channels.telegram.settings import TelegramSettings
from gateway.seam import ChannelContext, State
from gateway.settings import Settings
from tests.fakes.telegram import FakeTelegram
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway

GROUP = -1001234567890  # the ops team's group chat
ALICE, BOB, MALLORY = 1001, 1002, 1003
WEBHOOK_SECRET = "test-webhook-secret-0123456789"
PUBLIC_URL = "https://gw.example.test"
TO_OPS = {"team": "ops"}

ROUTING = f"""
[people.alice]
name = "Alice"
telegram = "{ALICE}"

[people.bob]
name = "Bob"
telegram = "{BOB}"

[teams.ops]
members = ["alice", "bob"]
telegram_chat = "{GROUP}"

[teams.pair]
members = ["alice", "bob"]
telegram_chat = "{GROUP}"
approvals_required = 2

[teams.slow]
members = ["alice", "bob"]
telegram_chat = "{GROUP}"
remind_every = "1s"
max_reminders = 1
"""


def telegram_settings(fake: FakeTelegram, **changes: Any) -> TelegramSettings:
    values: dict[str, Any] = {"bot_token": FakeTelegram.TOKEN, "api_url": fake.api_url}
    return TelegramSettings(_env_file=None, **(values | changes))


def telegram_channel(
    fake: FakeTelegram, **changes: Any
) -> Callable[[ChannelContext], TelegramChannel]:
    """The Telegram channel's factory, talking to `fake` (polling unless `mode` says)."""
    settings = telegram_settings(fake, **changes)

    def build(context: ChannelContext) -> TelegramChannel:
        return TelegramChannel(context, settings)

    return build


def webhook_mode() -> dict[str, Any]:
    return {"mode": "webhook", "webhook_secret": WEBHOOK_SECRET, "webhook_url": PUBLIC_URL}


@asynccontextmanager
async def gateway_with_bot(
    settings: Settings, fake: FakeTelegram, **changes: Any
) -> AsyncIterator[RunningGateway]:
    """A gateway whose Telegram connection is up: polling (clicks queued now reach it), or
    with its webhook registered."""
    factory = telegram_channel(fake, **changes)
    async with running_gateway(settings, channels={"telegram": factory}) as running:
        await connected(running)
        yield running


def channel_of(gateway: RunningGateway) -> TelegramChannel:
    channel = gateway.core.channels["telegram"]
    assert isinstance(channel, TelegramChannel)
    return channel


async def connected(gateway: RunningGateway, within: float = 10) -> TelegramChannel:
    """The gateway's Telegram channel, once its connection is up."""
    channel = channel_of(gateway)
    assert channel.connection is not None
    await asyncio.wait_for(channel.connection.wait_for(State.CONNECTED), timeout=within)
    return channel


def users(fake: FakeTelegram) -> dict[int, dict[str, Any]]:
    return {
        ALICE: fake.user(ALICE, "Alice", "alice"),
        BOB: fake.user(BOB, "Bob"),
        MALLORY: fake.user(MALLORY, "Mallory", "mallory"),
    }


def posted_message(fake: FakeTelegram, call_id: str, chat_id: int = GROUP) -> dict[str, Any]:
    """The one message the bot posted for `call_id` (its footer names the call)."""
    posts = [m for m in fake.messages_in(chat_id) if f"call {call_id}" in m["text"]]
    assert len(posts) == 1, f"expected one message for {call_id}, got {len(posts)}"
    return posts[0]


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    markup = message.get("reply_markup") or {}
    return [button for row in markup.get("inline_keyboard") or [] for button in row]


def data_of(message: dict[str, Any], prefix: str) -> str:
    """The callback_data of the button whose id starts with `prefix` ("gw:approve:")."""
    found = [str(b["callback_data"]) for b in buttons(message)]
    return next(data for data in found if data.startswith(prefix))


async def prompt_under(fake: FakeTelegram, message: dict[str, Any]) -> dict[str, Any]:
    """The ForceReply prompt the bot posts under `message`, once it is there."""

    def prompts() -> list[dict[str, Any]]:
        chat = message["chat"]["id"]
        return [
            m
            for m in fake.messages_in(chat)
            if m.get("force_reply")
            and m.get("reply_to_message", {}).get("message_id") == message["message_id"]
        ]

    async def asked() -> bool:
        return bool(prompts())

    await eventually(asked)
    [prompt] = prompts()
    return prompt


async def bot_reply_to(fake: FakeTelegram, said: dict[str, Any]) -> dict[str, Any]:
    """The bot's reply to a person's message `said`, once it is there."""

    def replies() -> list[dict[str, Any]]:
        chat = said["chat"]["id"]
        return [
            m
            for m in fake.messages_in(chat)
            if m.get("reply_to_message", {}).get("message_id") == said["message_id"]
        ]

    async def replied() -> bool:
        return bool(replies())

    await eventually(replied)
    [reply] = replies()
    return reply


def entity_types(message: dict[str, Any]) -> list[str]:
    return [entity["type"] for entity in message.get("entities") or []]


async def get(gateway: RunningGateway, call_id: str, contact: bool = False) -> dict[str, Any]:
    path = "/contact_requests" if contact else "/function_calls"
    async with gateway.client() as client:
        response = await client.get(f"{path}/{call_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def post_update(
    gateway: RunningGateway,
    update: dict[str, Any],
    *,
    secret: str | None = WEBHOOK_SECRET,
    path: str | None = None,
) -> httpx.Response:
    """What Telegram does in webhook mode: POST the update with the secret token."""
    channel = channel_of(gateway)
    headers = {SECRET_HEADER: secret} if secret is not None else {}
    target = path or channel.settings.webhook_path
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=10) as client:
        return await client.post(str(target), json=update, headers=headers)
