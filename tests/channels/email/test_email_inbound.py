"""Replies read from a real Dovecot over IMAP IDLE, delivered by LMTP as a mail server would."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from channels.email.channel import EmailChannel
from channels.email.imap import Watcher
from gateway.store import email as email_store
from tests.channels.email.helpers import (
    ALICE,
    BOB,
    answers_sent,
    decided,
    email_gateway,
    email_settings,
    reply,
    sent_for,
    status,
    to_alice,
)
from tests.factories import RequestFactory
from tests.helpers import events, eventually
from tests.services.dovecot import ThrowawayDovecot
from tests.services.inprocess import RunningGateway
from tests.services.smtp_sink import SmtpSink

QUOTES = {
    "gmail": (
        "On Sun, Nov 22, 2026 at 10:00 AM Approvals <approvals@example.test> wrote:\n"
        "> Agent agent-7 wants to call drop_table with:\n> Reply APPROVE, or REJECT\n"
    ),
    "outlook": (
        "________________________________\nFrom: Approvals <approvals@example.test>\n"
        "Sent: Sunday, November 22, 2026 10:00 AM\nTo: Alice <alice@example.org>\n"
        "Subject: Approval needed\n\nAgent agent-7 wants to call drop_table with:\n"
        "Reply APPROVE, or REJECT followed by your reason.\n"
    ),
    "german": (
        "Am 22.11.2026 um 10:00 schrieb Approvals <approvals@example.test>:\n"
        "> Agent agent-7 wants to call drop_table with:\n> Reply APPROVE, or REJECT\n"
    ),
}


@pytest.fixture
async def gateway(
    tmp_path: Path, smtp_sink: SmtpSink, dovecot: ThrowawayDovecot
) -> AsyncIterator[RunningGateway]:
    async with email_gateway(tmp_path, email_settings(smtp_sink, dovecot)) as running:
        yield running


@pytest.mark.parametrize("style", sorted(QUOTES))
async def test_an_approve_reply_decides_whatever_the_quoting_style(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    style: str,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, f"approve-{style}", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, f"approve-{style}")
    answer = reply(sunk.message, f"Approve\n\n{QUOTES[style]}")
    dovecot.deliver(answer, str(sunk.message["Reply-To"]))
    result = await decided(gateway, f"approve-{style}")
    assert result["approved"] is True
    assert result["user_info"]["channel"] == "email"
    assert result["user_info"]["email"] == ALICE
    confirmation = (await smtp_sink.wait_for_messages(2))[-1]
    assert confirmation.rcpt_tos == [ALICE]
    assert "Recorded: approved by you" in confirmation.message.get_content()
    assert confirmation.message["In-Reply-To"] is not None


async def test_a_reject_reply_gives_its_reason(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "reject-1", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, "reject-1")
    body = f"Reject: the users table is still in use\n\n{QUOTES['gmail']}"
    dovecot.deliver(reply(sunk.message, body), str(sunk.message["Reply-To"]))
    result = await decided(gateway, "reject-1")
    assert result["approved"] is False
    assert result["comment"] == "the users table is still in use"


async def test_a_reply_naming_a_reject_option(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    options = [
        {"name": "wrong_table", "title": "Wrong table", "description": "d"},
        {"name": "later", "title": "Later", "description": "d", "prompt_fill": "not now"},
    ]
    await request_factory(
        gateway, "option-1", channel=to_alice(), reject_options=options, settle=True
    )
    (sunk,) = sent_for(smtp_sink, "option-1")
    dovecot.deliver(reply(sunk.message, "later\n"), str(sunk.message["Reply-To"]))
    result = await decided(gateway, "option-1")
    assert (result["approved"], result["reject_option_name"]) == (False, "later")
    assert result["comment"] == "not now"


async def test_a_human_contact_is_answered_by_the_reply_text(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "ask-1", channel=to_alice(), contact=True, settle=True)
    (sunk,) = sent_for(smtp_sink, "ask-1")
    body = f"eu-west-1, and keep\nthe old one for a week.\n\n{QUOTES['german']}"
    dovecot.deliver(reply(sunk.message, body), str(sunk.message["Reply-To"]))
    result = await decided(gateway, "ask-1", contact=True)
    assert result["response"] == "eu-west-1, and keep\nthe old one for a week."


async def test_a_reply_from_another_address_decides_nothing(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "other-1", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, "other-1")
    answer = reply(sunk.message, "Approve", sender=f"Bob <{BOB}>")
    dovecot.deliver(answer, str(sunk.message["Reply-To"]))
    refusal = (await smtp_sink.wait_for_messages(2))[-1]
    assert refusal.rcpt_tos == [BOB]
    text = refusal.message.get_content()
    assert "Nothing was changed" in text and "not one of the people" in text
    assert (await status(gateway, "other-1"))["approved"] is None


async def test_a_from_header_with_two_addresses_decides_nothing(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "two-1", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, "two-1")
    for sender in (f"{ALICE}, attacker@evil.test", f'"{ALICE}" <attacker@evil.test>'):
        dovecot.deliver(
            reply(sunk.message, "Approve", sender=sender), str(sunk.message["Reply-To"])
        )

    async def both_ignored() -> bool:
        audit = (await events(gateway, "two-1"))["events"]
        return [e["type"] for e in audit].count("email_reply_ignored") == 2

    await eventually(both_ignored)
    await answers_sent(gateway)
    assert (await status(gateway, "two-1"))["approved"] is None
    assert len(smtp_sink.messages) == 1  # nobody was answered: the sender is unknown


async def test_an_auto_reply_is_ignored_and_not_answered(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "ooo-1", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, "ooo-1")
    auto = reply(
        sunk.message,
        "I am out of the office until Monday.",
        headers={"Auto-Submitted": "auto-replied"},
    )
    dovecot.deliver(auto, str(sunk.message["Reply-To"]))
    # A person's approval after it still works: the watcher read past the auto-reply.
    dovecot.deliver(reply(sunk.message, "approve"), str(sunk.message["Reply-To"]))
    assert (await decided(gateway, "ooo-1"))["approved"] is True
    await answers_sent(gateway)
    answers = smtp_sink.messages  # the request, and the approval's confirmation only
    assert len(answers) == 2 and "Recorded" in answers[-1].message.get_content()


async def test_the_same_reply_delivered_twice_decides_once(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "twice-1", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, "twice-1")
    answer = reply(sunk.message, "Approve")
    dovecot.deliver(answer, str(sunk.message["Reply-To"]))
    dovecot.deliver(answer, str(sunk.message["Reply-To"]))
    assert (await decided(gateway, "twice-1"))["approved"] is True

    async def both_copies_read() -> bool:
        read = await gateway.core.db.read(email_store.checkpoint, "INBOX")
        return read is not None and read[1] >= 2  # the mailbox holds just these two

    await eventually(both_copies_read)
    await answers_sent(gateway)
    audit = [e["type"] for e in (await events(gateway, "twice-1"))["events"]]
    assert audit.count("decided") == 1
    assert len(smtp_sink.messages) == 2  # the request and one confirmation


async def test_a_dovecot_restart_during_idle_loses_no_reply(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "restart-1", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, "restart-1")
    channel = gateway.core.channels["email"]
    assert isinstance(channel, EmailChannel) and channel.watcher is not None
    watcher = channel.watcher
    assert watcher.connected.is_set()
    dovecot.stop()
    await eventually(_disconnected(watcher))
    dovecot.start()
    # Delivered while the watcher may still be backing off: the UID search finds it.
    dovecot.deliver(reply(sunk.message, "approve"), str(sunk.message["Reply-To"]))
    assert (await decided(gateway, "restart-1"))["approved"] is True


def _disconnected(watcher: Watcher) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return not watcher.connected.is_set()

    return check
