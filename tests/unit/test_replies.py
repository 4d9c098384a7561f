"""The shared reader of free-text answers to an approval (gateway/replies.py), rule by rule.
The phrasings themselves live in tests/data/replies/corpus.toml (test_reply_corpus.py)."""

from __future__ import annotations

import pytest

from gateway.seam.grants import offered
from gateway.seam.replies import (
    QUOTE_LIMIT,
    Reading,
    Verdict,
    first_line,
    grant_hint,
    new_text,
    read_reply,
    tokens,
)

QUOTED_REQUEST = "> Agent agent-7 wants to call drop_table\n> Reply APPROVE, or REJECT\n"


# --- the reply's own words --------------------------------------------------------------


@pytest.mark.parametrize(
    "after",
    [
        "-- \nAlice Smith\nVP Engineering | Acme Corp\n+1 555 0100",
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
        "22.11.2026 10:00, Approvals пишет:\n" + QUOTED_REQUEST,
        "-----Original Message-----\nFrom: Approvals\nSent: Sunday, 22 Nov 2026\nTo: Alice\nNo",
        "From: Approvals <a@x.test>\nSent: Sunday, 22 Nov 2026\nTo: Alice\nSubject: x\n\nNo",
        "________________________________\nFrom: Approvals\nSent: 11/22/2026\nTo: Alice\n\nNo",
        "*From:* Approvals\n*Date:* Sunday, 22 Nov 2026\n*Subject:* x\n\nNo",
        "Von: Approvals\nGesendet: Sonntag, 22. November 2026\nAn: Alice\nBetreff: x\n\nNein",
        "---------- Forwarded message ---------\nFrom: Approvals\nDate: Sun, 22 Nov 2026\n\nNo",
        "Begin forwarded message:\n\nFrom: Approvals\nSubject: x\nDate: 22 Nov 2026\n\nNo",
    ],
)
def test_new_text_ends_where_the_quote_or_signature_starts(after: str) -> None:
    assert new_text(f"Approved, thanks!\n\n{after}\n", signer="Alice Smith") == (
        "Approved, thanks!"
    )


def test_quotes_without_a_real_attribution_stay_they_are_someone_elses_words() -> None:
    text = "> Approve?\nYes\n> anything else\nno, thanks"
    assert new_text(text) == text
    assert read_reply("> Can we hold this until the backup finishes?\n\nAgreed.").why == (
        "it answers quoted words"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Approved.\n\nSent from my iPhone\nActually hold off until Dana confirms.",
        "Approved\n________________________________\nDana: please hold until the freeze",
        "OK\n--\nbut only on staging",
        "Approved\n-- \nAlice\nP.S. not before the backup finishes",
        "Approved.\n\nThanks,\nAlice\nStaging, not prod.",
        "Go ahead.\n\nAlice Smith (not the DB owner, so check with Dana)",
        "Yes\n\nAlice Smith, for the record: I think this is a mistake",
    ],
)
def test_words_under_a_footer_separator_or_name_are_still_read(text: str) -> None:
    assert read_reply(text, signer="Alice Smith").verdict is Verdict.UNCLEAR


@pytest.mark.parametrize(
    "text",
    [
        "Approve\nsent from the beach, do not run before I'm back",
        "Yes\nBut see what Bob wrote:\n> do not run on prod",
        "OK\n\nOn Sunday Bob wrote:\nwait for me",  # no quote follows: the person's text
        "Yes\nOn second thought, see what Bob wrote:\n> no",  # no date, no address
    ],
)
def test_lines_that_only_look_like_markers_are_the_persons_text(text: str) -> None:
    assert new_text(text) == text


def test_lines_that_only_look_like_headers_stay() -> None:
    text = "From: the logs, it is fine\nTo: whom it may concern"
    assert new_text(text) == text  # a header block also has a Sent: or Date: line


# --- words ------------------------------------------------------------------------------


def test_tokens_are_normalised() -> None:
    assert tokens("LGTM 👍🏽!") == ["lgtm", "👍", "."]  # case, skin tone; "!" ends a sentence
    assert tokens("Don\u2019t :+1::skin-tone-3: ✔\ufe0f") == ["don't", "👍", "✔"]
    assert tokens("+1, not -1 or +15551234") == ["+1", "not", "-1", "or", "15551234"]
    # A link, an address or someone addressed is a word of its own: no plain yes holds one.
    assert tokens("ok? see https://x.example/?a=1 or bob@x.example") == [
        *("ok", "?", "see", "@", "or", "@")
    ]
    assert tokens("~~approved~~ ¬ :/ ;)") == ["~", "~", "approved", "~", "~", "¬", "😕", "😕"]
    assert tokens("!approved -approved- [ ]") == ["¬", "approved", "~", "approved", "~", "[", "]"]
    assert tokens("w\u200bait <@U123> <https://x.example|blocked>") == ["wait", "@", "blocked"]
    assert tokens("ok\u037e ok\U0001e95f") == ["ok", "?", "ok", "?"]  # Greek, Adlam


# --- the reading ------------------------------------------------------------------------


def test_an_approval_is_a_plain_yes_and_quotes_it() -> None:
    reading = read_reply("Hi Bob,\n\nYes please, go ahead.\n\nThanks,\nAlice\n")
    assert reading == Reading(Verdict.APPROVE, "Yes please, go ahead.", "a plain yes")
    assert reading.explanation == 'read as an approval: "Yes please, go ahead."'
    assert reading.sentence == 'We read your reply as an approval ("Yes please, go ahead.").'


def test_a_yes_with_more_to_say_is_unclear_and_asks_again() -> None:
    reading = read_reply("Hi Bob,\n\nYes please, go ahead.\n\nwatch the error rate\n")
    assert reading.verdict is Verdict.UNCLEAR
    assert reading.why == 'it says more than yes ("watch the error rate")'
    assert reading.sentence.startswith("I couldn't read that as a clear yes or no (")
    assert reading.sentence.endswith(": reply APPROVE, or REJECT followed by your reason.")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("yes, but not today", 'it says "but"'),
        ("hold until Monday", 'it says "hold"'),
        ("ok after the backup finishes", 'it says "after"'),
        ("approved? no way", "it asks a question"),
        ("ok\u061f", "it asks a question"),  # Arabic
        ("Approve\u203d", "it asks a question"),  # interrobang
        ("\U0001f44d \U0001f44e", "it says both yes and no"),
        ("Approved\n\nActually, hold on", 'it says "hold"'),
        (
            "looks good, send it to finance",
            'it says more than yes ("looks good, send it to finance")',
        ),
        ("thanks", "it is neither a plain yes nor a plain no"),
        ("Sent from my iPhone", "there is nothing to read"),
        ("Yes\nBut see what Bob wrote:\n> do not run on prod", "it answers quoted words"),
        ("Approved.\n\n> do not run on prod", "it answers quoted words"),
        ("Approve\nsent from the beach, do not run", "it says both yes and no"),
    ],
)
def test_unclear_says_why(text: str, why: str) -> None:
    reading = read_reply(text)
    assert (reading.verdict, reading.why) == (Verdict.UNCLEAR, why)
    assert reading.explanation == f"read as unclear: {why}"


@pytest.mark.parametrize(
    "text",
    [
        "no",
        "Nope, too risky",
        "don't approve",
        "I can\u2019t approve this",
        "👎",
        "Nein, bitte nicht",
    ],
)
def test_a_plain_no_rejects(text: str) -> None:
    reading = read_reply(text)
    assert reading.verdict is Verdict.REJECT
    assert reading.sentence.startswith("We read your reply as a rejection (")


@pytest.mark.parametrize("text", ["not yet", "No, unless Bob agrees", "no?"])
def test_a_no_that_holds_back_or_asks_is_unclear(text: str) -> None:
    assert read_reply(text).verdict is Verdict.UNCLEAR


def test_a_reading_quotes_the_whole_reply_on_one_line() -> None:
    reading = read_reply("Yes.\n\nBut wait until\nthe backup is done.")
    assert reading.said == "Yes. But wait until the backup is done."
    assert read_reply("").sentence == (
        "I couldn't read that as a clear yes or no (there is nothing to read): "
        "reply APPROVE, or REJECT followed by your reason."
    )


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


def test_the_senders_signature_block_is_not_read() -> None:
    text = "Approved.\n\nAlice Smith\nHead of Platform\n+1 555 0100"
    assert read_reply(text, signer="Alice Smith").approved
    assert not read_reply(text).approved  # whose name that is, only the sender tells
    postscript = "Approved.\n\nAlice\nPS: not before 6pm"
    assert read_reply(postscript, signer="Alice Smith").verdict is Verdict.UNCLEAR


def test_first_line_skips_blank_lines() -> None:
    assert first_line("\n\n  hello \nworld") == "hello"


@pytest.mark.timeout(20)  # each took ~0.1 s; the quadratic reading of "--" lines took 95 s
@pytest.mark.parametrize(
    "text",
    [
        "--\n" * 5000,
        "--\nAcme Corp\n" * 3000,
        ("On 22 Nov 2026 10:00 " * 20 + "wrote:\n> q\n") * 400,
        "Approved\n" + "Alice\n" * 3000,
        "a\n" * 20000,
        "ok " * 15000,
        "ok not " * 7000,
        ". " * 20000,
    ],
    ids=[
        *("delimiters", "signature-blocks", "attributions", "names", "lines", "one-line"),
        *("yes-and-not", "breaks"),
    ],
)
def test_hostile_replies_are_read_in_linear_time(text: str) -> None:
    assert read_reply(text, signer="Alice Smith").verdict is not Verdict.APPROVE


# --- "approve for 1h": a standing grant ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("approve for 1h", "run:3600"),
        ("Approve for 30 minutes", "run:1800"),
        ("approved for 2 hours", "run:7200"),
        ("yes for 15m", "run:900"),
        ("yes for 1 h", "run:3600"),
        ("approve for an hour, thanks!", "run:3600"),
        ("approve for 1d", "run:86400"),
        ("approve for 3 days", "run:259200"),  # read as asked: the core refuses what it lacks
        ("approve for 1h this run", "run:3600"),
        ("approve for 1h in this run", "run:3600"),
        ("approve for 1h exactly", "args:3600"),
        ("approve for 1h these arguments", "args:3600"),
        ("approve for 1h with these exact arguments", "args:3600"),
        ("approve for 1h any run", "key:3600"),
        ("approve for 1h for this agent", "key:3600"),
        ("approve until revoked", "run:forever"),
        ("Hi Bob,\napprove for 4h\n\nThanks,\nAlice", "run:14400"),
    ],
)
def test_a_first_line_that_asks_for_a_grant_approves_with_that_grant(text: str, value: str) -> None:
    reading = read_reply(text, signer="Alice", grants=True)
    assert reading.verdict is Verdict.APPROVE
    assert reading.grant is not None and reading.grant.value == value


def test_a_grant_reading_says_what_it_allows() -> None:
    reading = read_reply("approve for 1h", grants=True)
    assert reading.sentence == (
        "We read your reply as an approval that also allows this function in this run, "
        'for 1 hour ("approve for 1h").'
    )


@pytest.mark.parametrize(
    "text",
    [
        "approve. for 1h I'll be away",  # a sentence ends before "for"
        "approve\nfor 1h",  # not on one line
        "approve for 1h I'll be away",
        "approve for 1h from Monday",
        "approve for 1h all runs",  # not a scope it knows: no silent default
        "approve for 1h this run exactly",
        "approve for 1h?",
        "approve for 1h not",
        "approve for 1h\nbut not on prod",
        "approve for 1.5h",
        "approve for 1",
        "approve for a while",
        "approve for next week",
        "approve for staging",
        "ok for 1h",  # only approve, approved and yes ask for a grant
        "please approve for 1h",
        "don't approve for 1h",
        "approve for 1h\n> no",
    ],
)
def test_look_alikes_ask_for_no_grant(text: str) -> None:
    reading = read_reply(text, grants=True)
    assert reading.grant is None
    assert reading.verdict is not Verdict.APPROVE


@pytest.mark.parametrize("text", ["approve for 1h", "yes for 15m exactly", "approve until revoked"])
def test_without_grants_a_grant_reply_stays_unclear_as_before(text: str) -> None:
    reading = read_reply(text)  # a caller that cannot give a grant never approves without it
    assert (reading.verdict, reading.grant) == (Verdict.UNCLEAR, None)
    assert read_reply(text, grants=True).approved


def test_the_grant_hint_lists_what_is_offered() -> None:
    assert grant_hint((), "read_file") is None
    assert grant_hint(offered(8 * 3600, False), "read_file") == (
        'Reply "approve for 1h" to approve and also allow read_file in this run for 1 hour '
        '(15m, 1h, 4h or 8h; add "exactly" or "any run" for another scope).'
    )
    assert grant_hint(offered(1800, True), "f") == (
        'Reply "approve for 15m" to approve and also allow f in this run for 15 minutes '
        '(15m or 30m, or "approve until revoked"; add "exactly" or "any run" for another scope).'
    )
