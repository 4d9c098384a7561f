"""What "Approve and allow…" offers: a scope and a duration, the same words on every channel.

A channel renders `RequestView.grant_choices` (empty where a grant is not offered) and sends
the chosen one's `value` back through `Answers.answer(..., grant=value)`; the core checks it
against what it offers, so a crafted value grants nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.vocabulary import GrantScope

SCOPE_WORDS = {
    GrantScope.ARGS: "these exact arguments",
    GrantScope.RUN: "this function in this run",
    GrantScope.KEY: "this function for this agent",
}
# The same scopes in a sentence that names the function: "read_file in this run".
SCOPE_TAILS = {
    GrantScope.ARGS: "with these exact arguments",
    GrantScope.RUN: "in this run",
    GrantScope.KEY: "for this agent, in any run",
}
DURATIONS = (15 * 60, 3600, 4 * 3600, 8 * 3600, 24 * 3600)  # seconds; up to grant_max
FOREVER = "forever"  # a value's duration part for "until revoked"


@dataclass(frozen=True)
class GrantChoice:
    scope: GrantScope
    seconds: int | None  # None: until revoked

    @property
    def value(self) -> str:
        """What a button, select or form field carries: "run:3600", "key:forever"."""
        return f"{self.scope.value}:{self.seconds if self.seconds is not None else FOREVER}"

    @property
    def duration(self) -> str:
        return "until revoked" if self.seconds is None else f"for {lasting(self.seconds)}"

    @property
    def label(self) -> str:
        """ "this function in this run, for 1 hour"."""
        return f"{SCOPE_WORDS[self.scope]}, {self.duration}"

    def sentence(self, fn: str) -> str:
        """ "read_file in this run, for 1 hour": what the grant allows, named."""
        return f"{fn} {SCOPE_TAILS[self.scope]}, {self.duration}"

    @staticmethod
    def parse(value: str) -> GrantChoice | None:
        """The choice a value names; None for anything that is not one (the core then
        refuses it, as it does a choice it does not offer)."""
        scope, _, seconds = value.partition(":")
        if scope not in GrantScope._value2member_map_:
            return None
        if seconds == FOREVER:
            return GrantChoice(GrantScope(scope), None)
        if not seconds.isdigit() or len(seconds) > 9:
            return None
        return GrantChoice(GrantScope(scope), int(seconds))


def offered(max_seconds: float, until_revoked: bool) -> tuple[GrantChoice, ...]:
    """Every scope with each duration up to `max_seconds` (and that maximum itself), plus
    "until revoked" where the config allows it."""
    longest = int(max_seconds)
    seconds = sorted({s for s in DURATIONS if s <= longest} | ({longest} if longest else set()))
    durations: list[int | None] = [*seconds, *([None] if until_revoked else [])]
    return tuple(GrantChoice(scope, s) for scope in GrantScope for s in durations)


def lasting(seconds: float) -> str:
    """ "15 minutes", "1 hour", "8 hours", "1 day", "90 minutes"."""
    whole = int(seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if whole >= size and whole % size == 0:
            count = whole // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{whole} seconds"


def by_scope(choices: Iterable[GrantChoice]) -> dict[GrantScope, list[GrantChoice]]:
    """The choices grouped by scope, in the order offered (for a select's option groups)."""
    groups: dict[GrantScope, list[GrantChoice]] = {}
    for choice in choices:
        groups.setdefault(choice.scope, []).append(choice)
    return groups


@dataclass(frozen=True)
class GrantView:
    """A standing grant as the console, the CLI and the admin API show it."""

    id: str
    project: str
    project_id: int
    key: str  # the name of the agent's API key it is for
    fn: str
    scope: GrantScope
    run_id: str | None
    granted_by: dict[str, Any]  # the user_info of the person who gave it
    source_rid: str  # the request whose answer gave it
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None
    uses: int
    last_used_at: datetime | None
    live: bool  # neither revoked nor expired

    @property
    def what(self) -> str:
        """ "read_file in this run (run-42)", "read_file with these exact arguments"."""
        tail = SCOPE_TAILS[self.scope]
        run = f" ({self.run_id})" if self.scope == GrantScope.RUN and self.run_id else ""
        return f"{self.fn} {tail}{run}"

    def wire(self) -> dict[str, Any]:
        """The admin API's JSON of it."""

        def iso(moment: datetime | None) -> str | None:
            return None if moment is None else moment.isoformat()

        return {
            "id": self.id,
            "project": self.project,
            "key": self.key,
            "fn": self.fn,
            "scope": self.scope.value,
            "run_id": self.run_id,
            "granted_by": self.granted_by,
            "source_rid": self.source_rid,
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "revoked_at": iso(self.revoked_at),
            "revoked_by": self.revoked_by,
            "uses": self.uses,
            "last_used_at": iso(self.last_used_at),
            "live": self.live,
        }
