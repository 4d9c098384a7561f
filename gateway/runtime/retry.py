"""Retry policies: pure functions of the attempt number, with injected randomness."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before the next attempt after `attempts` have failed.

    With `schedule`, delays come from the list (Svix: 0, 5 s, 5 min, ...); otherwise they
    grow exponentially from `base` up to `cap`. Jitter spreads retries by ±`jitter`.
    """

    schedule: Sequence[float] = ()
    base: float = 2.0
    cap: float = 300.0
    jitter: float = 0.1
    rand: Callable[[], float] = field(default=random.random, repr=False)

    def delay(self, attempts: int, *, retry_after: float | None = None) -> float:
        if self.schedule:
            seconds = self.schedule[min(attempts, len(self.schedule) - 1)]
        else:
            exponent = min(max(attempts - 1, 0), 64)  # 2**1025 does not fit in a float
            seconds = min(self.cap, self.base * 2**exponent)
        seconds *= 1 + self.jitter * (2 * self.rand() - 1)
        if retry_after is not None:
            seconds = max(seconds, retry_after)  # never earlier than the server asked
        return seconds
