"""The insights page's figures as the console shows them (`Console.insights`): the store's
aggregates (`gateway.store.insights`, its queries run side by side on reader threads),
folded, with the routing config's teams and people put in.

A request counts for a team when its route holds one of the team's targets as the config
expands `team:NAME` now: the team's Slack, Discord, Teams or Telegram channel or its email
list, or, for a team with none of these, the console open to exactly its members. People are
counted as votes count them (`votes.person_of`): a configured person is one person whichever
channel they answer in, and a vote under a policy is one answer.

One page's queries hold every reader thread for a while: a process computes one page at a
time (`_one_page_at_a_time`), so anyone reloading it in a loop cannot starve the API's
reads."""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from gateway.core import Core
from gateway.lifecycle import Status
from gateway.policies import votes
from gateway.routing import RoutingConfig
from gateway.seam.insights import (
    AgeCount,
    AutoDecisions,
    DayOutcomes,
    Insights,
    PersonAnswers,
    Rejections,
    Timing,
)
from gateway.seam.people import Responder
from gateway.seam.sentences import spoken
from gateway.store import dumps, utcnow
from gateway.store import insights as insight_store
from gateway.vocabulary import AnsweredIn, ChannelName

MOST_REJECTED = 10  # functions listed
# One lock per event loop (one per process in service; tests run several loops, and a lock
# belongs to the loop it first waited in).
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _one_page_at_a_time() -> asyncio.Lock:
    return _locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())


async def gather(
    core: Core, projects: Sequence[str] | None, since: datetime, until: datetime
) -> Insights:
    """The figures of `projects` (None: every project) for decisions in [since, until)."""
    period = insight_store.Period(projects, since, until)
    db = core.db
    async with _one_page_at_a_time():
        outcomes, groups, (by_channel, by_team), pending, voted = await asyncio.gather(
            db.scan(insight_store.outcomes, period),
            db.scan(insight_store.decision_groups, period),
            db.scan(insight_store.timings, period, team_marks(core.config)),
            db.scan(insight_store.pending_ages, projects, utcnow()),
            db.scan(insight_store.votes, period),
        )
    return Insights(
        since=since,
        until=until,
        per_day=_every_day(outcomes, since, until),
        by_team=_busiest(by_team),
        by_channel=_busiest([_in_words(timing) for timing in by_channel]),
        pending=[AgeCount(label, n) for label, n in zip(AGE_LABELS, pending, strict=True)],
        rejected=_most_rejected(outcomes),
        auto=_auto(groups),
        people=_people(core.config, groups, voted),
    )


def _age_labels(bounds: Sequence[int]) -> list[str]:
    """ "under 5m", "5m to 30m", ..., "over 7d"."""
    words = [spoken(seconds) for seconds in bounds]
    between = [f"{low} to {high}" for low, high in itertools.pairwise(words)]
    return [f"under {words[0]}", *between, f"over {words[-1]}"]


AGE_LABELS = _age_labels(insight_store.PENDING_AGE_LIMITS)


def team_marks(config: RoutingConfig) -> dict[str, list[str]]:
    """Per team, the text each of its targets starts with in a stored route: its channel and
    address (and, for the console, its members), as `intake` writes `route_json`."""
    marks: dict[str, list[str]] = {}
    for name in config.teams:
        found = []
        for target in config.expand(f"team:{name}", via="insights"):
            if target.channel == ChannelName.WEB:  # the console: told apart by its members
                found.append(dumps(target.model_dump(mode="json", exclude={"via"}))[:-1] + ",")
            else:
                place = target.model_dump(mode="json", include={"channel", "address"})
                found.append(dumps(place)[:-1] + ',"responders":')
        marks[name] = found
    return marks


def _every_day(
    outcomes: list[tuple[str, str, str | None, int]], since: datetime, until: datetime
) -> list[DayOutcomes]:
    """One entry per UTC day of the period, days without a decision included."""
    by_day: dict[str, Counter[str]] = defaultdict(Counter)
    for day, outcome, _fn, count in outcomes:
        by_day[day][outcome] += count
    first, last = since.date(), (until - timedelta(microseconds=1)).date()
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    return [DayOutcomes(day, dict(by_day.get(day.isoformat(), {}))) for day in days]


def _most_rejected(outcomes: list[tuple[str, str, str | None, int]]) -> list[Rejections]:
    """The function calls rejected most often (by a person or a rule), with how many of
    them expired (rejected by the gateway at their deadline)."""
    decided: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    expired: Counter[str] = Counter()
    for _day, outcome, fn, count in outcomes:
        if fn is not None:
            decided[fn] += count
            rejected[fn] += count if outcome == Status.REJECTED else 0
            expired[fn] += count if outcome == insight_store.EXPIRED else 0
    ranked = sorted(
        (fn for fn in decided if rejected[fn] or expired[fn]),
        key=lambda fn: (-rejected[fn], -expired[fn], fn),
    )
    return [Rejections(fn, rejected[fn], expired[fn], decided[fn]) for fn in ranked[:MOST_REJECTED]]


def _busiest(timings: list[Timing]) -> list[Timing]:
    return sorted(timings, key=lambda timing: (-timing.decisions, timing.label))


def _in_words(timing: Timing) -> Timing:
    """A channel as people call it: "Slack", "the web console" (or "other")."""
    place = Responder.of({"channel": timing.label})
    label = place.place if place and timing.label in insight_store.PLACES else timing.label
    return Timing(label, timing.decisions, timing.p50, timing.p90)


def _auto(groups: list[insight_store.DecisionGroup]) -> list[AutoDecisions]:
    """What each rule and each standing grant decided at create, nobody asked."""
    found: dict[tuple[str, str], list[int]] = {}
    names: dict[tuple[str, str], str] = {}
    for group in groups:
        who = group.who
        if who["channel"] == AnsweredIn.GATEWAY and who["rule"]:
            key, name = ("rule", who["rule"]), str(who["name"] or f"rule {who['rule']}")
        elif who["channel"] == AnsweredIn.GRANT and who["grant"]:
            key, name = ("grant", who["grant"]), f"{who['name'] or 'someone'}'s standing grant"
        else:
            continue
        names.setdefault(key, name)
        counts = found.setdefault(key, [0, 0])
        counts[0] += group.count if group.status == "approved" else 0
        counts[1] += group.count if group.status == "rejected" else 0
    ranked = sorted(found.items(), key=lambda item: (-sum(item[1]), item[0]))
    return [
        AutoDecisions(source, key, names[source, key], *counts) for (source, key), counts in ranked
    ]


def _people(
    config: RoutingConfig,
    groups: list[insight_store.DecisionGroup],
    voted: list[insight_store.VoteCount],
) -> list[PersonAnswers]:
    """One row per person, however many channels and keys they answered through: each
    decision a person made alone, and each vote."""
    names: dict[str, str] = {}
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for group in groups:
        who = group.who
        if not group.without_vote or group.status not in insight_store.BY_PEOPLE:
            continue
        if who["channel"] in insight_store.NOT_BY_A_PERSON:
            continue
        info = {key: str(value) for key, value in who.items() if value is not None}
        person = votes.person_of(config, info)
        if person not in names:
            names[person] = _named(config, person, info)
        _add(totals[person], group.count, group.status)
    for vote in voted:
        if vote.person not in names:
            via, _, ident = vote.person.partition(":")  # `via:id` unless configured
            names[vote.person] = _named(config, vote.person, {"channel": via, "user_id": ident})
        total = totals[vote.person]
        _add(total, vote.approved, "approved")
        _add(total, vote.votes - vote.approved, "rejected")
    found = [PersonAnswers(names[person], *total) for person, total in totals.items()]
    return sorted(found, key=lambda answered: (-answered.answers, answered.person))


def _add(total: list[int], count: int, status: str) -> None:
    """Count `count` answers of this outcome in (answers, approved, rejected)."""
    total[0] += count
    total[1] += count if status == "approved" else 0
    total[2] += count if status == "rejected" else 0


def _named(config: RoutingConfig, person: str, info: Mapping[str, str]) -> str:
    """A configured person's name, the operator, or who answered and where."""
    if person == votes.OPERATOR:
        return "the operator"
    key = person.removeprefix("person:")
    configured = config.people.get(key) if person.startswith("person:") else None
    if configured is not None:
        return configured.name or key
    responder = Responder.of(info)
    return "someone" if responder is None else f"{responder.name} ({responder.place})"
