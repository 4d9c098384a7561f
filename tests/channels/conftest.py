"""Fixtures for channel tests: a real Dovecot (IMAP + LMTP) and an SMTP sink."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import missing_service
from tests.services.dovecot import ThrowawayDovecot, find_dovecot


@pytest.fixture(scope="session")
def dovecot_server() -> Iterator[ThrowawayDovecot]:
    """One Dovecot for the session; user `approvals`, address approvals@example.test."""
    binary = find_dovecot()
    if binary is None:
        missing_service("Dovecot (dovecot-imapd, dovecot-lmtpd)")
    assert binary is not None
    server = ThrowawayDovecot(binary)
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def dovecot(dovecot_server: ThrowawayDovecot) -> ThrowawayDovecot:
    """The session's Dovecot, running (again, if an earlier test stopped it and failed)."""
    return dovecot_server.start()
