"""How values are stored: UTC timestamps, and JSON we serialize ourselves."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """In UTC: SQLite hands datetimes back naive (everything stored is UTC), PostgreSQL in
    its session's time zone, which need not be UTC."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
