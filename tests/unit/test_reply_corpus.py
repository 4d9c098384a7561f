"""The reply corpus (tests/data/replies/corpus.toml): every phrasing gets its reading, from the
shared reader and through the email pipeline alike. Grow the corpus whenever a reply is
misread (see the comment at its top)."""

from __future__ import annotations

import tomllib
from email.message import EmailMessage
from pathlib import Path

import pytest

from channels.email.reading import read_intent, reply_text
from gateway.lifecycle import Kind
from gateway.seam.replies import read_reply

CORPUS = tomllib.loads(
    (Path(__file__).parent.parent / "data" / "replies" / "corpus.toml").read_text("utf-8")
)
APPROVE: list[str] = CORPUS["approve"]
REJECT: list[str] = CORPUS["reject"]


def label(text: str) -> str:
    return " ".join(text.split())[:40]


def as_email(text: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "alice@example.org"
    message.set_content(text)
    return message


def test_the_corpus_is_large_and_each_phrase_has_one_reading() -> None:
    assert len(APPROVE) >= 30 and len(REJECT) >= 30
    assert len(set(APPROVE)) == len(APPROVE) and len(set(REJECT)) == len(REJECT)
    assert not set(APPROVE) & set(REJECT)


@pytest.mark.parametrize("text", APPROVE, ids=label)
def test_approves(text: str) -> None:
    reading = read_reply(text)
    assert reading.approved, reading.explanation
    assert reading.sentence.startswith("We read your reply as an approval (")
    intent = read_intent(reply_text(as_email(text)), kind=Kind.FUNCTION_CALL, options=[])
    assert intent.verdict == "approve"


@pytest.mark.parametrize("text", REJECT, ids=label)
def test_does_not_approve(text: str) -> None:
    reading = read_reply(text)
    assert not reading.approved, reading.explanation
    assert reading.sentence.startswith("We read your reply as a rejection")
    intent = read_intent(reply_text(as_email(text)), kind=Kind.FUNCTION_CALL, options=[])
    assert intent.verdict != "approve"  # "-1" alone is a signature to mail-parser-reply
