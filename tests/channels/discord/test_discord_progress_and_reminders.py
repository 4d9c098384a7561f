"""Discord under an approval policy: a partial approval edits the post but keeps its buttons,
and a reminder replies under the post pinging only the people still awaited. The channel's
real discord.py client talks to the fake Discord; the tests read what the fake recorded."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from channels.discord.channel import DiscordChannel
from channels.discord.render import CONTENT_LIMIT, MAX_MENTIONED_USERS, reminder
from channels.discord.settings import DiscordSettings
from gateway.errors import DeliveryError
from gateway.seam.channel import Remindable
from gateway.seam.targets import Target
from gateway.seam.views import Progress, RequestView, Sent
from tests.fakes.discord import Call, FakeDiscord
from tests.helpers import detached
from tests.unit.views import request_view

CHANNEL = "500000000000000001"
ALICE, BOB, CAROL = "600000000000000001", "600000000000000002", "600000000000000003"
TARGET = Target(channel="discord", address={"channel_id": CHANNEL}, via="test")
EXPIRES = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)
REMINDER = (
    "Reminder: this request is still waiting for a decision"
    " (1 of 2 approvals: Carol (Discord)); it expires at 2026-11-22 05:00 UTC"
)


def approver(user_id: str, name: str) -> dict[str, Any]:
    return {"channel": "discord", "user_id": user_id, "name": name}


def halfway(name: str = "Carol", **changes: Any) -> RequestView:
    """Pending, one of two approvals in (`name`'s), expiring at EXPIRES."""
    progress = Progress(approvals=1, needed=2, approvers=(approver(CAROL, name),))
    return request_view(progress=progress, expires_at=EXPIRES, **changes)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as discord_fake:
        yield discord_fake


@pytest.fixture
async def channel(fake: FakeDiscord) -> AsyncIterator[DiscordChannel]:
    settings = DiscordSettings(
        _env_file=None, bot_token=fake.TOKEN, api_url=fake.api_url, gateway_url=fake.gateway_url
    )
    discord_channel = DiscordChannel(detached("discord"), settings)
    yield discord_channel
    await discord_channel.aclose()


async def post(channel: DiscordChannel, fake: FakeDiscord) -> tuple[Sent, dict[str, Any]]:
    """Send the plain pending request; its ref and a copy of the message as first posted."""
    sent = await channel.send(request_view(), TARGET)
    return sent, copy.deepcopy(fake.messages[sent.ref["message_id"]])


def fields(message: dict[str, Any]) -> dict[str, str]:
    return {f["name"]: f["value"] for f in message["embeds"][0].get("fields") or []}


def reminders(fake: FakeDiscord) -> list[Call]:
    """The messages posted with a reference: the reminders."""
    posts = [c for c in fake.calls if c.method == "POST" and c.path.endswith("/messages")]
    return [c for c in posts if c.json_body.get("message_reference")]


# --- update: a partial approval keeps the buttons


async def test_a_partial_approval_keeps_the_buttons_and_shows_the_progress(
    channel: DiscordChannel, fake: FakeDiscord
) -> None:
    sent, original = await post(channel, fake)
    assert original["components"]  # Approve and Reject, to be kept

    await channel.update(halfway(name="Car_ol"), TARGET, sent.ref)

    edit = fake.edits_of(sent.ref["message_id"])[-1]
    assert edit["components"] == original["components"]  # sent again, not merely left alone
    message = fake.messages[sent.ref["message_id"]]
    assert message["components"] == original["components"]
    assert fields(message) == {
        "name": "users",
        "Progress": "⌛ 1 of 2 approvals: Car\\_ol (Discord)",  # escaped like agent text
    }
    embed, first = message["embeds"][0], original["embeds"][0]
    assert (embed["title"], embed["color"], embed["footer"]) == (
        first["title"],
        first["color"],
        first["footer"],
    )


async def test_a_pending_request_without_progress_is_edited_back_to_its_post(
    channel: DiscordChannel, fake: FakeDiscord
) -> None:
    sent, original = await post(channel, fake)
    await channel.update(request_view(), TARGET, sent.ref)
    edited = fake.messages[sent.ref["message_id"]]
    assert (edited["embeds"], edited["components"]) == (original["embeds"], original["components"])


async def test_a_decided_request_still_loses_its_buttons_and_shows_the_outcome(
    channel: DiscordChannel, fake: FakeDiscord
) -> None:
    sent, _original = await post(channel, fake)
    await channel.update(halfway(), TARGET, sent.ref)  # first the partial approval
    decided = request_view(
        status="approved",
        user_info=approver(ALICE, "Alice"),
        responded_at=EXPIRES,
        progress=Progress(approvals=2, needed=2),
    )
    await channel.update(decided, TARGET, sent.ref)
    message = fake.messages[sent.ref["message_id"]]
    assert message["components"] == []
    assert list(fields(message)) == ["name", "Outcome"]
    assert fields(message)["Outcome"].startswith(f"✅ Approved by <@{ALICE}>")


# --- remind: a reply under the post, pinging only the people named


async def test_a_reminder_replies_under_the_post_and_pings_only_those_named(
    channel: DiscordChannel, fake: FakeDiscord
) -> None:
    assert isinstance(channel, Remindable)
    sent, _original = await post(channel, fake)

    await channel.remind(halfway(), TARGET, sent.ref, [ALICE, BOB])

    [call] = reminders(fake)
    assert call.path == f"/channels/{CHANNEL}/messages" and call.status == 200
    assert call.json_body["content"] == f"<@{ALICE}> <@{BOB}> {REMINDER}"
    reference = call.json_body["message_reference"]
    assert reference["message_id"] == int(sent.ref["message_id"])
    assert reference["channel_id"] == int(CHANNEL)
    assert reference["fail_if_not_exists"] is False
    assert call.json_body["allowed_mentions"] == {"parse": [], "users": [int(ALICE), int(BOB)]}
    assert not call.json_body.get("embeds") and not call.json_body.get("components")


async def test_a_retried_reminder_posts_once_and_the_next_one_posts_again(
    channel: DiscordChannel, fake: FakeDiscord
) -> None:
    sent, _original = await post(channel, fake)
    await channel.remind(halfway(), TARGET, sent.ref, [ALICE], number=1)
    await channel.remind(halfway(), TARGET, sent.ref, [ALICE], number=1)  # the job ran again
    await channel.remind(halfway(), TARGET, sent.ref, [ALICE], number=2)
    first, retried, second = reminders(fake)
    assert first.json_body["enforce_nonce"] is True
    assert first.json_body["nonce"] == retried.json_body["nonce"] != second.json_body["nonce"]
    replies = [m for m in fake.messages_in(CHANNEL) if "Reminder" in (m.get("content") or "")]
    assert len(replies) == 2  # Discord kept one message per nonce


async def test_a_reminder_never_pings_everyone_whatever_a_name_says(
    channel: DiscordChannel, fake: FakeDiscord
) -> None:
    sent, _original = await post(channel, fake)
    await channel.remind(halfway(name="@everyone"), TARGET, sent.ref, [ALICE])
    [call] = reminders(fake)
    assert "@\u200beveryone" in call.json_body["content"]
    assert call.json_body["allowed_mentions"] == {"parse": [], "users": [int(ALICE)]}


@pytest.mark.parametrize(
    ("status", "code", "raises", "retryable"),
    [
        (403, 50013, True, False),  # missing permissions: the outbox gives up
        (404, 10003, False, None),  # the channel is gone: nothing to remind, as update does
    ],
)
async def test_reminder_errors_are_mapped_as_update_maps_them(
    channel: DiscordChannel,
    fake: FakeDiscord,
    status: int,
    code: int,
    raises: bool,
    retryable: bool | None,
) -> None:
    sent, _original = await post(channel, fake)
    fake.fail_next("POST", rf"/channels/{CHANNEL}/messages", status=status, code=code)
    if raises:
        with pytest.raises(DeliveryError, match=str(code)) as failed:
            await channel.remind(halfway(), TARGET, sent.ref, [ALICE])
        assert failed.value.retryable is retryable
    else:
        await channel.remind(halfway(), TARGET, sent.ref, [ALICE])
    assert [c.status for c in reminders(fake)] == [status]


# --- the reminder payload, pure


def test_a_reminder_mentions_as_many_as_fit_and_skips_ids_that_are_not_discord_users() -> None:
    many = [str(700000000000000000 + i) for i in range(150)]
    content, mentions = reminder(halfway(), ["alice@example.com", *many])
    assert len(content) <= CONTENT_LIMIT and content.endswith(REMINDER)
    assert isinstance(mentions.users, list)
    named = [str(user.id) for user in mentions.users]
    assert 0 < len(named) <= MAX_MENTIONED_USERS and named == many[: len(named)]
    assert content == "".join(f"<@{u}> " for u in named) + REMINDER
    assert "alice@example.com" not in content


# --- note: a standing grant's uses, under the post that gave it


async def test_a_note_replies_under_the_post_once_per_key_and_pings_nobody(
    channel: DiscordChannel, fake: FakeDiscord
) -> None:
    sent, original = await post(channel, fake)
    text = "@everyone's standing grant approved 3 more calls of read_file in this run"
    await channel.note(request_view(), TARGET, sent.ref, text, key="grant g1 3")
    await channel.note(request_view(), TARGET, sent.ref, text, key="grant g1 3")  # a retry
    await channel.note(request_view(), TARGET, sent.ref, text, key="grant g1 4")
    first, retried, second = reminders(fake)
    assert str(first.json_body["message_reference"]["message_id"]) == str(sent.ref["message_id"])
    assert first.json_body["allowed_mentions"]["parse"] == []
    assert first.json_body["content"].startswith("@\u200beveryone")
    assert first.json_body["nonce"] == retried.json_body["nonce"] != second.json_body["nonce"]
    notes = [m for m in fake.messages_in(CHANNEL) if "standing grant" in (m.get("content") or "")]
    assert len(notes) == 2  # one message per key
    assert fake.messages[sent.ref["message_id"]] == original  # the post is not edited
