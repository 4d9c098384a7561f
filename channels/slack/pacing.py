"""Outbound pacing: about one message per second per Slack channel (chat.postMessage's limit,
docs.slack.dev/apis/web-api/rate-limits), with an injectable clock and sleep for tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class Pacer:
    def __init__(
        self,
        interval: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._sleep = sleep
        self._next: dict[str, float] = {}  # the first slot after every one reserved
        self._later: dict[str, float] = {}  # the last slot handed to a message put off

    async def wait_turn(self, channel: str) -> None:
        """Return when a message may go to `channel`; reserves the slot after it."""
        now = self._clock()
        start = max(now, self._next.get(channel, now))
        # Reserved before waiting (no lock to queue on): `wait` counts every waiting message.
        self._next[channel] = start + self.interval
        if start > now:
            await self._sleep(start - now)

    def wait(self, channel: str) -> float:
        """Seconds a message to `channel` would wait for its turn now (0: none)."""
        return max(0.0, self._next.get(channel, 0.0) - self._clock())

    def later(self, channel: str) -> float:
        """Seconds until a slot for a message put off now instead of waiting: after the
        messages waiting their turn and one interval after the last one put off, so that
        messages put off together come back one at a time. Reserves nothing."""
        now = self._clock()
        after_last = self._later.get(channel, now - self.interval) + self.interval
        slot = max(now, self._next.get(channel, now), after_last)
        self._later[channel] = slot
        return slot - now
