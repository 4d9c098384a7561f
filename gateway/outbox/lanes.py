"""How the outbox worker shares itself out, so that one busy or slow destination never holds
up another's work (a deadline, a webhook, another project's post).

A claimed job holds one of the worker's run slots only while it makes progress: it gives the
slot back once it waits for a paced channel's turn, or has waited SLOT_SECONDS on its
destination (its turn, a slow answer), and carries on without one; the worker claims more.
A lane (one destination: a channel address, a webhook endpoint) runs at most LANE_WIDTH of
its jobs at once; a paced channel's pacing is its lane instead. A job whose lane is too far
behind is put off (`Deferred`), at no cost of an attempt.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field

from gateway.seam.channel import Paced
from gateway.seam.targets import Target

SLOT_SECONDS = 0.25  # then a job still waiting on its destination gives its slot back
LANE_WIDTH = 4  # jobs of one destination that run at once
LANE_DEPTH = 64  # jobs of one destination held here, running or waiting their turn
LANE_RETRY_SECONDS = 5.0  # a lane that deep is slow: later jobs come back after this
PACED_AHEAD_SECONDS = 10.0  # posts held waiting a paced channel's turn: this far ahead


class Deferred(Exception):
    """Put the job off for `seconds`, giving its attempt back: its destination is behind."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"put off {seconds:.1f} s: its destination is behind")
        self.seconds = seconds


class Slots:
    """The worker's run slots, by the jobs holding them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._holders: set[int] = set()
        self._freed = asyncio.Event()

    @property
    def free(self) -> int:
        return self.size - len(self._holders)

    def take(self, job_id: int) -> None:
        self._holders.add(job_id)

    def give_back(self, job_id: int) -> None:
        """Free `job_id`'s slot, if it holds one (it may have given it back before)."""
        if job_id in self._holders:
            self._holders.discard(job_id)
            self._freed.set()

    def wake(self) -> None:
        """End a `freed()` wait without a slot (the worker stops)."""
        self._freed.set()

    async def freed(self) -> None:
        """Until a slot is given back (or `wake`)."""
        await self._freed.wait()
        self._freed.clear()


@dataclass
class _Lane:
    running: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(LANE_WIDTH))
    held: int = 0


class Lanes:
    """Jobs' turns at their destinations. A job that waits on its destination (for its turn,
    or for a slow answer) gives its run slot back after SLOT_SECONDS at the most."""

    def __init__(self, slots: Slots) -> None:
        self.slots = slots
        self._lanes: dict[str, _Lane] = {}

    @asynccontextmanager
    async def post(
        self, channel: object, name: str, target: Target, job_id: int
    ) -> AsyncIterator[bool]:
        """Around one post (a send, a reminder) of `channel`, named `name`, to `target`: a
        paced channel's turn, else its lane's. True when it waited for its lane's turn."""
        if not isinstance(channel, Paced):
            async with self.lane(lane_of(name, target), job_id) as waited:
                yield waited
            return
        self._pace(channel, target, job_id)  # no await until the post reserves its turn
        with self._slot_until_slow(job_id):
            yield False  # the channel's send waits for its turn

    def _pace(self, channel: Paced, target: Target, job_id: int) -> None:
        wait = channel.wait_before(target)
        if wait > PACED_AHEAD_SECONDS:
            raise Deferred(channel.later_slot(target))
        if wait > 0:
            self.slots.give_back(job_id)

    @asynccontextmanager
    async def lane(self, key: str, job_id: int) -> AsyncIterator[bool]:
        """At most LANE_WIDTH jobs of lane `key` at once; past LANE_DEPTH, Deferred. True
        when the job waited for its turn (what it read before may have changed)."""
        lane = self._lanes.setdefault(key, _Lane())
        if lane.held >= LANE_DEPTH:
            raise Deferred(LANE_RETRY_SECONDS)
        lane.held += 1
        try:
            with self._slot_until_slow(job_id):
                waited = lane.running.locked()
                async with lane.running:
                    yield waited
        finally:
            lane.held -= 1
            if not lane.held:
                del self._lanes[key]

    @contextmanager
    def _slot_until_slow(self, job_id: int) -> Iterator[None]:
        later = asyncio.get_running_loop().call_later
        timer = later(SLOT_SECONDS, self.slots.give_back, job_id)
        try:
            yield
        finally:
            timer.cancel()


def lane_of(name: str, target: Target) -> str:
    """The lane of a channel's posts to one address."""
    return f"{name}:{json.dumps(target.address, sort_keys=True)}"
