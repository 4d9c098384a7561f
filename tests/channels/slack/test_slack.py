"""Slack end to end: the real Bolt app behind the gateway's own ASGI app, requests signed
with Slack's algorithm, the gateway's real AsyncWebClient talking to a fake Slack Web API."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.channels.slack.helpers import (
    C1_ALICE_ONLY,
    TO_C1,
    assert_posted,
    click,
    decided,
    modal_submit,
    parent_ts,
    post_event,
    reply,
    send,
    slack_channel,
    status,
)
from tests.factories import RequestFactory
from tests.fakes.slack import FakeSlack
from tests.helpers import events, eventually, outbox_idle
from tests.services.inprocess import RunningGateway, running_gateway, test_settings


async def test_approve_click_decides_and_updates_the_message(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "approve-me", channel=TO_C1, settle=True)).rid
    assert_posted(fake)
    [posted] = fake.calls_to("chat.postMessage")
    assert posted.params["channel"] == "C1" and posted.token == "xoxb-test"
    buttons = [e for b in posted.params["blocks"] for e in b.get("elements", []) if "value" in e]
    assert {(b["action_id"], b["value"]) for b in buttons} == {
        (f"gw:approve:{rid}", f"gw:approve:{rid}"),
        (f"gw:reject:{rid}", f"gw:reject:{rid}"),
        (f"gw:edit:{rid}", f"gw:edit:{rid}"),
    }
    reply = await send(gateway, click(fake, rid, "gw_approve"))
    assert reply.status_code == 200
    approved = await decided(gateway, "approve-me")
    assert approved["status"]["approved"] is True
    assert approved["status"]["user_info"]["channel"] == "slack"
    assert approved["status"]["user_info"]["user_id"] == "U0ALICE"
    # Who decided, as users.info tells it (the fake's profile for U0ALICE).
    assert approved["status"]["user_info"]["name"] == "User U0ALICE"
    assert approved["status"]["user_info"]["email"] == "u0alice@example.com"
    assert approved["status"]["slack_message_ts"]
    [update] = await fake.wait_for("chat.update", 1)
    assert update.params["ts"] == approved["status"]["slack_message_ts"]
    assert "Approved by <@U0ALICE>" in update.params["text"]
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"]


async def test_reject_opens_a_modal_and_the_reason_is_the_comment(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "reject-me", channel=TO_C1, settle=True)).rid
    assert_posted(fake)
    assert (await send(gateway, click(fake, rid, "gw_reject"))).status_code == 200
    [opened] = await fake.wait_for("views.open", 1)
    view = opened.params["view"]
    view = json.loads(view) if isinstance(view, str) else view
    assert opened.params["trigger_id"] == "trigger-U0ALICE"
    assert json.loads(view["private_metadata"])["rid"] == rid
    assert (await status(gateway, "reject-me"))["status"]["approved"] is None  # not yet

    empty = await send(gateway, modal_submit(rid, "   "))
    assert empty.json()["response_action"] == "errors"
    submitted = await send(gateway, modal_submit(rid, "not the users table"))
    assert submitted.status_code == 200
    rejected = await decided(gateway, "reject-me")
    assert rejected["status"]["approved"] is False
    assert rejected["status"]["comment"] == "not the users table"


async def test_reject_options(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    options = [
        {"name": "spam", "title": "Spam", "prompt_fill": "looks like spam"},
        {"name": "edit", "title": "Edit", "prompt_fill": "change it to", "interactive": True},
    ]
    made = await request_factory(gateway, "opt", reject_options=options, channel=TO_C1, settle=True)
    rid = made.rid
    assert_posted(fake)
    await send(gateway, click(fake, rid, "gw_option_0"))
    rejected = await decided(gateway, "opt")
    assert rejected["status"]["approved"] is False
    assert rejected["status"]["comment"] == "looks like spam"
    assert rejected["status"]["reject_option_name"] == "spam"

    made = await request_factory(
        gateway, "opt-edit", reject_options=options, channel=TO_C1, settle=True
    )
    rid = made.rid
    assert_posted(fake)
    await send(gateway, click(fake, rid, "gw_option_1"))
    [opened] = await fake.wait_for("views.open", 1)
    view = opened.params["view"]
    view = json.loads(view) if isinstance(view, str) else view
    assert view["blocks"][0]["element"]["initial_value"] == "change it to"
    await send(gateway, modal_submit(rid, "change it to eu-west", option="edit"))
    rejected = await decided(gateway, "opt-edit")
    assert rejected["status"]["comment"] == "change it to eu-west"
    assert rejected["status"]["reject_option_name"] == "edit"


async def test_human_contact_answered_by_button(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    options = [{"name": "eu", "title": "Europe"}]
    made = await request_factory(
        gateway, "ask", contact=True, response_options=options, channel=TO_C1, settle=True
    )
    rid = made.rid
    assert_posted(fake)
    await send(gateway, click(fake, rid, "gw_option_0"))
    answered = await decided(gateway, "ask", "contact_requests")
    assert answered["status"]["response"] == "Europe"
    assert answered["status"]["response_option_name"] == "eu"


async def test_a_person_not_allowed_is_told_privately(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "guarded", channel=C1_ALICE_ONLY, settle=True)).rid
    assert_posted(fake)
    await send(gateway, click(fake, rid, "gw_approve", user="U0MALLORY", respond_id="mallory"))
    [told] = await fake.wait_for_response("mallory")
    assert told["response_type"] == "ephemeral" and "not allowed" in told["text"]
    assert (await status(gateway, "guarded"))["gateway_status"] == "pending"


async def test_reject_on_a_decided_request_is_refused_before_any_form(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "late-reject", channel=TO_C1, settle=True)).rid
    assert_posted(fake)
    await send(gateway, click(fake, rid, "gw_approve"))
    await decided(gateway, "late-reject")
    await send(gateway, click(fake, rid, "gw_reject", user="U0BOB", respond_id="bob"))
    [told] = await fake.wait_for_response("bob")
    assert told["response_type"] == "ephemeral" and "already approved" in told["text"]
    assert fake.calls_to("views.open") == []  # nobody types a reason for nothing


async def test_two_clicks_at_once_one_wins(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "race", channel=TO_C1, settle=True)).rid
    assert_posted(fake)
    replies = await asyncio.gather(
        send(gateway, click(fake, rid, "gw_approve", user="U0ALICE", respond_id="alice")),
        send(gateway, click(fake, rid, "gw_approve", user="U0BOB", respond_id="bob")),
    )
    assert [r.status_code for r in replies] == [200, 200]
    winner = (await decided(gateway, "race"))["status"]["user_info"]["user_id"]
    loser = "bob" if winner == "U0ALICE" else "alice"
    [told] = await fake.wait_for_response(loser)
    assert told["response_type"] == "ephemeral"
    assert f"already approved by User {winner} in Slack at" in told["text"]  # users.info name
    await fake.wait_for("chat.update", 1)
    await eventually(lambda: outbox_idle(gateway))
    assert len(fake.calls_to("chat.update")) == 1


async def test_forged_or_stale_requests_change_nothing(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "forged", channel=TO_C1, settle=True)).rid
    assert_posted(fake)
    forged = await send(gateway, click(fake, rid, "gw_approve"), secret="not-the-secret")
    stale = await send(gateway, click(fake, rid, "gw_approve"), timestamp=int(time.time()) - 360)
    assert (forged.status_code, stale.status_code) == (401, 401)
    assert (await status(gateway, "forged"))["gateway_status"] == "pending"


async def test_a_decision_through_the_api_updates_the_message(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "via-api", channel=TO_C1, settle=True)
    assert_posted(fake)
    async with gateway.client() as client:
        reply = await client.post(
            "/agent/function_calls/via-api/respond",
            json={"approved": False, "comment": "no <!channel>"},
        )
        assert reply.status_code == 200
    [update] = await fake.wait_for("chat.update", 1)
    assert "Rejected by " in update.params["text"]
    assert "no &lt;!channel&gt;" in update.params["text"]


async def test_rate_limited_post_is_retried_after_retry_after(
    tmp_path: Path, request_factory: RequestFactory
) -> None:
    async with FakeSlack(retry_after=1) as fake:
        settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/rl.db")
        channel = slack_channel(fake, token="xoxb-ratelimited")
        async with running_gateway(settings, channels={"slack": channel}) as gateway:
            started = time.monotonic()
            await request_factory(gateway, "limited", channel=TO_C1, settle=True)
            assert_posted(fake)
            attempts = fake.calls_to("chat.postMessage")
            assert [a.failed for a in attempts] == [True, False]
            assert time.monotonic() - started >= 1  # waited out Retry-After


async def test_thread_reply_answers_a_question(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "q", contact=True, channel=TO_C1, settle=True)
    assert_posted(fake)
    thread = await parent_ts(gateway, "q", "contact_requests")
    assert (await post_event(gateway, reply(thread, "eu-west-1, please"))).status_code == 200
    answered = await decided(gateway, "q", "contact_requests")
    assert answered["status"]["response"] == "eu-west-1, please"
    assert answered["status"]["user_info"]["user_id"] == "U0ALICE"
    [note] = [c for c in await fake.wait_for("chat.postMessage", 2) if c.params.get("thread_ts")]
    assert note.params["thread_ts"] == thread and "Answered by <@U0ALICE>" in note.params["text"]


@pytest.mark.parametrize(("text", "approved"), [("LGTM", True), ("No, not on prod", False)])
async def test_thread_reply_on_an_approval(
    gateway: RunningGateway,
    fake: FakeSlack,
    text: str,
    approved: bool,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "fc", channel=TO_C1, settle=True)
    assert_posted(fake)
    thread = await parent_ts(gateway, "fc")
    await post_event(gateway, reply(thread, text))
    result = await decided(gateway, "fc")
    assert result["status"]["approved"] is approved
    if not approved:
        assert result["status"]["comment"] == "No, not on prod"
    [note] = await fake.wait_for("chat.postEphemeral", 1)  # the person is told how it was read
    expected = "an approval" if approved else "a rejection"
    assert note.params["text"].startswith(f"We read your reply as {expected}")


async def test_a_retried_event_decides_once_and_stays_quiet(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "retried", channel=TO_C1, settle=True)
    assert_posted(fake)
    thread = await parent_ts(gateway, "retried")
    await post_event(gateway, reply(thread, "approve"))
    await decided(gateway, "retried")
    assert (await post_event(gateway, reply(thread, "approve"), retry=1)).status_code == 200
    [note] = await fake.wait_for("chat.postEphemeral", 1)  # the first copy's reading note
    assert note.params["text"] == 'We read your reply as an approval ("approve").'
    await eventually(lambda: outbox_idle(gateway))
    async with gateway.client() as client:
        trail = (await client.get(f"{gateway.base_url}/gateway/v1/calls/retried/events")).json()
    assert [e["type"] for e in trail["events"]].count("decided") == 1
    assert len(fake.calls_to("chat.postEphemeral")) == 1  # the retry stays quiet


async def test_replies_elsewhere_are_ignored(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "other", channel=TO_C1, settle=True)
    assert_posted(fake)
    thread = await parent_ts(gateway, "other")
    elsewhere = reply(thread, "approve") | {"channel": "C999"}
    top_level = reply(thread, "approve") | {"thread_ts": None}
    from_a_bot = reply(thread, "approve") | {"bot_id": "B1"}
    for event in (elsewhere, top_level, from_a_bot):
        assert (await post_event(gateway, event)).status_code == 200
    async with gateway.client() as client:
        answer = await client.get("/function_calls/other", params={"wait": 0.5})
    assert answer.json()["gateway_status"] == "pending"


@pytest.mark.parametrize(
    "text", ["LGTM\nBlocked on the migration", "Approve\npas en prod", "ok\u061f", ""]
)
async def test_an_unclear_thread_reply_decides_nothing_and_asks_again_in_the_thread(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory, text: str
) -> None:
    await request_factory(gateway, "unclear", channel=TO_C1, settle=True)
    assert_posted(fake)
    thread = await parent_ts(gateway, "unclear")
    assert (await post_event(gateway, reply(thread, text))).status_code == 200
    [note] = await fake.wait_for("chat.postEphemeral", 1)
    assert note.params["thread_ts"] == thread and note.params["user"] == "U0ALICE"
    assert note.params["text"].startswith("I couldn't read that as a clear yes or no (")
    assert "reply APPROVE, or REJECT followed by your reason" in note.params["text"]
    async with gateway.client() as client:
        pending = await client.get("/function_calls/unclear")
    assert pending.json()["status"].get("approved") is None
    trail = (await events(gateway, "unclear"))["events"]
    [kept] = [e["detail"] for e in trail if e["type"] == "unclear_reply"]
    assert (kept["text"], kept["by"]["user_id"]) == (text, "U0ALICE")
    # A clear answer afterwards still decides.
    await post_event(gateway, reply(thread, "Approved"))
    assert (await decided(gateway, "unclear"))["status"]["approved"] is True


async def test_a_button_posted_before_the_shared_ids_still_decides(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    """Messages posted by an earlier version carry action_id gw_approve and the rid."""
    rid = (await request_factory(gateway, "legacy", channel=TO_C1, settle=True)).rid
    payload = click(fake, rid, "gw_approve")
    payload["actions"][0] |= {"action_id": "gw_approve", "value": rid}
    assert (await send(gateway, payload)).status_code == 200
    assert (await decided(gateway, "legacy"))["status"]["approved"] is True
