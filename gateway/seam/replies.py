"""Free-text answers to an approval (an email reply, a Slack thread reply): approve, reject or
unclear, and why, in words the person can be shown. It never guesses yes.

1. The reply's own words (`gateway.seam.reply_text`): real quotes, signatures, client
   footers and the old message are cut; anything else is the person's.
2. Its words (`gateway.seam.reply_words`), normalised, are read as phrases: approving
   ("yes", "LGTM", "go ahead", 👍, in several languages), polite ("thanks", "please"),
   refusing ("no", "don't approve", 👎), doubting ("not sure"), or anything else.
- approve: approving and polite phrases only, at least one approving, and nobody else's
  words quoted;
- reject: it opens with a refusal, has no yes, no question, no condition, and does not
  defer ("not yet", "Nope. Next week."); the reply becomes the reason;
- unclear: anything else. The request stays pending and the person is asked again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from gateway.seam.reply_signature import quoted, without_greeting, without_sign_off
from gateway.seam.reply_text import new_text, own_lines
from gateway.seam.reply_words import (
    CONDITIONS,
    HOLD,
    HOLDS,
    NO,
    OTHER,
    POLITE,
    REJECTING,
    TIME,
    YES,
    Phrase,
    cover,
    tokens,
)
from gateway.seam.sentences import shorten

__all__ = ["QUOTE_LIMIT", "Reading", "Verdict", "first_line", "new_text", "read_reply", "tokens"]

QUOTE_LIMIT = 80  # characters of the reply quoted back to the person
ASK_AGAIN = "reply APPROVE, or REJECT followed by your reason"
_CLAUSE = re.compile(r"[,.;:!]|\s[-–—]\s")


class Verdict(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    UNCLEAR = "unclear"


@dataclass(frozen=True)
class Reading:
    """How a reply was read, the words judged, and why."""

    verdict: Verdict
    said: str  # the words judged, on one line, cut to QUOTE_LIMIT
    why: str  # "a plain yes", 'it says "but"', "it asks a question", ...

    @property
    def approved(self) -> bool:
        return self.verdict is Verdict.APPROVE

    @property
    def explanation(self) -> str:
        """'read as an approval: "LGTM 👍"', 'read as unclear: it asks a question'."""
        if self.verdict is Verdict.APPROVE:
            return f'read as an approval: "{self.said}"'
        return (
            f"read as {'a rejection' if self.verdict is Verdict.REJECT else 'unclear'}: {self.why}"
        )

    @property
    def sentence(self) -> str:
        """What to tell the person, e.g. 'We read your reply as an approval ("LGTM 👍").'"""
        said = f' ("{self.said}")' if self.said else ""
        if self.verdict is Verdict.APPROVE:
            return f"We read your reply as an approval{said}."
        if self.verdict is Verdict.REJECT:
            return f"We read your reply as a rejection{said}."
        return f"I couldn't read that as a clear yes or no ({self.why}): {ASK_AGAIN}."


def read_reply(text: str, *, signer: str | None = None) -> Reading:
    """Read a free-text answer to an approval. `signer`: the sender's display name, whose
    signature block ends the reply's own words."""
    own, quoting = own_lines(text, signer)
    mine = [line.strip() for line in without_sign_off(own, signer)]
    lines = without_greeting([line for line in mine if line and not quoted(line)])
    said = _quote(" ".join(lines))
    words = tokens("\n".join(lines))
    if not words:
        return Reading(Verdict.UNCLEAR, said, "there is nothing to read")
    if "?" in words:
        return Reading(Verdict.UNCLEAR, said, "it asks a question")
    if quoting:  # a yes or a no to someone else's words says nothing plain about the call
        return Reading(Verdict.UNCLEAR, said, "it answers quoted words")
    return _judge(cover(words), said, lines)


def _judge(phrases: list[tuple[str, Phrase]], said: str, lines: list[str]) -> Reading:
    kinds = [kind for kind, _ in phrases]
    if YES in kinds and set(kinds) <= {YES, POLITE}:
        return Reading(Verdict.APPROVE, said, "a plain yes")
    if YES in kinds and NO in kinds:
        return Reading(Verdict.UNCLEAR, said, "it says both yes and no")
    holding = next((" ".join(p) for k, p in phrases if k == HOLDS), None)
    if holding is not None:
        return Reading(Verdict.UNCLEAR, said, f'it says "{holding}"')
    if next((kind for kind in kinds if kind != POLITE), None) == NO:
        return _refusal(phrases, said, lines)
    holding = next((w for kind, p in phrases if kind == OTHER for w in p if w in HOLD), None)
    if holding is not None:
        return Reading(Verdict.UNCLEAR, said, f'it says "{holding}"')
    if YES in kinds:
        more = next(line for line in lines if any(k == OTHER for k, _ in cover(tokens(line))))
        return Reading(Verdict.UNCLEAR, said, f'it says more than yes ("{_quote(more)}")')
    return Reading(Verdict.UNCLEAR, said, "it is neither a plain yes nor a plain no")


def _refusal(phrases: list[tuple[str, Phrase]], said: str, lines: list[str]) -> Reading:
    """A no: a rejection, unless a condition holds it back, or a deferral is its point (in
    its own clause, or a clause of nothing but when: "No. Next week.")."""
    refusal = next(phrase for kind, phrase in phrases if kind == NO)
    if refusal in REJECTING:  # "reject: not today" is a rejection with its reason
        return Reading(Verdict.REJECT, said, "a plain no")
    words = [word for kind, phrase in phrases if kind == OTHER for word in phrase]
    clauses = [set(tokens(c)) for line in lines for c in _CLAUSE.split(line) if tokens(c)]
    deferring = [c for c in clauses[1:] if c <= HOLD | TIME and c & HOLD]
    first = clauses[0] if clauses else set()
    held = next((w for w in words if w in CONDITIONS or (w in HOLD and w in first)), None)
    if held is None and deferring:
        held = sorted(deferring[0] & HOLD)[0]
    if held is not None:
        return Reading(Verdict.UNCLEAR, said, f'it says "{held}"')
    return Reading(Verdict.REJECT, said, "a plain no")


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _quote(text: str) -> str:
    return shorten(" ".join(text.split()), QUOTE_LIMIT)
