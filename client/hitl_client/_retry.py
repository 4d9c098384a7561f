"""When to try again: connection errors, 503 (and 429), with backoff, jitter and the
gateway's `Retry-After`; never any other status, so a refusal is raised at once."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from hitl_client.errors import ApiError, message_of

# 503: the gateway's database is busy or unreachable. 429: over the key's create rate; a 4xx,
# but one the gateway asks to repeat, after `Retry-After`.
RETRIED_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` in all (the first included); waits grow `base` * 2**n up to `cap`, each a
    random fraction of that ("full jitter"), so that many agents do not retry in step."""

    attempts: int = 6
    base: float = 0.25
    cap: float = 15.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None when none is left."""
        if attempt + 1 >= self.attempts:
            return None
        jitter = random.uniform(0, min(self.cap, self.base * 2**attempt))
        return jitter if retry_after is None else retry_after + jitter / 4


def retry_after(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds, from either of its forms (seconds, or an HTTP date)."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    if value.strip().isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retry_delay(policy: RetryPolicy, attempt: int, response: httpx.Response) -> float | None:
    """How long to wait before sending again, or None to take this answer."""
    if response.status_code not in RETRIED_STATUSES:
        return None
    return policy.delay(attempt, retry_after(response))


def result(response: httpx.Response) -> Any:
    """The JSON of a 2xx answer; any other raises with the gateway's message."""
    if response.is_success:
        return response.json()
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text or response.reason_phrase
    raise ApiError(response.status_code, message_of(detail), detail)
