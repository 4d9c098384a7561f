"""Policies in Telegram, end to end: a two-person rule shows its progress on the message and
keeps the buttons until the second approval; a reminder replies under the message naming
only the people still awaited, once; a deadline fails closed and the message says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.channels.telegram.helpers import (
    ALICE,
    BOB,
    GROUP,
    buttons,
    data_of,
    get,
    posted_message,
)
from tests.factories import RequestFactory
from tests.fakes.telegram import FakeTelegram
from tests.helpers import eventually, outbox_idle
from tests.services.inprocess import RunningGateway


async def test_two_approvals_show_progress_then_the_outcome(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Any],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "pair-1", channel={"team": "pair"}, settle=True)
    message = posted_message(fake, "pair-1")
    first = await fake.click(message, data_of(message, "gw:approve:"), people[ALICE])
    assert "1 of 2 approvals" in (await fake.wait_for_answer(first))["text"]
    await eventually(lambda: outbox_idle(gateway))
    [progress] = fake.edits_of(message)
    assert "⏳ 1 of 2 approvals: Alice (Telegram)" in progress["text"]
    assert buttons(progress) == buttons(message)  # still open to the second approver
    assert (await get(gateway, "pair-1"))["status"]["approved"] is None

    second = await fake.click(progress, data_of(progress, "gw:approve:"), people[BOB])
    await fake.wait_for_answer(second)
    await eventually(lambda: outbox_idle(gateway))
    assert (await get(gateway, "pair-1"))["status"]["approved"] is True
    decided = fake.current(message)
    assert "reply_markup" not in decided
    assert "✅ Approved by Bob in Telegram" in decided["text"]


async def test_a_reminder_replies_under_the_message_once_naming_who_is_awaited(
    gateway: RunningGateway, fake: FakeTelegram, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "slow-1", channel={"team": "slow"})

    def reminders() -> list[dict[str, Any]]:
        return [m for m in fake.messages_in(GROUP) if "Reminder:" in m["text"]]

    async def reminded() -> bool:
        return bool(reminders()) and await outbox_idle(gateway)

    await eventually(reminded)
    message = posted_message(fake, "slow-1")
    [reminder] = reminders()  # max_reminders = 1
    assert reminder["reply_to_message"]["message_id"] == message["message_id"]
    mentioned = [e["user"]["id"] for e in reminder["entities"] if e["type"] == "text_mention"]
    assert sorted(mentioned) == [ALICE, BOB]
    assert "still waiting for a decision" in reminder["text"]


async def test_a_deadline_fails_closed_and_the_message_says_so(
    gateway: RunningGateway, fake: FakeTelegram, request_factory: RequestFactory
) -> None:
    deadline = datetime.now(UTC) + timedelta(seconds=1)
    await request_factory(
        gateway, "late-1", channel={"team": "ops"}, expires_at=deadline.isoformat(), settle=True
    )
    message = posted_message(fake, "late-1")

    async def expired() -> bool:
        status = (await get(gateway, "late-1"))["status"]
        return status["approved"] is False and await outbox_idle(gateway)

    await eventually(expired)
    assert "expired" in (await get(gateway, "late-1"))["status"]["comment"]
    edited = fake.current(message)
    assert "reply_markup" not in edited
    assert "Expired at" in edited["text"]
