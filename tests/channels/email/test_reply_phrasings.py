"""Approval replies as people write them, end to end: delivered by LMTP into a real Dovecot,
read by the gateway's IMAP watcher, decided (or, when unclear, not), and answered by email in
the reply's thread with how each was read. The full list of phrasings is the unit corpus
(tests/data/replies/corpus.toml)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from email import message_from_bytes, policy
from pathlib import Path

import pytest

from tests.channels.email.helpers import (
    ALICE,
    decided,
    email_gateway,
    email_settings,
    reply,
    sent_for,
    to_alice,
)
from tests.factories import RequestFactory
from tests.helpers import events
from tests.services.dovecot import ThrowawayDovecot
from tests.services.inprocess import RunningGateway
from tests.services.smtp_sink import SmtpSink, SunkMessage

GMAIL_QUOTE = (
    "On Sun, Nov 22, 2026 at 10:00 AM Approvals <approvals@example.test> wrote:\n"
    "> Agent r wants to call drop_table with:\n> Reply APPROVE, or REJECT followed by a reason.\n"
)
OUTLOOK_HEADERS = (
    "From: Approvals <approvals@example.test>\n"
    "Sent: Sunday, November 22, 2026 10:00 AM\n"
    "To: Alice <alice@example.org>\n"
    "Subject: Approval needed: r wants to call drop_table\n\n"
    "Agent r wants to call drop_table with:\n"
    "Reply APPROVE, or REJECT followed by your reason.\n"
)


@dataclass(frozen=True)
class Case:
    body: str
    approved: bool
    comment: str | None
    read_as: str  # the line of the confirmation that says how the reply was read


CASES = {
    "please-go-ahead": Case(
        f"Yes please, go ahead.\n\n{GMAIL_QUOTE}",
        True,
        None,
        'We read your reply as an approval ("Yes please, go ahead.").',
    ),
    "outlook-signature": Case(
        "Sure - approved.\n\n-- \nAlice Smith\nVP Engineering\n\n"
        f"-----Original Message-----\n{OUTLOOK_HEADERS}",
        True,
        None,
        'We read your reply as an approval ("Sure - approved.").',
    ),
    "iphone-emoji": Case(
        "👍🏽\n\nSent from my iPhone\n\n" + GMAIL_QUOTE,
        True,
        None,
        'We read your reply as an approval ("👍🏽").',
    ),
    "outlook-signature-and-headers": Case(
        # The sender's own signature block (no "-- ") and Outlook's header block are cut.
        "Yes, approved.\n\nAlice Smith\nDirector of Platform\nAcme Corp\nT: +1 555 0100\n\n"
        f"________________________________\n{OUTLOOK_HEADERS}",
        True,
        None,
        'We read your reply as an approval ("Yes, approved.").',
    ),
    "plain-no": Case(
        f"No - wrong account.\n\n{GMAIL_QUOTE}",
        False,
        "wrong account.",  # the reason, after the word that rejects
        'We read your reply as a rejection ("No - wrong account.").',
    ),
}
UNCLEAR = {
    "blocked": "LGTM\nBlocked on the migration",
    "outlook-but": "Yes, but not before the backup finishes.\n\nAlice Smith\nVP Engineering\n\n"
    f"________________________________\n{OUTLOOK_HEADERS}",
    "question": "approved? no way\n\nSent from my iPhone",
    "beach": "Approve\nsent from the beach, do not run before I'm back",
}


@pytest.fixture
async def gateway(
    tmp_path: Path, smtp_sink: SmtpSink, dovecot: ThrowawayDovecot
) -> AsyncIterator[RunningGateway]:
    async with email_gateway(tmp_path, email_settings(smtp_sink, dovecot)) as running:
        yield running


async def answer_to(sink: SmtpSink, message_id: str) -> SunkMessage:
    """The gateway's threaded answer to the reply `message_id` (waits for it to arrive)."""
    while True:
        seen = len(sink.messages)
        found = [m for m in sink.messages[:seen] if m.message["In-Reply-To"] == message_id]
        if found:
            return found[0]
        await sink.wait_for_messages(seen + 1)  # TimeoutError if no other message comes


def text_of(sunk: SunkMessage) -> str:
    part = sunk.message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content())


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_reply_is_read_and_the_confirmation_says_how(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
    name: str,
) -> None:
    case = CASES[name]
    await request_factory(gateway, name, channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, name)
    raw = reply(sunk.message, case.body, sender=f"Alice Smith <{ALICE}>")  # as Outlook sends
    dovecot.deliver(raw, str(sunk.message["Reply-To"]))

    result = await decided(gateway, name)
    assert (result["approved"], result["comment"]) == (case.approved, case.comment)
    assert result["user_info"]["email"] == ALICE

    reply_id = str(message_from_bytes(raw, policy=policy.default)["Message-ID"])
    confirmation = await answer_to(smtp_sink, reply_id)
    assert confirmation.rcpt_tos == [ALICE]
    lines = text_of(confirmation).splitlines()
    assert lines[0] == case.read_as
    outcome = "approved" if case.approved else "rejected"
    assert lines[1].startswith(f"Recorded: {outcome} by you at ")


@pytest.mark.parametrize("name", sorted(UNCLEAR))
async def test_an_unclear_reply_decides_nothing_and_asks_again_in_the_thread(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
    name: str,
) -> None:
    await request_factory(gateway, name, channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, name)
    raw = reply(sunk.message, UNCLEAR[name])
    dovecot.deliver(raw, str(sunk.message["Reply-To"]))

    reply_id = str(message_from_bytes(raw, policy=policy.default)["Message-ID"])
    answer = await answer_to(smtp_sink, reply_id)  # threaded: In-Reply-To is the reply
    assert answer.rcpt_tos == [ALICE]
    said = text_of(answer)
    assert said.startswith("I couldn't read that as a clear yes or no (")
    assert "reply APPROVE, or REJECT followed by your reason" in said
    async with gateway.client() as client:
        found = await client.get(f"/function_calls/{name}")
    assert found.json()["status"].get("approved") is None  # still pending
    kept = [e for e in (await events(gateway, name))["events"] if e["type"] == "unclear_reply"]
    assert len(kept) == 1 and kept[0]["detail"]["by"]["email"] == ALICE
    assert kept[0]["detail"]["text"].startswith(UNCLEAR[name].split("\n")[0])
