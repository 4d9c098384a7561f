"""Free-text replies to an approval (a Slack thread, later an email): only an explicit yes
approves; anything else rejects with the text as the reason (HumanLayer's behaviour, and
safe: nothing runs without an explicit yes)."""

from __future__ import annotations

APPROVE_WORDS = frozenset({"approve", "approved", "yes", "lgtm"})


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def is_approval(text: str) -> bool:
    """True for "approve", "Approved!", "yes", "LGTM." and the like, alone on the first line."""
    return first_line(text).lower().rstrip(".!") in APPROVE_WORDS
