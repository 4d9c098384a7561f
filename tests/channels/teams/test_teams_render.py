"""Requests as Adaptive Cards, on their JSON: buttons carry the shared callback ids, a decided
card has none, agent text is never markup and never pings, and big requests stay within
Teams' message size."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from channels.teams.render import (
    TEXT_LIMIT,
    as_it_stands,
    escape,
    note_card,
    posted_card,
    reminder_card,
    summary,
)
from gateway.seam import Progress, Verb, encode
from gateway.seam.grants import offered
from tests.channels.teams.helpers import actions, texts
from tests.unit.views import request_view

TEAMS_MESSAGE_BYTES = 28_000  # Teams refuses larger messages
# What an agent could try: markdown, a masked link, HTML, a Teams mention of the channel, the
# team or everyone, and Slack's and Discord's broadcast words.
HOSTILE = (
    "**bold** _it_ [click](https://evil.example) <b>x</b> <at>General</at> "
    '<at id="0">Operations</at> @channel @team @everyone <!here>'
)
APPROVER = {"channel": "teams", "user_id": "6f1b2c3d-1111-4a5b-8c9d-0000000000a1", "name": "Al"}


def elements(card: dict[str, Any]) -> list[dict[str, Any]]:
    """Every element of a card and of the forms in it."""
    found = list(card.get("body") or [])
    for action in actions(card):
        if action["type"] == "Action.ShowCard":
            found += action["card"]["body"]
    return found


def hostile_request() -> Any:
    spec = {
        "fn": HOSTILE,
        "kwargs": {HOSTILE: HOSTILE, "nested": {"note": HOSTILE}},
        "reject_options": [{"name": "x", "title": HOSTILE, "prompt_fill": HOSTILE}],
        "origin": {"via": "mcp", "client": HOSTILE},
    }
    return request_view(run_id=HOSTILE, call_id=HOSTILE, spec=spec)


def test_the_approval_card_carries_the_shared_callback_ids() -> None:
    card = posted_card(
        request_view(
            spec={"fn": "f", "kwargs": {}, "reject_options": [{"name": "spam", "title": "Spam"}]}
        )
    )
    verbs = {a["title"]: a["verb"] for a in actions(card) if a["type"] == "Action.Execute"}
    assert verbs == {
        "Approve": encode(Verb.APPROVE, "RID123"),
        "Reject": encode(Verb.REJECT, "RID123"),
        "Spam": encode(Verb.OPTION, "RID123", 0),
    }
    [reason] = [e for e in elements(card) if e.get("id") == "reason"]
    assert reason["isRequired"] is True  # Teams asks for it before the click goes out
    assert card["version"] == "1.5" and card["type"] == "AdaptiveCard"


def test_a_question_has_an_answer_form_and_its_options() -> None:
    card = posted_card(
        request_view(
            kind="human_contact",
            spec={"msg": "Which region?", "response_options": [{"name": "eu", "title": "EU"}]},
        )
    )
    assert "Which region?" in texts(card)
    verbs = {a["title"]: a["verb"] for a in actions(card) if a["type"] == "Action.Execute"}
    assert verbs == {"Send": encode(Verb.ANSWER, "RID123"), "EU": encode(Verb.OPTION, "RID123", 0)}


def test_grants_and_edits_are_offered_as_forms() -> None:
    view = request_view(grant_choices=offered(3600, False), editable=True)
    card = posted_card(view)
    [grant] = [e for e in elements(card) if e.get("id") == "grant"]
    assert {c["value"] for c in grant["choices"]} == {c.value for c in view.grant_choices}
    [edit] = [e for e in elements(card) if e.get("id") == "arg_0"]
    assert (edit["label"], edit["value"]) == ("name", "users")
    verbs = {a["verb"] for a in actions(card) if a["type"] == "Action.Execute"}
    assert {encode(Verb.GRANT, "RID123"), encode(Verb.EDIT, "RID123")} <= verbs


def test_a_decided_card_has_no_buttons_and_says_who_decided() -> None:
    decided = request_view(
        status="rejected",
        comment="not today",
        user_info=APPROVER,
        responded_at=datetime(2026, 11, 22, 4, 0, tzinfo=UTC),
    )
    card = as_it_stands(decided)
    assert [a["type"] for a in actions(card)] == ["Action.OpenUrl"]
    assert not [e for e in card["body"] if e["type"] == "ActionSet"]
    assert "❌ Rejected by Al in Teams at 2026-11-22 04:00 UTC: not today" in texts(card)


def test_progress_keeps_the_buttons_and_says_who_approved() -> None:
    progress = Progress(approvals=1, needed=2, approvers=(APPROVER,))
    card = as_it_stands(request_view(progress=progress))
    assert "1 of 2 approvals: Al (Teams)" in texts(card)
    assert any(a.get("verb") == encode(Verb.APPROVE, "RID123") for a in actions(card))
    assert as_it_stands(request_view()) == posted_card(request_view())


def test_agent_text_is_never_markup_and_never_pings() -> None:
    card = posted_card(hostile_request())
    for element in elements(card):
        if element["type"] == "TextBlock":  # the gateway's own words only
            assert HOSTILE not in element["text"] and "<at" not in element["text"]
    runs = [i["text"] for e in elements(card) for i in e.get("inlines") or []]
    assert sum(HOSTILE in text for text in runs) >= 5  # shown, as typed, in runs
    assert "msteams" not in card or "entities" not in card["msteams"]
    assert HOSTILE[:80] in {a["title"] for a in actions(card)}  # button titles: plain text


def test_a_reminder_mentions_only_entra_ids_with_escaped_names() -> None:
    alice = "6f1b2c3d-1111-4a5b-8c9d-0000000000a1"
    people = [
        (alice, "<at>General</at> **A**"),
        ("19:0a1b@thread.tacv2", "General"),  # a channel is no person
        ("everyone", "Everyone"),
    ]
    card = reminder_card(request_view(), people)
    [entity] = card["msteams"]["entities"]
    assert entity["mentioned"]["id"] == alice
    line = card["body"][0]["text"]
    assert line == entity["text"] and line.count("<at>") == 1
    assert "General" in line and "<at>General" not in line and "\\*\\*A\\*\\*" in line
    assert "Reminder: this request is still waiting for a decision" in texts(card)


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("**bold**", "\\*\\*bold\\*\\*"),
        ("[x](https://e)", "\\[x\\]\\(https://e\\)"),
        ("<at>General</at>", "\u2039at\u203aGeneral\u2039/at\u203a"),
        ("# head\n- item", "\\# head\n\\- item"),
        ("plain words", "plain words"),
    ],
)
def test_escape_makes_text_block_markup_literal(text: str, escaped: str) -> None:
    assert escape(text) == escaped


def test_a_note_is_plain_text() -> None:
    card = note_card(HOSTILE)
    run = {"type": "TextRun", "text": HOSTILE}
    assert card["body"] == [{"type": "RichTextBlock", "inlines": [run]}]


def test_a_huge_request_is_cut_with_a_link_and_fits_a_message() -> None:
    kwargs = {f"arg{n}": "x" * 5000 for n in range(40)} | {"blob": {"k": "y" * 50_000}}
    card = posted_card(request_view(spec={"fn": "f", "kwargs": kwargs}))
    assert len(json.dumps(card).encode()) < TEAMS_MESSAGE_BYTES
    runs = [i for e in card["body"] for i in e.get("inlines") or []]
    assert all(len(r["text"]) <= TEXT_LIMIT for r in runs)
    links = [r for r in runs if "selectAction" in r]
    assert links and links[0]["selectAction"]["url"] == "https://gw.example/r/RID123"
    assert any("more arguments" in r["text"] for r in runs)


def test_the_summary_is_short_plain_text() -> None:
    said = summary(request_view(run_id="bot\n\nname", spec={"fn": "x" * 500, "kwargs": {}}))
    assert len(said) <= 200 and "\n" not in said
