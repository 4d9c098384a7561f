"""Reading email replies: a corpus of saved replies, then the intent grammar case by case."""

from __future__ import annotations

import email
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from channels.email.html import html_to_text
from channels.email.reading import (
    MAX_BODY_CHARS,
    MAX_LINE_CHARS,
    TRUNCATED,
    Intent,
    dmarc_passed,
    intent_of,
    is_automatic,
    read_intent,
    reply_text,
    sender,
)
from channels.email.tokens import message_ids_in_thread, rid_from_headers
from gateway.answers.verbs import decision_for
from gateway.lifecycle import Kind
from gateway.seam import Refusal, Refused, Verb, Verdict
from gateway.store.rows import RequestRow

CORPUS = Path(__file__).parent.parent / "data" / "email"
BASE, KEY, AUTHSERV = "approvals@example.com", b"test-email-key", "mx.example.com"
FC_RID, HC_RID = "Vq3xZ9-kT_2mYbLw0pQa1g", "Hc7_PzLq0wRt5nU-9sYe2A"
REQUEST_ID = "<179543200012.4242.1589133620144839106.req-Vq3xZ9-kT_2mYbLw0pQa1g@example.com>"
REJECT_OPTIONS = [
    {"name": "too_risky", "title": "Too risky"},
    {"name": "wrong_env", "title": "Wrong environment", "prompt_fill": "use staging"},
]


def load(name: str) -> EmailMessage:
    message = email.message_from_bytes((CORPUS / name).read_bytes(), policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def parse(raw: str) -> EmailMessage:
    message = email.message_from_string(raw.replace("\n", "\r\n"), policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


@dataclass(frozen=True)
class Expected:
    intent: Intent | None  # None: automatic mail, which the pipeline drops unread
    sender: str | None
    automatic: str | None = None
    dmarc: bool = True
    rid: str = FC_RID


CASES = {
    "gmail_approve.eml": Expected(Intent("approve"), "alice.approver@gmail.com"),
    # "after the standup" defers the yes above it: no approval, the reply is the reason.
    "gmail_html_only.eml": Expected(
        Intent("unclear", "LGTM.\n\nShip it after the standup please."), "alice.approver@gmail.com"
    ),
    "outlook_reject.eml": Expected(Intent("reject", "not this quarter"), "bob.smith@contoso.com"),
    # A bare-name signature is indistinguishable from text, so it stays in the reason.
    "outlook_original_message.eml": Expected(
        Intent("reject", "budget freeze until January"),  # her signature is cut
        "alice.smith@fabrikam.com",
    ),
    "outlook_german_latin1.eml": Expected(Intent("approve"), "j.mueller@firma.example"),
    "thunderbird_german.eml": Expected(
        Intent("reject", "zu teuer, bitte erst die Kosten für den zweiten Cluster abklären."),
        "k.schneider@posteo.de",
    ),
    "apple_mail.eml": Expected(Intent("approve"), "erin@icloud.com"),
    "iphone_signature_base64.eml": Expected(Intent("approve"), "carol.nguyen@outlook.com"),
    "reject_option.eml": Expected(
        Intent("option", "run it against staging first,\nthen ask again.", "too_risky"),
        "dev.lead@fabrikam.com",
    ),
    "human_contact_multiline.eml": Expected(
        Intent(
            "response",
            "Yes, the budget for the offsite is 12k EUR in total.\n"
            "Please book the venue in Leipzig, not Berlin, and keep\n"
            "the catering vegetarian.",
        ),
        "dana@example.org",
        rid=HC_RID,
    ),
    "only_quote.eml": Expected(Intent("unreadable"), "alice.approver@gmail.com"),
    "bad_charset.eml": Expected(
        Intent("reject", "the caf\ufffd budget is \ufffd\ufffd gone"),
        "olaf@firma.example",
        dmarc=False,
    ),
    "two_from_addresses.eml": Expected(Intent("approve"), None),
    "display_name_spoof.eml": Expected(Intent("approve"), None),
    "out_of_office.eml": Expected(
        None, "bob.smith@contoso.com", automatic="Auto-Submitted: auto-replied"
    ),
    "dsn_bounce.eml": Expected(
        None, "mailer-daemon@mx.example.com", automatic="Return-Path: <>", dmarc=False
    ),
    "mailing_list_copy.eml": Expected(
        None, "approvers@lists.example.com", automatic="Precedence: list", dmarc=False
    ),
}


def test_every_corpus_file_has_a_row() -> None:
    assert sorted(path.name for path in CORPUS.glob("*.eml")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus(name: str) -> None:
    expected, message = CASES[name], load(name)
    assert sender(message) == expected.sender
    assert is_automatic(message) == expected.automatic
    assert dmarc_passed(message, AUTHSERV) is expected.dmarc
    assert rid_from_headers(message, BASE, KEY) == expected.rid
    if expected.intent is not None:
        kind = Kind.HUMAN_CONTACT if expected.rid == HC_RID else Kind.FUNCTION_CALL
        intent = read_intent(reply_text(message), kind=kind, options=REJECT_OPTIONS)
        assert intent == expected.intent


@pytest.mark.parametrize(
    "name", ["gmail_approve.eml", "outlook_reject.eml", "apple_mail.eml", "only_quote.eml"]
)
def test_html_part_alone_reads_the_same(name: str) -> None:
    message = load(name)
    html = message.get_body(preferencelist=("html",))
    assert html is not None
    html_only = EmailMessage()
    html_only["From"] = str(message["From"])  # whose signature it is
    html_only.set_content(html.get_content(), subtype="html")
    assert reply_text(html_only) == reply_text(message)


def test_thread_ids_point_at_the_reminder_first() -> None:
    ids = message_ids_in_thread(load("gmail_html_only.eml"))
    assert ids[0].startswith("<179543560077.4242.7730918827401185527.remind-")
    assert ids[1:] == [REQUEST_ID]


# --- reply_text -------------------------------------------------------------------------


def test_quoted_lines_without_a_real_attribution_are_kept() -> None:
    # Without an attribution above them, the quoted words may be anyone's: the reader must
    # see them (a yes or a no to them is no plain answer).
    message = parse("From: a@b.example\n\n> Approve?\nno: too late\n> Reply APPROVE or REJECT\n")
    assert reply_text(message) == "> Approve?\nno: too late\n> Reply APPROVE or REJECT"


@pytest.mark.parametrize(
    "tail",
    [
        "Sent from Mail for Windows",
        "---------- Forwarded message ---------\nFrom: Approvals\nDate: Sun, 22 Nov 2026\n\nOK",
    ],
)
def test_what_mail_parser_reply_leaves_is_cut_too(tail: str) -> None:
    assert reply_text(parse(f"From: a@b.example\n\nApproved\n\n{tail}\n")) == "Approved"


def test_format_flowed_lines_are_joined() -> None:
    message = parse(
        "From: a@b.example\nContent-Type: text/plain; charset=utf-8; format=flowed; delsp=yes\n\n"
        "Reject: the window is too \nshort.\n"
    )
    assert reply_text(message) == "Reject: the window is tooshort."


def test_empty_plain_part_falls_back_to_html() -> None:
    message = EmailMessage()
    message.set_content("\n")
    message.add_alternative("<p>Deny &amp; revert</p>", subtype="html")
    assert reply_text(message) == "Deny & revert"


def test_html_is_the_text_a_person_sees_with_quotes_as_quotes() -> None:
    html = (
        "<html><head><title>t</title><style>p{}</style></head><body>"
        "<p>first&nbsp;line</p><div>second<br>third</div>"
        "<blockquote><blockquote>inner</blockquote>still quoted</blockquote>"
        "<script>alert(1)</script><p>after</p>"
        '<div id="divRplyFwdMsg"><b>From:</b> x</div><p>old mail</p></body></html>'
    )
    assert html_to_text(html) == (
        "first line\nsecond\nthird\n> > inner\n> still quoted\nafter\nFrom: x\nold mail"
    )


@pytest.mark.parametrize(
    ("html", "marked"),
    [
        ("<p><s>Approved</s></p>", "~ Approved ~"),
        ('<p style="text-decoration:line-through">Approved</p>', "~ Approved ~"),
        ('<div style="display:none">Approved</div>', "[hidden] Approved"),
        ('<span style="color:#ffffff">Approved</span>', "[hidden] Approved"),
        ("<!--[if mso]><p>Not on prod</p><![endif]--><p>Approved</p>", "[if mso]"),
        ('<style>p::after{content:" not"}</style><p>Approved</p>', "[styled]"),
        ('<div>OK <img alt="🤔" src="x.png"></div>', "OK 🤔"),
        ('<li><input type="checkbox"> Approve</li>', "[ ] Approve"),
    ],
)
def test_html_that_looks_unlike_what_it_says_is_marked(html: str, marked: str) -> None:
    text = html_to_text(html)
    assert marked in " ".join(text.split())
    assert fc(text).verdict != "approve"


def test_hostile_bodies_are_bounded_before_parsing() -> None:
    message = EmailMessage()
    message.set_content("approve\n" + "word " * 10_000 + "\n" + "x" * 30_000)
    text = reply_text(message)
    assert text.startswith("approve\nword word")
    assert text.endswith(f"\n{TRUNCATED}") and len(text) <= MAX_BODY_CHARS + len(TRUNCATED) + 1
    assert fc(text).verdict != "approve"  # what was not read cannot make a plain yes
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE_CHARS


def test_long_lines_are_broken_at_a_space_without_losing_words() -> None:
    words = [f"word{i}" for i in range(400)]
    message = EmailMessage()
    message.set_content(" ".join(words))
    text = reply_text(message)
    assert len(text.splitlines()) > 1
    assert text.split() == words


def test_message_without_a_text_body_reads_empty() -> None:
    message = EmailMessage()
    message.add_attachment(b"\x00\x01", maintype="application", subtype="octet-stream")
    assert reply_text(message) == ""


# --- read_intent ------------------------------------------------------------------------


def fc(text: str, options: list[dict[str, Any]] | None = None) -> Intent:
    return read_intent(text, kind=Kind.FUNCTION_CALL, options=options or [])


def hc(text: str, options: list[dict[str, Any]] | None = None) -> Intent:
    return read_intent(text, kind=Kind.HUMAN_CONTACT, options=options or [])


@pytest.mark.parametrize(
    "text",
    [
        "approve",
        "Approved!",
        "YES",
        "LGTM.",
        "\n\n  lgtm \n",
        "No problem, go ahead",
        "yes please",
        "looks good, send it",
    ],
)
def test_a_plain_yes_approves(text: str) -> None:
    intent = fc(text)
    assert intent == Intent("approve")
    assert intent.reading is not None and intent.reading.approved


def test_an_approval_with_more_to_say_is_unclear() -> None:
    text = "Approve\n\nwatch the error rate"
    assert fc(text) == Intent("unclear", text)


@pytest.mark.parametrize(
    ("text", "comment"),
    [
        ("reject", None),
        ("No.", None),
        ("Denied!", None),
        ("Reject: not this quarter", "not this quarter"),
        ("deny - budget freeze", "budget freeze"),
        ("Rejected, see below\nthe budget is gone", "see below\nthe budget is gone"),
        ("REJECT:\n\ntoo expensive", "too expensive"),
        ("no \u2014 too risky", "too risky"),
    ],
)
def test_reject_words_take_the_rest_as_reason(text: str, comment: str | None) -> None:
    assert fc(text) == Intent("reject", comment)


def test_a_no_that_is_no_keyword_rejects_with_the_whole_text() -> None:
    assert fc("nope") == Intent("reject", "nope")
    assert fc("Reject not now") == Intent("reject", "Reject not now")  # REJECT is a rejection


@pytest.mark.parametrize(
    "text",
    [
        "No doubt, go ahead",  # a no and a yes
        "Nothing to add",
        "no-op for now",
        "Yes, but wait until Friday",  # an approve word held back by a condition is no yes
        "approve? not sure",
        "looks good, send it to finance",
    ],
)
def test_anything_else_on_an_approval_is_unclear_with_the_whole_text(text: str) -> None:
    intent = fc(text)
    assert intent == Intent("unclear", text)
    assert intent.reading is not None and intent.reading.verdict is Verdict.UNCLEAR


def test_the_reading_says_why() -> None:
    reading = fc("yes, but not today").reading
    assert reading is not None
    assert reading.sentence == (
        'I couldn\'t read that as a clear yes or no (it says "but"): '
        "reply APPROVE, or REJECT followed by your reason."
    )
    assert fc("too risky", REJECT_OPTIONS).reading is None  # an option is named, not read


@pytest.mark.parametrize("text", ["", "   \n\n  "])
def test_empty_text_is_unreadable(text: str) -> None:
    assert fc(text) == Intent("unreadable")
    assert hc(text) == Intent("unreadable")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("too risky", Intent("option", None, "too_risky")),
        ("TOO_RISKY: canary first", Intent("option", "canary first", "too_risky")),
        ("Wrong Environment", Intent("option", "use staging", "wrong_env")),
        (
            "wrong environment.\nprod-eu, not prod-us",
            Intent("option", "prod-eu, not prod-us", "wrong_env"),
        ),
        ("too risky today", Intent("unclear", "too risky today")),
    ],
)
def test_reject_options_match_name_or_title_case_insensitively(text: str, expected: Intent) -> None:
    assert fc(text, REJECT_OPTIONS) == expected


def test_longest_option_label_wins() -> None:
    options = [{"name": "no"}, {"name": "no_budget", "title": "No budget"}]
    assert fc("no budget: Q4", options) == Intent("option", "Q4", "no_budget")


@pytest.mark.parametrize("text", ["approve", "yes", "LGTM"])
def test_approve_words_are_just_text_on_a_human_contact(text: str) -> None:
    assert hc(text) == Intent("response", text)


def test_human_contact_response_options() -> None:
    options = [{"name": "leipzig", "title": "Leipzig", "prompt_fill": "book Leipzig"}]
    assert hc("Leipzig") == Intent("response", "Leipzig")  # no options given: plain text
    assert hc("leipzig", options) == Intent("option", "book Leipzig", "leipzig")
    assert hc("Leipzig, 40 people", options) == Intent("option", "40 people", "leipzig")


def test_human_contact_reject_words_are_a_response() -> None:
    assert hc("No, not Berlin.\nLeipzig.") == Intent("response", "No, not Berlin.\nLeipzig.")


# --- sender -----------------------------------------------------------------------------


def with_from(value: str) -> EmailMessage:
    return parse(f"From: {value}\nTo: approvals@example.com\n\nhi\n")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Alice <Alice@Example.COM>", "alice@example.com"),
        ("alice@example.com", "alice@example.com"),
        ('"Smith, Bob" <bob@example.com>', "bob@example.com"),
        ('"bob@example.com" <Bob@example.com>', "bob@example.com"),  # the same address shown
        ("=?utf-8?b?w6lsaXNl?= <elise@example.com>", "elise@example.com"),
    ],
)
def test_clean_sender(value: str, expected: str) -> None:
    assert sender(with_from(value)) == expected


@pytest.mark.parametrize(
    "value",
    [
        '"boss@corp.com" <attacker@evil.com>',
        "=?utf-8?q?boss=40corp.com?= <attacker@evil.com>",
        "Bob (boss@corp.com) <attacker@evil.com>",
        "Bob (=?utf-8?q?boss=40corp.com?=) <attacker@evil.com>",
        "alice@example.com, bob@example.com",
        "team: alice@example.com;",
        "undisclosed-recipients:;",
        "bob@x.example <alice@example.com>",
        "=?utf-8?q?Alice=0D=0ABcc:_x?= <alice@example.com>",
        "Alice <alice@example.com",
        '"alice@example.com"@evil.com',
        "Alice <alice@[192.0.2.1]>",
        "alice",
        "<>",
    ],
)
def test_doubtful_sender_is_none(value: str) -> None:
    assert sender(with_from(value)) is None


def test_missing_or_repeated_from_is_none() -> None:
    assert sender(parse("To: a@example.com\n\nhi\n")) is None
    assert sender(parse("From: a@example.com\nFrom: a@example.com\n\nhi\n")) is None


# --- is_automatic -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("Auto-Submitted: auto-generated", "Auto-Submitted: auto-generated"),
        (
            "Auto-Submitted: Auto-Replied; owner-email=x@y.z",
            "Auto-Submitted: Auto-Replied; owner-email=x@y.z",
        ),
        ("Precedence: bulk", "Precedence: bulk"),
        ("Precedence: JUNK", "Precedence: JUNK"),
        ("Precedence: auto_reply", "Precedence: auto_reply"),
        ("X-Autoreply: yes", "X-Autoreply: yes"),
        ("X-Autorespond: vacation", "X-Autorespond: vacation"),
        ("List-Id: <team.lists.example.com>", "List-Id: <team.lists.example.com>"),
        ("Return-Path: <>", "Return-Path: <>"),
    ],
)
def test_automatic_headers(header: str, reason: str) -> None:
    assert is_automatic(parse(f"From: a@example.com\n{header}\n\nhi\n")) == reason


@pytest.mark.parametrize(
    "header",
    [
        "Auto-Submitted: no",
        "Precedence: first-class",
        "X-Auto-Response-Suppress: All",  # asks others not to auto-reply; says nothing of itself
        "Return-Path: <a@example.com>",
    ],
)
def test_person_written_mail_is_not_automatic(header: str) -> None:
    assert is_automatic(parse(f"From: a@example.com\n{header}\n\nhi\n")) is None


def test_reports_are_automatic() -> None:
    message = EmailMessage()
    message["From"] = "mx@example.com"
    message.set_content("Your message was read.")
    message.make_mixed()
    message.replace_header("Content-Type", "multipart/report; report-type=disposition-notification")
    assert is_automatic(message) == "a delivery or read report (multipart/report)"


def test_folded_reason_is_one_line() -> None:
    message = parse(
        "From: a@example.com\nAuto-Submitted: auto-replied;\n owner=x@example.com\n\nhi\n"
    )
    assert is_automatic(message) == "Auto-Submitted: auto-replied; owner=x@example.com"


@pytest.mark.parametrize("local", ["MAILER-DAEMON", "postmaster"])
def test_mail_system_senders_are_automatic(local: str) -> None:
    reason = is_automatic(parse(f"From: Mail System <{local}@mx.example.com>\n\nhi\n"))
    assert reason == f"sent by {local.lower()}"


# --- dmarc_passed -----------------------------------------------------------------------


def with_results(*values: str) -> EmailMessage:
    headers = "".join(f"Authentication-Results: {value}\n" for value in values)
    return parse(f"From: a@example.com\n{headers}\nhi\n")


@pytest.mark.parametrize(
    "values",
    [
        ["mx.example.com; dkim=pass header.d=example.com; dmarc=pass header.from=example.com"],
        ["MX.Example.COM; DMARC=PASS (p=reject) header.from=example.com"],
        ["mx.example.com 1; spf=pass smtp.mailfrom=example.com; dmarc = pass"],
        ["attacker.example; dmarc=fail", "mx.example.com; dmarc=pass"],
    ],
)
def test_dmarc_pass_from_our_mta(values: list[str]) -> None:
    assert dmarc_passed(with_results(*values), AUTHSERV)


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["attacker.example; dmarc=pass header.from=example.com"],
        ["mx.example.com.evil.example; dmarc=pass"],
        ["mx.example.com; dmarc=fail (p=reject) header.from=example.com"],
        ["mx.example.com; dmarc=fail (dmarc=pass) header.from=example.com"],
        ["mx.example.com; spf=pass (x; dmarc=pass) smtp.mailfrom=example.com"],
        ['mx.example.com; spf=pass smtp.mailfrom="x;dmarc=pass"'],
        ["mx.example.com; dkim=pass header.d=example.com"],
        ["mx.example.com; none"],
        ["mx.example.com; dmarc=pass", "mx.example.com; dmarc=fail"],
    ],
)
def test_dmarc_not_passed(values: list[str]) -> None:
    assert not dmarc_passed(with_results(*values), AUTHSERV)


def test_a_plain_yes_approves_only_if_the_html_part_says_it_too() -> None:
    def two_parts(plain: str, html: str) -> EmailMessage:
        message = EmailMessage()
        message["From"] = "Alice Smith <alice@example.org>"
        message.set_content(plain)
        message.add_alternative(html, subtype="html")
        return message

    same = two_parts("Approved\n", "<p>Approved</p>")
    struck = two_parts("Approved\n", "<p><s>Approved</s></p>")
    assert intent_of(same, kind=Kind.FUNCTION_CALL, options=[]).verdict == "approve"
    unclear = intent_of(struck, kind=Kind.FUNCTION_CALL, options=[])
    assert (unclear.verdict, unclear.comment) == ("unclear", "~ Approved ~")


def test_the_answer_path_reads_a_reply_as_the_email_channel_did() -> None:
    """Without a display name the channel reads with no signer; the answer path, given the
    address as the responder's name, must not read a line with that address as a signature."""
    row = RequestRow(
        rid="r",
        project_id=1,
        kind="function_call",
        call_id="c",
        run_id="run",
        spec_json='{"fn": "f", "kwargs": {}}',
        body_hash="h",
        route_json="[]",
        status="pending",
        requested_at=datetime.now(UTC),
    )
    text = "Approved\n\nalice@example.org"
    assert fc(text).verdict == "unclear"
    who = {"channel": "email", "user_id": "alice@example.org", "name": "alice@example.org"}
    made = decision_for(row, Verb.REPLY, who, text=text)
    assert isinstance(made, Refused) and made.why == Refusal.UNCLEAR
