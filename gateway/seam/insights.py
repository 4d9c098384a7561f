"""The figures of the console's insights page (`Console.insights`): how decisions flow in
some projects over a period. Days are UTC days; times to decision are whole seconds (down);
a percentile is the nearest rank: the least time that at least that share of the decisions
took no longer than."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime


@dataclass(frozen=True)
class DayOutcomes:
    """The decisions of one UTC day, by outcome: a `Status` (approved, rejected, ...), but
    "expired" also for a function call rejected by the gateway at its deadline."""

    day: date
    outcomes: Mapping[str, int]

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())


@dataclass(frozen=True)
class Timing:
    """How long people took to decide, for one team or one channel."""

    label: str
    decisions: int
    p50: int
    p90: int


@dataclass(frozen=True)
class AgeCount:
    """How many requests still pending are this old (`label`: "5m to 30m")."""

    label: str
    count: int


@dataclass(frozen=True)
class Rejections:
    """A function's rejections among its decisions: by a person or a rule (`rejected`), or
    by the gateway when nobody answered before the deadline (`expired`)."""

    fn: str
    rejected: int
    expired: int
    decided: int


@dataclass(frozen=True)
class AutoDecisions:
    """What one rule (`source` "rule") or one standing grant ("grant") decided by itself."""

    source: str
    key: str  # the rule's name, or the grant's id
    name: str  # "rule NAME", or "Alice's standing grant"
    approved: int
    rejected: int


@dataclass(frozen=True)
class PersonAnswers:
    """One person's answers (a vote under a policy counts as one), by what they answered."""

    person: str
    answers: int
    approved: int
    rejected: int  # answers - approved - rejected: replies to questions


@dataclass(frozen=True)
class Insights:
    """Everything on the insights page: the decisions made between `since` and `until`."""

    since: datetime
    until: datetime
    per_day: list[DayOutcomes]  # every day of the period, oldest first
    by_team: list[Timing]
    by_channel: list[Timing]
    pending: list[AgeCount]  # youngest first; pending now, whatever the period
    rejected: list[Rejections]  # most rejected first
    auto: list[AutoDecisions]
    people: list[PersonAnswers]  # most answers first
