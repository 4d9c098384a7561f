"""Clicks and replies that must decide nothing: callback_data we did not sign (tampered, or
copied from another chat or another request), and people the route does not allow. Each
test tries the attack through the real bot, then asserts nothing changed."""

from __future__ import annotations

from typing import Any

from tests.channels.telegram.helpers import (
    ALICE,
    BOB,
    MALLORY,
    TO_OPS,
    bot_reply_to,
    data_of,
    get,
    posted_message,
    prompt_under,
)
from tests.factories import RequestFactory
from tests.fakes.telegram import FakeTelegram
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway

Person = dict[str, Any]


async def undecided(gateway: RunningGateway, fake: FakeTelegram, call_id: str) -> None:
    """Still pending, and its message never edited."""
    assert (await get(gateway, call_id))["status"]["approved"] is None
    assert fake.edits_of(posted_message(fake, call_id)) == []


async def test_tampered_callback_data_decides_nothing(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "tamper-1", channel=TO_OPS, settle=True)
    await request_factory(gateway, "tamper-2", channel=TO_OPS, settle=True)
    first, second = posted_message(fake, "tamper-1"), posted_message(fake, "tamper-2")
    approve = data_of(first, "gw:approve:")
    button, _, mac = approve.rpartition(".")
    forged = [
        button.replace("gw:approve:", "gw:reject:") + "." + mac,  # another verb, same MAC
        f"{button}.{'A' * len(mac)}",  # a made-up MAC
        button,  # no MAC at all
        approve[:-1] + ("B" if approve[-1] != "B" else "C"),  # one character off
    ]
    for data in forged:
        answer = await fake.wait_for_answer(await fake.click(first, data, people[ALICE]))
        assert answer["show_alert"] is True and "not valid" in answer["text"]
    # A genuine button of the first request, clicked on the second one's message.
    answer = await fake.wait_for_answer(await fake.click(second, approve, people[ALICE]))
    assert "not valid" in answer["text"]
    await undecided(gateway, fake, "tamper-1")
    await undecided(gateway, fake, "tamper-2")


async def test_a_button_signed_for_another_chat_decides_nothing(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    # Sent to the team's group and to Bob's private chat: the same request, two chats.
    channel = {"any_of": [TO_OPS, {"person": "bob"}]}
    await request_factory(gateway, "chat-1", channel=channel, settle=True)
    in_private = posted_message(fake, "chat-1", chat_id=BOB)
    in_group = posted_message(fake, "chat-1")
    copied = data_of(in_private, "gw:approve:")
    answer = await fake.wait_for_answer(await fake.click(in_group, copied, people[ALICE]))
    assert "not valid" in answer["text"]
    assert (await get(gateway, "chat-1"))["status"]["approved"] is None
    assert fake.edits_of(in_group) == [] and fake.edits_of(in_private) == []


async def test_someone_not_allowed_is_refused_and_nothing_is_decided(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "allowed-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "allowed-1")
    for prefix in ("gw:approve:", "gw:reject:"):
        query = await fake.click(message, data_of(message, prefix), people[MALLORY])
        answer = await fake.wait_for_answer(query)
        assert answer["show_alert"] is True and "not allowed" in answer["text"]
    said = await fake.reply(message, "yes, approve", people[MALLORY])
    refusal = await bot_reply_to(fake, said)
    assert "not allowed" in refusal["text"]
    assert not [m for m in fake.messages_in(message["chat"]["id"]) if m.get("force_reply")]
    await undecided(gateway, fake, "allowed-1")


async def test_a_reply_to_someone_elses_reason_prompt_is_not_their_reason(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Person],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "prompt-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "prompt-1")
    await fake.click(message, data_of(message, "gw:reject:"), people[BOB])
    prompt = await prompt_under(fake, message)
    for who in (MALLORY, ALICE):  # not the person it asked, allowed or not
        await fake.reply(prompt, f"{who} says no", people[who])
    await fake.reply(prompt, "wrong database", people[BOB])

    async def rejected() -> bool:
        return (await get(gateway, "prompt-1"))["status"]["approved"] is False

    await eventually(rejected)
    status = (await get(gateway, "prompt-1"))["status"]
    assert (status["comment"], status["user_info"]["user_id"]) == ("wrong database", str(BOB))
