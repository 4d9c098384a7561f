"""The figures of the console's insights page (`gateway.seam.insights`), alike on SQLite and
PostgreSQL. Decisions are read from the `decision` table (`gateway.store.decided`: one narrow
row per decided request, written with the decision), never from the requests' content: each
count from an index led by the day and then its GROUP BY, so a period is a range of it whose
entries arrive grouped, never sorted or hashed; the times in one pass over the rows (no index
holds the routes, so that pass reads every decision, whatever the period).

- `outcomes`: decisions by UTC day, outcome and function (per day; most rejected).
- `decision_groups`: decisions by who decided (people's answers; what rules and standing
  grants decided by themselves).
- `timings`: the seconds people's decisions took, per channel and per team, folded into
  nearest-rank percentiles.
- `pending_ages`, `votes`: pending requests by age (from the requests); the votes cast
  under policies.

A function call the gateway rejected at its deadline counts as `EXPIRED`."""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnClause, ColumnElement, TextClause

from gateway.lifecycle import Status
from gateway.seam.insights import Timing
from gateway.store import tables
from gateway.store.decided import DECIDER_FIELDS, DecidedBy
from gateway.store.metrics import rows
from gateway.store.values import as_utc
from gateway.vocabulary import AnsweredIn

# Pending-age buckets: the requests younger than each of these (seconds), youngest first;
# one more bucket holds the older. (/metrics' `PENDING_AGES` counts those older than.)
PENDING_AGE_LIMITS = (300, 1800, 3600, 14400, 86400, 604800)
NOT_BY_A_PERSON = (AnsweredIn.GATEWAY.value, AnsweredIn.GRANT.value)  # `user_info.channel`
BY_PEOPLE = (Status.APPROVED.value, Status.REJECTED.value, Status.RESPONDED.value)
# Where people answer (`user_info.channel`); any other is counted as "other".
PLACES = [place.value for place in AnsweredIn if place.value not in NOT_BY_A_PERSON]
# The outcome of a function call rejected by the gateway at its deadline (stored rejected).
EXPIRED = Status.EXPIRED.value

_request = tables.Request.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]
_vote = tables.Vote.__table__  # type: ignore[attr-defined]
_decision = tables.Decision.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Period:
    """The requests of `projects` (None: every project) decided in [since, until)."""

    projects: Sequence[str] | None
    since: datetime
    until: datetime


@dataclass(frozen=True)
class DecisionGroup:
    """Decisions with the same maker (`DECIDER_FIELDS` of user_info, None when absent) and the
    same outcome; `without_vote`: no vote was cast for them (see `decision_groups`)."""

    who: Mapping[str, str | None]
    without_vote: bool
    status: str
    count: int


@dataclass(frozen=True)
class VoteCount:
    """One person's votes (as `vote.person` names them)."""

    person: str
    votes: int
    approved: int


# --- what the queries share


def _of_projects(projects: Sequence[str] | None, project_id: Any) -> ColumnElement[bool]:
    if projects is None:
        return sa.true()
    ids = sa.select(_project.c.id).where(_project.c.name.in_(list(projects)))
    chosen: ColumnElement[bool] = project_id.in_(ids.scalar_subquery())
    return chosen


# The `decision` table's columns, unqualified: `_decisions` writes the FROM clause.
_COLUMNS = {column.name: sa.column(column.name, column.type) for column in _decision.columns}


def _d(name: str) -> ColumnClause[Any]:
    return _COLUMNS[name]


def _decisions(conn: Connection, index: str | None) -> TextClause:
    """The decision table, read through `index` on SQLite (None: the table itself): each
    index leads with the day and its query's GROUP BY, so rows arrive grouped and are never
    sorted, and SQLite's planner, given statistics, would rather skip-scan another one."""
    if conn.dialect.name != "sqlite":
        return sa.text("decision")  # PostgreSQL: `_in_index_order` does the same
    return sa.text(f"decision INDEXED BY {index}" if index else "decision NOT INDEXED")


@contextlib.contextmanager
def _in_index_order(conn: Connection) -> Iterator[None]:
    """PostgreSQL: plan the read as SQLite's INDEXED BY does, an index-only scan in the
    order of the index led by the GROUP BY (rows arrive grouped), rather than a scan of
    the table and a hash of every row: half the time with 100,000 decisions."""
    if conn.dialect.name != "postgresql":
        yield
        return
    try:
        conn.exec_driver_sql("SET enable_hashagg = off")
        conn.exec_driver_sql("SET enable_seqscan = off")
        yield
    finally:  # the reader's connection serves other reads next: as it was, or not at all
        if not conn.invalidated:  # a lost connection is replaced (and its error kept)
            try:
                conn.exec_driver_sql("RESET enable_hashagg; RESET enable_seqscan")
            except sa.exc.DBAPIError:
                conn.invalidate()


def _decided_in(period: Period) -> list[ColumnElement[bool]]:
    """The period's decisions; its days too, which lead the indexes: only the period's
    entries are read, however long the table."""
    last = as_utc(period.until) - timedelta(microseconds=1)
    return [
        _d("day") >= as_utc(period.since).date().isoformat(),
        _d("day") <= last.date().isoformat(),
        _of_projects(period.projects, _d("project_id")),
        _d("decided_at") >= period.since,
        _d("decided_at") < period.until,
    ]


# --- the figures


def outcomes(conn: Connection, period: Period) -> list[tuple[str, str, str | None, int]]:
    """(UTC day `YYYY-MM-DD`, outcome, fn (None for a question), decisions). The outcome is
    the status, but `EXPIRED` for a function call the gateway rejected at its deadline."""
    found = _counted(conn, period, "ix_decision_outcomes", ("day", "fn", "status", "decided_by"))
    counted: Counter[tuple[str, str, str | None]] = Counter()
    for day, fn, status, by, n in found:
        ran_out = status == Status.REJECTED and by == DecidedBy.DEADLINE
        counted[str(day), EXPIRED if ran_out else str(status), fn] += int(n)
    return [(day, outcome, fn, n) for (day, outcome, fn), n in counted.items()]


def decision_groups(conn: Connection, period: Period) -> list[DecisionGroup]:
    """Decisions grouped by who made them (`decision.decider`). `without_vote`: a person's
    answer decided it alone, not a vote under a policy (`answers.decisions.submit` votes on
    approvals and rejections only, so a reply to a question under a policy is no vote)."""
    found = _counted(conn, period, "ix_decision_deciders", ("day", "decider", "alone", "status"))
    groups: Counter[tuple[str, bool, str]] = Counter()
    for _day, decider, alone, status, n in found:  # grouped by day too: the index's order
        groups[decider, bool(alone), str(status)] += int(n)
    return [
        DecisionGroup(_who(decider), alone, status, n)
        for (decider, alone, status), n in groups.items()
    ]


def _counted(
    conn: Connection, period: Period, index: str, columns: Sequence[str]
) -> list[tuple[Any, ...]]:
    """The period's decisions counted by `columns`, read in the order of `index`, which
    leads with the day and then those columns: rows arrive grouped, never sorted or hashed."""
    grouped = [_d(name) for name in columns]
    query = (
        sa.select(*grouped, sa.func.count())
        .select_from(_decisions(conn, index))
        .where(*_decided_in(period))
        .group_by(*grouped)
    )
    with _in_index_order(conn):
        return rows(conn, query)


def _who(decider: str) -> dict[str, str | None]:
    found = json.loads(decider)
    return {key: found.get(key) for key in DECIDER_FIELDS}


def timings(
    conn: Connection, period: Period, teams: Mapping[str, Sequence[str]]
) -> tuple[list[Timing], list[Timing]]:
    """Time to a person's decision (rules, standing grants and deadlines aside), in whole
    seconds, per channel they answered in (one the gateway does not know: "other") and per
    team the request was routed to: `teams` gives, per team, texts that its targets write in
    a stored route; a decision whose route holds any of them counts for that team (for each
    team it was routed to). One pass over the decision rows (no index holds the routes)."""
    position = sa.func.instr if conn.dialect.name == "sqlite" else sa.func.strpos
    channel = _d("answered_in")
    places = [channel == place for place in PLACES]
    places.append(sa.func.coalesce(channel, "").not_in(PLACES))
    routed_to_team = [
        sa.or_(*(position(_d("route_json"), mark) > 0 for mark in marks))
        for marks in teams.values()
    ]
    by_people = [
        *_decided_in(period),
        _d("decided_by") == DecidedBy.PERSON.value,
        _d("status").in_(BY_PEOPLE),
    ]
    found = _summaries(conn, [*places, *routed_to_team], by_people)
    labels = [*PLACES, "other"]
    by_channel = zip(labels, found[: len(labels)], strict=True)
    by_team = zip(teams, found[len(labels) :], strict=True)
    return _timings(by_channel), _timings(by_team)


# (decisions, p50, p90) in whole seconds, or None where there are none.
Summary = tuple[int, int, int] | None


def _summaries(
    conn: Connection, groups: list[ColumnElement[bool]], where: list[ColumnElement[bool]]
) -> list[Summary]:
    """Each group's times, handed over as one list (JSON text on SQLite, an array on
    PostgreSQL), sorted here: SQLite has no percentile function, and PostgreSQL's ordered
    aggregates, one sort per group, cost it more than the lists do."""
    collect = sa.func.json_group_array if conn.dialect.name == "sqlite" else sa.func.array_agg
    lists = [collect(_d("took_ms")).filter(group) for group in groups]
    found = conn.execute(sa.select(*lists).select_from(_decisions(conn, None)).where(*where))
    summaries: list[Summary] = []
    for millis in found.one():
        values = json.loads(millis) if isinstance(millis, str) else millis or []
        summaries.append(_summary(sorted(int(value) // 1000 for value in values)))
    return summaries


def _summary(ordered: list[int]) -> Summary:
    if not ordered:
        return None
    return len(ordered), nearest_rank(ordered, 50), nearest_rank(ordered, 90)


def _timings(summaries: Iterable[tuple[str, Summary]]) -> list[Timing]:
    return [Timing(label, *summary) for label, summary in summaries if summary is not None]


def nearest_rank(ordered: Sequence[int], pct: int) -> int:
    """The least of `ordered` (sorted) that at least `pct`% of them do not exceed."""
    return ordered[math.ceil(len(ordered) * pct / 100) - 1]


def pending_ages(conn: Connection, projects: Sequence[str] | None, now: datetime) -> list[int]:
    """The requests pending now, per age bucket (`PENDING_AGE_LIMITS`), youngest first."""
    younger = [
        (_request.c.requested_at > now - timedelta(seconds=bound), index)
        for index, bound in enumerate(PENDING_AGE_LIMITS)
    ]
    bucket = sa.case(*younger, else_=len(PENDING_AGE_LIMITS)).label("bucket")
    pending = (
        sa.select(bucket)
        .where(_of_projects(projects, _request.c.project_id), _request.c.status == Status.PENDING)
        .subquery()
    )
    query = sa.select(pending.c.bucket, sa.func.count()).group_by(pending.c.bucket)
    counts = [0] * (len(PENDING_AGE_LIMITS) + 1)
    for index, n in rows(conn, query):
        counts[int(index)] = int(n)
    return counts


def votes(conn: Connection, period: Period) -> list[VoteCount]:
    """The votes cast in the period (`vote.at`), per person (`vote.person`: who they are,
    resolved when they voted)."""
    approved = sa.func.sum(sa.case((_vote.c.approve.is_(True), 1), else_=0))
    query = (
        sa.select(_vote.c.person, sa.func.count(), approved)
        .select_from(_vote.join(_request, _request.c.rid == _vote.c.rid))
        .where(
            _of_projects(period.projects, _request.c.project_id),
            _vote.c.at >= period.since,
            _vote.c.at < period.until,
        )
        .group_by(_vote.c.person)
    )
    return [VoteCount(str(person), int(n), int(a or 0)) for person, n, a in rows(conn, query)]
