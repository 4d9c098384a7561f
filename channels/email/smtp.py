"""Sending over SMTP with aiosmtplib; failures mapped onto the gateway's error tree."""

from __future__ import annotations

import functools
import ssl
from email.message import EmailMessage

import aiosmtplib

from channels.email.settings import EmailSettings
from gateway.errors import DeliveryError

TIMEOUT_SECONDS = 30


def tls_context(ca_file: object) -> ssl.SSLContext:
    return _tls_context(None if ca_file is None else str(ca_file))


# Built once: loading the system CA bundle takes ~30 ms of CPU, which would stall the event
# loop on every email sent. A context is safe to share between connections.
@functools.cache
def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca_file is not None:
        context.load_verify_locations(cafile=ca_file)
    return context


def as_delivery_error(error: Exception) -> DeliveryError:
    """A 4xx reply is temporary (try again), a 5xx permanent; no answer at all is retried."""
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused) and error.recipients:
        refusals = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in error.recipients)
        temporary = any(r.code < 500 for r in error.recipients)
        return DeliveryError(f"smtp refused every recipient: {refusals}", retryable=temporary)
    if isinstance(error, aiosmtplib.SMTPResponseException):
        code, text = error.code, error.message
        return DeliveryError(f"smtp {code}: {text}", retryable=not 500 <= code < 600)
    return DeliveryError(f"smtp unreachable: {type(error).__name__}: {error}", retryable=True)


async def send(settings: EmailSettings, message: EmailMessage, recipients: list[str]) -> None:
    """Send to exactly `recipients` (the envelope: Bcc addresses are not in the headers)."""
    password = settings.smtp_password.get_secret_value() if settings.smtp_password else None
    try:
        await aiosmtplib.send(
            message,
            sender=settings.sender.addr_spec,
            recipients=recipients,
            hostname=settings.smtp_host,
            port=settings.smtp_port,
            username=settings.smtp_username,
            password=password,
            # Fail closed: with "starttls" a server that does not offer it is an error.
            start_tls=settings.smtp_security == "starttls",
            use_tls=settings.smtp_security == "tls",
            tls_context=tls_context(settings.smtp_ca_file),
            timeout=TIMEOUT_SECONDS,
        )
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as error:
        raise as_delivery_error(error) from None
