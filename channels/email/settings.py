"""Email settings, from the environment and `.env` (all listed in `.env.example`)."""

from __future__ import annotations

from email.headerregistry import Address
from email.utils import parseaddr
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from gateway.seam import EnvSettings

Security = Literal["starttls", "tls", "none"]


class EmailSettings(EnvSettings):
    """No prefix: the names are SMTP_*, IMAP_* and EMAIL_*, as operators know them."""

    smtp_host: str | None = None
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_security: Security = "starttls"
    smtp_ca_file: Path | None = None  # trust this CA too (a private mail server)
    email_from: str | None = None
    email_reply_to: str | None = None  # the base reply address; EMAIL_FROM's address if unset
    email_inbound_secret: SecretStr | None = None
    email_require_dmarc: bool = False
    email_trusted_authserv_id: str | None = None
    imap_host: str | None = None
    imap_port: int = Field(default=993, ge=1, le=65535)
    imap_username: str | None = None
    imap_password: SecretStr | None = None
    imap_security: Security = "tls"
    imap_ca_file: Path | None = None
    imap_mailbox: str = "INBOX"
    # IDLE is re-issued, and the mailbox searched again, at least this often.
    imap_poll_seconds: float = Field(default=300.0, gt=0, le=600)

    @property
    def reply_base(self) -> str:
        """The bare address replies go to, before its per-request +token."""
        return parseaddr(self.email_reply_to or self.email_from or "")[1]

    @property
    def sender(self) -> Address:
        name, address = parseaddr(self.email_from or "")
        return Address(display_name=name, addr_spec=address)

    @property
    def domain(self) -> str:
        return self.reply_base.rpartition("@")[2] or "localhost"
