"""The free-text reply grammar: only an explicit yes approves."""

from __future__ import annotations

import pytest

from gateway.replies import first_line, is_approval


@pytest.mark.parametrize("text", ["approve", "Approved!", "yes", "LGTM.", "\n  lgtm  \nthanks"])
def test_explicit_yes_approves(text: str) -> None:
    assert is_approval(text)


@pytest.mark.parametrize(
    "text", ["", "no", "approve? not sure", "yes but not today", "looks great, send it", "y"]
)
def test_anything_else_does_not(text: str) -> None:
    assert not is_approval(text)


def test_first_line_skips_blank_lines() -> None:
    assert first_line("\n\n  hello \nworld") == "hello"
