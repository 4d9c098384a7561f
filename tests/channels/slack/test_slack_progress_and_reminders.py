"""A policy's partial approvals and its reminders in Slack: the channel's real slack_sdk
client against the fake Slack Web API, asserting what Slack would then show."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from channels.slack.channel import SlackChannel
from gateway.errors import ChannelDown, DeliveryError
from gateway.runtime.retry import RetryPolicy
from gateway.runtime.supervisor import Supervisor
from gateway.seam.connections import Link
from gateway.seam.targets import Target
from gateway.seam.views import Progress, RequestView
from tests.channels.slack.helpers import slack_channel
from tests.fakes.slack import FakeSlack
from tests.helpers import detached
from tests.unit.views import REQUESTED, request_view

TARGET = Target(
    channel="slack", address={"channel": "C1"}, responders=["U0ALICE", "U0BOB"], via="test"
)
ALICE = {"channel": "slack", "user_id": "U0ALICE", "name": "Alice"}
HALF = Progress(approvals=1, needed=2, approvers=(ALICE,))
EXPIRES = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


@pytest.fixture
async def slack(fake: FakeSlack) -> AsyncIterator[SlackChannel]:
    channel = slack_channel(fake)(detached("slack"))
    yield channel
    await channel.aclose()


def pending(**changes: Any) -> RequestView:
    return request_view(progress=HALF, **changes)


async def post(slack: SlackChannel, view: RequestView) -> dict[str, Any]:
    return (await slack.send(view, TARGET)).ref


def button_ids(message: dict[str, Any]) -> list[str]:
    blocks = message.get("blocks") or []
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def context_texts(message: dict[str, Any]) -> list[str]:
    blocks = message.get("blocks") or []
    return [e["text"] for b in blocks if b["type"] == "context" for e in b["elements"]]


async def test_a_partial_approval_keeps_the_buttons_and_shows_progress(
    slack: SlackChannel, fake: FakeSlack
) -> None:
    ref = await post(slack, request_view())
    key = (ref["channel"], ref["ts"])
    original = fake.messages[key]["blocks"]

    await slack.update(pending(), TARGET, ref)

    edited = fake.messages[key]
    assert button_ids(edited) == ["gw:approve:RID123", "gw:reject:RID123"]
    [progress] = [t for t in context_texts(edited) if "approvals" in t]
    assert progress == ":hourglass: 1 of 2 approvals: Alice (Slack)"
    # The post as first sent (responders' mentions too), plus that one line.
    assert [b for b in edited["blocks"] if progress not in str(b)] == original
    assert "<@U0ALICE>, <@U0BOB>" in str(edited["blocks"])
    assert fake.thread(*key) == [], "a partial approval posts no thread note"
    assert not fake.calls_to("conversations.replies")


async def test_a_retried_progress_edit_leaves_the_same_message(
    slack: SlackChannel, fake: FakeSlack
) -> None:
    ref = await post(slack, request_view())
    fake.fail_after_accepting("chat.update", 1)  # the edit lands, Slack's answer is lost
    with pytest.raises(DeliveryError) as lost:
        await slack.update(pending(), TARGET, ref)
    assert lost.value.retryable
    after_first = fake.messages[(ref["channel"], ref["ts"])]

    await slack.update(pending(), TARGET, ref)

    assert fake.messages[(ref["channel"], ref["ts"])] == after_first
    first, second = fake.calls_to("chat.update")
    assert first.params == second.params
    assert fake.thread(ref["channel"], ref["ts"]) == []


async def test_a_decided_request_still_loses_its_buttons_and_gets_a_note(
    slack: SlackChannel, fake: FakeSlack
) -> None:
    ref = await post(slack, request_view())
    await slack.update(pending(), TARGET, ref)
    bob = {"channel": "slack", "user_id": "U0BOB", "name": "Bob"}
    decided = request_view(status="approved", user_info=bob, responded_at=REQUESTED)

    await slack.update(decided, TARGET, ref)

    edited = fake.messages[(ref["channel"], ref["ts"])]
    assert button_ids(edited) == []
    assert edited["text"].startswith(":white_check_mark: Approved by <@U0BOB> at ")
    assert not [t for t in context_texts(edited) if "of 2 approvals" in t]
    [note] = fake.thread(ref["channel"], ref["ts"])
    assert note["text"] == edited["text"]
    assert note["metadata"] == {
        "event_type": "gateway_outcome",
        "event_payload": {"rid": "RID123", "status": "approved"},
    }


async def test_a_reminder_replies_in_the_thread_mentioning_who_is_awaited(
    slack: SlackChannel, fake: FakeSlack
) -> None:
    ref = await post(slack, request_view())
    parent = dict(fake.messages[(ref["channel"], ref["ts"])])

    await slack.remind(pending(expires_at=EXPIRES), TARGET, ref, ["U0BOB", "U0CAROL"])

    [reminder] = fake.thread(ref["channel"], ref["ts"])
    assert reminder["text"] == (
        "<@U0BOB> <@U0CAROL> Reminder: this request is still waiting for a decision "
        "(1 of 2 approvals: Alice (Slack)); it expires at 2026-11-22 05:00 UTC"
    )
    assert reminder["metadata"] == {
        "event_type": "gateway_reminder",
        "event_payload": {"rid": "RID123", "number": 1},
    }
    assert fake.messages[(ref["channel"], ref["ts"])] == parent, "the post is not edited"


async def test_a_retried_reminder_posts_once_and_the_next_one_posts_again(
    slack: SlackChannel, fake: FakeSlack
) -> None:
    ref = await post(slack, request_view())
    await slack.remind(pending(), TARGET, ref, ["U0BOB"], number=1)
    await slack.remind(pending(), TARGET, ref, ["U0BOB"], number=1)  # the job ran again
    assert len(fake.thread(ref["channel"], ref["ts"])) == 1
    await slack.remind(pending(), TARGET, ref, ["U0BOB"], number=2)
    numbers = [
        m["metadata"]["event_payload"]["number"] for m in fake.thread(ref["channel"], ref["ts"])
    ]
    assert numbers == [1, 2]


async def test_a_reminder_in_a_direct_message_goes_to_the_dm_slack_answered_with(
    slack: SlackChannel, fake: FakeSlack
) -> None:
    to_bob = Target(channel="slack", address={"channel": "U0BOB"}, via="test")
    ref = (await slack.send(request_view(), to_bob)).ref
    assert ref["channel"] == "D0BOB"

    await slack.remind(request_view(), to_bob, ref, ["U0BOB"])

    [call] = [c for c in fake.calls_to("chat.postMessage") if "thread_ts" in c.params]
    assert (call.params["channel"], call.params["thread_ts"]) == ("D0BOB", ref["ts"])
    assert call.params["text"] == (
        "<@U0BOB> Reminder: this request is still waiting for a decision"
    )


@pytest.mark.parametrize(
    ("token", "error", "retryable"),
    [
        ("xoxb-channel_not_found", "channel_not_found", False),
        ("xoxb-server_error", "internal_error", True),
        ("xoxb-ratelimited", "ratelimited", True),
    ],
)
async def test_reminder_failures_map_onto_delivery_errors(
    fake: FakeSlack, token: str, error: str, retryable: bool
) -> None:
    slack = slack_channel(fake, token=token)(detached("slack"))
    ref = {"channel": "C1", "ts": "1700000000.000100"}
    try:
        with pytest.raises(DeliveryError, match=error) as raised:
            await slack.remind(pending(), TARGET, ref, ["U0BOB"])
    finally:
        await slack.aclose()
    assert raised.value.retryable is retryable
    assert [c.error for c in fake.calls_to("chat.postMessage")] == [error]


async def _never_connects(link: Link) -> None:
    raise AssertionError("the supervisor is never started here")


async def test_while_the_socket_is_down_reminders_and_edits_wait(
    slack: SlackChannel, fake: FakeSlack
) -> None:
    slack.connection = Supervisor(
        "slack", _never_connects, connect_timeout=1, policy=RetryPolicy()
    )  # not started: connecting
    ref = {"channel": "C1", "ts": "1700000000.000100"}
    with pytest.raises(ChannelDown):
        await slack.remind(pending(), TARGET, ref, ["U0BOB"])
    with pytest.raises(ChannelDown):
        await slack.update(pending(), TARGET, ref)
    assert fake.calls == []
