"""The limits on agent-supplied JSON: duplicate keys, nesting, key and item counts, the
shape of user_info, and characters that would spoof what a person reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from gateway.api.body import JSONTooLarge, strict_loads
from gateway.wire.models import (
    MAX_JSON_DEPTH,
    MAX_JSON_ITEMS,
    MAX_OBJECT_KEYS,
    FunctionCallIn,
    FunctionCallStatusIn,
    HumanContactIn,
    json_shape_problem,
    spoofing_character,
)


def nested_text(depth: int) -> bytes:
    """A JSON array `depth` levels deep, written out (json.dumps itself stops near 1,000)."""
    return b"[" * depth + b"]" * depth


# --- duplicate keys --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (b'{"approved": false, "approved": true}', "approved"),
        (b'{"a": 1, "b": {"c": 1, "c": 1}}', "c"),  # nested, even with equal values
        (b'[{"x": 1}, {"y": 1, "y": 2}]', "y"),
        (b'{"k": 1, "\\u006b": 2}', "k"),  # the same key, spelled with an escape
    ],
)
def test_duplicate_keys_are_refused(body: bytes, key: str) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        strict_loads(body)
    assert f"duplicate key {key!r}" in caught.value.msg


def test_keys_differing_only_in_case_are_distinct() -> None:
    assert strict_loads(b'{"a": 1, "A": 2}') == {"a": 1, "A": 2}


# --- nesting and counts ----------------------------------------------------------------


def test_nesting_up_to_the_limit_is_accepted() -> None:
    assert strict_loads(nested_text(MAX_JSON_DEPTH)) is not None


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100, 254, 256, 1_000, 100_000])
def test_deeper_nesting_is_refused_naming_the_limit(depth: int) -> None:
    with pytest.raises(JSONTooLarge, match=f"nested more than {MAX_JSON_DEPTH} levels deep"):
        strict_loads(nested_text(depth))


def test_the_path_to_a_too_deep_value_is_reported() -> None:
    inner = nested_text(MAX_JSON_DEPTH).decode()
    body = f'{{"spec": {{"kwargs": {{"x": {inner}}}}}}}'.encode()
    with pytest.raises(JSONTooLarge) as caught:
        strict_loads(body)
    assert caught.value.path[:3] == ("spec", "kwargs", "x")


def test_object_key_count_is_limited() -> None:
    fits = {f"k{i}": i for i in range(MAX_OBJECT_KEYS)}
    assert strict_loads(json.dumps(fits).encode()) == fits
    too_many = {f"k{i}": i for i in range(MAX_OBJECT_KEYS + 1)}
    with pytest.raises(JSONTooLarge, match=f"at most {MAX_OBJECT_KEYS} are allowed"):
        strict_loads(json.dumps({"state": too_many}).encode())


def test_total_item_count_is_limited() -> None:
    # HumanLayer's own "large context" example: 100,000 integers in state.
    large = {"state": {"numbers": list(range(100_000))}}
    assert strict_loads(json.dumps(large).encode()) == large
    too_many = {"a": [0] * (MAX_JSON_ITEMS // 2), "b": [[0]] * (MAX_JSON_ITEMS // 2)}
    with pytest.raises(JSONTooLarge, match=f"more than {MAX_JSON_ITEMS} values"):
        strict_loads(json.dumps(too_many).encode())


def test_shape_check_counts_nested_items_and_reports_paths() -> None:
    assert json_shape_problem({"a": [{"b": [1, 2]}]}) is None
    problem = json_shape_problem({"a": [{"b": [[1]]}]}, max_depth=4)
    assert problem == ("JSON nested more than 4 levels deep", ("a", 0, "b", 0))
    assert json_shape_problem([[1, 2], [3]], max_items=4) is not None
    assert json_shape_problem([[1, 2], [3]], max_items=5) is None


# --- the wire models -------------------------------------------------------------------


def call(**fields: Any) -> dict[str, Any]:
    spec = {"fn": "deploy", "kwargs": {}} | fields.pop("spec", {})
    return {"run_id": "run-1", "call_id": "c-1", "spec": spec} | fields


def test_function_call_without_kwargs_has_empty_kwargs() -> None:
    # The TS SDK leaves kwargs out for a function called without arguments.
    body = {"run_id": "r", "call_id": "c", "spec": {"fn": "ping"}}
    parsed = FunctionCallIn.model_validate(body)
    assert parsed.spec.kwargs == {}
    assert parsed.spec.model_dump(mode="json")["kwargs"] == {}


def test_models_check_the_depth_of_kwargs_and_state_themselves() -> None:
    deep: Any = 1
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    with pytest.raises(ValidationError, match=r"nested more than 64 levels deep at kwargs\.x"):
        FunctionCallIn.model_validate(call(spec={"kwargs": {"x": deep}}))
    with pytest.raises(ValidationError, match=r"nested more than 64 levels deep at state\.x"):
        HumanContactIn.model_validate(
            {"run_id": "r", "call_id": "c", "spec": {"msg": "?", "state": {"x": deep}}}
        )


SPOOFING = [
    ("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("\u202a", "U+202A (LEFT-TO-RIGHT EMBEDDING)"),
    ("\u2066", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
    ("\u2069", "U+2069 (POP DIRECTIONAL ISOLATE)"),
    ("\u200e", "U+200E (LEFT-TO-RIGHT MARK)"),
    ("\u200f", "U+200F (RIGHT-TO-LEFT MARK)"),
    ("\u061c", "U+061C (ARABIC LETTER MARK)"),
    ("\u0085", "U+0085 (a control character)"),
    ("\u009b", "U+009B (a control character)"),
    ("\u0007", "U+0007 (a control character)"),
    ("\u007f", "U+007F (a control character)"),
]


@pytest.mark.parametrize(("char", "named"), SPOOFING)
def test_spoofing_characters_are_named(char: str, named: str) -> None:
    assert spoofing_character(f"ab{char}c") == f"{named} at position 2"


@pytest.mark.parametrize(
    "text", ["deploy", "déployer", "\u05e9\u05dc\u05d5\u05dd", "emoji \U0001f680", "a\u200db"]
)
def test_ordinary_text_is_not_spoofing(text: str) -> None:
    assert spoofing_character(text) is None


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"run_id": "run\u202e1"}, ("run_id",)),
        ({"spec": {"fn": "de\u2066ploy"}}, ("spec", "fn")),
        (
            {"spec": {"reject_options": [{"name": "n\u200f"}]}},
            ("spec", "reject_options", 0, "name"),
        ),
        ({"spec": {"reject_options": [{"name": "n", "title": "\u0085t"}]}}, None),
        ({"call_id": "c\u202e1"}, ("call_id",)),
    ],
)
def test_spoofing_in_what_a_person_reads_is_refused(
    fields: dict[str, Any], loc: tuple[Any, ...] | None
) -> None:
    with pytest.raises(ValidationError) as caught:
        FunctionCallIn.model_validate(call(**fields))
    (error,) = caught.value.errors()
    assert "control characters and bidirectional overrides are not allowed" in error["msg"]
    assert "U+" in error["msg"]
    assert loc is None or error["loc"] == loc
    field = str(error["loc"][-1])
    assert error["msg"].startswith(f"Value error, {field} contains U+")


def test_human_contact_option_titles_are_checked_too() -> None:
    spec = {"msg": "?", "response_options": [{"name": "yes", "title": "Yes\u202e"}]}
    with pytest.raises(ValidationError, match="title contains U\\+202E"):
        HumanContactIn.model_validate({"run_id": "r", "call_id": "c", "spec": spec})


# --- user_info -------------------------------------------------------------------------


def status(user_info: Any) -> FunctionCallStatusIn:
    return FunctionCallStatusIn.model_validate({"approved": True, "user_info": user_info})


def test_user_info_within_the_limits_is_kept() -> None:
    info = {f"field{i}": "x" * 1_000 for i in range(16)} | {
        "name": "Alice",
        "n": 3,
        "ok": True,
        "none": None,
    }
    assert status(info).user_info is not None
    assert status(info).model_dump(exclude_none=True)["user_info"]["field3"] == "x" * 1_000


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ({f"f{i}": "x" for i in range(21)}, "user_info has 21 fields; at most 20"),
        ({"name": "x" * 1_001}, "user_info.name has 1001 characters; at most 1000"),
        ({"team": "x" * 1_000_000}, "user_info.team has 1000000 characters"),
        ({"k" * 101: "v"}, "user_info field names may be 100 characters at most"),
        ({"groups": ["a", "b"]}, "user_info.groups is an array; user_info holds one level"),
        ({"org": {"id": 1}}, "user_info.org is an object"),
    ],
)
def test_user_info_beyond_the_limits_is_refused(info: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        status(info)
    assert message in str(caught.value)
    assert caught.value.errors()[0]["loc"] == ("user_info",)
