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
3. A channel that can give a standing grant ("Approve and allow…") reads with
   `grants=True`. Then a reply whose first line starts with

       <yes> for <duration> [<scope>]        or        <yes> until revoked [<scope>]

   asks for one: <yes> is "approve", "approved" or "yes"; <duration> a whole number and a
   unit, together or apart ("1h", "30 minutes", "2 hours", "15m", "1d"; m, min, minute(s),
   h, hr(s), hour(s), d, day(s)), or "an hour", "a day"; <scope> "this run" or "in this
   run" (the default), "exactly", "these (exact) arguments" or "with these (exact)
   arguments", "any run", "in any run", "this agent" or "for this agent". The words follow
   each other in this order on one line, with nothing between them ("Approve. For 1h I'll
   be away" asks for none, and is unclear). The reply is then read as if they were the yes
   alone: it asks for the grant only when that reads as approve ("approve for 1h, thanks"
   does; "approve for 1h from Monday", "approve for 1h all runs" are unclear). The reading
   carries the `GrantChoice`; whether the request offers it, and that duration, only the
   core decides. Without `grants` such a reply is unclear, as it always was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from gateway.seam.grants import GrantChoice, lasting
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
from gateway.seam.sentences import shorten, spoken
from gateway.vocabulary import GrantScope

__all__ = [
    "QUOTE_LIMIT",
    "Reading",
    "Verdict",
    "first_line",
    "grant_hint",
    "new_text",
    "read_reply",
    "tokens",
]

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
    # The standing grant an approval asks for ("approve for 1h"), read with `grants=True`.
    grant: GrantChoice | None = None

    @property
    def approved(self) -> bool:
        return self.verdict is Verdict.APPROVE

    @property
    def approval(self) -> str:
        """ "an approval", "an approval that also allows this function in this run, for 1
        hour"."""
        return "an approval" + (f" that also allows {self.grant.label}" if self.grant else "")

    @property
    def explanation(self) -> str:
        """'read as an approval: "LGTM 👍"', 'read as unclear: it asks a question'."""
        if self.verdict is Verdict.APPROVE:
            return f'read as {self.approval}: "{self.said}"'
        return (
            f"read as {'a rejection' if self.verdict is Verdict.REJECT else 'unclear'}: {self.why}"
        )

    @property
    def sentence(self) -> str:
        """What to tell the person, e.g. 'We read your reply as an approval ("LGTM 👍").'"""
        said = f' ("{self.said}")' if self.said else ""
        if self.verdict is Verdict.APPROVE:
            return f"We read your reply as {self.approval}{said}."
        if self.verdict is Verdict.REJECT:
            return f"We read your reply as a rejection{said}."
        return f"I couldn't read that as a clear yes or no ({self.why}): {ASK_AGAIN}."


def read_reply(text: str, *, signer: str | None = None, grants: bool = False) -> Reading:
    """Read a free-text answer to an approval. `signer`: the sender's display name, whose
    signature block ends the reply's own words; `grants`: read "approve for 1h" as an
    approval that asks for a standing grant (3. above)."""
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
    reading = _judge(cover(words), said, lines)
    asked = _grant_asked(lines[0]) if grants else None
    if asked is None:
        return reading
    choice, first = asked
    plain = [first, *lines[1:]]  # the reply with the grant's words taken out
    if not _judge(cover(tokens("\n".join(plain))), said, plain).approved:
        return reading  # unclear, as it was: "for 1h" is more than a yes
    return Reading(Verdict.APPROVE, said, f"a yes that allows {choice.label}", grant=choice)


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


# --- "approve for 1h": a standing grant --------------------------------------------------

_GRANT_YES = frozenset({"approve", "approved", "yes"})
_ONE = frozenset({"a", "an", "one"})
_AMOUNT = re.compile(r"(\d{1,4})([a-z]*)")  # "1h", "30" (then its unit is the next word)
_UNITS = {
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
}
_SCOPES: dict[tuple[str, ...], GrantScope] = {
    **dict.fromkeys([("this", "run"), ("in", "this", "run")], GrantScope.RUN),
    **dict.fromkeys(
        [
            ("exactly",),
            ("these", "arguments"),
            ("these", "exact", "arguments"),
            ("with", "these", "arguments"),
            ("with", "these", "exact", "arguments"),
        ],
        GrantScope.ARGS,
    ),
    **dict.fromkeys(
        [("any", "run"), ("in", "any", "run"), ("this", "agent"), ("for", "this", "agent")],
        GrantScope.KEY,
    ),
}
_FOREVER = ["until", "revoked"]


def _grant_asked(line: str) -> tuple[GrantChoice, str] | None:
    """The grant a first line asks for, and the line with the grant's words taken out."""
    words = tokens(line)
    if not words or words[0] not in _GRANT_YES:
        return None
    lasting_for = _duration(words[1:])
    if lasting_for is None:
        return None
    seconds, used = lasting_for
    rest = words[1 + used :]
    scope, size = next(
        ((_SCOPES[tuple(rest[:n])], n) for n in (4, 3, 2, 1) if tuple(rest[:n]) in _SCOPES),
        (GrantScope.RUN, 0),
    )
    return GrantChoice(scope, seconds), " ".join([words[0], *rest[size:]])


def _duration(words: list[str]) -> tuple[int | None, int] | None:
    """How long ("for 1h": 3600; "until revoked": None) and how many words say it."""
    if words[:2] == _FOREVER:
        return None, 2
    if words[:1] != ["for"] or len(words) < 2:
        return None
    amount = _AMOUNT.fullmatch(words[1])
    if amount is None and words[1] not in _ONE:
        return None
    number = int(amount[1]) if amount else 1
    unit, used = (amount[2], 2) if amount and amount[2] else (" ".join(words[2:3]), 3)
    size = _UNITS.get(unit)
    return None if size is None else (number * size, used)


def grant_hint(choices: Sequence[GrantChoice], fn: str) -> str | None:
    """How to ask for a standing grant by reply, in one line; None where none is offered:
    'Reply "approve for 1h" to approve and also allow read_file in this run for 1 hour (15m,
    1h, 4h or 8h; add "exactly" or "any run" for another scope).'"""
    timed = sorted({c.seconds for c in choices if c.seconds is not None})
    if not choices:
        return None
    said = [spoken(seconds) for seconds in timed]
    durations = f"{', '.join(said[:-1])} or {said[-1]}" if len(said) > 1 else "".join(said)
    if any(c.seconds is None for c in choices):
        durations += ', or "approve until revoked"' if said else '"approve until revoked"'
    example = 3600 if 3600 in timed else (timed[0] if timed else None)
    if example is None:
        ask, allow = "approve until revoked", "until revoked"
    else:
        ask, allow = f"approve for {spoken(example)}", f"for {lasting(example)}"
    return (
        f'Reply "{ask}" to approve and also allow {fn} in this run {allow} '
        f'({durations}; add "exactly" or "any run" for another scope).'
    )


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _quote(text: str) -> str:
    return shorten(" ".join(text.split()), QUOTE_LIMIT)
