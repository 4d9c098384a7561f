""" "Edit and approve": the form every channel shows for a call's arguments, and how what a
person typed becomes the arguments again. One field per top-level argument: a scalar as its
text, anything else (and null) as JSON. The core checks the result once more (`Answers.answer`
refuses what is too big or too deep), so a channel only renders and reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_FIELD_CHARS = 4000  # Discord's text input allows 4,000 (Slack's 3,000: it cuts its own)
MAX_FIELDS = 5  # a Discord modal holds at most five inputs; other channels show as many


@dataclass(frozen=True)
class EditField:
    name: str
    text: str  # what the field starts with
    as_json: bool  # typed as JSON (objects, lists, null), else as the scalar's own text
    kind: str  # "str", "int", "float", "bool" or "json": what the text must read as


@dataclass(frozen=True)
class EditProblem:
    """What is wrong with one field, in words for the form (nothing is decided)."""

    field: str
    message: str


def edit_fields(kwargs: dict[str, Any]) -> list[EditField]:
    """The form's fields, one per argument, in the call's order."""
    return [_field(name, value) for name, value in kwargs.items()]


def fits_form(kwargs: dict[str, Any], max_fields: int | None = None) -> bool:
    """Whether every argument fits one field (a channel with a field cap offers editing only
    when the call has at most that many arguments)."""
    fields = edit_fields(kwargs)
    if max_fields is not None and len(fields) > max_fields:
        return False
    return all(len(f.text) <= MAX_FIELD_CHARS for f in fields)


def _field(name: str, value: Any) -> EditField:
    if isinstance(value, bool):
        return EditField(name, "true" if value else "false", False, "bool")
    if isinstance(value, int):
        return EditField(name, str(value), False, "int")
    if isinstance(value, float):
        return EditField(name, repr(value), False, "float")
    if isinstance(value, str):
        return EditField(name, value, False, "str")
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return EditField(name, text, True, "json")


def read_edits(kwargs: dict[str, Any], submitted: dict[str, str]) -> dict[str, Any] | EditProblem:
    """The edited arguments from the form's texts (a field not submitted keeps its value),
    or what is wrong with the first field that does not read as its type."""
    edited: dict[str, Any] = {}
    for field in edit_fields(kwargs):
        text = submitted.get(field.name)
        if text is None:
            edited[field.name] = kwargs[field.name]
            continue
        value = _read(field, text)
        if isinstance(value, EditProblem):
            return value
        edited[field.name] = value
    return edited


def _read(field: EditField, text: str) -> Any:
    if field.kind == "str":
        return text
    stripped = text.strip()
    if field.kind == "bool":
        if stripped.lower() in ("true", "false"):
            return stripped.lower() == "true"
        return EditProblem(field.name, "type true or false")
    if field.kind in ("int", "float"):
        try:
            return int(stripped) if field.kind == "int" else float(stripped)
        except ValueError:
            return EditProblem(field.name, f"type a number ({field.kind})")
    try:
        return json.loads(stripped)
    except ValueError as error:
        return EditProblem(field.name, f"not valid JSON: {error}")
