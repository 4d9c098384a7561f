"""The console's insights page (`/console/insights`): how decisions flow in the projects the
signed-in person sees, over a period. Each figure is a chart drawn on the server
(`channels.web.charts`) and the same numbers as a table, so the page reads the same without
JavaScript. Filters: one project (or all the person sees) and the last 7, 30 or 90 days, or
from one UTC day to another: the form's buttons say which (`days`: a number, or `custom` for
its from/to boxes, which are read only then)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from fastapi.responses import Response

from channels.web import charts, render
from channels.web.auth import Viewer
from gateway.seam import Console
from gateway.seam.insights import Insights, Timing

PERIODS = (7, 30, 90)  # days the period buttons offer
CUSTOM = "custom"  # `days` for the from/to boxes
DEFAULT_DAYS = 30
LONGEST_DAYS = 366  # a from/to period: one column a day must still fit
CHART_ROWS = 15  # people and rules a chart shows, the most first; their tables show all


@dataclass(frozen=True)
class Period:
    """The UTC days chosen: the last `days` (a button) or `start` to `end` (both included;
    `days` None)."""

    start: date
    end: date
    days: int | None

    @property
    def since(self) -> datetime:
        return datetime.combine(self.start, time(), UTC)

    @property
    def until(self) -> datetime:
        return datetime.combine(self.end + timedelta(days=1), time(), UTC)


@dataclass(frozen=True)
class Unshown:
    """Why the page is not shown: a message page's status, title and text."""

    status: int
    title: str
    text: str


def period_of(query: Mapping[str, str], today: date) -> Period | str:
    """The period a query asks for, or why it cannot be read. The from/to days count only
    when `days` is `custom` (or absent, for a link with just them): a button for the last
    days wins over boxes still filled from a custom period."""
    days, start, end = query.get("days") or "", query.get("from") or "", query.get("to") or ""
    custom = days == CUSTOM or (not days and bool(start or end))  # a link may give just days
    if not custom:
        chosen = int(days) if days in {str(d) for d in PERIODS} else DEFAULT_DAYS
        return Period(today - timedelta(days=chosen - 1), today, chosen)
    try:
        last = date.fromisoformat(end) if end else today
        first = date.fromisoformat(start) if start else last - timedelta(days=DEFAULT_DAYS - 1)
    except ValueError:
        return "Give the days as YYYY-MM-DD."
    if last < first:
        return "The period ends before it begins."
    if (last - first).days >= LONGEST_DAYS:
        return f"Choose at most {LONGEST_DAYS} days."
    return Period(first, last, None)


async def page(
    console: Console, query: Mapping[str, str], viewer: Viewer, csrf: str
) -> Response | Unshown:
    """The page for a signed-in person: their projects only (another is a 404)."""
    visible = await console.project_names(viewer.sees)
    project = query.get("project") or None
    if project is not None and project not in visible:  # another's project is not there
        return Unshown(404, "Not found", "There is no such project here.")
    period = period_of(query, datetime.now(UTC).date())
    if isinstance(period, str):
        return Unshown(422, "Nothing to show", period)
    projects = [project] if project else (None if viewer.projects is None else visible)
    found = await console.insights(projects, period.since, period.until)
    return render.page(
        "insights.html",
        **shown(found),
        period=period,
        periods=PERIODS,
        custom=CUSTOM,
        project=project,
        projects=visible,
        viewer=viewer,
        csrf=csrf,
    )


def shown(found: Insights) -> dict[str, Any]:
    """Each figure's chart and table rows."""
    totals: dict[str, int] = {}
    for day in found.per_day:
        for outcome, count in day.outcomes.items():
            totals[outcome] = totals.get(outcome, 0) + count
    rejected = [
        charts.Row(
            r.fn,
            [r.rejected, r.expired],
            [f"{r.rejected} of {r.decided}", f"{r.expired} of {r.decided}"],
        )
        for r in found.rejected
    ]
    auto = [
        charts.Row(a.name, [a.approved, a.rejected], [str(a.approved), str(a.rejected)])
        for a in found.auto
    ]
    answers = [charts.Row(p.person, [p.answers], [str(p.answers)]) for p in found.people]
    pending = [charts.Row(a.label, [a.count], [str(a.count)]) for a in found.pending]
    return {
        "found": found,
        "totals": totals,
        "decided": sum(totals.values()),
        "auto_decided": sum(a.approved + a.rejected for a in found.auto),
        "pending_now": sum(a.count for a in found.pending),
        "days_chart": charts.day_columns(found.per_day),
        "outcomes": [o for o in charts.OUTCOMES if totals.get(o)] or ["approved", "rejected"],
        "team_chart": charts.bars(_timing_rows(found.by_team), ("p50", "p90")),
        "channel_chart": charts.bars(_timing_rows(found.by_channel), ("p50", "p90")),
        "pending_chart": charts.bars(pending, ("count",)),
        "rejected_chart": charts.bars(rejected, ("rejected", "expired")),
        "auto_chart": charts.bars(auto[:CHART_ROWS], ("approved", "rejected")),
        "answers_chart": charts.bars(answers[:CHART_ROWS], ("count",)),
        "took": charts.took,
    }


def _timing_rows(timings: list[Timing]) -> list[charts.Row]:
    return [
        charts.Row(t.label, [t.p50, t.p90], [charts.took(t.p50), charts.took(t.p90)])
        for t in timings
    ]
