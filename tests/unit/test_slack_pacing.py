"""Per-channel pacing with an injected clock: no test waits for real."""

from __future__ import annotations

import asyncio

from channels.slack.pacing import Pacer


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_a_burst_to_one_channel_goes_out_one_per_second() -> None:
    clock = FakeClock()
    pacer = Pacer(1.0, clock=clock, sleep=clock.sleep)
    sent_at = []
    for _ in range(5):
        await pacer.wait_turn("C1")
        sent_at.append(clock.now)
    assert sent_at == [100.0, 101.0, 102.0, 103.0, 104.0]


async def test_channels_do_not_wait_for_each_other() -> None:
    clock = FakeClock()
    pacer = Pacer(1.0, clock=clock, sleep=clock.sleep)
    await asyncio.gather(pacer.wait_turn("C1"), pacer.wait_turn("C2"), pacer.wait_turn("C3"))
    assert clock.slept == []


async def test_a_quiet_channel_sends_at_once() -> None:
    clock = FakeClock()
    pacer = Pacer(1.0, clock=clock, sleep=clock.sleep)
    await pacer.wait_turn("C1")
    clock.now += 5
    await pacer.wait_turn("C1")
    assert clock.slept == []
