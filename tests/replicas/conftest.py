"""Fixtures for replica tests: the channel tests' Dovecot (the SMTP sink is the root's)."""

from tests.channels.conftest import dovecot, dovecot_server

__all__ = ["dovecot", "dovecot_server"]
