"""Golden tests for the Discord embed and button renderers (pure: no network, no loop)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from channels.discord.render import (
    EMBED_TOTAL_LIMIT,
    FIELD_VALUE_LIMIT,
    ButtonSpec,
    approval,
    decided,
    question,
)
from gateway.seam.views import RequestView
from tests.unit.views import REQUESTED, request_view


def view(**changes: Any) -> RequestView:
    # An underscore, so the golden test shows markdown escaping.
    return request_view(**({"run_id": "deploy_bot"} | changes))


def test_approval_golden() -> None:
    embed, buttons = approval(view())
    assert embed.to_dict() == {
        "title": "Agent deploy\\_bot wants to call drop\\_table",
        "url": "https://gw.example/r/RID123",
        "color": 0x5865F2,
        "timestamp": "2026-11-22T03:00:00+00:00",
        "footer": {"text": "call call-1"},
        "fields": [{"name": "name", "value": "users", "inline": False}],
        "type": "rich",
        "flags": 0,
    }
    assert buttons == [
        ButtonSpec("Approve", "success", "gw:approve:RID123"),
        ButtonSpec("Reject", "danger", "gw:reject:RID123"),
    ]


def test_options_and_ids_fit_discord_limits() -> None:
    options = [{"name": f"o{i}", "title": "T" * 200} for i in range(30)]
    rid = "r" * 22  # the gateway's rids are 22 characters
    _embed, buttons = approval(
        view(rid=rid, spec={"fn": "f", "kwargs": {}, "reject_options": options})
    )
    assert len(buttons) == 25 and buttons[2].custom_id == f"gw:option:0:{rid}"
    assert all(len(b.custom_id) <= 100 and len(b.label) <= 80 for b in buttons)


@pytest.mark.parametrize(
    "evil",
    [
        "@everyone",
        "@here",
        "<@1234>",
        "<@&99>",
        "*bold* _x_",
        "[Approve](https://evil.example)",
        "```code```",
    ],
)
def test_agent_text_is_escaped(evil: str) -> None:
    embed, _buttons = approval(view(run_id=evil, spec={"fn": evil, "kwargs": {"k": evil}}))
    rendered = str(embed.to_dict())
    assert "@everyone" not in rendered.replace("@\u200beveryone", "")
    assert not re.search(r"(?<!\\)\[Approve\]\(https://evil", rendered)  # no live link


def test_long_values_are_truncated_with_a_link() -> None:
    embed, _ = approval(view(spec={"fn": "f", "kwargs": {"doc": "x" * 10_000}}))
    [field] = embed.fields
    assert field.value is not None and len(field.value) <= FIELD_VALUE_LIMIT
    assert field.value.endswith("[see the full request](https://gw.example/r/RID123)")


def test_the_embed_stays_under_six_thousand_characters() -> None:
    kwargs = {f"k{i}": "y" * 900 for i in range(40)}
    embed, _ = approval(view(spec={"fn": "f", "kwargs": kwargs}))
    assert len(embed) <= EMBED_TOTAL_LIMIT and len(embed.fields) <= 25


def test_question_golden() -> None:
    spec = {"msg": "Which region? @here", "response_options": [{"name": "eu", "title": "EU"}]}
    embed, buttons = question(view(kind="human_contact", spec=spec))
    assert embed.description == "Which region? @\u200bhere"
    assert buttons == [
        ButtonSpec("Answer", "primary", "gw:answer:RID123"),
        ButtonSpec("EU", "secondary", "gw:option:0:RID123"),
    ]


def test_decided_shows_who_and_why() -> None:
    info = {"channel": "discord", "user_id": "42", "name": "bob"}
    embed = decided(
        view(status="rejected", user_info=info, comment="not @everyone", responded_at=REQUESTED)
    )
    outcome = embed.fields[-1]
    assert outcome.name == "Outcome" and embed.colour is not None
    assert outcome.value == "❌ Rejected by <@42> at <t:1795316400:f>: not @\u200beveryone"
    assert embed.colour.value == 0xED4245


def test_a_decided_embed_with_many_arguments_keeps_its_outcome() -> None:
    kwargs = {f"k{i}": "y" * 900 for i in range(40)}
    embed = decided(
        view(
            spec={"fn": "f", "kwargs": kwargs},
            status="approved",
            user_info={"name": "alice"},
            responded_at=REQUESTED,
        )
    )
    assert len(embed) <= EMBED_TOTAL_LIMIT and len(embed.fields) <= 25
    assert embed.fields[-1].name == "Outcome"
    assert embed.fields[-1].value == "✅ Approved by alice in the API at <t:1795316400:f>"
