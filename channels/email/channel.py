"""The email channel: a threaded email per target, replies read over IMAP or posted raw.

Outbound mail goes through aiosmtplib; inbound mail (IMAP IDLE, or `POST /email/inbound`
from an MTA pipe or a provider) goes through one pipeline (`inbound.Inbox`).
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import replace
from email.message import EmailMessage
from typing import Any

import aiosmtplib
from fastapi import FastAPI, Request

from channels.email import agent_template, compose, imap, smtp
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

log = logging.getLogger(__name__)

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
        """One message per recipient, each with its own reply token and link, made for that
        address: a copy forwarded, or a recipient in Bcc, can only ever answer as itself."""
        options = compose.email_options(request, target)
        people = compose.recipients(target, options)
        html = await self._agent_html(request, target, options)
        ids: dict[str, str] = {}
        for address in people.everyone:
            message = compose.request_message(
                self._for(request, target, address),
                target,
                self.settings,
                self.key(),
                to=address,
                escalation=target.address.get("escalation_msg"),
                thread=target.address.get("thread"),
                html=html,
            )
            await self._send(message, [address])
            ids[address] = str(message["Message-ID"])
        ref = {
            "message_id": ids[people.to[0]],
            "message_ids": ids,
            "subject": compose.subject(request, options),
            "to": people.to,
            "cc": people.cc,
            "bcc": people.bcc,
        }
        return Sent(ref=ref)

    async def _agent_html(
        self, request: RequestView, target: Target, options: dict[str, Any]
    ) -> str | None:
        """The agent's own template (in `options`, its email options), rendered, where its
        project allows agent templates; None to use ours. Past its budget the delivery fails
        for good (`OverBudget`)."""
        template = options.get("template")
        if not template or not request.agent_templates or target.address.get("escalation_msg"):
            return None
        html = await agent_template.render(str(template), compose.template_context(request))
        if html is None:
            log.warning("email template of %s was refused; using ours", request.call_id)
        return html

    def _for(self, request: RequestView, target: Target, address: str) -> RequestView:
        """The request as `address` sees it: a link that lets them decide when they are one
        of the target's responders, else the page's link, which asks them to sign in."""
        if request.link is None:
            return request
        deciders = {r.lower() for r in target.responders or []}
        if target.responders is None or address.lower() in deciders:
            return replace(request, link=self.keys.link(request.rid, address))
        return request

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
        for person in people:  # as in `send`: each their own token and link
            # A retried reminder keeps its Message-ID, so mail clients show one copy.
            message = compose.reminder(
                self._for(request, target, person),
                ref,
                [person],
                reminder_text(request),
                self.settings,
                self.key(),
                number,
            )
            await self._send(message, [person])

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
