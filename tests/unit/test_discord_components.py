"""Golden tests for the components the bot sends, and the custom ids its handlers read back."""

from __future__ import annotations

import re

import pytest

from channels.discord.interactions import reason_modal
from channels.discord.render import approval, button_view
from gateway.seam.callbacks import BUTTON_PATTERN, CallbackId, Verb, decode, encode
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
