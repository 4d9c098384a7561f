"""Outbound pacing: about one message per second per Slack channel (chat.postMessage's limit,
docs.slack.dev/apis/web-api/rate-limits), with an injectable clock and sleep for tests."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
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
        self._next: dict[str, float] = {}
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def wait_turn(self, channel: str) -> None:
        """Return when a message may go to `channel`; reserves the slot after it."""
        async with self._locks[channel]:
            now = self._clock()
            start = max(now, self._next.get(channel, now))
            if start > now:
                await self._sleep(start - now)
            self._next[channel] = start + self.interval
