"""The figures of the console's insights page (`gateway.seam.insights`), alike on SQLite and
PostgreSQL: a few aggregate queries over the requests of some projects decided in a period,
each one scan of the request table, grouped so that few rows come back.

- `outcomes`: decisions by UTC day, outcome and function (per day; most rejected).
- `deciders`: decisions by who decided, as their `user_info` says (people's answers; what
  rules and standing grants decided by themselves).
- `timings`: the seconds people's decisions took, per channel and per team, folded into
  nearest-rank percentiles.
- `pending_ages`, `votes`: pending requests by age; the votes cast under policies.

`user_info.channel` tells who decided: "gateway" with a `rule` is a rule that decided at
create (without one, a deadline), "grant" a standing grant, anything else a person."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from gateway.lifecycle import Status
from gateway.seam.insights import Timing
from gateway.store import tables
from gateway.vocabulary import AnsweredIn

# The upper bounds (seconds) of the pending-age buckets; one more bucket holds the older.
PENDING_AGES = (300, 1800, 3600, 14400, 86400, 604800)
BY_THEMSELVES = (AnsweredIn.GATEWAY.value, AnsweredIn.GRANT.value)  # no person decided
BY_PEOPLE = (Status.APPROVED.value, Status.REJECTED.value, Status.RESPONDED.value)
# Where people answer (`user_info.channel`); any other is counted as "other".
PLACES = [place.value for place in AnsweredIn if place.value not in BY_THEMSELVES]
# What `deciders` reads of a decision's user_info (`Decider.who`).
WHO = ("channel", "user_id", "person", "by", "rule", "grant", "name")

_request = tables.Request.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]
_vote = tables.Vote.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Scope:
    """The requests of `projects` (None: every project) decided in [since, until)."""

    projects: Sequence[str] | None
    since: datetime
    until: datetime


@dataclass(frozen=True)
class Decider:
    """Decisions alike in who made them (`WHO`'s fields of user_info, None when absent)
    and their outcome; `without_vote`: no vote was cast for them (see `deciders`)."""

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


def _of_projects(projects: Sequence[str] | None) -> ColumnElement[bool]:
    if projects is None:
        return sa.true()
    ids = sa.select(_project.c.id).where(_project.c.name.in_(list(projects)))
    chosen: ColumnElement[bool] = _request.c.project_id.in_(ids.scalar_subquery())
    return chosen


def _decided_in(scope: Scope) -> list[ColumnElement[bool]]:
    return [
        _of_projects(scope.projects),
        _request.c.status != Status.PENDING,
        _request.c.responded_at >= scope.since,
        _request.c.responded_at < scope.until,
    ]


def _channel(dialect: str) -> ColumnElement[Any]:
    """`user_info.channel`: where a decision was made."""
    column = _request.c.user_info_json
    if dialect == "sqlite":
        return sa.func.json_extract(column, sa.literal_column("'$.channel'"))
    # PostgreSQL refuses to read a document holding the escape \u0000 (an API caller may put
    # one in a name), even to read another field: the escape becomes \u0001, which keeps any
    # such text valid JSON. The channel itself is the gateway's word.
    readable = sa.func.replace(
        column, sa.literal_column("'\\u0000'"), sa.literal_column("'\\u0001'")
    )
    return sa.func.json_extract_path_text(
        sa.cast(readable, sa.JSON), sa.literal_column("'channel'")
    )


def _rows(conn: Connection, query: sa.Select[Any]) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(query)]


# --- the figures


def outcomes(conn: Connection, scope: Scope) -> list[tuple[str, str, str | None, int]]:
    """(UTC day `YYYY-MM-DD`, status, fn (None for a question), decisions)."""
    decided = _request.c.responded_at
    day: ColumnElement[Any]
    if conn.dialect.name == "sqlite":  # SQLite keeps timestamps as UTC text
        day = sa.func.substr(decided, 1, 10)
    else:
        day = sa.cast(sa.func.timezone(sa.literal_column("'UTC'"), decided), sa.Date)
    rows = (
        sa.select(day.label("day"), _request.c.status, _request.c.fn)
        .where(*_decided_in(scope))
        .subquery()
    )
    grouped = (rows.c.day, rows.c.status, rows.c.fn)
    query = sa.select(*grouped, sa.func.count()).group_by(*grouped)
    # SQLite's text and PostgreSQL's date both read YYYY-MM-DD as str.
    return [(str(day), str(status), fn, int(n)) for day, status, fn, n in _rows(conn, query)]


def deciders(conn: Connection, scope: Scope) -> list[Decider]:
    """Decisions grouped by who made them. `without_vote`: a person's answer decided it
    alone, not a vote under a policy (`answers.decisions.submit` votes on approvals and
    rejections only, so a reply to a question under a policy is no vote either). Grouped
    by the stored text, each read here once: parsing JSON row by row costs the database
    more than the few distinct texts (one per person and place, mostly) cost Python."""
    without_vote = sa.or_(_request.c.policy_json.is_(None), _request.c.status == Status.RESPONDED)
    rows = (
        sa.select(
            _request.c.user_info_json.label("who"),
            without_vote.label("without_vote"),
            _request.c.status,
        )
        .where(*_decided_in(scope))
        .subquery()
    )
    grouped = (rows.c.who, rows.c.without_vote, rows.c.status)
    query = sa.select(*grouped, sa.func.count()).group_by(*grouped)
    alike: Counter[tuple[tuple[str | None, ...], bool, str]] = Counter()
    for text, alone, status, n in _rows(conn, query):  # texts apart by an email's id: one
        alike[_who(text), bool(alone), str(status)] += int(n)
    return [
        Decider(dict(zip(WHO, who, strict=True)), alone, status, n)
        for (who, alone, status), n in alike.items()
    ]


def _who(text: str | None) -> tuple[str | None, ...]:
    info = json.loads(text or "{}")
    found = info if isinstance(info, dict) else {}
    return tuple(None if found.get(key) is None else str(found[key]) for key in WHO)


def timings(
    conn: Connection, scope: Scope, teams: Mapping[str, Sequence[str]]
) -> tuple[list[Timing], list[Timing]]:
    """Time to a person's decision, per channel they answered in and per team the request
    was routed to: `teams` gives, per team, texts that its targets write in a stored route
    (`route_json`); a request whose route holds any of them counts for that team (for each
    team it went to). In whole seconds (to the millisecond, then down). The database hands
    over each channel's and each team's times in one pass, as lists (a GROUP BY would sort
    every row first); they are sorted here."""
    dialect = conn.dialect.name
    position = sa.func.instr if dialect == "sqlite" else sa.func.strpos
    rows = (
        sa.select(
            _channel(dialect).label("channel"),
            _whole_seconds(dialect).label("seconds"),
            *(
                sa.or_(*(position(_request.c.route_json, mark) > 0 for mark in marks)).label(
                    f"team_{index}"
                )
                for index, marks in enumerate(teams.values())
            ),
        )
        .where(*_decided_in(scope), _request.c.status.in_(BY_PEOPLE))
        .offset(0)  # kept a subquery: each row's channel is read once, not once per list
        .subquery()
    )
    places = [rows.c.channel == place for place in PLACES]
    places.append(sa.func.coalesce(rows.c.channel, "").not_in([*PLACES, *BY_THEMSELVES]))
    went = [rows.c[f"team_{index}"] for index in range(len(teams))]
    every = [_every(dialect, rows.c.seconds, where) for where in (*places, *went)]
    found = [_as_list(values) for values in conn.execute(sa.select(*every)).one()]
    labels = [*PLACES, "other"]
    by_channel = dict(zip(labels, found[: len(labels)], strict=True))
    by_team = dict(zip(teams, found[len(labels) :], strict=True))
    return _percentiles(by_channel), _percentiles(by_team)


def _every(dialect: str, value: Any, where: ColumnElement[bool]) -> ColumnElement[Any]:
    """Every `value` of the rows where `where` holds, as one list (JSON text on SQLite)."""
    collect = sa.func.json_group_array if dialect == "sqlite" else sa.func.array_agg
    return collect(value).filter(where)


def _as_list(values: Any) -> list[int]:
    found = json.loads(values) if isinstance(values, str) else values
    return [int(value) for value in found or []]


def _whole_seconds(dialect: str) -> ColumnElement[Any]:
    """From creation to decision: milliseconds (SQLite's dates hold no finer), rounded,
    then whole seconds down."""
    decided, created = _request.c.responded_at, _request.c.requested_at
    if dialect == "sqlite":
        days = sa.func.julianday(decided) - sa.func.julianday(created)
        return sa.cast(sa.func.round(days * 86_400_000), sa.Integer) // 1000
    seconds = sa.func.date_part(sa.literal_column("'epoch'"), decided - created)  # a float
    millis = sa.cast(sa.func.round(seconds * 1000), sa.BigInteger)
    return millis // 1000


def _percentiles(times: Mapping[str, list[int]]) -> list[Timing]:
    found = []
    for label, seconds in times.items():
        ordered = sorted(seconds)
        if ordered:
            found.append(
                Timing(label, len(ordered), nearest_rank(ordered, 50), nearest_rank(ordered, 90))
            )
    return found


def nearest_rank(ordered: Sequence[int], pct: int) -> int:
    """The least of `ordered` (sorted) that at least `pct`% of them do not exceed."""
    return ordered[math.ceil(len(ordered) * pct / 100) - 1]


def pending_ages(conn: Connection, projects: Sequence[str] | None, now: datetime) -> list[int]:
    """The requests pending now, per age bucket (`PENDING_AGES`), youngest first."""
    younger = [
        (_request.c.requested_at > now - timedelta(seconds=bound), index)
        for index, bound in enumerate(PENDING_AGES)
    ]
    bucket = sa.case(*younger, else_=len(PENDING_AGES)).label("bucket")
    pending = (
        sa.select(bucket)
        .where(_of_projects(projects), _request.c.status == Status.PENDING)
        .subquery()
    )
    query = sa.select(pending.c.bucket, sa.func.count()).group_by(pending.c.bucket)
    counts = [0] * (len(PENDING_AGES) + 1)
    for index, n in _rows(conn, query):
        counts[int(index)] = int(n)
    return counts


def votes(conn: Connection, scope: Scope) -> list[VoteCount]:
    """The votes cast in the period (`vote.at`), per person (`vote.person`: who they are,
    resolved when they voted)."""
    approved = sa.func.sum(sa.case((_vote.c.approve.is_(True), 1), else_=0))
    query = (
        sa.select(_vote.c.person, sa.func.count(), approved)
        .select_from(_vote.join(_request, _request.c.rid == _vote.c.rid))
        .where(_of_projects(scope.projects), _vote.c.at >= scope.since, _vote.c.at < scope.until)
        .group_by(_vote.c.person)
    )
    return [VoteCount(str(person), int(n), int(a or 0)) for person, n, a in _rows(conn, query)]
