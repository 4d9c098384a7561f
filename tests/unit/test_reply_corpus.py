"""The reply corpus (tests/data/replies/corpus.toml): replies as people write them, each under
the reading it must get, read by the shared reader and through the email pipeline alike.

A false approval (anything read as approve that is not labelled approve) fails the suite,
one test per reply. The other mistakes (a clear yes read as unclear or as a no, a no read as
unclear) are counted and printed, and must stay rare: a reader that answered "unclear" to
everything would never approve wrongly, and would be useless. Grow the corpus whenever a
reply is misread (see the comment at its top)."""

from __future__ import annotations

import tomllib
from collections import Counter
from email.message import EmailMessage
from pathlib import Path

import pytest

from channels.email.reading import intent_of
from gateway.lifecycle import Kind
from gateway.seam.replies import Verdict, read_reply

CORPUS = tomllib.loads(
    (Path(__file__).parent.parent / "data" / "replies" / "corpus.toml").read_text("utf-8")
)
LABELS = {verdict: list(CORPUS[verdict.value]) for verdict in Verdict}
EVERY = [(text, verdict) for verdict, texts in LABELS.items() for text in texts]
SENDER = "Alice Smith"  # the corpus's signatures are hers
# How many of each kind of mistake the reader may make, at most (a yes read as unclear costs
# the person one more reply; a no read as unclear too). The corpus holds four red-team
# rounds written to be misread, and a black-box round: 24 of 406 yeses and 12 of 244 nos are.
MOST_MISREAD = 0.08


def label(text: str) -> str:
    return " ".join(text.split())[:40] or "(empty)"


def as_email(text: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = f"{SENDER} <alice@example.org>"
    message.set_content(text)
    return message


def by_email(text: str) -> Verdict:
    intent = intent_of(as_email(text), kind=Kind.FUNCTION_CALL, options=[])
    return Verdict.UNCLEAR if intent.verdict == "unreadable" else Verdict(intent.verdict)


def test_the_corpus_is_large_and_each_reply_has_one_reading() -> None:
    assert len(EVERY) >= 400
    assert all(len(texts) >= 80 for texts in LABELS.values())
    assert len({text for text, _ in EVERY}) == len(EVERY)


@pytest.mark.parametrize(("text", "expected"), EVERY, ids=lambda v: label(str(v)))
def test_nothing_but_a_plain_yes_approves(text: str, expected: Verdict) -> None:
    for how, read in (
        ("reader", read_reply(text, signer=SENDER).verdict),
        ("email", by_email(text)),
    ):
        if expected is not Verdict.APPROVE:
            assert read is not Verdict.APPROVE, f"false approval by the {how}: {text!r}"


@pytest.mark.parametrize("how", ["reader", "email"])
def test_the_other_mistakes_are_counted_and_rare(how: str) -> None:
    mistakes: Counter[tuple[Verdict, Verdict]] = Counter()
    for text, expected in EVERY:
        read = read_reply(text, signer=SENDER).verdict if how == "reader" else by_email(text)
        if read is not expected:
            mistakes[expected, read] += 1
    print(f"\n{how}: {len(EVERY)} replies; mistakes by (labelled, read): {dict(mistakes)}")
    for verdict, texts in LABELS.items():
        wrong = sum(n for (expected, _), n in mistakes.items() if expected is verdict)
        print(f"  {verdict.value}: {wrong} of {len(texts)} misread")
        assert wrong <= MOST_MISREAD * len(texts), (verdict, mistakes)


def test_every_reading_says_what_to_do_next() -> None:
    for text, _ in EVERY:
        reading = read_reply(text, signer=SENDER)
        if reading.verdict is Verdict.UNCLEAR:
            assert "reply APPROVE, or REJECT followed by your reason" in reading.sentence
        else:
            assert reading.sentence.startswith("We read your reply as a")


HTML = tomllib.loads(
    (Path(__file__).parent.parent / "data" / "replies" / "html_corpus.toml").read_text("utf-8")
)
HTML_EVERY = [
    (text, Verdict(label)) for label in ("approve", "reject", "unclear") for text in HTML[label]
]


def html_reading(html: str) -> Verdict:
    message = EmailMessage()
    message["From"] = f"{SENDER} <alice@example.org>"
    message.set_content(html, subtype="html")
    intent = intent_of(message, kind=Kind.FUNCTION_CALL, options=[])
    return Verdict.UNCLEAR if intent.verdict == "unreadable" else Verdict(intent.verdict)


@pytest.mark.parametrize(("html", "expected"), HTML_EVERY, ids=lambda v: label(str(v)))
def test_an_html_only_reply_approves_only_with_a_plain_visible_yes(
    html: str, expected: Verdict
) -> None:
    read = html_reading(html)
    if expected is not Verdict.APPROVE:
        assert read is not Verdict.APPROVE, f"false approval of an HTML reply: {html!r}"


def test_html_readings_are_counted() -> None:
    mistakes = Counter(
        (expected, read)
        for html, expected in HTML_EVERY
        if (read := html_reading(html)) is not expected
    )
    print(f"\nhtml: {len(HTML_EVERY)} replies; mistakes by (labelled, read): {dict(mistakes)}")
    approvals = [html for html, expected in HTML_EVERY if expected is Verdict.APPROVE]
    assert sum(html_reading(html) is Verdict.APPROVE for html in approvals) >= len(approvals) // 2


def test_reading_for_grants_changes_no_reading_of_the_corpus() -> None:
    """No reply here asks for a standing grant ("approve for 1h"): a channel that can give
    one reads every one of them exactly as before, "Approved for next week" included."""
    changed = [
        text
        for text, _ in EVERY
        if read_reply(text, signer=SENDER, grants=True) != read_reply(text, signer=SENDER)
    ]
    assert changed == []
