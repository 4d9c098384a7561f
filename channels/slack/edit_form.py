""" "Edit and approve" in Slack: a modal with one input per argument of the call, and what the
person typed there read back as texts for `gateway.seam.edits.read_edits`. Pure: no network.

The inputs are named by their place in the call's arguments (`gw_arg_<n>`), never by the
agent's argument names, and the submission is read against the request as stored.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.seam import RequestView
from gateway.seam.edits import EditField, edit_fields, fits_form

EDIT_MODAL = "gw_edit_modal"  # the modal's callback_id
EDIT_INPUT = "text"  # the action_id of every input
COMMENT_BLOCK = "gw_comment"
MAX_FIELDS = 40  # one input block each: a modal holds 100 blocks
INPUT_CHARS = 3000  # a plain_text_input holds at most 3,000 characters
LABEL_CHARS = 2000  # an input block's label and hint
_HINTS = {"json": "JSON", "int": "A whole number", "float": "A number", "bool": "true or false"}

Block = dict[str, Any]


def offers_edit(request: RequestView) -> bool:
    """Whether this request gets an "Edit and approve" button: the core offers editing and
    every argument fits one input of a modal."""
    kwargs = request.spec.get("kwargs") or {}
    fields = edit_fields(kwargs)
    return (
        request.editable
        and bool(fields)
        and fits_form(kwargs, MAX_FIELDS)
        and all(len(field.text) <= INPUT_CHARS for field in fields)
    )


def field_block(index: int) -> str:
    """The block_id of the input for the call's `index`-th argument."""
    return f"gw_arg_{index}"


def _plain(text: str, limit: int) -> Block:
    return {"type": "plain_text", "text": text[:limit] or " "}


def _input(index: int, field: EditField) -> Block:
    element: Block = {
        "type": "plain_text_input",
        "action_id": EDIT_INPUT,
        "multiline": field.as_json or "\n" in field.text,
        "max_length": INPUT_CHARS,
    }
    if field.text:
        element["initial_value"] = field.text
    block: Block = {
        "type": "input",
        "block_id": field_block(index),
        "optional": True,  # an argument may be an empty string
        "label": _plain(field.name, LABEL_CHARS),
        "element": element,
    }
    if field.kind in _HINTS:
        block["hint"] = _plain(_HINTS[field.kind], LABEL_CHARS)
    return block


def _comment() -> Block:
    element = {
        "type": "plain_text_input",
        "action_id": EDIT_INPUT,
        "multiline": True,
        "max_length": INPUT_CHARS,
    }
    return {
        "type": "input",
        "block_id": COMMENT_BLOCK,
        "optional": True,
        "label": _plain("Comment for the agent", LABEL_CHARS),
        "element": element,
    }


def edit_modal(request: RequestView, copy: str | None) -> Block:
    """The modal views.open shows: the call's arguments as editable texts, and a comment."""
    fields = edit_fields(request.spec.get("kwargs") or {})
    fn = str(request.spec.get("fn", ""))
    intro = {"type": "section", "text": _plain(f"Approve {fn} with these arguments:", 3000)}
    return {
        "type": "modal",
        "callback_id": EDIT_MODAL,
        "private_metadata": json.dumps({"rid": request.rid, "copy": copy}),
        "title": _plain("Edit and approve", 24),
        "submit": _plain("Approve", 24),
        "close": _plain("Cancel", 24),
        "blocks": [intro, *(_input(i, f) for i, f in enumerate(fields)), _comment()],
    }


def _typed(values: dict[str, Any], block_id: str) -> str | None:
    """What the person left in one input ("" when they emptied it), None when it is absent."""
    if block_id not in values:
        return None
    return str((values[block_id].get(EDIT_INPUT) or {}).get("value") or "")


def typed_arguments(view: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, str]:
    """{argument name: the text submitted for it}, for the arguments `kwargs` has."""
    values = (view.get("state") or {}).get("values") or {}
    typed = {f.name: _typed(values, field_block(i)) for i, f in enumerate(edit_fields(kwargs))}
    return {name: text for name, text in typed.items() if text is not None}


def typed_comment(view: dict[str, Any]) -> str | None:
    values = (view.get("state") or {}).get("values") or {}
    return (_typed(values, COMMENT_BLOCK) or "").strip() or None


def block_of(kwargs: dict[str, Any], name: str | None = None) -> str:
    """The block_id of the input of argument `name` (the first one's, for a problem with the
    arguments as a whole), where the modal shows an error."""
    names = [field.name for field in edit_fields(kwargs)]
    return field_block(names.index(name) if name in names else 0)
