"""Requests as Telegram messages, rendered without a network: what Telegram would make of the
HTML (the fake's parser: the entities Telegram creates, and mentions it would detect), the
limits, and the signed callback_data."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from channels.telegram import render
from channels.telegram.callbacks import DATA_LIMIT, CallbackSigner
from gateway.lifecycle import Kind, Status
from gateway.seam import Progress, decode
from gateway.wire.models import Origin
from tests.fakes.telegram import TEXT_LIMIT, entities_of, utf16
from tests.helpers import detached
from tests.unit.views import REQUESTED, request_view

HOSTILE = (
    '@everyone @all @channel_admins <b>bold</b> <a href="tg://user?id=42">you</a> '
    '<a href="https://evil.example">Approve</a> &amp; </pre>'
)
ALICE = {"channel": "telegram", "user_id": "1001", "name": "Alice"}
SAFE = {"bold", "italic", "code", "pre"}  # the only entities agent text may end up in
LINK = "https://gw.example/r/RID123"


def shown(html: str) -> tuple[str, list[str]]:
    """The text Telegram shows for `html`, and the types of its entities."""
    text, entities = entities_of(html, "HTML")
    return text, [e["type"] for e in entities]


def hostile_request(kind: Kind = Kind.FUNCTION_CALL, **changes: Any) -> Any:
    origin = Origin(via="mcp", client=HOSTILE[:200], tool="@all").model_dump(exclude_none=True)
    if kind == Kind.FUNCTION_CALL:
        spec = {"fn": "@all", "kwargs": {"note": HOSTILE, "long": {"nested": HOSTILE}}}
    else:
        spec = {"msg": HOSTILE}
    return request_view(kind=kind, run_id="@ops <i>", spec=spec | {"origin": origin}, **changes)


@pytest.mark.parametrize("kind", [Kind.FUNCTION_CALL, Kind.HUMAN_CONTACT])
def test_agent_text_mentions_nobody_and_shows_as_typed(kind: Kind) -> None:
    decided = {"status": Status.REJECTED, "comment": HOSTILE, "user_info": ALICE}
    if kind == Kind.HUMAN_CONTACT:
        decided = {"status": Status.RESPONDED, "response": HOSTILE, "user_info": ALICE}
    for post in (
        render.posted(hostile_request(kind)),
        render.as_it_stands(hostile_request(kind, responded_at=REQUESTED, **decided)),
    ):
        text, entities = entities_of(post.text, "HTML")
        ours = {"type": "text_link", "url": LINK}  # "Open the request"
        unsafe = [e for e in entities if e["type"] not in SAFE and not ours.items() <= e.items()]
        assert unsafe == []
        assert '<b>bold</b> <a href="tg://user?id=42">you</a>' in text
        assert "@\u2060everyone @\u2060all @\u2060channel_admins" in text
        assert "&amp; </pre>" in text


def test_the_approval_message_and_its_buttons() -> None:
    options = [{"name": "later", "title": "Not now"}]
    post = render.posted(
        request_view(
            spec={"fn": "drop_table", "kwargs": {"name": "users"}, "reject_options": options}
        )
    )
    text, types = shown(post.text)
    assert text == (
        "🤖 Agent deploy-bot wants to call drop_table\n\nname: users\n\ncall call-1\n"
        "Open the request\n\nReply to this message to approve or reject it in words."
    )
    assert types == ["bold", "bold", "code", "text_link", "italic"]
    assert [[(b.label, b.id) for b in row] for row in post.rows] == [
        [("✅ Approve", "gw:approve:RID123"), ("❌ Reject…", "gw:reject:RID123")],
        [("Not now", "gw:option:0:RID123")],
    ]


def test_a_decided_request_has_no_buttons_and_says_who() -> None:
    view = request_view(status=Status.APPROVED, user_info=ALICE, responded_at=REQUESTED)
    post = render.as_it_stands(view)
    text, _types = shown(post.text)
    assert post.rows == ()
    assert text.endswith("✅ Approved by Alice in Telegram at 2026-11-22 03:00 UTC")
    assert "Reply to this message" not in text


def test_a_partial_approval_keeps_the_buttons_and_shows_progress() -> None:
    view = request_view(progress=Progress(1, 2, (ALICE,)))
    post = render.as_it_stands(view)
    text, _types = shown(post.text)
    assert "⏳ 1 of 2 approvals: Alice (Telegram)" in text
    assert post.rows == render.posted(request_view()).rows
    assert render.as_it_stands(request_view()) == render.posted(request_view())


def test_the_origin_line_is_under_the_headline() -> None:
    origin = {"via": "mcp", "client": "claude-code", "tool": "request_approval"}
    view = request_view(spec={"fn": "f", "kwargs": {}, "origin": origin})
    text, _types = shown(render.posted(view).text)
    assert text.splitlines()[1] == (
        "Requested through an MCP client: claude-code, tool request_approval"
    )


def test_long_arguments_are_cut_with_a_link_and_the_message_fits() -> None:
    kwargs = {f"arg{i}": "@" * 3000 for i in range(10)}
    post = render.posted(request_view(spec={"fn": "f", "kwargs": kwargs}))
    text, types = shown(post.text)
    assert utf16(text) <= TEXT_LIMIT
    assert "more arguments: see the full request" in text and "text_link" in types
    question = render.posted(request_view(kind=Kind.HUMAN_CONTACT, spec={"msg": "😀" * 5000}))
    assert utf16(shown(question.text)[0]) <= TEXT_LIMIT


def test_a_reminder_mentions_only_the_people_awaited() -> None:
    view = request_view(progress=Progress(1, 2, (ALICE,)))
    text = render.reminder(replace(view, spec=view.spec), ["1002", "@all", "1003"])
    _shown, entities = entities_of(text, "HTML")
    assert [(e["type"], e["user"]["id"]) for e in entities] == [
        ("text_mention", 1002),
        ("text_mention", 1003),
    ]


def test_callback_data_is_signed_for_its_chat_and_fits_64_bytes() -> None:
    signer = CallbackSigner(detached("telegram").keys)
    rid = "A" * 22  # the gateway's rids: 16 random bytes, URL-safe
    for button in (f"gw:approve:{rid}", f"gw:option:24:{rid}"):
        data = signer.data(-1001234567890, button)
        assert len(data.encode()) <= DATA_LIMIT
        assert signer.read(-1001234567890, data) == decode(button)
        assert signer.read(1001, data) is None  # copied into another chat
        tampered = data.replace(f":{rid}", f":{'B' * 22}")
        assert signer.read(-1001234567890, tampered) is None
        assert signer.read(-1001234567890, button) is None  # unsigned
