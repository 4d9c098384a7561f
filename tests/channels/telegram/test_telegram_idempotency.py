"""Everything runs at least once, and shows once: a send the outbox runs again finds the
message it posted, an edit run again finds the edit it made, an update Telegram sends again
(a poll not yet confirmed, a webhook retried) decides and edits once; a 429 is waited out
and posts once. The fake counts the Bot API calls."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gateway.seam import Target
from tests.channels.telegram.helpers import (
    ALICE,
    GROUP,
    TO_OPS,
    channel_of,
    data_of,
    get,
    posted_message,
)
from tests.factories import RequestFactory
from tests.fakes.telegram import FakeTelegram
from tests.helpers import events, eventually, outbox_idle
from tests.services.inprocess import RunningGateway

TARGET = Target(channel="telegram", address={"chat_id": str(GROUP)}, via="test")


async def decisions(gateway: RunningGateway, call_id: str) -> int:
    return [e["type"] for e in (await events(gateway, call_id))["events"]].count("decided")


async def test_a_send_run_again_posts_once_and_an_edit_run_again_edits_once(
    gateway: RunningGateway, fake: FakeTelegram, request_factory: RequestFactory
) -> None:
    made = await request_factory(gateway, "again-1", channel=TO_OPS, settle=True)
    channel = channel_of(gateway)
    view = await gateway.context("telegram").answers.view(made.rid)
    assert view is not None
    # The outbox runs the send again, as after a crash before it recorded the first.
    sent = await channel.send(view, TARGET)
    message = posted_message(fake, "again-1")
    assert sent.ref == {"chat_id": str(GROUP), "message_id": message["message_id"]}
    assert len(fake.calls_to("sendMessage")) == 1

    async with gateway.client() as client:
        response = await client.post(
            "/agent/function_calls/again-1/respond", json={"approved": True}
        )
        assert response.status_code == 200, response.text
    await eventually(lambda: outbox_idle(gateway))
    decided = await gateway.context("telegram").answers.view(made.rid)
    assert decided is not None
    await channel.update(decided, TARGET, sent.ref)  # and the update again
    assert len(fake.calls_to("editMessageText")) == 1
    assert len(fake.edits_of(message)) == 1


async def test_an_edit_whose_answer_was_lost_is_not_made_twice(
    gateway: RunningGateway, fake: FakeTelegram, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "lost-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "lost-1")
    fake.fail_after_accepting("editMessageText")  # edited, but the gateway hears a 500
    async with gateway.client() as client:
        response = await client.post(
            "/agent/function_calls/lost-1/respond", json={"approved": True}
        )
        assert response.status_code == 200, response.text

    async def retried() -> bool:
        return len(fake.calls_to("editMessageText")) == 2 and await outbox_idle(gateway)

    await eventually(retried)
    assert [c.status for c in fake.calls_to("editMessageText")] == [500, 400]  # not modified
    assert len(fake.edits_of(message)) == 1
    assert "reply_markup" not in fake.current(message)


async def test_an_update_sent_again_decides_and_edits_once(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Any],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "twice-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "twice-1")
    update = fake.callback_update(message, data_of(message, "gw:approve:"), people[ALICE])
    # Fetched twice in one poll, as Telegram sends an update again until it is confirmed.
    await fake.push(update, update)
    await fake.wait_for_answer(update["callback_query"]["id"])

    async def both_handled() -> bool:  # confirmed by the next poll: both copies were read
        return fake.pending_updates() == 0 and await outbox_idle(gateway)

    await eventually(both_handled)
    assert (await get(gateway, "twice-1"))["status"]["approved"] is True
    assert await decisions(gateway, "twice-1") == 1
    assert len(fake.calls_to("answerCallbackQuery")) == 1
    assert len(fake.calls_to("editMessageText")) == 1


async def test_a_429_is_waited_out_and_the_message_posted_once(
    gateway: RunningGateway, fake: FakeTelegram, request_factory: RequestFactory
) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=1)
    await request_factory(gateway, "limit-1", channel=TO_OPS, settle=True)
    posted_message(fake, "limit-1")  # exactly one
    assert [c.status for c in fake.calls_to("sendMessage")] == [429, 200]
    [delivery] = (await events(gateway, "limit-1"))["deliveries"]
    assert delivery["status"] == "sent"


async def test_the_bot_token_is_in_no_log_line(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Any],
    request_factory: RequestFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    await request_factory(gateway, "log-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "log-1")
    await fake.wait_for_answer(
        await fake.click(message, data_of(message, "gw:approve:"), people[ALICE])
    )
    await eventually(lambda: outbox_idle(gateway))
    lines = [record.getMessage() for record in caplog.records]
    assert any("/bot[redacted]/sendMessage" in line for line in lines)  # httpx's request line
    secret = FakeTelegram.TOKEN.partition(":")[2]
    assert not [line for line in lines if secret in line]
