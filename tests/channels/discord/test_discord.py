"""Discord end to end: the gateway's real discord.py bot, logged in to a fake Discord (REST
and gateway websocket) through DISCORD_API_URL and DISCORD_GATEWAY_URL; clicks and modal
submissions are INTERACTION_CREATE dispatches, answers are the recorded callbacks."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from channels.discord import interactions
from gateway.errors import DeliveryError
from gateway.runtime.supervisor import Supervisor
from gateway.seam.connections import Link
from gateway.seam.targets import Target
from gateway.settings import Settings
from tests.channels.discord.helpers import (
    ALICE,
    BOB,
    CHANNEL,
    CHANNEL_MESSAGE,
    DEFERRED_UPDATE,
    EPHEMERAL,
    FAST,
    MALLORY,
    MODAL,
    TEAM_CHANNEL,
    TO_CHANNEL,
    UPDATE_MESSAGE,
    custom_ids,
    discord_channel,
    gateway_with_bot,
    get,
    outcome_field,
    posted_message,
)
from tests.factories import RequestFactory
from tests.fakes.discord import FakeDiscord
from tests.helpers import detached, events, eventually, outbox_idle
from tests.services.inprocess import RunningGateway
from tests.unit.views import request_view


async def test_posts_an_embed_with_buttons_and_no_pings(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    kwargs = {"name": "users", "note": "@everyone look"}
    made = await request_factory(
        gateway, "post-1", channel=TO_CHANNEL, run_id="r1", kwargs=kwargs, settle=True
    )
    rid, message = made.rid, posted_message(fake, "post-1")
    assert message["channel_id"] == CHANNEL
    assert custom_ids(message) == [
        f"gw:approve:{rid}",
        f"gw:edit:{rid}",
        f"gw:reject:{rid}",
        f"gw:grant:{rid}",
    ]
    embed = message["embeds"][0]
    assert "drop\\_table" in embed["title"] and "r1" in embed["title"]
    assert [f["name"] for f in embed["fields"]] == ["name", "note"]
    post = await fake.wait_for_call(lambda c: c.method == "POST" and c.path.endswith("/messages"))
    assert post.json_body["allowed_mentions"] == {"parse": []}
    assert post.json_body["enforce_nonce"] is True and len(post.json_body["nonce"]) <= 25
    assert "@\u200beveryone" in json.dumps(embed["fields"], ensure_ascii=False)


async def test_approve_updates_the_message_in_the_click_response(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "approve-1", channel=TO_CHANNEL, settle=True)).rid
    message = posted_message(fake, "approve-1")
    clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=ALICE)
    callback = await fake.wait_for_callback(clicked)
    assert callback["type"] == UPDATE_MESSAGE
    assert callback["data"]["components"] == []
    assert f"Approved by <@{ALICE}>" in outcome_field(callback["data"])
    answer = await get(gateway, "approve-1")
    assert answer["status"]["approved"] is True
    assert answer["status"]["user_info"]["channel"] == "discord"
    assert answer["status"]["user_info"]["user_id"] == ALICE
    # The outbox also edits the message through REST (idempotent), with no buttons left.
    await eventually(lambda: outbox_idle(gateway))
    assert fake.messages[message["id"]]["components"] == []


async def test_reject_opens_a_modal_and_the_reason_is_the_comment(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "reject-1", channel=TO_CHANNEL, settle=True)).rid
    message = posted_message(fake, "reject-1")
    clicked = await fake.click(f"gw:reject:{rid}", message_id=message["id"], user_id=ALICE)
    modal = await fake.wait_for_callback(clicked)
    assert modal["type"] == MODAL
    assert modal["data"]["custom_id"] == f"gw:modal:reject:{rid}"
    assert (await get(gateway, "reject-1"))["status"]["approved"] is None  # nothing yet
    submitted = await fake.submit_modal(
        modal["data"]["custom_id"],
        {"text": "  not on a Friday  "},
        user_id=ALICE,
        message_id=message["id"],
    )
    callback = await fake.wait_for_callback(submitted)
    assert callback["type"] == UPDATE_MESSAGE and callback["data"]["components"] == []
    status = (await get(gateway, "reject-1"))["status"]
    assert status["approved"] is False
    assert status["comment"] == "not on a Friday"


async def test_a_reject_option_decides_with_its_prompt_fill(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    options = [
        {
            "name": "wrong_table",
            "title": "Wrong table",
            "description": "d",
            "prompt_fill": "use staging",
        },
        {
            "name": "later",
            "title": "Later",
            "description": "d",
            "prompt_fill": "after 5pm",
            "interactive": True,
        },
    ]
    made = await request_factory(
        gateway, "option-1", channel=TO_CHANNEL, reject_options=options, settle=True
    )
    rid = made.rid
    message = posted_message(fake, "option-1")
    assert custom_ids(message)[3:5] == [f"gw:option:0:{rid}", f"gw:option:1:{rid}"]
    clicked = await fake.click(f"gw:option:0:{rid}", message_id=message["id"], user_id=BOB)
    assert (await fake.wait_for_callback(clicked))["type"] == UPDATE_MESSAGE
    status = (await get(gateway, "option-1"))["status"]
    assert status["approved"] is False
    assert status["reject_option_name"] == "wrong_table"
    assert status["comment"] == "use staging"


async def test_an_interactive_option_opens_a_prefilled_modal(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    options = [
        {
            "name": "later",
            "title": "Later",
            "description": "d",
            "prompt_fill": "after 5pm",
            "interactive": True,
        }
    ]
    made = await request_factory(
        gateway, "option-2", channel=TO_CHANNEL, reject_options=options, settle=True
    )
    rid = made.rid
    message = posted_message(fake, "option-2")
    clicked = await fake.click(f"gw:option:0:{rid}", message_id=message["id"], user_id=BOB)
    modal = await fake.wait_for_callback(clicked)
    assert modal["type"] == MODAL
    text_input = modal["data"]["components"][0]["components"][0]
    assert text_input["value"] == "after 5pm"
    submitted = await fake.submit_modal(
        modal["data"]["custom_id"], {"text": "after 6pm"}, user_id=BOB, message_id=message["id"]
    )
    await fake.wait_for_callback(submitted)
    status = (await get(gateway, "option-2"))["status"]
    assert (status["reject_option_name"], status["comment"]) == ("later", "after 6pm")


async def test_a_question_is_answered_in_a_modal(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    options = [{"name": "eu", "title": "Europe", "description": "d"}]
    made = await request_factory(
        gateway,
        "ask-1",
        channel=TO_CHANNEL,
        contact=True,
        response_options=options,
        settle=True,
    )
    rid = made.rid
    message = posted_message(fake, "ask-1")
    assert custom_ids(message) == [f"gw:answer:{rid}", f"gw:option:0:{rid}"]
    clicked = await fake.click(f"gw:answer:{rid}", message_id=message["id"], user_id=ALICE)
    modal = await fake.wait_for_callback(clicked)
    assert modal["type"] == MODAL
    submitted = await fake.submit_modal(
        modal["data"]["custom_id"],
        {"text": "us-east-1, please"},
        user_id=ALICE,
        message_id=message["id"],
    )
    callback = await fake.wait_for_callback(submitted)
    assert "us-east-1, please" in outcome_field(callback["data"])
    status = (await get(gateway, "ask-1", contact=True))["status"]
    assert status["response"] == "us-east-1, please"
    assert status["user_info"]["user_id"] == ALICE


async def test_someone_not_allowed_is_told_privately_and_nothing_changes(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    route = {"discord": {"channel_id": CHANNEL, "allowed_responder_ids": [ALICE]}}
    rid = (await request_factory(gateway, "allowed-1", channel=route, settle=True)).rid
    message = posted_message(fake, "allowed-1")
    for verb in ("approve", "reject"):
        clicked = await fake.click(f"gw:{verb}:{rid}", message_id=message["id"], user_id=MALLORY)
        callback = await fake.wait_for_callback(clicked)
        assert callback["type"] == CHANNEL_MESSAGE  # not a modal, not an update
        assert callback["data"]["flags"] == EPHEMERAL
        assert "not allowed" in callback["data"]["content"]
    assert (await get(gateway, "allowed-1"))["status"]["approved"] is None
    assert fake.messages[message["id"]]["components"] != []


async def test_two_clicks_at_once_decide_once_and_the_late_one_is_told_who_won(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    options = [{"name": "no", "title": "No", "description": "d", "prompt_fill": "no"}]
    made = await request_factory(
        gateway, "race-1", channel=TO_CHANNEL, reject_options=options, settle=True
    )
    rid = made.rid
    message = posted_message(fake, "race-1")
    first, second = await asyncio.gather(
        fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=ALICE),
        fake.click(f"gw:option:0:{rid}", message_id=message["id"], user_id=BOB),
    )
    callbacks = [await fake.wait_for_callback(i) for i in (first, second)]
    assert sorted(c["type"] for c in callbacks) == [CHANNEL_MESSAGE, UPDATE_MESSAGE]
    late = next(c for c in callbacks if c["type"] == CHANNEL_MESSAGE)
    assert late["data"]["flags"] == EPHEMERAL and "already" in late["data"]["content"]
    assert (await _event_types(gateway, "race-1")).count("decided") == 1


async def posted_and_stopped(
    settings: Settings, fake: FakeDiscord, request_factory: RequestFactory, call_id: str
) -> tuple[str, dict[str, Any]]:
    """A request posted by a gateway that has stopped since: its rid and its message."""
    async with gateway_with_bot(settings, fake) as first:
        rid = (await request_factory(first, call_id, channel=TO_CHANNEL, settle=True)).rid
        return rid, posted_message(fake, call_id)


async def test_a_click_after_a_gateway_restart_still_lands(
    settings: Settings, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    rid, message = await posted_and_stopped(settings, fake, request_factory, "restart-1")
    async with gateway_with_bot(settings, fake) as second:
        # The new process takes up the session the first one left, as its next owner would.
        assert (fake.identify_count, fake.resume_count) == (1, 1)
        clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=BOB)
        assert (await fake.wait_for_callback(clicked))["type"] == UPDATE_MESSAGE
        assert (await get(second, "restart-1"))["status"]["approved"] is True


async def test_a_click_made_while_the_gateway_was_down_is_handled_once_it_is_back(
    settings: Settings, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    rid, message = await posted_and_stopped(settings, fake, request_factory, "down-1")
    # Nobody is connected: Discord keeps the click for the session, which was left resumable.
    clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=BOB)
    assert not fake.callbacks
    fake.answer_within = 60  # not the subject here: a loaded machine may take 3 s to restart
    async with gateway_with_bot(settings, fake) as second:
        assert (await fake.wait_for_callback(clicked))["type"] == UPDATE_MESSAGE
        assert (await get(second, "down-1"))["status"]["approved"] is True
        assert (fake.identify_count, fake.replays) == (1, [1])  # the click
    async with gateway_with_bot(settings, fake):  # handled up to there: not replayed again
        assert fake.replays == [1, 0]


async def test_a_click_replayed_too_late_to_answer_still_decides_and_the_post_is_edited(
    settings: Settings, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    rid, message = await posted_and_stopped(settings, fake, request_factory, "late-1")
    clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=BOB)
    fake.answer_within = 0  # by the replay, Discord has forgotten the interaction (10062)
    async with gateway_with_bot(settings, fake) as second:

        async def decided_and_edited() -> bool:
            edits = fake.edits_of(str(message["id"]))
            return bool(edits) and not edits[-1].get("components")

        await eventually(decided_and_edited, within=10)  # by the outbox, not the click
        assert (await get(second, "late-1"))["status"]["approved"] is True
        history = (await events(second, "late-1"))["events"]
        assert [e["type"] for e in history].count("decided") == 1
    assert not [c for c in fake.callbacks if c["interaction_id"] == clicked]


async def test_a_session_discord_no_longer_has_is_started_anew(
    settings: Settings, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    rid, message = await posted_and_stopped(settings, fake, request_factory, "gone-1")
    fake.forget_session()
    async with gateway_with_bot(settings, fake) as second:
        assert (fake.identify_count, fake.resume_count) == (2, 0)  # INVALID_SESSION, then READY
        clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=BOB)
        assert (await fake.wait_for_callback(clicked))["type"] == UPDATE_MESSAGE
        assert (await get(second, "gone-1"))["status"]["approved"] is True


async def test_a_modal_submitted_after_a_restart_is_still_handled(
    settings: Settings, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    async with gateway_with_bot(settings, fake) as first:
        rid = (await request_factory(first, "restart-2", channel=TO_CHANNEL, settle=True)).rid
        message = posted_message(fake, "restart-2")
        clicked = await fake.click(f"gw:reject:{rid}", message_id=message["id"], user_id=ALICE)
        modal = await fake.wait_for_callback(clicked)
    async with gateway_with_bot(settings, fake) as second:
        submitted = await fake.submit_modal(
            modal["data"]["custom_id"],
            {"text": "wrong database"},
            user_id=ALICE,
            message_id=message["id"],
        )
        assert (await fake.wait_for_callback(submitted))["type"] == UPDATE_MESSAGE
        status = (await get(second, "restart-2"))["status"]
        assert (status["approved"], status["comment"]) == (False, "wrong database")


async def test_a_click_while_the_websocket_is_down_is_not_lost(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "drop-1", channel=TO_CHANNEL, settle=True)).rid
    message = posted_message(fake, "drop-1")
    async with fake.disconnected():
        clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=ALICE)
    callback = await fake.wait_for_callback(clicked)
    assert callback["type"] == UPDATE_MESSAGE
    assert fake.resume_count == 1
    assert (await get(gateway, "drop-1"))["status"]["approved"] is True


async def test_a_decision_through_the_api_edits_the_discord_message(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "api-1", channel=TO_CHANNEL, settle=True)
    message = posted_message(fake, "api-1")
    async with gateway.client() as client:
        body = {"approved": False, "comment": "not today"}
        response = await client.post("/agent/function_calls/api-1/respond", json=body)
        assert response.status_code == 200, response.text
    await eventually(lambda: outbox_idle(gateway))
    edited = fake.messages[message["id"]]
    assert edited["components"] == []
    assert "Rejected by" in outcome_field(edited) and "not today" in outcome_field(edited)


async def test_a_rest_429_is_waited_out_and_the_message_sent_once(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    fake.fail_next("POST", rf"/channels/{CHANNEL}/messages", status=429, retry_after=0.1)
    await request_factory(gateway, "limit-1", channel=TO_CHANNEL, settle=True)
    posted_message(fake, "limit-1")  # exactly one message, despite the 429
    posts = [c for c in fake.calls if c.method == "POST" and c.path.endswith("/messages")]
    assert [c.status for c in posts] == [429, 200]


async def test_a_long_rate_limit_goes_back_to_the_outbox(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    # Over the bot's 30 s patience: discord.py raises, the outbox retries after Retry-After.
    fake.fail_next("POST", rf"/channels/{CHANNEL}/messages", status=429, retry_after=31)
    await request_factory(gateway, "limit-2", channel=TO_CHANNEL)
    await eventually(lambda: first_delivery_retrying(gateway, "limit-2"))
    assert "delivery_failed" not in await _event_types(gateway, "limit-2")
    jobs = await _deliveries(gateway, "limit-2")
    assert jobs[0]["status"] == "retrying" and "rate limit" in jobs[0]["error"]


async def first_delivery_retrying(gateway: RunningGateway, call_id: str) -> bool:
    deliveries = await _deliveries(gateway, call_id)
    return bool(deliveries) and deliveries[0]["status"] == "retrying"


async def _deliveries(gateway: RunningGateway, call_id: str) -> list[dict[str, Any]]:
    deliveries: list[dict[str, Any]] = (await events(gateway, call_id))["deliveries"]
    return deliveries


async def _event_types(gateway: RunningGateway, call_id: str) -> list[str]:
    return [e["type"] for e in (await events(gateway, call_id))["events"]]


async def test_a_refused_dm_fails_visibly_and_falls_back_to_the_team_channel(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    fake.dm_blocked.add(ALICE)
    rid = (await request_factory(gateway, "dm-1", channel={"person": "alice"}, settle=True)).rid
    message = posted_message(fake, "dm-1")
    deliveries = await _deliveries(gateway, "dm-1")
    assert [(d["channel"], d["status"]) for d in deliveries] == [
        ("discord", "failed"),
        ("discord", "sent"),
    ]
    assert "50007" in deliveries[0]["error"]
    assert message["channel_id"] == TEAM_CHANNEL
    assert ALICE in message["content"]
    post = next(c for c in fake.calls if c.path == f"/channels/{TEAM_CHANNEL}/messages")
    assert post.json_body["allowed_mentions"] == {"parse": [], "users": [int(ALICE)]}
    assert "delivery_fallback" in await _event_types(gateway, "dm-1")
    # Still only alice may answer it there.
    clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=BOB)
    assert "not allowed" in (await fake.wait_for_callback(clicked))["data"]["content"]
    clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=ALICE)
    assert (await fake.wait_for_callback(clicked))["type"] == UPDATE_MESSAGE


async def test_a_dm_that_works_goes_to_the_person(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "dm-2", channel={"discord": {"user_id": BOB}}, settle=True)
    message = posted_message(fake, "dm-2")
    assert message["channel_id"] != TEAM_CHANNEL
    assert [d["status"] for d in await _deliveries(gateway, "dm-2")] == ["sent"]


async def test_a_slow_store_defers_then_edits_the_original(
    gateway: RunningGateway,
    fake: FakeDiscord,
    monkeypatch: pytest.MonkeyPatch,
    request_factory: RequestFactory,
) -> None:
    monkeypatch.setattr(interactions, "DEFER_AFTER_SECONDS", 0)  # every decision is "slow"
    rid = (await request_factory(gateway, "slow-1", channel=TO_CHANNEL, settle=True)).rid
    message = posted_message(fake, "slow-1")
    clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=ALICE)
    assert (await fake.wait_for_callback(clicked))["type"] == DEFERRED_UPDATE

    async def edited() -> bool:
        return bool(fake.messages[message["id"]]["components"] == [])

    await eventually(edited)
    assert (await get(gateway, "slow-1"))["status"]["approved"] is True


async def test_check_logs_in_and_the_invite_url_names_the_application(fake: FakeDiscord) -> None:
    channel = discord_channel(fake)(detached("discord"))
    try:
        assert FakeDiscord.BOT_USER_ID in await channel.check()
        url = await channel.invite_url()
    finally:
        await channel.aclose()
    assert f"client_id={FakeDiscord.APPLICATION_ID}" in url and "scope=bot" in url
    assert "permissions=" in url


async def test_check_with_a_bad_token_fails_and_says_so(fake: FakeDiscord) -> None:
    channel = discord_channel(fake, token="wrong-token")(detached("discord"))
    with pytest.raises(DeliveryError, match="refused the bot token"):
        await channel.check()
    await channel.aclose()


async def test_a_send_repeated_after_a_crash_posts_once(fake: FakeDiscord) -> None:
    # The outbox may run a send again when the process died before recording it.
    channel = discord_channel(fake)(detached("discord"))
    view = request_view(rid="rid-nonce")
    target = Target(channel="discord", address={"channel_id": CHANNEL}, via="test")
    try:
        first = await channel.send(view, target)
        second = await channel.send(view, target)
    finally:
        await channel.aclose()
    assert first.ref == second.ref
    assert len(fake.messages_in(CHANNEL)) == 1


async def test_a_replica_standing_by_sends_and_edits_without_the_websocket(
    fake: FakeDiscord,
) -> None:
    # Another replica owns the websocket; this one's outbox worker still delivers at once.
    channel = discord_channel(fake)(detached("discord"))
    channel.connection = Supervisor("discord", _never_run, connect_timeout=5, policy=FAST)
    channel.connection.hold("here:1")
    await channel.connection.stand_by("there:2")
    view = request_view(rid="rid-standby")
    target = Target(channel="discord", address={"channel_id": CHANNEL}, via="test")
    try:
        sent = await channel.send(view, target)
        await channel.update(request_view(rid="rid-standby", status="approved"), target, sent.ref)
    finally:
        await channel.aclose()
    assert [m["id"] for m in fake.messages_in(CHANNEL)] == [sent.ref["message_id"]]
    assert len(fake.edits_of(sent.ref["message_id"])) == 1
    assert fake.identify_count == 0  # REST only: the owner's websocket is the only one


async def _never_run(_link: Link) -> None:
    raise AssertionError("a standby runs no websocket session")
