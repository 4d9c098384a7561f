"""Reminders: a reply in the request's thread to whoever has not answered, against the SMTP
sink; a reply to the reminder goes through `POST /email/inbound` like any other reply."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from channels.email import tokens
from channels.email.channel import KEY_PURPOSE, EmailChannel
from gateway.seam.sentences import reminder_text
from gateway.seam.targets import Target
from gateway.seam.views import Progress, RequestView
from gateway.store import requests as request_store
from tests.channels.email.helpers import (
    ALICE,
    BOB,
    email_gateway,
    email_settings,
    post_inbound,
    reply,
    sent_for,
    status,
    to_alice,
)
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway
from tests.services.smtp_sink import SmtpSink, SunkMessage

WITH_BOB = {"additional_recipients": [{"address": BOB, "field": "cc"}]}
EXPIRES = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)


async def remind(
    gw: RunningGateway, rid: str, mention: list[str], number: int = 1
) -> tuple[RequestView, str]:
    """Remind through the channel, as the core's reminder job does; returns the view it got
    (with a policy's progress and a deadline) and the Message-ID the request went out with."""
    view = await gw.context("email").answers.view(rid)
    assert view is not None
    view = replace(view, progress=Progress(approvals=1, needed=2), expires_at=EXPIRES)
    (delivery,) = await gw.core.db.read(request_store.list_deliveries, [rid])
    assert delivery.ref_json is not None
    ref = json.loads(delivery.ref_json)
    channel = gw.core.channels["email"]
    assert isinstance(channel, EmailChannel)
    target = Target.model_validate_json(delivery.target_json)
    await channel.remind(view, target, ref, mention, number=number)
    return view, str(ref["message_id"])


def text_of(sunk: SunkMessage) -> str:
    part = sunk.message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content())


def plain_reply(in_reply_to: str) -> bytes:
    """Alice's "approve", sent to the plain address: only the thread names the request."""
    headers = [
        f"From: Alice <{ALICE}>",
        "To: approvals@example.test",
        "Subject: Re: reminder",
        "Message-ID: <plain-reply@example.org>",
        f"In-Reply-To: {in_reply_to}",
        f"References: {in_reply_to}",
    ]
    return ("\r\n".join(headers) + "\r\n\r\napprove\r\n").encode()


async def test_a_reminder_threads_under_the_request_to_those_who_have_not_answered(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        rid = (await request_factory(gw, "rem-1", channel=to_alice(**WITH_BOB), settle=True)).rid
        copies = {sunk.rcpt_tos[0]: sunk for sunk in sent_for(smtp_sink, "rem-1")}
        view, _ = await remind(gw, rid, [BOB])
        key = gw.core.box.subkey(KEY_PURPOSE)
    reminder = sent_for(smtp_sink, "rem-1")[-1]
    first = copies[BOB]  # the reminder goes under Bob's own copy, with his own token
    assert reminder not in copies.values()
    assert reminder.rcpt_tos == [BOB] and reminder.message["To"] == BOB
    assert reminder.message["Cc"] is None
    message_id = str(first.message["Message-ID"])
    assert reminder.message["In-Reply-To"] == message_id
    assert reminder.message["References"] == message_id
    # On the wire as written, not as an RFC 2047 encoded word no client threads on.
    assert f"\r\nIn-Reply-To: {message_id}\r\n".encode() in reminder.raw
    assert f"\r\nReferences: {message_id}\r\n".encode() in reminder.raw
    assert reminder.message["Message-ID"] != message_id
    assert reminder.message["Subject"] == f"Re: {first.message['Subject']}"
    assert reminder.message["Reply-To"] == first.message["Reply-To"]
    reply_to = str(reminder.message["Reply-To"])
    assert tokens.rid_from_address(reply_to, "approvals@example.test", key, BOB) == rid
    assert tokens.rid_from_address(reply_to, "approvals@example.test", key, ALICE) is None
    text = text_of(reminder)
    assert text.startswith(reminder_text(view) + ".")
    assert "Reminder: this request is still waiting for a decision (1 of 2 approvals)" in text
    assert "it expires at 2030-01-02 03:04 UTC" in text
    assert "Reply APPROVE, or REJECT followed by your reason." in text


async def test_a_reminder_with_nobody_to_mention_goes_to_the_targets_address(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        rid = (await request_factory(gw, "rem-2", channel=to_alice(**WITH_BOB), settle=True)).rid
        await remind(gw, rid, [])
    reminder = sent_for(smtp_sink, "rem-2")[-1]
    assert reminder.rcpt_tos == [ALICE] and reminder.message["To"] == ALICE


async def test_a_question_reminder_says_how_to_answer_it(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    options = [{"name": "eu", "title": "Europe", "description": "Frankfurt"}]
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        made = await request_factory(
            gw, "rem-3", contact=True, channel=to_alice(), response_options=options, settle=True
        )
        await remind(gw, made.rid, [ALICE])
    (_, reminder) = sent_for(smtp_sink, "rem-3")
    text = text_of(reminder)
    assert "To answer, reply to this email with your answer." in text
    assert "  * eu (Europe): Frankfurt" in text
    assert "Reply APPROVE" not in text


async def test_a_reply_to_the_reminder_decides_its_request(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        await request_factory(gw, "other", channel=to_alice(**WITH_BOB), settle=True)
        rid = (await request_factory(gw, "rem-4", channel=to_alice(**WITH_BOB), settle=True)).rid
        await remind(gw, rid, [BOB])
        reminder = sent_for(smtp_sink, "rem-4")[-1]
        answer = reply(reminder.message, "reject: not today", sender=f"Bob <{BOB}>")
        outcome = await post_inbound(gw, answer)
        decided, untouched = await status(gw, "rem-4"), await status(gw, "other")
    assert outcome["result"] == "decided", outcome
    assert decided["approved"] is False and decided["comment"] == "not today"
    assert decided["user_info"]["email"] == BOB
    assert untouched["approved"] is None


async def test_a_reply_to_the_reminder_that_lost_its_token_is_found_by_its_thread(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        await request_factory(gw, "other", channel=to_alice(), settle=True)
        rid = (await request_factory(gw, "rem-5", channel=to_alice(), settle=True)).rid
        await remind(gw, rid, [ALICE])
        reminder = sent_for(smtp_sink, "rem-5")[-1]
        outcome = await post_inbound(gw, plain_reply(str(reminder.message["Message-ID"])))
        decided, untouched = await status(gw, "rem-5"), await status(gw, "other")
    assert outcome["result"] == "decided", outcome
    assert decided["approved"] is True and decided["user_info"]["email"] == ALICE
    assert untouched["approved"] is None


async def test_a_retried_reminder_keeps_its_message_id_and_the_next_one_has_its_own(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        rid = (await request_factory(gw, "rem-id", channel=to_alice(), settle=True)).rid
        await remind(gw, rid, [ALICE], number=1)
        await remind(gw, rid, [ALICE], number=1)  # the reminder job ran again
        await remind(gw, rid, [ALICE], number=2)
    _request, first, retried, second = sent_for(smtp_sink, "rem-id")
    assert first.message["Message-ID"] == retried.message["Message-ID"]
    assert second.message["Message-ID"] != first.message["Message-ID"]
