"""The insights page's charts, drawn on the server as inline SVG (no script, no library):
the geometry here, the markup in `templates/web/_charts.html`. Two shapes serve every
figure: a column per day stacked by outcome, and horizontal bars (one or two per row)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.seam import shorten
from gateway.seam.insights import DayOutcomes

WIDTH = 520  # the bars' viewBox, in a half-width card (the SVG scales to its card)
DAYS_WIDTH = 1000  # the days' viewBox, across the page
OUTCOMES = ("approved", "rejected", "responded", "expired", "cancelled")  # bottom up
LABEL_WIDTH = 170  # horizontal bars: the row labels' column
LABEL_CHARS = 26  # what fits in it
ROW_HEIGHT = 28
DAYS_HEIGHT = 220
AXIS = 28  # room under the columns for their dates, left of them for the scale
TOP = 10


@dataclass(frozen=True)
class Row:
    """One row of a bar chart: its label, a value per series and each value in words."""

    label: str
    values: Sequence[float]
    texts: Sequence[str]


def took(whole: int) -> str:
    """A time to decision (whole seconds) as people read it: <1s, 42s, 4m 05s, 2h 05m, 3d 04h."""
    if whole < 1:
        return "<1s"
    for unit, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{whole // size}{unit} {whole % size // small_size:02d}{small}"
    if whole >= 60:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole}s"


def day_columns(days: Sequence[DayOutcomes]) -> dict[str, Any]:
    """Decisions per day: one column per day, stacked by outcome, with a scale and a date
    under every few columns."""
    plot = DAYS_HEIGHT - AXIS - TOP
    top = _nice(max((day.total for day in days), default=0))
    step = (DAYS_WIDTH - AXIS) / max(len(days), 1)
    every = math.ceil(len(days) / 12) or 1  # at most about 12 dates under the columns
    columns = []
    for index, day in enumerate(days):
        x = AXIS + index * step
        base = float(TOP + plot)
        segments = []
        for outcome in OUTCOMES:
            count = day.outcomes.get(outcome, 0)
            if count:
                height = plot * count / top
                base -= height
                segments.append({"outcome": outcome, "y": base, "h": height, "count": count})
        columns.append(
            {
                "x": x + step * 0.1,
                "w": step * 0.8,
                "segments": segments,
                "title": f"{day.day.isoformat()}: {_counted(day)}",
                "date": day.day.strftime("%m-%d") if index % every == 0 else None,
                "date_x": x + step / 2,
            }
        )
    return {
        "width": DAYS_WIDTH,
        "height": DAYS_HEIGHT,
        "columns": columns,
        "scale": [{"y": TOP + plot * (1 - n / top), "text": str(n)} for n in (0, top // 2, top)],
        "axis_x": AXIS,
        "date_y": DAYS_HEIGHT - 8,
    }


def _counted(day: DayOutcomes) -> str:
    found = [f"{day.outcomes[o]} {o}" for o in OUTCOMES if day.outcomes.get(o)]
    return ", ".join(found) or "no decisions"


def _nice(value: float) -> int:
    """The scale's top: an even number at least `value` (2 for an empty chart)."""
    return max(2, math.ceil(value / 2) * 2)


def bars(rows: Sequence[Row], series: Sequence[str]) -> dict[str, Any]:
    """Horizontal bars, one row per `rows` entry, a bar per series (p50 and p90; or one count),
    all on one scale, each with its value written after it."""
    width = WIDTH - LABEL_WIDTH - 60  # room for the value's text after the longest bar
    top = max((value for row in rows for value in row.values), default=0) or 1
    thickness = (ROW_HEIGHT - 6) / max(len(series), 1)
    drawn = []
    for index, row in enumerate(rows):
        y = TOP + index * ROW_HEIGHT
        shown = [
            {
                "series": name,
                "y": y + 3 + offset * thickness,
                "h": thickness - 1,
                "w": max(width * value / top, 1 if value else 0),
                "text": text,
            }
            for offset, (name, value, text) in enumerate(
                zip(series, row.values, row.texts, strict=True)
            )
        ]
        label = shorten(row.label, LABEL_CHARS)  # the table below has it whole
        drawn.append({"label": label, "y": y + ROW_HEIGHT / 2, "bars": shown})
    return {
        "width": WIDTH,
        "height": TOP * 2 + ROW_HEIGHT * len(rows),
        "rows": drawn,
        "x": LABEL_WIDTH,
    }
