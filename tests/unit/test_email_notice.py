"""The note an email thread gets when its request is decided elsewhere: sent again by a
retried update, it is the same message (the same Message-ID), not a second note."""

from __future__ import annotations

from typing import Any

from channels.email import compose
from channels.email.settings import EmailSettings

KEY = b"k" * 32
REF: dict[str, Any] = {
    "message_id": "<first.abc@example.test>",
    "subject": "Approve drop_table?",
    "to": ["alice@example.org"],
}


def settings() -> EmailSettings:
    return EmailSettings(
        _env_file=None, smtp_host="localhost", email_from="Approvals <approvals@example.test>"
    )


def test_the_same_note_twice_has_one_message_id() -> None:
    first = compose.notice(REF, "Approved by Bob (slack).", settings(), KEY, "rid-1")
    again = compose.notice(REF, "Approved by Bob (slack).", settings(), KEY, "rid-1")
    assert first["Message-ID"] == again["Message-ID"]
    assert str(first["In-Reply-To"]) == REF["message_id"]


def test_different_notes_have_different_message_ids() -> None:
    approved = compose.notice(REF, "Approved by Bob (slack).", settings(), KEY, "rid-1")
    expired = compose.notice(REF, "This request expired.", settings(), KEY, "rid-1")
    other = compose.notice(REF, "Approved by Bob (slack).", settings(), KEY, "rid-2")
    ids = {approved["Message-ID"], expired["Message-ID"], other["Message-ID"]}
    assert len(ids) == 3
