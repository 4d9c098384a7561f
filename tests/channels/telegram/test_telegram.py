"""Telegram end to end: the gateway's real python-telegram-bot client against a fake Bot API
server (TELEGRAM_API_URL), in polling mode: the bot long-polls getUpdates, clicks and replies
are updates queued in the fake, and what people see is the fake's copy of each message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from channels.telegram.settings import TelegramSettings
from gateway.errors import DeliveryError
from tests.channels.telegram.helpers import (
    ALICE,
    BOB,
    TO_OPS,
    bot_reply_to,
    buttons,
    data_of,
    entity_types,
    get,
    posted_message,
    prompt_under,
    telegram_channel,
)
from tests.factories import RequestFactory
from tests.fakes.telegram import FakeTelegram
from tests.helpers import detached, eventually, outbox_idle
from tests.services.inprocess import RunningGateway

Person = dict[str, Any]
REPO_ROOT = Path(__file__).resolve().parents[3]


async def decided_and_edited(
    gateway: RunningGateway, fake: FakeTelegram, message: Person
) -> Person:
    """The message once the outbox has edited it after the decision (once)."""

    async def edited_once() -> bool:
        return bool(fake.edits_of(message)) and await outbox_idle(gateway)

    await eventually(edited_once)
    [edited] = fake.edits_of(message)
    return edited


async def test_posts_html_with_signed_buttons_and_no_previews(
    gateway: RunningGateway, fake: FakeTelegram, request_factory: RequestFactory
) -> None:
    made = await request_factory(
        gateway, "post-1", channel=TO_OPS, run_id="r1", kwargs={"name": "users"}, settle=True
    )
    message = posted_message(fake, "post-1")
    assert message["text"].startswith("🤖 Agent r1 wants to call drop_table")
    assert "name: users" in message["text"]
    assert entity_types(message)[:1] == ["bold"]
    ids = [str(b["callback_data"]).rpartition(".")[0] for b in buttons(message)]
    assert ids == [f"gw:approve:{made.rid}", f"gw:reject:{made.rid}"]
    assert all(len(b["callback_data"].encode()) <= 64 for b in buttons(message))
    [send] = fake.calls_to("sendMessage")
    assert send.params["parse_mode"] == "HTML"
    assert send.params["link_preview_options"] == {"is_disabled": True}


async def test_approve_decides_records_the_person_and_removes_the_buttons(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "approve-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "approve-1")
    query = await fake.click(message, data_of(message, "gw:approve:"), people[ALICE])
    answer = await fake.wait_for_answer(query)
    assert "Approved by Alice in Telegram" in answer["text"]
    status = (await get(gateway, "approve-1"))["status"]
    assert status["approved"] is True
    info = status["user_info"]
    assert (info["channel"], info["user_id"], info["name"]) == ("telegram", str(ALICE), "Alice")
    edited = await decided_and_edited(gateway, fake, message)
    assert "reply_markup" not in edited
    assert "✅ Approved by Alice in Telegram at " in edited["text"]
    assert "Reply to this message" not in edited["text"]


async def test_reject_asks_for_the_reason_and_the_reply_to_the_prompt_is_the_comment(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "reject-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "reject-1")
    query = await fake.click(message, data_of(message, "gw:reject:"), people[BOB])
    assert "Reply to the message below" in (await fake.wait_for_answer(query))["text"]
    prompt = await prompt_under(fake, message)
    assert prompt["force_reply"]["selective"] is True
    assert prompt["reply_to_message"]["message_id"] == message["message_id"]
    [mention] = [e for e in prompt["entities"] if e["type"] == "text_mention"]
    assert mention["user"]["id"] == BOB  # the one person it pings: who clicked
    assert (await get(gateway, "reject-1"))["status"]["approved"] is None  # nothing yet

    await fake.reply(prompt, "not on a Friday", people[BOB])

    async def rejected() -> bool:
        return (await get(gateway, "reject-1"))["status"]["approved"] is False

    await eventually(rejected)
    status = (await get(gateway, "reject-1"))["status"]
    assert status["comment"] == "not on a Friday"
    assert status["user_info"]["user_id"] == str(BOB)
    edited = await decided_and_edited(gateway, fake, message)
    assert "reply_markup" not in edited
    assert "❌ Rejected by Bob in Telegram" in edited["text"]
    assert "not on a Friday" in edited["text"]


async def test_options_decide_with_their_prompt_fill_or_ask_when_interactive(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    options = [
        {"name": "wrong_table", "title": "Wrong table", "prompt_fill": "use staging"},
        {"name": "later", "title": "Later", "prompt_fill": "after 5pm", "interactive": True},
    ]
    for call_id in ("option-1", "option-2"):
        await request_factory(gateway, call_id, channel=TO_OPS, reject_options=options, settle=True)
    first, second = posted_message(fake, "option-1"), posted_message(fake, "option-2")
    assert [b["text"] for b in buttons(first)] == [
        "✅ Approve",
        "❌ Reject…",
        "Wrong table",
        "Later",
    ]

    await fake.wait_for_answer(await fake.click(first, data_of(first, "gw:option:0:"), people[BOB]))
    status = (await get(gateway, "option-1"))["status"]
    assert (status["approved"], status["reject_option_name"]) == (False, "wrong_table")
    assert status["comment"] == "use staging"

    await fake.wait_for_answer(
        await fake.click(second, data_of(second, "gw:option:1:"), people[ALICE])
    )
    prompt = await prompt_under(fake, second)
    assert prompt["force_reply"]["input_field_placeholder"] == "after 5pm"
    assert (await get(gateway, "option-2"))["status"]["approved"] is None
    await fake.reply(prompt, "after 6pm", people[ALICE])

    async def rejected() -> bool:
        return (await get(gateway, "option-2"))["status"]["approved"] is False

    await eventually(rejected)
    status = (await get(gateway, "option-2"))["status"]
    assert (status["reject_option_name"], status["comment"]) == ("later", "after 6pm")


async def test_a_question_is_answered_by_replying_to_its_message(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    options = [{"name": "eu", "title": "Europe"}]
    await request_factory(
        gateway, "ask-1", channel=TO_OPS, contact=True, response_options=options, settle=True
    )
    message = posted_message(fake, "ask-1")
    assert message["text"].startswith("❓ Agent r asks:\n\nWhich region?")
    assert [b["text"] for b in buttons(message)] == ["Europe"]
    await fake.reply(message, "us-east-1, please", people[ALICE])

    async def answered() -> bool:
        return (await get(gateway, "ask-1", contact=True))["status"]["response"] is not None

    await eventually(answered)
    status = (await get(gateway, "ask-1", contact=True))["status"]
    assert status["response"] == "us-east-1, please"
    assert status["user_info"]["user_id"] == str(ALICE)
    edited = await decided_and_edited(gateway, fake, message)
    assert "reply_markup" not in edited
    assert "💬 Answered by Alice in Telegram" in edited["text"]
    assert "us-east-1, please" in edited["text"]


async def test_an_approval_answered_in_words_is_read_and_the_person_told_how(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "words-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "words-1")
    said = await fake.reply(message, "LGTM 👍", people[BOB])
    reading = await bot_reply_to(fake, said)
    assert (await get(gateway, "words-1"))["status"]["approved"] is True
    assert reading["text"].startswith("We read your reply as an approval")


HOSTILE = '@everyone @all @ops_admins <b>bold</b> <a href="tg://user?id=42">you</a> &amp;'
SAFE = {"bold", "italic", "code", "pre"}  # what the gateway's own markup makes


async def test_agent_text_pings_nobody_and_formats_nothing(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    kwargs = {"note": HOSTILE, "nested": {"html": HOSTILE}}
    await request_factory(
        gateway, "ping-1", channel=TO_OPS, run_id="@all", kwargs=kwargs, settle=True
    )
    await request_factory(gateway, "ping-2", channel=TO_OPS, contact=True, msg=HOSTILE, settle=True)
    message = posted_message(fake, "ping-1")
    await fake.click(message, data_of(message, "gw:reject:"), people[ALICE])
    await fake.reply(await prompt_under(fake, message), HOSTILE, people[ALICE])  # the reason
    await fake.reply(posted_message(fake, "ping-2"), HOSTILE, people[BOB])  # the answer
    edited = [
        await decided_and_edited(gateway, fake, posted_message(fake, c))
        for c in ("ping-1", "ping-2")
    ]
    for shown in (message, posted_message(fake, "ping-2"), *edited):
        assert set(entity_types(shown)) <= SAFE, shown["entities"]
        assert '<b>bold</b> <a href="tg://user?id=42">you</a> &amp;' in shown["text"]
    assert "@\u2060everyone @\u2060all" in edited[0]["text"]


async def test_check_signs_in_and_a_bad_token_says_so(fake: FakeTelegram) -> None:
    channel = telegram_channel(fake)(detached("telegram"))
    try:
        assert await channel.check() == (
            f"signed in as @{FakeTelegram.BOT_USERNAME} ({FakeTelegram.BOT_ID}), polling"
        )
    finally:
        await channel.aclose()
    refused = telegram_channel(fake, bot_token="42:not-the-token")(detached("telegram"))
    with pytest.raises(DeliveryError, match="refused the bot token") as error:
        await refused.check()
    await refused.aclose()
    assert not error.value.retryable and "not-the-token" not in str(error.value)


def test_secrets_stay_out_of_reprs_and_errors() -> None:
    settings = TelegramSettings(
        _env_file=None, bot_token=FakeTelegram.TOKEN, webhook_secret="s" * 20, mode="webhook"
    )
    assert FakeTelegram.TOKEN not in repr(settings) and "s" * 20 not in repr(settings)
    assert settings.webhook_path is not None and "s" * 20 not in settings.webhook_path
    with pytest.raises(ValidationError) as refused:
        TelegramSettings(_env_file=None, webhook_secret="too short, and spaces")
    assert "too short" not in str(refused.value)
