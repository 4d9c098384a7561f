"""The ids a channel's buttons and forms carry, shared by Slack and Discord: the request and
what the click means, so a click on a message posted by an earlier process still lands.

`gw:<verb>:<rid>`, `gw:option:<index>:<rid>`, and for a form opened by a click
`gw:modal:<verb>:<rid>` (or `gw:modal:option:<index>:<rid>`). Rids are URL-safe base64.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Verb(StrEnum):
    """What a person did: the same words on every channel."""

    APPROVE = "approve"
    REJECT = "reject"  # with a reason (a modal, a form)
    OPTION = "option"  # one of the request's reject or response options
    ANSWER = "answer"  # a question's free-text answer
    REPLY = "reply"  # free text to read: an approval's "yes"/feedback, or a question's answer
    GRANT = "grant"  # approve, and allow more like it for a while (`gateway.seam.grants`)
    EDIT = "edit"  # approve with arguments the person edited (a form)


_TAIL = r"(?:(?P<index>\d{1,2}):)?(?P<rid>[A-Za-z0-9_-]{1,64})"
_VERBS = "|".join(verb.value for verb in Verb)
# For frameworks that match on a pattern (Slack's action ids).
BUTTON_PATTERN = rf"gw:(?P<verb>{_VERBS}):{_TAIL}"
_BUTTON = re.compile(rf"^{BUTTON_PATTERN}$")
_MODAL = re.compile(rf"^gw:modal:(?P<verb>{_VERBS}):{_TAIL}$")


@dataclass(frozen=True)
class CallbackId:
    verb: Verb
    rid: str
    index: int | None = None  # the option's place in the request's options
    modal: bool = False  # the submission of a form a click opened


def encode(verb: Verb, rid: str, index: int | None = None, *, modal: bool = False) -> str:
    middle = f"{index}:" if index is not None else ""
    return f"gw:{'modal:' if modal else ''}{verb.value}:{middle}{rid}"


def decode(value: str) -> CallbackId | None:
    """The click or submission an id stands for; None for an id that is not ours."""
    modal = value.startswith("gw:modal:")
    match = (_MODAL if modal else _BUTTON).match(value)
    if match is None:
        return None
    index = match["index"]
    return CallbackId(Verb(match["verb"]), match["rid"], int(index) if index else None, modal)
