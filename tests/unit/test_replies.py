"""The shared reader of free-text answers to an approval (gateway/replies.py), rule by rule.
The phrasings themselves live in tests/data/replies/corpus.toml (test_reply_corpus.py)."""

from __future__ import annotations

import pytest

from gateway.seam.replies import QUOTE_LIMIT, Reading, first_line, new_text, read_reply, tokens

QUOTED_REQUEST = "> Agent agent-7 wants to call drop_table\n> Reply APPROVE, or REJECT\n"


# --- the reply's own words --------------------------------------------------------------


@pytest.mark.parametrize(
    "after",
    [
        "-- \nAlice Smith\nNot available on Fridays",
        "--\nAlice",
        "Sent from my iPhone",
        "Sent from Mail for Windows",
        "Sent with Proton Mail secure email.",
        "Get Outlook for Android",
        "Gesendet von meinem iPhone",
        "On Sun, Nov 22, 2026 at 10:00 AM Approvals <approvals@example.test> wrote:\n"
        + QUOTED_REQUEST,
        "On Sun, Nov 22, 2026 at 10:00 AM Approvals <\napprovals@example.test> wrote:\n"
        + QUOTED_REQUEST,
        "Approvals wrote:\n" + QUOTED_REQUEST,
        "-----Original Message-----\nFrom: Approvals\nSent: Sunday\nTo: Alice\nSubject: x\nNo",
        "From: Approvals <approvals@example.test>\nSent: Sunday\nTo: Alice\nSubject: x\n\nNo",
        "________________________________\nFrom: Approvals\nSent: Sunday\nTo: Alice\n\nNo",
        "*From:* Approvals\n*Date:* Sunday\n*Subject:* x\n\nNo",
        "Von: Approvals\nGesendet: Sonntag\nAn: Alice\nBetreff: x\n\nNein",
        "---------- Forwarded message ---------\nFrom: Approvals\n\nNo",
        "Begin forwarded message:\n\nNo",
    ],
)
def test_new_text_ends_where_the_quote_or_signature_starts(after: str) -> None:
    assert new_text(f"Approved, thanks!\n\n{after}\n") == "Approved, thanks!"


def test_quoted_lines_are_dropped_where_they_are() -> None:
    assert new_text("> Approve?\nYes\n> anything else\nno, thanks") == "Yes\nno, thanks"


def test_lines_that_only_look_like_headers_stay() -> None:
    text = "From: the logs, it is fine\nTo: whom it may concern"
    assert new_text(text) == text  # a header block also has a Sent: or Date: line


# --- words ------------------------------------------------------------------------------


def test_tokens_are_normalised() -> None:
    assert tokens("LGTM 👍🏽!") == ["lgtm", "👍"]  # case, skin tone, punctuation
    assert tokens("Don\u2019t :+1::skin-tone-3: ✔\ufe0f") == ["don't", "👍", "✔"]
    assert tokens("+1, not -1 or +15551234") == ["+1", "not", "-1", "or", "15551234"]
    assert tokens("ok? see https://x.example/?a=1 or bob@x.example") == ["ok", "?", "see", "or"]


# --- the reading ------------------------------------------------------------------------


def test_an_approval_quotes_its_intent_line_and_keeps_the_rest_as_comment() -> None:
    reading = read_reply("Hi Bob,\n\nYes please, go ahead.\n\nwatch the error rate\n")
    assert reading == Reading(True, "Yes please, go ahead.", "a plain yes", "watch the error rate")
    assert reading.explanation == 'read as an approval: "Yes please, go ahead."'
    assert reading.sentence == 'We read your reply as an approval ("Yes please, go ahead.").'


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("yes, but not today", 'it says "but"'),
        ("don't approve", 'it says "don\'t"'),
        ("I can\u2019t approve this", 'it says "can\'t"'),
        ("hold until Monday", 'it says "hold"'),
        ("ok after the backup finishes", 'it says "after"'),
        ("approved? no way", "it asks a question"),
        ("👍 👎", 'it says "👎"'),
        ("Approved\n\nActually, hold on", 'it says "hold"'),  # a veto anywhere counts
        ("looks good, send it to finance", "it is not a plain yes"),
        ("thanks", "it is not a plain yes"),
        ("Sent from my iPhone", "it is empty"),
    ],
)
def test_a_rejection_says_why(text: str, why: str) -> None:
    reading = read_reply(text)
    assert (reading.approved, reading.why) == (False, why)
    assert reading.explanation == f"read as a rejection: {why}"


def test_a_rejection_quotes_the_whole_reply_on_one_line() -> None:
    reading = read_reply("Yes.\n\nBut wait until\nthe backup is done.")
    assert reading.sentence == (
        'We read your reply as a rejection ("Yes. But wait until the backup is done."): '
        'it says "but".'
    )
    assert read_reply("").sentence == "We read your reply as a rejection: it is empty."


def test_long_replies_are_cut_when_quoted() -> None:
    reading = read_reply("maybe " * 40)
    assert len(reading.said) == QUOTE_LIMIT and reading.said.endswith("…")


@pytest.mark.parametrize("text", ["no problem, approved", "Approved, no worries"])
def test_politeness_with_a_negative_word_is_no_veto(text: str) -> None:
    assert read_reply(text).approved


@pytest.mark.parametrize("text", ["Hi Alice, approved.", "Hello team,\napproved", "hey, LGTM"])
def test_a_greeting_before_the_yes_is_skipped(text: str) -> None:
    assert read_reply(text).approved


def test_a_greeting_alone_is_no_yes() -> None:
    assert not read_reply("Hi Alice,").approved
    assert not read_reply("Hi Alice,\nthanks").approved


def test_first_line_skips_blank_lines() -> None:
    assert first_line("\n\n  hello \nworld") == "hello"
