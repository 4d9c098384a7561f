"""Fixtures for replica tests: the channel tests' Dovecot and SMTP sink."""

from tests.channels.conftest import dovecot, dovecot_server, smtp_sink

__all__ = ["dovecot", "dovecot_server", "smtp_sink"]
