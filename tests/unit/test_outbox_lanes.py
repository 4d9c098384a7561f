"""The outbox's shares: a job that waits on its destination gives its run slot back, one
destination runs a few jobs at once, and a destination too far behind puts jobs off."""

from __future__ import annotations

import asyncio

import pytest

from gateway.outbox import lanes
from gateway.outbox.lanes import Deferred, Lanes, Slots
from gateway.seam.targets import Target
from gateway.vocabulary import ChannelName

TARGET = Target(channel=ChannelName.SLACK, address={"channel": "C1"}, via="test")


class PacedChannel:
    """Says its next turn is `wait` seconds away, and hands out later slots 1 s apart."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.put_off = 0

    def wait_before(self, target: Target, /) -> float:
        return self.wait

    def later_slot(self, target: Target, /) -> float:
        self.put_off += 1
        return self.wait + self.put_off


def slots_held_by(*job_ids: int) -> Slots:
    slots = Slots(len(job_ids))
    for job_id in job_ids:
        slots.take(job_id)
    return slots


async def test_a_job_waiting_for_its_lane_gives_its_slot_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lanes, "SLOT_SECONDS", 0.05)
    monkeypatch.setattr(lanes, "LANE_WIDTH", 1)
    slots = slots_held_by(1, 2)
    shares = Lanes(slots)
    release, inside = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with shares.lane("webhook:1", 1):
            inside.set()
            await release.wait()

    async def second() -> None:
        async with shares.lane("webhook:1", 2):
            assert release.is_set(), "ran beside the first: the lane is one wide"

    jobs = [asyncio.create_task(first()), asyncio.create_task(second())]
    async with asyncio.timeout(5):
        await inside.wait()
        while slots.free < 2:  # both wait on the lane: neither holds a slot after a while
            await slots.freed()
    release.set()
    await asyncio.gather(*jobs)


async def test_a_lane_too_far_behind_puts_the_job_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lanes, "LANE_DEPTH", 1)
    shares = Lanes(slots_held_by(1, 2))
    release, inside = asyncio.Event(), asyncio.Event()

    async def held() -> None:
        async with shares.lane("webhook:1", 1):
            inside.set()
            await release.wait()

    job = asyncio.create_task(held())
    async with asyncio.timeout(5):
        await inside.wait()
    with pytest.raises(Deferred) as deferred:
        async with shares.lane("webhook:1", 2):
            pass
    assert deferred.value.seconds == lanes.LANE_RETRY_SECONDS
    async with shares.lane("webhook:2", 2):  # another destination is not behind
        pass
    release.set()
    await job


async def test_a_paced_post_waits_without_a_slot_or_is_put_off_to_a_later_slot() -> None:
    slots = slots_held_by(1, 2, 3)
    shares = Lanes(slots)
    async with shares.post(PacedChannel(0.0), "slack", TARGET, 1):
        assert slots.free == 0  # its turn is now: it keeps its slot
    async with shares.post(PacedChannel(3.0), "slack", TARGET, 2):
        assert slots.free == 1  # it waits its turn without one
    far = PacedChannel(lanes.PACED_AHEAD_SECONDS + 1)
    for expected in (1, 2):
        with pytest.raises(Deferred) as deferred:
            async with shares.post(far, "slack", TARGET, 3):
                pass
        assert deferred.value.seconds == far.wait + expected  # one after the other
