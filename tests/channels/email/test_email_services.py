"""The email test services are real: an SMTP sink with STARTTLS + AUTH, and Dovecot."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from email.message import EmailMessage
from typing import Any

import aiosmtplib
import pytest
from aioimaplib import IMAP4

from tests.services.dovecot import ThrowawayDovecot
from tests.services.smtp_sink import SmtpSink


def request_mail(subject: str = "[Approval R1] Deploy v2 to prod?") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "Approvals <approvals@example.test>"
    msg["To"] = "alice@example.org"
    msg["Subject"] = subject
    msg.set_content("Reply APPROVE or DENY.")
    return msg


def reply_mail(token: str, to: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "alice@example.org"
    msg["To"] = to
    msg["Subject"] = f"Re: [Approval {token}]"
    msg.set_content("Approve, go ahead.")
    return msg.as_bytes()


# -- SMTP sink


@pytest.mark.parametrize("verify", [True, False], ids=["trusted-cert", "no-verify"])
async def test_sink_records_mail_sent_with_starttls_and_auth(
    smtp_sink: SmtpSink, verify: bool
) -> None:
    await aiosmtplib.send(request_mail(), **smtp_sink.client_options(verify=verify))

    [sunk] = await smtp_sink.wait_for_messages(1)
    assert sunk.mail_from == "approvals@example.test"
    assert sunk.rcpt_tos == ["alice@example.org"]
    assert sunk.message["Subject"] == "[Approval R1] Deploy v2 to prod?"
    assert sunk.message.get_content().strip() == "Reply APPROVE or DENY."
    assert b"Subject: [Approval R1]" in sunk.raw


async def test_sink_refuses_mail_without_auth(smtp_sink: SmtpSink) -> None:
    options = smtp_sink.client_options()
    del options["username"], options["password"]

    with pytest.raises(aiosmtplib.SMTPSenderRefused) as refused:
        await aiosmtplib.send(request_mail(), **options)
    assert refused.value.code == 530
    assert smtp_sink.messages == []


async def test_sink_refuses_mail_without_starttls(smtp_sink: SmtpSink) -> None:
    plain: dict[str, Any] = {"hostname": smtp_sink.host, "port": smtp_sink.port, "start_tls": False}

    with pytest.raises(aiosmtplib.SMTPResponseException) as refused:
        await aiosmtplib.send(request_mail(), **plain)
    assert refused.value.code == 530
    assert "STARTTLS" in refused.value.message


async def test_sink_refuses_a_wrong_password(smtp_sink: SmtpSink) -> None:
    options = {**smtp_sink.client_options(), "password": "wrong"}

    with pytest.raises(aiosmtplib.SMTPAuthenticationError) as refused:
        await aiosmtplib.send(request_mail(), **options)
    assert refused.value.code == 535


async def test_sink_fails_the_next_data_then_accepts(smtp_sink: SmtpSink) -> None:
    smtp_sink.fail_next(451)

    with pytest.raises(aiosmtplib.SMTPDataError) as failed:
        await aiosmtplib.send(request_mail("first"), **smtp_sink.client_options())
    assert failed.value.code == 451

    await aiosmtplib.send(request_mail("second"), **smtp_sink.client_options())
    [sunk] = await smtp_sink.wait_for_messages(1)
    assert sunk.message["Subject"] == "second"


async def test_sink_can_refuse_recipients_permanently(smtp_sink: SmtpSink) -> None:
    smtp_sink.fail_next(550, on="RCPT")

    with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
        await aiosmtplib.send(request_mail(), **smtp_sink.client_options())
    assert [error.code for error in refused.value.recipients] == [550]
    assert smtp_sink.messages == []


async def test_wait_for_messages_times_out(smtp_sink: SmtpSink) -> None:
    with pytest.raises(TimeoutError):
        await smtp_sink.wait_for_messages(1, timeout=0.1)


# -- Dovecot


@asynccontextmanager
async def imap_inbox(
    server: ThrowawayDovecot, on_lost: Callable[[Exception | None], None] | None = None
) -> AsyncIterator[IMAP4]:
    """A client logged in as the test user with INBOX selected; logged out afterwards."""
    client = IMAP4(server.host, server.imap_port, timeout=10, conn_lost_cb=on_lost)
    await client.wait_hello_from_server()
    try:
        assert (await client.login(server.user, server.password)).result == "OK"
        assert (await client.select("INBOX")).result == "OK"
        yield client
    finally:
        if not client.protocol.transport.is_closing():
            await client.logout()
        client.protocol.transport.close()


async def fetch_by_subject(client: IMAP4, token: str) -> list[bytes]:
    """The raw messages whose subject contains `token` (BODY.PEEK: no \\Seen flag)."""
    found = await client.uid_search("SUBJECT", token)
    assert found.result == "OK"
    uids = found.lines[0].split()
    messages = []
    for uid in uids:
        fetched = await client.uid("fetch", uid.decode(), "(BODY.PEEK[])")
        assert fetched.result == "OK"
        messages.append(bytes(fetched.lines[1]))
    return messages


async def test_lmtp_delivery_to_a_plus_address_lands_in_the_inbox(
    dovecot: ThrowawayDovecot,
) -> None:
    token = uuid.uuid4().hex
    recipient = dovecot.address_of(dovecot.user, f"{token}.mac")
    assert recipient == f"approvals+{token}.mac@example.test"

    dovecot.deliver(reply_mail(token, recipient), recipient)

    async with imap_inbox(dovecot) as client:
        [raw] = await fetch_by_subject(client, token)
    assert f"Delivered-To: {recipient}".encode() in raw
    assert b"Approve, go ahead." in raw


async def test_idle_client_sees_a_delivery(dovecot: ThrowawayDovecot) -> None:
    token = uuid.uuid4().hex
    async with imap_inbox(dovecot) as client:
        idle = await client.idle_start(timeout=30)
        dovecot.deliver(reply_mail(token, dovecot.address), dovecot.address)

        pushed = await client.wait_server_push(timeout=10)
        while not any(line.endswith(b"EXISTS") for line in pushed):
            pushed = await client.wait_server_push(timeout=10)
        client.idle_done()
        assert (await asyncio.wait_for(idle, 10)).result == "OK"

        assert len(await fetch_by_subject(client, token)) == 1


async def test_restart_drops_idle_clients_and_keeps_the_mail(dovecot: ThrowawayDovecot) -> None:
    token = uuid.uuid4().hex
    dovecot.deliver(reply_mail(token, dovecot.address), dovecot.address)
    lost = asyncio.Event()

    async with imap_inbox(dovecot, on_lost=lambda _exc: lost.set()) as client:
        idle = await client.idle_start(timeout=30)
        dovecot.restart()
        await asyncio.wait_for(lost.wait(), 10)
        idle.cancel()  # aioimaplib leaves the IDLE command pending when the connection drops
        with pytest.raises(asyncio.CancelledError):
            await idle

    async with imap_inbox(dovecot) as client:
        assert len(await fetch_by_subject(client, token)) == 1


async def test_an_added_user_has_a_mailbox_of_its_own(dovecot: ThrowawayDovecot) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    dovecot.add_user(user, "pw-" + user)
    dovecot.deliver(reply_mail(user, dovecot.address_of(user)), dovecot.address_of(user, "x"))

    client = IMAP4(dovecot.host, dovecot.imap_port, timeout=10)
    await client.wait_hello_from_server()
    try:
        assert (await client.login(f"{user}@example.test", "pw-" + user)).result == "OK"
        selected = await client.select("INBOX")
        assert b"1 EXISTS" in selected.lines
        await client.logout()
    finally:
        client.protocol.transport.close()
