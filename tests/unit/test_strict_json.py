"""strict_loads (JSON as the RFC defines it) and the wire models' validation rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from gateway.api.body import strict_loads
from gateway.wire.models import (
    DiscordContactChannel,
    EmailContactChannel,
    FunctionCallIn,
    HumanContactIn,
    SlackContactChannel,
)

# --- strict_loads ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"[1, NaN]",
        b'{"a": Infinity}',
        b'{"a": {"b": [-Infinity]}}',
    ],
)
def test_rejects_non_finite_constants(body: bytes) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        strict_loads(body)
    assert "not valid JSON" in caught.value.msg


@pytest.mark.parametrize(
    "body",
    [
        rb'"\ud800"',
        rb'"\uDBFF"',
        rb'"\udc00"',  # a lone low surrogate
        rb'"\ude00\ud83d"',  # a pair in the wrong order
        rb'"\ud800\ud800"',
        rb'"ok \ud800 then text"',
        rb'{"\ud800": 1}',  # in a key
        rb'{"a": ["x", {"b": "\udfff"}]}',  # nested
    ],
)
def test_rejects_lone_surrogates(body: bytes) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        strict_loads(body)
    assert "surrogate" in caught.value.msg


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (rb'"\ud83d\ude00"', "\U0001f600"),
        (rb'"\uD83D\uDE00"', "\U0001f600"),
        (rb'{"k": "\ud83d\ude00!"}', {"k": "\U0001f600!"}),
        ('"\U0001f600"'.encode(), "\U0001f600"),  # raw UTF-8, no escapes
        (rb'"\\ud800"', "\\ud800"),  # an escaped backslash, not a surrogate escape
        (rb'"\u00e9"', "\u00e9"),
    ],
)
def test_accepts_valid_text(body: bytes, expected: Any) -> None:
    assert strict_loads(body) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (rb'"\u0000"', "\x00"),
        (rb'"a\u0000b"', "a\x00b"),
        (rb'{"k": ["\u0000"]}', {"k": ["\x00"]}),
    ],
)
def test_keeps_nul_intact(body: bytes, expected: Any) -> None:
    assert strict_loads(body) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'{"a": 1, "b": [true, false, null], "c": 1.5e3}',
            {"a": 1, "b": [True, False, None], "c": 1500.0},
        ),
        (b"[]", []),
        (b'"NaN"', "NaN"),  # a string is fine
    ],
)
def test_ordinary_json(body: bytes, expected: Any) -> None:
    assert strict_loads(body) == expected


def test_malformed_json_still_raises_decode_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        strict_loads(b'{"a": ')


# --- wire models -----------------------------------------------------------------------


def function_call(call_id: str = "c-1", **spec: Any) -> dict[str, Any]:
    return {"run_id": "r-1", "call_id": call_id, "spec": {"fn": "f", "kwargs": {}, **spec}}


def test_function_call_minimal_is_valid() -> None:
    call = FunctionCallIn.model_validate(function_call())
    assert call.call_id == "c-1"
    assert call.spec.fn == "f"


def test_call_id_of_255_chars_is_accepted() -> None:
    assert FunctionCallIn.model_validate(function_call("x" * 255)).call_id == "x" * 255


@pytest.mark.parametrize(
    "call_id",
    ["x" * 300, "x" * 256, "line\nbreak", "tab\there", "nul\x00", "del\x7f", "cr\r", ""],
)
def test_function_call_rejects_bad_call_id(call_id: str) -> None:
    with pytest.raises(ValidationError) as caught:
        FunctionCallIn.model_validate(function_call(call_id))
    assert any(error["loc"] == ("call_id",) for error in caught.value.errors())


def test_human_contact_rejects_newline_in_call_id() -> None:
    body = {"run_id": "r", "call_id": "a\nb", "spec": {"msg": "hello"}}
    with pytest.raises(ValidationError):
        HumanContactIn.model_validate(body)


def test_function_call_rejects_duplicate_reject_option_names() -> None:
    options = [{"name": "no"}, {"name": "later"}, {"name": "no"}]
    with pytest.raises(ValidationError, match="unique"):
        FunctionCallIn.model_validate(function_call(reject_options=options))


def test_function_call_accepts_distinct_reject_option_names() -> None:
    options = [{"name": "no"}, {"name": "later"}]
    call = FunctionCallIn.model_validate(function_call(reject_options=options))
    assert call.spec.reject_options is not None
    assert [o.name for o in call.spec.reject_options] == ["no", "later"]


def test_human_contact_rejects_duplicate_response_option_names() -> None:
    spec = {"msg": "hi", "response_options": [{"name": "a"}, {"name": "a"}]}
    with pytest.raises(ValidationError, match="unique"):
        HumanContactIn.model_validate({"run_id": "r", "call_id": "c", "spec": spec})


@pytest.mark.parametrize(
    ("plain", "experimental"),
    [
        ("subject", "experimental_subject_line"),
        ("references_message_id", "experimental_references_message_id"),
        ("in_reply_to_message_id", "experimental_in_reply_to_message_id"),
    ],
)
@pytest.mark.parametrize("give_plain", [True, False])
def test_email_channel_mirrors_aliases(plain: str, experimental: str, give_plain: bool) -> None:
    field = plain if give_plain else experimental
    email = EmailContactChannel.model_validate({"address": "a@example.com", field: "value"})
    assert getattr(email, plain) == "value"
    assert getattr(email, experimental) == "value"


def test_email_channel_without_subject_leaves_both_unset() -> None:
    email = EmailContactChannel(address="a@example.com")
    assert email.subject is None
    assert email.experimental_subject_line is None


def test_slack_channel_rejects_empty_allowed_responders() -> None:
    with pytest.raises(ValidationError):
        SlackContactChannel(channel_or_user_id="C1", allowed_responder_ids=[])


@pytest.mark.parametrize("allowed", [None, ["U1"], ["U1", "U2"]])
def test_slack_channel_accepts_absent_or_non_empty_responders(allowed: list[str] | None) -> None:
    slack = SlackContactChannel(channel_or_user_id="C1", allowed_responder_ids=allowed)
    assert slack.allowed_responder_ids == allowed


@pytest.mark.parametrize(
    "fields",
    [{}, {"channel_id": None, "user_id": None}, {"channel_id": "1", "user_id": "2"}],
)
def test_discord_channel_requires_exactly_one_target(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="exactly one of channel_id or user_id"):
        DiscordContactChannel.model_validate(fields)


@pytest.mark.parametrize("fields", [{"channel_id": "123"}, {"user_id": "456"}])
def test_discord_channel_with_one_target_is_valid(fields: dict[str, Any]) -> None:
    discord = DiscordContactChannel.model_validate(fields)
    assert discord.model_dump(include=set(fields)) == fields


def test_discord_ids_must_be_numeric() -> None:
    with pytest.raises(ValidationError):
        DiscordContactChannel(channel_id="general")
