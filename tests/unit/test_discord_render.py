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
    as_it_stands,
    button_view,
    decided,
    grant_menu,
    question,
)
from gateway.seam.edits import MAX_FIELD_CHARS
from gateway.seam.grants import GrantChoice, offered
from gateway.seam.views import RequestView
from gateway.vocabulary import GrantScope
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


def test_the_grant_select_offers_each_choice_by_its_words() -> None:
    choices = offered(3600, until_revoked=True)
    menu = grant_menu(view(grant_choices=choices))
    assert menu is not None and menu.custom_id == "gw:grant:RID123"
    assert menu.placeholder == "Approve and allow…"
    assert ("this function in this run, for 1 hour", "run:3600") in menu.options
    assert [value for _label, value in menu.options] == [c.value for c in choices]
    assert grant_menu(view()) is None  # nothing offered: no select


def test_the_grant_select_keeps_discord_limits_and_its_row() -> None:
    choices = tuple(GrantChoice(GrantScope.RUN, 60 * n) for n in range(1, 31))
    options = [{"name": f"o{i}", "title": "T"} for i in range(30)]
    rid = "r" * 22  # the gateway's rids are 22 characters
    request = view(
        rid=rid, grant_choices=choices, spec={"fn": "f", "kwargs": {}, "reject_options": options}
    )
    menu = grant_menu(request)
    assert menu is not None and len(menu.custom_id) <= 100
    assert [value for _label, value in menu.options] == [c.value for c in choices[:25]]
    assert all(len(label) <= 100 and len(value) <= 100 for label, value in menu.options)
    _embed, buttons = approval(request)
    assert len(buttons) == 20  # four rows of buttons, the fifth for the select
    rows = button_view(buttons, menu).to_components()  # discord.py checks the widths
    assert len(rows) == 5 and [c["type"] for c in rows[-1]["components"]] == [3]
    assert len(rows[-1]["components"][0]["options"]) == 25


def test_the_edit_button_needs_every_argument_to_fit_a_modal() -> None:
    def custom_ids(kwargs: dict[str, Any], *, editable: bool = True) -> list[str]:
        spec = {"fn": "f", "kwargs": kwargs}
        return [b.custom_id for b in approval(view(spec=spec, editable=editable))[1]]

    five = {f"k{i}": i for i in range(5)}
    assert custom_ids(five) == ["gw:approve:RID123", "gw:edit:RID123", "gw:reject:RID123"]
    assert "gw:edit:RID123" not in custom_ids(five | {"k5": 5})  # a modal holds five inputs
    assert "gw:edit:RID123" not in custom_ids({"doc": "x" * (MAX_FIELD_CHARS + 1)})
    assert "gw:edit:RID123" not in custom_ids({})  # a modal needs an input
    assert "gw:edit:RID123" not in custom_ids(five, editable=False)


def test_a_decided_message_keeps_neither_the_select_nor_the_edit_button() -> None:
    offers = {"grant_choices": offered(3600, until_revoked=False), "editable": True}
    _embed, pending = as_it_stands(view(**offers))
    assert pending is not None
    assert {getattr(item, "custom_id", "") for item in pending.children} >= {
        "gw:grant:RID123",
        "gw:edit:RID123",
    }
    info = {"channel": "discord", "user_id": "42", "name": "bob", "allowed": "f in this run"}
    embed, after = as_it_stands(
        view(**offers, status="approved", user_info=info, responded_at=REQUESTED)
    )
    assert after is None
    assert "and allowed f in this run" in str(embed.fields[-1].value)
