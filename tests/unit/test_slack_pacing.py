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


async def test_the_wait_counts_every_message_already_waiting() -> None:
    clock = FakeClock()
    parked: asyncio.Queue[float] = asyncio.Queue()

    async def park(seconds: float) -> None:  # the messages stay waiting their turn
        parked.put_nowait(seconds)
        await asyncio.Event().wait()

    pacer = Pacer(1.0, clock=clock, sleep=park)
    assert pacer.wait("C1") == 0.0
    waiting = [asyncio.create_task(pacer.wait_turn("C1")) for _ in range(3)]
    async with asyncio.timeout(5):  # the first went at once, the others wait 1 and 2 s
        assert [await parked.get(), await parked.get()] == [1.0, 2.0]
    assert pacer.wait("C1") == 3.0
    assert pacer.wait("C2") == 0.0
    for task in waiting:
        task.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)


async def test_messages_put_off_come_back_one_interval_apart_after_the_waiting_ones() -> None:
    clock = FakeClock()
    pacer = Pacer(1.0, clock=clock, sleep=clock.sleep)
    await pacer.wait_turn("C1")
    assert [pacer.later("C1") for _ in range(3)] == [1.0, 2.0, 3.0]
    assert pacer.wait("C1") == 1.0  # putting off reserves nothing
    clock.now += 10
    assert pacer.later("C1") == 0.0  # long after the last one: at once
