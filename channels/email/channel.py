"""The email channel: a threaded email per target, replies read over IMAP or posted raw.

Outbound mail goes through aiosmtplib; inbound mail (IMAP IDLE, or `POST /email/inbound`
from an MTA pipe or a provider) goes through one pipeline (`inbound.Inbox`).
"""

from __future__ import annotations

import hmac
from dataclasses import replace
from email.message import EmailMessage
from typing import Any

import aiosmtplib
from fastapi import FastAPI, Request

from channels.email import compose, imap, smtp
from channels.email.imap import Watcher
from channels.email.inbound import Inbox
from channels.email.settings import EmailSettings
from gateway.errors import ChannelNotConfigured, DeliveryError, InvalidInput, NotFound, Unauthorized
from gateway.lifecycle import Status
from gateway.seam import (
    AnsweredIn,
    ChannelContext,
    ChannelName,
    Connection,
    RequestView,
    Sent,
    Target,
    describe,
    reminder_text,
    responses,
)

KEY_PURPOSE = "email-reply-token"


def outcome_line(request: RequestView) -> str:
    """The core's outcome sentence, and what it means for the reader of this thread."""
    sentence = describe(request) + "."
    if request.status == Status.PENDING:
        return sentence
    return f"{sentence} Replies to this email no longer change it."


class EmailChannel:
    name = ChannelName.EMAIL

    def __init__(self, context: ChannelContext, settings: EmailSettings | None = None) -> None:
        self.settings = settings or EmailSettings()
        self.keys = context.keys
        self.inbox = Inbox(context.answers, context.records, self.settings, self.key, self._send)
        self.watcher: Watcher | None = None
        self.connection: Connection | None = None  # the IMAP watcher's, when IMAP_HOST is set
        if self.settings.imap_host:
            self.watcher = Watcher(self.settings, context.records, self.inbox.receive)
            self.connection = context.supervise("imap", self.watcher.session)

    def missing_settings(self) -> list[str]:
        required = {"SMTP_HOST": self.settings.smtp_host, "EMAIL_FROM": self.settings.email_from}
        return [name for name, value in required.items() if not value]

    def mount(self, app: FastAPI, /) -> None:
        """Serve `POST /email/inbound` (raw MIME, EMAIL_INBOUND_SECRET as a bearer token)."""
        app.add_api_route(
            "/email/inbound",
            self._inbound,
            methods=["POST"],
            tags=["email"],
            responses=responses(401, 404, 413, 422, 503),
        )

    async def start(self) -> None:
        if self.connection is not None:
            self.connection.start()

    def key(self) -> bytes:
        """The key of reply tokens and Message-IDs (from GATEWAY_SECRET_KEY)."""
        return self.keys.subkey(KEY_PURPOSE)

    async def _send(self, message: EmailMessage, recipients: list[str]) -> None:
        if self.missing_settings():
            raise ChannelNotConfigured(f"email is not configured: set {self.missing_settings()}")
        await smtp.send(self.settings, message, recipients)

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        if request.link is not None:
            # The link carries a token for the addressee, who may decide from the page.
            addressee = str(target.address.get("address") or "") or None
            request = replace(request, link=self.keys.link(request.rid, addressee))
        message, people = compose.request_message(
            request,
            target,
            self.settings,
            self.key(),
            escalation=target.address.get("escalation_msg"),
            thread=target.address.get("thread"),
        )
        await self._send(message, people.everyone)
        ref = {
            "message_id": str(message["Message-ID"]),
            "subject": str(message["Subject"]).removeprefix("Re: "),
            "to": people.to,
            "cc": people.cc,
            "bcc": people.bcc,
        }
        return Sent(ref=ref)

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        """A note in the thread when the request was decided elsewhere (an email answer got
        its confirmation already)."""
        answered_in = (request.user_info or {}).get("channel")
        if request.status == Status.PENDING or answered_in == AnsweredIn.EMAIL:
            return
        note = compose.notice(ref, outcome_line(request), self.settings, self.key(), request.rid)
        await self._send(note, [*ref["to"], *ref.get("cc", []), *ref.get("bcc", [])])

    async def remind(
        self,
        request: RequestView,
        target: Target,
        ref: dict[str, Any],
        mention: list[str],
        /,
        *,
        number: int = 1,
    ) -> None:
        """A reminder in the request's thread to the addresses that have not answered
        (`mention`; the target's address when empty), answerable like the request."""
        people = list(dict.fromkeys(mention)) or [str(target.address["address"])]
        if request.link is not None and len(people) == 1:
            # As in `send`: a link only its one addressee may decide from.
            request = replace(request, link=self.keys.link(request.rid, people[0]))
        # A retried reminder keeps its Message-ID, so mail clients show one copy.
        message = compose.reminder(
            request, ref, people, reminder_text(request), self.settings, self.key(), number
        )
        await self._send(message, people)

    async def _inbound(self, request: Request) -> dict[str, str]:
        secret = self.settings.email_inbound_secret
        if secret is None:
            raise NotFound("inbound email is off: set EMAIL_INBOUND_SECRET")
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), secret.get_secret_value().encode()):
            raise Unauthorized("send EMAIL_INBOUND_SECRET as `Authorization: Bearer <secret>`")
        raw = await request.body()
        if b"\n" not in raw or b":" not in raw.split(b"\n", 1)[0]:
            raise InvalidInput("the body must be one raw MIME message (message/rfc822)")
        outcome = await self.inbox.receive(raw)
        return {"result": outcome.result, "reason": outcome.reason}

    async def check(self) -> str:
        """Log in to the SMTP server, and to the IMAP server when one is set."""
        lines = [await self._check_smtp()]
        if self.settings.imap_host:
            try:
                lines.append(await imap.check(self.settings))
            except Exception as error:
                raise DeliveryError(
                    f"imap: {type(error).__name__}: {error}", retryable=True
                ) from None
        return "; ".join(lines)

    async def _check_smtp(self) -> str:
        settings = self.settings
        client = aiosmtplib.SMTP(
            hostname=settings.smtp_host,
            port=settings.smtp_port,
            start_tls=settings.smtp_security == "starttls",
            use_tls=settings.smtp_security == "tls",
            tls_context=smtp.tls_context(settings.smtp_ca_file),
            timeout=smtp.TIMEOUT_SECONDS,
        )
        try:
            async with client:
                if settings.smtp_username and settings.smtp_password:
                    await client.login(
                        settings.smtp_username, settings.smtp_password.get_secret_value()
                    )
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as error:
            raise smtp.as_delivery_error(error) from None
        return f"SMTP signed in to {settings.smtp_host}:{settings.smtp_port}"

    async def aclose(self) -> None:
        if self.connection is not None:
            await self.connection.aclose()
        await self.inbox.settled()
