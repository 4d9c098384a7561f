"""Standing grants by email reply: "approve for 1h" approves and allows more calls like it,
end to end through the real SMTP sink and a real Dovecot (or `POST /email/inbound`, as an MTA
pipe posts). A grant the request does not offer, or for a duration it does not offer, is
refused and the person is told: nothing is decided and no grant exists."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from channels.email import compose
from channels.email.reading import intent_of
from gateway.lifecycle import Kind, Status
from gateway.policies import grants
from gateway.seam import RequestView
from gateway.seam.grants import GrantChoice, offered
from gateway.vocabulary import GrantScope
from tests.channels.email.helpers import (
    ALICE,
    answers_sent,
    decided,
    email_gateway,
    email_settings,
    post_inbound,
    reply,
    sent_for,
    status,
    to_alice,
)
from tests.factories import RequestFactory
from tests.helpers import events
from tests.services.dovecot import ThrowawayDovecot
from tests.services.inprocess import RunningGateway
from tests.services.smtp_sink import SmtpSink, SunkMessage

HINT = 'Reply "approve for 1h" to approve and also allow read_file in this run for 1 hour'
GMAIL_QUOTE = (
    "On Sun, Nov 22, 2026 at 10:00 AM Approvals <approvals@example.test> wrote:\n"
    "> Agent r wants to call read_file with:\n> Reply APPROVE, or REJECT\n"
    f"> {HINT}\n"
)
READ_FILE: dict[str, Any] = {"fn": "read_file", "kwargs": {"path": "/a"}}


@pytest.fixture
async def mailed(tmp_path: Path, smtp_sink: SmtpSink) -> AsyncIterator[RunningGateway]:
    """Replies posted to `POST /email/inbound`: its answer says what the pipeline did."""
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as running:
        yield running


def plain(sunk: SunkMessage) -> str:
    part = sunk.message.get_body(preferencelist=("plain",))
    return "" if part is None else str(part.get_content())


def html(sunk: SunkMessage) -> str:
    part = sunk.message.get_body(preferencelist=("html",))
    return "" if part is None else str(part.get_content())


async def test_approve_for_1h_approves_grants_and_the_next_call_in_the_run_sends_no_email(
    tmp_path: Path,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
    request_factory: RequestFactory,
) -> None:
    settings = email_settings(smtp_sink, dovecot)
    async with email_gateway(tmp_path, settings) as gateway:
        await request_factory(gateway, "g-1", channel=to_alice(), settle=True, **READ_FILE)
        (sunk,) = sent_for(smtp_sink, "g-1")
        assert HINT in plain(sunk) and HINT.replace('"', "&quot;") in html(sunk)

        answer = reply(sunk.message, f"Approve for 1h\n\n{GMAIL_QUOTE}")
        dovecot.deliver(answer, str(sunk.message["Reply-To"]))
        result = await decided(gateway, "g-1")
        assert result["approved"] is True and result["user_info"]["email"] == ALICE

        [grant] = await grants.listing(gateway.core)
        assert (grant.scope, grant.fn, grant.run_id, grant.live) == (
            GrantScope.RUN,
            "read_file",
            "r",
            True,
        )
        assert grant.expires_at is not None
        assert grant.expires_at - grant.created_at == timedelta(hours=1)
        assert grant.granted_by["email"] == ALICE
        confirmation = (await smtp_sink.wait_for_messages(2))[-1]
        assert confirmation.rcpt_tos == [ALICE]
        text = confirmation.message.get_content()
        assert "We read your reply as an approval that also allows this function in this " in text
        assert "Recorded: approved by you at " in text
        assert ", and allowed read_file in this run, for 1 hour." in text

        again = await request_factory(
            gateway, "g-2", settle=True, channel=to_alice(), fn="read_file", kwargs={"path": "/b"}
        )
        assert again.wire["status"]["approved"] is True  # in the create's own answer
        assert again.wire["status"]["user_info"]["grant"] == grant.id
        await answers_sent(gateway)
        assert sent_for(smtp_sink, "g-2") == []  # nobody was emailed for it
        assert len(smtp_sink.messages) == 2  # the first request and its confirmation


async def test_a_duration_not_offered_is_refused_and_the_person_told_what_is(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    await request_factory(mailed, "g-days", channel=to_alice(), settle=True, **READ_FILE)
    (sunk,) = sent_for(smtp_sink, "g-days")
    handled = await post_inbound(mailed, reply(sunk.message, "approve for 3 days"))
    assert handled["result"] == "refused"
    assert (await status(mailed, "g-days"))["approved"] is None
    assert await grants.listing(mailed.core) == []
    await answers_sent(mailed)
    told = smtp_sink.messages[-1]
    assert told.rcpt_tos == [ALICE]
    text = told.message.get_content()
    assert "Nothing was changed: a standing grant for 3 days is not offered" in text
    assert f"{HINT} (15m, 1h, 4h or 8h;" in text
    trail = [e["type"] for e in (await events(mailed, "g-days"))["events"]]
    assert "decided" not in trail and "granted" not in trail


async def test_under_a_quorum_a_grant_reply_is_refused_and_no_vote_counts(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    quorum = {"any_of": [to_alice() | {"approvals_required": 2}]}
    await request_factory(mailed, "g-quorum", channel=quorum, settle=True, **READ_FILE)
    (sunk,) = sent_for(smtp_sink, "g-quorum")
    assert "approve for" not in plain(sunk)  # no grant offered, none hinted at

    handled = await post_inbound(mailed, reply(sunk.message, "approve for 1h"))
    assert handled["result"] == "refused"
    await answers_sent(mailed)
    text = smtp_sink.messages[-1].message.get_content()
    assert "Nothing was changed: a standing grant is not offered on this request" in text
    assert "Reply APPROVE to approve it without a standing grant" in text
    assert await grants.listing(mailed.core) == []
    trail = [e["type"] for e in (await events(mailed, "g-quorum"))["events"]]
    assert "voted" not in trail and "decided" not in trail  # not even a vote counted

    voted = await post_inbound(mailed, reply(sunk.message, "approve"))  # a plain yes is one
    assert voted["result"] == "decided"
    got = await status(mailed, "g-quorum")
    assert got["approved"] is None
    assert await grants.listing(mailed.core) == []


@pytest.mark.parametrize(
    ("words", "choice"),
    [
        ("approve for 15m exactly", GrantChoice(GrantScope.ARGS, 900)),
        ("Yes for 4 hours, any run. Thanks!", GrantChoice(GrantScope.KEY, 4 * 3600)),
    ],
)
async def test_the_scope_words_choose_what_the_grant_covers(
    mailed: RunningGateway,
    smtp_sink: SmtpSink,
    request_factory: RequestFactory,
    words: str,
    choice: GrantChoice,
) -> None:
    await request_factory(mailed, "g-scope", channel=to_alice(), settle=True, **READ_FILE)
    (sunk,) = sent_for(smtp_sink, "g-scope")
    handled = await post_inbound(mailed, reply(sunk.message, words))
    assert handled["result"] == "decided"
    [grant] = await grants.listing(mailed.core)
    assert grant.scope is choice.scope
    assert grant.expires_at is not None and choice.seconds is not None
    assert grant.expires_at - grant.created_at == timedelta(seconds=choice.seconds)


def both_parts(text: str, html: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = f"Alice <{ALICE}>"
    message.set_content(text)
    message.add_alternative(html, subtype="html")
    return message


def test_a_grant_the_html_part_does_not_ask_for_too_is_unclear() -> None:
    struck = both_parts("approve for 8h", "<p>approve for <s>8h</s> 1h</p>")
    intent = intent_of(struck, kind=Kind.FUNCTION_CALL, options=[])
    assert intent.verdict == "unclear" and intent.grant is None
    other = both_parts("approve for 8h", "<p>approve for 1h</p>")
    assert intent_of(other, kind=Kind.FUNCTION_CALL, options=[]).verdict == "unclear"
    same = both_parts("approve for 1h", "<p>Approve for 1h</p>")
    intent = intent_of(same, kind=Kind.FUNCTION_CALL, options=[])
    assert intent.verdict == "approve" and intent.grant == GrantChoice(GrantScope.RUN, 3600)


@pytest.mark.parametrize(("offers", "hinted"), [(True, True), (False, False)])
def test_a_reminder_says_how_to_ask_for_a_grant_where_one_is_offered(
    smtp_sink: SmtpSink, offers: bool, hinted: bool
) -> None:
    request = RequestView(
        rid="rid-1",
        project="default",
        kind=Kind.FUNCTION_CALL,
        call_id="c-1",
        run_id="r",
        spec=READ_FILE,
        status=Status.PENDING,
        requested_at=datetime.now(UTC),
        grant_choices=offered(8 * 3600, False) if offers else (),
    )
    ref = {"message_id": "<m@example.test>", "subject": "Approval needed"}
    settings = email_settings(smtp_sink)
    message = compose.reminder(request, ref, [ALICE], "Reminder", settings, b"k" * 32)
    assert (HINT in message.get_content()) is hinted
