"""What the answer path tells a channel: the request as an answer left it, the refusal to
tell the person instead, or a form to open first."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gateway.seam.replies import Reading
from gateway.seam.views import RequestView


@dataclass(frozen=True)
class Answered:
    request: RequestView  # as the answer left it
    reading: Reading | None = None  # how a free-text reply was read


class Refusal(StrEnum):
    NOT_ALLOWED = "not_allowed"
    DECIDED = "decided"
    GONE = "gone"
    UNKNOWN_OPTION = "unknown_option"
    MISSING_TEXT = "missing_text"
    WRONG_VERB = "wrong_verb"
    UNCLEAR = "unclear"  # a free-text reply that is neither a plain yes nor a plain no
    INVALID = "invalid"  # a grant or edited arguments the request does not take


@dataclass(frozen=True)
class Refused:
    """Nothing changed, and why, in words for the person."""

    why: Refusal
    message: str


@dataclass(frozen=True)
class Form:
    """A form to open before answering: its title and the text it starts with."""

    title: str
    prefill: str | None
