"""Teams end to end: the gateway posts Adaptive Cards through the Agents SDK's ConnectorClient
to a fake Bot Connector, and takes the clicks Teams would send (Action.Execute invokes signed
with the fake's key) at /teams/messages."""

from __future__ import annotations

from tests.channels.teams.helpers import (
    ALICE,
    BOB,
    CAROL,
    DANA,
    MALLORY,
    OPS,
    PAIR,
    TO_CAROL,
    TO_DANA,
    TO_OPS,
    actions,
    installed,
    invoke,
    only_post,
    post,
    status,
    texts,
    thread_reply,
)
from tests.factories import RequestFactory
from tests.fakes.teams import FakeTeams
from tests.helpers import eventually, outbox_idle
from tests.services.inprocess import RunningGateway


async def test_approve_decides_records_the_person_and_updates_the_card_without_buttons(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "approve-me", channel=TO_OPS, settle=True)
    card = only_post(fake)
    [attachment] = card.activity["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert "drop_table" in texts(card.card) and "users" in texts(card.card)

    answered = await post(gateway, fake, invoke(fake, card, "Approve", user=ALICE))
    assert answered.status_code == 200
    response = answered.json()
    assert response["statusCode"] == 200
    assert response["type"] == "application/vnd.microsoft.card.adaptive"
    assert "Approved by Alice" in texts(response["value"])
    assert not [a for a in actions(response["value"]) if a["type"] != "Action.OpenUrl"]

    approved = await status(gateway, "approve-me")
    assert approved["status"]["approved"] is True
    user_info = approved["status"]["user_info"]
    assert (user_info["channel"], user_info["user_id"]) == ("teams", ALICE)
    assert user_info["name"] == "Alice" and user_info["tenant_id"]
    await eventually(lambda: outbox_idle(gateway))
    [edit] = card.edits  # the card everyone sees, once
    assert "Approved by Alice" in texts(edit["attachments"][0]["content"])
    assert not [a for a in actions(edit["attachments"][0]["content"]) if "verb" in a]


async def test_reject_with_a_reason_makes_it_the_comment(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "reject-me", channel=TO_OPS, settle=True)
    card = only_post(fake)
    reason = {"reason": "not the users table"}
    answered = await post(gateway, fake, invoke(fake, card, "Reject", user=BOB, inputs=reason))
    assert "Rejected by Bob" in texts(answered.json()["value"])
    rejected = await status(gateway, "reject-me")
    assert rejected["status"]["approved"] is False
    assert rejected["status"]["comment"] == "not the users table"
    assert rejected["status"]["user_info"]["user_id"] == BOB


async def test_reject_options_plain_and_interactive(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    options = [
        {"name": "spam", "title": "Spam", "prompt_fill": "looks like spam"},
        {"name": "edit", "title": "Edit", "prompt_fill": "change it to", "interactive": True},
    ]
    await request_factory(gateway, "opt", reject_options=options, channel=TO_OPS, settle=True)
    await post(gateway, fake, invoke(fake, only_post(fake), "Spam"))
    spam = await status(gateway, "opt")
    assert spam["status"]["comment"] == "looks like spam"
    assert spam["status"]["reject_option_name"] == "spam"

    await request_factory(gateway, "opt-2", reject_options=options, channel=TO_OPS, settle=True)
    second = fake.posts_in(OPS)[1]
    [form] = [a for a in actions(second.card) if a["title"] == "Edit…"]  # a prefilled reason
    assert form["card"]["body"][0]["value"] == "change it to"
    typed = {"reason_1": "change it to eu-west"}
    await post(gateway, fake, invoke(fake, second, "Edit", inputs=typed))
    edited = await status(gateway, "opt-2")
    assert edited["status"]["comment"] == "change it to eu-west"
    assert edited["status"]["reject_option_name"] == "edit"


async def test_a_question_answered_in_text_on_the_card_and_by_option(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    options = [{"name": "eu", "title": "Europe"}]
    await request_factory(
        gateway, "ask", contact=True, response_options=options, channel=TO_OPS, settle=True
    )
    typed = {"answer": "eu-west-1, please"}
    await post(gateway, fake, invoke(fake, only_post(fake), "Send", inputs=typed))
    answered = await status(gateway, "ask", "contact_requests")
    assert answered["status"]["response"] == "eu-west-1, please"

    await request_factory(
        gateway, "ask-2", contact=True, response_options=options, channel=TO_OPS, settle=True
    )
    await post(gateway, fake, invoke(fake, fake.posts_in(OPS)[1], "Europe", user=BOB))
    picked = await status(gateway, "ask-2", "contact_requests")
    assert picked["status"]["response_option_name"] == "eu"


async def test_a_question_answered_by_a_reply_in_the_thread(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "ask-thread", contact=True, channel=TO_OPS, settle=True)
    card = only_post(fake)
    reply = thread_reply(fake, card, "us-east-2 &amp; then stop")
    assert (await post(gateway, fake, reply)).status_code == 200
    answered = await status(gateway, "ask-thread", "contact_requests")
    assert answered["status"]["response"] == "us-east-2 & then stop"
    assert answered["status"]["user_info"]["user_id"] == ALICE


async def test_a_reply_in_an_approvals_thread_is_read_and_the_person_told_how(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "by-reply", channel=TO_OPS, settle=True)
    card = only_post(fake)
    unclear = thread_reply(fake, card, "hmm, maybe after lunch", number=1)
    assert (await post(gateway, fake, unclear)).status_code == 200
    assert (await status(gateway, "by-reply"))["gateway_status"] == "pending"
    await post(gateway, fake, thread_reply(fake, card, "yes, go ahead", user=BOB, number=2))
    approved = await status(gateway, "by-reply")
    assert approved["status"]["approved"] is True
    assert approved["status"]["user_info"]["user_id"] == BOB
    [told_alice] = fake.replies_to(unclear["id"])  # in the thread, under her message
    [told_bob] = fake.replies_to(f"{card.activity_id}2")
    assert texts(told_alice.card).startswith("Alice: ")
    assert "as an approval" in texts(told_bob.card)


async def test_a_request_cannot_ping_the_channel_or_inject_markup(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    hostile = "<at>General</at> @channel @team **now** [docs](https://evil.example)"
    kwargs = {"note": hostile}
    await request_factory(gateway, "hostile", channel=TO_OPS, kwargs=kwargs, settle=True)
    posted = only_post(fake)
    assert "entities" not in posted.activity  # no mention of anyone, let alone the channel
    assert "entities" not in posted.card.get("msteams", {})
    shown = [
        inline["text"]
        for element in posted.card["body"]
        for inline in element.get("inlines") or []
        if inline["type"] == "TextRun"
    ]
    assert hostile in shown  # as typed, in a run that takes no markdown
    blocks = [e["text"] for e in posted.card["body"] if e["type"] == "TextBlock"]
    assert not [text for text in blocks if "<at>" in text or "**" in text]


async def test_a_person_not_allowed_is_told_and_nothing_changes(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "guarded", channel=TO_OPS, settle=True)
    answered = await post(gateway, fake, invoke(fake, only_post(fake), "Approve", user=MALLORY))
    assert answered.status_code == 200
    told = answered.json()
    assert told["type"] == "application/vnd.microsoft.activity.message"
    assert "not allowed" in told["value"]
    assert (await status(gateway, "guarded"))["gateway_status"] == "pending"
    await eventually(lambda: outbox_idle(gateway))
    assert only_post(fake).edits == []


async def test_a_late_click_is_told_who_decided(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "late", channel=TO_OPS, settle=True)
    card = only_post(fake)
    await post(gateway, fake, invoke(fake, card, "Approve", user=ALICE))
    late = await post(gateway, fake, invoke(fake, card, "Reject", user=BOB, inputs={"reason": "x"}))
    assert "already approved by Alice in Teams" in late.json()["value"]
    assert (await status(gateway, "late"))["status"]["approved"] is True


async def test_two_approvals_show_progress_then_the_decision(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "pair", channel={"team": "pair"}, settle=True)
    card = only_post(fake, PAIR)
    first = (await post(gateway, fake, invoke(fake, card, "Approve", user=ALICE))).json()
    assert "1 of 2 approvals: Alice (Teams)" in texts(first["value"])
    assert any(a.get("title") == "Approve" for a in actions(first["value"]))  # still open
    await eventually(lambda: outbox_idle(gateway))
    assert "1 of 2 approvals" in texts(card.card)  # everyone's copy says so too
    await post(gateway, fake, invoke(fake, card, "Approve", user=BOB))
    assert (await status(gateway, "pair"))["status"]["approved"] is True
    await eventually(lambda: outbox_idle(gateway))
    assert "Approved by Bob" in texts(card.card) and len(card.edits) == 2


async def test_a_person_gets_a_1_1_chat_once_the_app_is_installed_for_them(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    # Carol installed the app: Teams tells the gateway, which keeps her conversation.
    assert (await post(gateway, fake, installed(fake, CAROL))).status_code == 200
    await request_factory(gateway, "for-carol", channel=TO_CAROL, settle=True)
    chat = fake.personal_conversation(CAROL)
    card = only_post(fake, chat)
    assert fake.calls_to("POST", r"^v3/conversations$") == []  # the stored reference sufficed
    await post(gateway, fake, invoke(fake, card, "Approve", user=CAROL))
    assert (await status(gateway, "for-carol"))["status"]["user_info"]["user_id"] == CAROL


async def test_a_person_without_a_chat_gets_one_opened_or_a_clear_failure(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    fake.installed.add(CAROL)  # installed by an admin policy: Teams opens the chat on request
    await request_factory(gateway, "opened", channel=TO_CAROL, settle=True)
    await request_factory(gateway, "opened-2", channel=TO_CAROL, settle=True)
    assert len(fake.posts_in(fake.personal_conversation(CAROL))) == 2
    assert len(fake.calls_to("POST", r"^v3/conversations$")) == 1  # then kept

    await request_factory(gateway, "no-chat", channel=TO_DANA)  # Dana never installed it
    async with gateway.client() as client:

        async def failed_with_a_reason() -> bool:
            trail = (await client.get(f"{gateway.base_url}/gateway/v1/calls/no-chat/events")).json()
            [delivery] = trail["deliveries"]
            return "no 1:1 chat with" in str(delivery.get("error"))

        await eventually(failed_with_a_reason)
    assert fake.posts_in(fake.personal_conversation(DANA)) == []
