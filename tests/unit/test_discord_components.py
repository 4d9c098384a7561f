"""Golden tests for the components the bot sends, and the custom ids its handlers read back."""

from __future__ import annotations

import re
from typing import Any

import pytest

from channels.discord.interactions import edit_modal, edits_from, reason_modal
from channels.discord.render import approval, button_view, grant_menu
from gateway.seam.callbacks import BUTTON_PATTERN, CallbackId, Verb, decode, encode
from gateway.seam.edits import EditProblem
from gateway.seam.grants import GrantChoice
from gateway.vocabulary import GrantScope
from tests.unit.views import request_view

RID = "aB3_-xYz0123456789abcd"  # the shape crypto.new_rid() makes: URL-safe base64


async def test_buttons_become_one_action_row_in_order() -> None:
    options = [{"name": "stale", "title": "Stale data", "description": "d"}]
    _embed, buttons = approval(
        request_view(rid=RID, spec={"fn": "f", "kwargs": {}, "reject_options": options})
    )
    assert button_view(buttons).to_components() == [
        {
            "type": 1,
            "components": [
                {
                    "type": 2,
                    "style": 3,
                    "label": "Approve",
                    "custom_id": f"gw:approve:{RID}",
                    "disabled": False,
                },
                {
                    "type": 2,
                    "style": 4,
                    "label": "Reject",
                    "custom_id": f"gw:reject:{RID}",
                    "disabled": False,
                },
                {
                    "type": 2,
                    "style": 4,
                    "label": "Stale data",
                    "custom_id": f"gw:option:0:{RID}",
                    "disabled": False,
                },
            ],
        }
    ]


@pytest.mark.parametrize(
    ("verb", "index"), [("approve", None), ("reject", None), ("answer", None), ("option", 7)]
)
def test_every_button_id_is_read_back(verb: str, index: int | None) -> None:
    encoded = encode(Verb(verb), RID, index)
    match = re.fullmatch(BUTTON_PATTERN, encoded)  # what Slack's action listener matches
    assert match is not None
    assert (match["verb"], match["rid"]) == (verb, RID)
    assert match["index"] == (None if index is None else str(index))
    assert decode(encoded) == CallbackId(Verb(verb), RID, index)


def test_foreign_ids_are_not_ours() -> None:
    for other in ("gw:delete:abc", "approve:abc", "gw:approve:a/b", f"gw:option:x:{RID}"):
        assert re.fullmatch(BUTTON_PATTERN, other) is None
        assert decode(other) is None
        assert decode(other.replace("gw:", "gw:modal:", 1)) is None


async def test_the_reason_modal_is_required_and_prefilled() -> None:
    click = CallbackId(Verb.OPTION, RID, 1)
    modal = reason_modal(click, title="Later", label="Why?", prefill="after 5pm")
    payload = modal.to_dict()
    assert payload["custom_id"] == f"gw:modal:option:1:{RID}"
    assert decode(payload["custom_id"]) == CallbackId(Verb.OPTION, RID, 1, modal=True)
    text_input = payload["components"][0]["components"][0]
    assert text_input["required"] is True and text_input["min_length"] == 1
    assert text_input["value"] == "after 5pm" and text_input["style"] == 2


async def test_the_grant_select_is_a_row_of_its_own_under_the_buttons() -> None:
    choices = (GrantChoice(GrantScope.RUN, 3600), GrantChoice(GrantScope.KEY, None))
    request = request_view(rid=RID, grant_choices=choices)
    _embed, buttons = approval(request)
    rows = button_view(buttons, grant_menu(request)).to_components()
    assert [c["custom_id"] for c in rows[0]["components"]] == [
        f"gw:approve:{RID}",
        f"gw:reject:{RID}",
    ]
    assert rows[1]["components"] == [
        {
            "type": 3,
            "custom_id": f"gw:grant:{RID}",
            "placeholder": "Approve and allow…",
            "min_values": 1,
            "max_values": 1,
            "options": [
                {
                    "label": "this function in this run, for 1 hour",
                    "value": "run:3600",
                    "default": False,
                },
                {
                    "label": "this function for this agent, until revoked",
                    "value": "key:forever",
                    "default": False,
                },
            ],
            "disabled": False,
            "required": True,
        }
    ]
    assert decode(f"gw:grant:{RID}") == CallbackId(Verb.GRANT, RID)
    assert decode(f"gw:modal:edit:{RID}") == CallbackId(Verb.EDIT, RID, modal=True)


KWARGS = {"path": "/etc/passwd", "lines": 10, "note": "two\nlines", "opts": {"follow": True}}


async def test_the_edit_modal_has_one_prefilled_input_per_argument() -> None:
    payload = edit_modal(CallbackId(Verb.EDIT, RID), KWARGS).to_dict()
    assert payload["custom_id"] == f"gw:modal:edit:{RID}"
    inputs = [row["components"][0] for row in payload["components"]]
    assert [(i["custom_id"], i["label"], i["value"]) for i in inputs] == [
        ("0", "path", "/etc/passwd"),
        ("1", "lines", "10"),
        ("2", "note", "two\nlines"),
        ("3", "opts", '{\n  "follow": true\n}'),
    ]
    assert [i["style"] for i in inputs] == [1, 1, 2, 2]  # short; paragraph for JSON, newlines
    assert [i["required"] for i in inputs] == [False, True, False, True]  # "" is a string
    assert all(i["max_length"] == 4000 for i in inputs)


def modal_data(values: dict[str, str]) -> dict[str, Any]:
    """A modal submission's `data`, as Discord sends it."""
    rows = [
        {"type": 1, "components": [{"type": 4, "custom_id": key, "value": value}]}
        for key, value in values.items()
    ]
    return {"custom_id": f"gw:modal:edit:{RID}", "components": rows}


def test_edits_are_read_back_by_place_against_the_stored_arguments() -> None:
    submitted = modal_data({"0": "/tmp/safe", "1": " 5 ", "3": "[]", "9": "x", "path": "/etc"})
    edited = edits_from(KWARGS, submitted)
    # Unknown inputs are ignored; one not submitted keeps its value.
    assert edited == {"path": "/tmp/safe", "lines": 5, "note": "two\nlines", "opts": []}
    problem = edits_from(KWARGS, modal_data({"3": "{not json"}))
    assert isinstance(problem, EditProblem) and problem.field == "opts"
    assert problem.message.startswith("not valid JSON")
