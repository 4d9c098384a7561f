"""A gateway with the real email channel: aiosmtplib to the SMTP sink (STARTTLS + AUTH),
aioimaplib to a real Dovecot, and replies delivered over LMTP as a mail server would."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from typing import Any

import httpx

from channels.email.channel import EmailChannel
from channels.email.settings import EmailSettings
from tests.helpers import eventually
from tests.services.dovecot import ThrowawayDovecot
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.smtp_sink import SmtpSink, SunkMessage

ALICE = "alice@example.org"
BOB = "bob@example.org"
_mailboxes = itertools.count(1)


def new_mailbox(dovecot: ThrowawayDovecot) -> tuple[str, str]:
    """A fresh Dovecot user per test, so no test reads another's mail."""
    user, password = f"gw{next(_mailboxes)}", "mailbox-secret"
    dovecot.add_user(user, password)
    return user, password


def email_settings(
    sink: SmtpSink, dovecot: ThrowawayDovecot | None = None, **overrides: Any
) -> EmailSettings:
    values: dict[str, Any] = {
        "smtp_host": sink.host,
        "smtp_port": sink.port,
        "smtp_username": sink.username,
        "smtp_password": sink.password,
        "smtp_security": "starttls",
        "smtp_ca_file": sink.cert_path,
        "email_from": "Approvals <approvals@example.test>",
        "email_reply_to": "approvals@example.test",
        "email_inbound_secret": "inbound-secret",
    }
    if dovecot is not None:
        user, password = new_mailbox(dovecot)
        values |= {
            "email_reply_to": dovecot.address_of(user),
            "imap_host": dovecot.host,
            "imap_port": dovecot.imap_port,
            "imap_username": user,
            "imap_password": password,
            "imap_security": "none",
        }
    return EmailSettings(_env_file=None, **(values | overrides))


def email_env(
    sink: SmtpSink, dovecot: ThrowawayDovecot, user: str, password: str
) -> dict[str, str]:
    """The same settings as environment variables, for a `gateway` subprocess."""
    return {
        "SMTP_HOST": sink.host,
        "SMTP_PORT": str(sink.port),
        "SMTP_USERNAME": sink.username,
        "SMTP_PASSWORD": sink.password,
        "SMTP_SECURITY": "starttls",
        "SMTP_CA_FILE": str(sink.cert_path),
        "EMAIL_FROM": "Approvals <approvals@example.test>",
        "EMAIL_REPLY_TO": dovecot.address_of(user),
        "IMAP_HOST": dovecot.host,
        "IMAP_PORT": str(dovecot.imap_port),
        "IMAP_USERNAME": user,
        "IMAP_PASSWORD": password,
        "IMAP_SECURITY": "none",
    }


@asynccontextmanager
async def email_gateway(
    tmp_path: Path, settings: EmailSettings, **gateway_settings: Any
) -> AsyncIterator[RunningGateway]:
    core_settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/email.db", **gateway_settings)
    channels = {"email": lambda context: EmailChannel(context, settings)}
    async with running_gateway(core_settings, channels=channels) as gateway:
        channel = gateway.core.channels["email"]
        assert isinstance(channel, EmailChannel)
        if channel.watcher is not None:
            await eventually(_connected(channel), within=15)
        yield gateway


def _connected(channel: EmailChannel) -> Any:
    async def check() -> bool:
        return channel.watcher is not None and channel.watcher.connected.is_set()

    return check


def to_alice(**email: Any) -> dict[str, Any]:
    """A `channel` routing a request to ALICE by email, with HumanLayer's `email` options."""
    return {"email": {"address": ALICE} | email}


def sent_for(sink: SmtpSink, call_id: str) -> list[SunkMessage]:
    return [m for m in sink.messages if f"Request {call_id}," in _text(m.message)]


def _text(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    return "" if part is None else str(part.get_content())


def reply(
    original: EmailMessage,
    body: str,
    *,
    sender: str = f"Alice <{ALICE}>",
    headers: dict[str, str] | None = None,
) -> bytes:
    """A person's reply to `original`, as their mail client would write it."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = str(original["Reply-To"])
    message["Subject"] = f"Re: {original['Subject']}"
    message["Date"] = formatdate()
    message["Message-ID"] = make_msgid(domain="example.org")
    message["In-Reply-To"] = str(original["Message-ID"])
    message["References"] = str(original["Message-ID"])
    for name, value in (headers or {}).items():
        message[name] = value
    message.set_content(body)
    return bytes(message)


async def status(gateway: RunningGateway, call_id: str, contact: bool = False) -> dict[str, Any]:
    path = "/contact_requests" if contact else "/function_calls"
    async with gateway.client() as client:
        response = await client.get(f"{path}/{call_id}")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["status"]
    return result


async def decided(gateway: RunningGateway, call_id: str, contact: bool = False) -> dict[str, Any]:
    """The answer, with a long-poll: returns as soon as the decision commits."""
    path = "/contact_requests" if contact else "/function_calls"
    async with gateway.client() as client:
        response = await client.get(f"{path}/{call_id}", params={"wait": 20})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["status"]
    return result


async def answers_sent(gateway: RunningGateway) -> None:
    """Until the threaded answers the email pipeline sends in the background are out."""
    channel = gateway.core.channels["email"]
    assert isinstance(channel, EmailChannel) and channel.inbox is not None
    await channel.inbox.settled()


async def post_inbound(gateway: RunningGateway, raw: bytes) -> dict[str, str]:
    """A raw message posted to `POST /email/inbound`, as an MTA pipe would; what it did."""
    headers = {"Content-Type": "message/rfc822", "Authorization": "Bearer inbound-secret"}
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as client:
        response = await client.post("/email/inbound", content=raw, headers=headers)
    assert response.status_code == 200, response.text
    result: dict[str, str] = response.json()
    return result
