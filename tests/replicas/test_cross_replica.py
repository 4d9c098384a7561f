"""Three `gateway serve` replicas on one PostgreSQL database, clients spread over them: a
request created on one replica and decided on another answers a long-poll on the third
within the latency target, and a decision made on one replica wakes a waiter and the
console's live page (its server-sent events) on the others within the same target.

The target. No test asserts an in-process decision latency: tests/test_longpoll.py bounds an
answer at 15 s (a sanity bound, far inside the 30 s wait), and bench/README.md measures
respond -> long-poll answer on PostgreSQL at p50 9.5 ms / p99 13 ms without asserting it.
Issue 15 asks for "the same latency target as in-process"; with no explicit target, these
tests take p99 < 1 s, for the cross-replica paths and for the same paths on one replica,
measured in the same run.

What is timed: from sending the respond to the waiter holding its answer, and to the live
page receiving its `changed` event. A waiter is sent before the respond; a subprocess does
not show when its waiter is registered, so a decision that commits first is answered by the
waiter's own read (as designed) rather than by the NOTIFY. The live page's event cannot be
anything but the NOTIFY: it is counted in lockstep (below).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from channels.web.auth import COOKIE
from tests.factories import request_body
from tests.replicas.cluster import Cluster, Replica, clients

pytestmark = pytest.mark.postgres

TARGET_P99 = 1.0  # seconds; see the module's docstring
ROUNDS_PER_ORDER = 8  # x 6 orders of (creator, decider, poller)
SAME_ROUNDS = 12  # everything on one replica, each replica in turn: the in-process path
LIVE_ROUNDS = 24  # decisions on one replica, watched from the two others
WAIT = 30  # the long-poll's ?wait=, far beyond the target
ANSWER_WITHIN = 10.0  # for one answer or one event: a failure, not a measurement


async def start_three(cluster: Cluster) -> list[Replica]:
    """The first replica creates the API key; the two others start together."""
    await cluster.start()
    await asyncio.gather(cluster.start(), cluster.start())
    return cluster.replicas


def percentile(values: list[float], pct: float) -> float:
    """Nearest rank: the smallest value with at least `pct` % of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def figures(values: list[float]) -> str:
    return (
        f"n={len(values)} p50={percentile(values, 50) * 1000:.1f} ms "
        f"p99={percentile(values, 99) * 1000:.1f} ms max={max(values) * 1000:.1f} ms"
    )


async def timed(call: Awaitable[httpx.Response]) -> tuple[httpx.Response, float]:
    """The response, and when it arrived (time.monotonic())."""
    response = await call
    return response, time.monotonic()


def decision(n: int) -> dict[str, Any]:
    return {"approved": n % 2 == 0, "comment": f"decision {n}"}


async def one_round(
    apis: list[httpx.AsyncClient], creator: int, decider: int, poller: int, n: int
) -> float:
    """Create on `creator`, long-poll on `poller`, decide on `decider`: seconds from
    sending the respond to the waiter's answer, which is the decision."""
    call_id = f"cross-{n}"
    created = await apis[creator].post("/function_calls", json=request_body(call_id))
    assert created.status_code == 200, created.text
    waiter = asyncio.create_task(
        timed(apis[poller].get(f"/function_calls/{call_id}", params={"wait": WAIT}))
    )
    try:
        sent = time.monotonic()
        respond = f"/agent/function_calls/{call_id}/respond"
        decided = await apis[decider].post(respond, json=decision(n))
        assert decided.status_code == 200, decided.text
        async with asyncio.timeout(ANSWER_WITHIN):
            answer, arrived = await waiter
    finally:
        waiter.cancel()  # it has answered, unless this round failed
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == decided.json()["status"]
    assert answer.json()["status"]["approved"] is decision(n)["approved"]
    return arrived - sent


async def test_created_on_one_decided_on_another_answers_a_long_poll_on_a_third(
    tmp_path: Path, pg_url: str
) -> None:
    cluster = Cluster(tmp_path, {"GATEWAY_DATABASE_URL": pg_url})
    try:
        replicas = await start_three(cluster)
        async with clients(replicas) as apis:
            orders = list(itertools.permutations(range(len(replicas))))
            cross = [
                await one_round(apis, creator, decider, poller, n)
                for n, (creator, decider, poller) in enumerate(orders * ROUNDS_PER_ORDER)
            ]
            same = [
                await one_round(apis, n % 3, n % 3, n % 3, len(cross) + n)
                for n in range(SAME_ROUNDS)
            ]
    finally:
        await cluster.stop()
    print(f"\nlong-poll, three replicas: {figures(cross)}; one replica: {figures(same)}")
    assert len(cross) == len(orders) * ROUNDS_PER_ORDER == 6 * ROUNDS_PER_ORDER
    assert percentile(cross, 99) < TARGET_P99, figures(cross)
    assert percentile(same, 99) < TARGET_P99, figures(same)


class LivePage:
    """The console's event stream (`GET /console/events`) on one replica, as the live
    pages read it: a background reader notes when each `changed` event arrives."""

    def __init__(self, replica: Replica, session: str) -> None:
        self.replica = replica
        self.arrivals: list[float] = []  # time.monotonic() of each `changed`
        self._changed = asyncio.Condition()
        self._http = httpx.AsyncClient(
            base_url=replica.process.base_url,
            cookies={COOKIE: session},
            timeout=httpx.Timeout(10, read=None),  # keepalives come every 15 s
        )
        self._reader: asyncio.Task[None] | None = None
        self._response: httpx.Response | None = None

    async def open(self) -> None:
        request = self._http.build_request("GET", "/console/events")
        self._response = await self._http.send(request, stream=True)
        assert self._response.status_code == 200, await self._response.aread()
        assert self._response.headers["content-type"].startswith("text/event-stream")
        lines = self._response.aiter_lines()
        assert await anext(lines) == "retry: 1000"  # the stream's first line
        self._reader = asyncio.create_task(self._read(lines))

    async def _read(self, lines: AsyncIterator[str]) -> None:
        async for line in lines:
            if line == "event: changed":
                async with self._changed:
                    self.arrivals.append(time.monotonic())
                    self._changed.notify_all()

    async def arrival(self, number: int) -> float:
        """When the `number`-th `changed` event arrived (1 is the first)."""
        async with asyncio.timeout(ANSWER_WITHIN), self._changed:
            await self._changed.wait_for(lambda: len(self.arrivals) >= number)
        return self.arrivals[number - 1]

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._response is not None:
            await self._response.aclose()
        await self._http.aclose()


async def console_session(replica: Replica) -> str:
    """Sign in with the one-time link the first replica printed; the session's cookie."""
    link = replica.process.console_link
    assert link is not None, "".join(replica.process.output)
    origin = {"Origin": replica.process.base_url}  # a browser on the console's page sends it
    async with httpx.AsyncClient(headers=origin) as browser:
        signed_in = await browser.post(link)
    assert signed_in.status_code == 303, signed_in.text
    session = signed_in.cookies.get(COOKIE)
    assert session
    return session


@asynccontextmanager
async def live_pages(replicas: list[Replica], session: str) -> AsyncIterator[list[LivePage]]:
    pages = [LivePage(replica, session) for replica in replicas]
    try:
        await asyncio.gather(*(page.open() for page in pages))
        yield pages
    finally:
        await asyncio.gather(*(page.aclose() for page in pages))


async def live_round(
    apis: list[httpx.AsyncClient], maker: int, pages: dict[int, LivePage], n: int
) -> tuple[list[float], list[float]]:
    """Create on `maker`, a waiter on each watching replica, decide on `maker`: seconds
    from sending the respond to each waiter's answer, and to each page's event. Round n
    makes changes 2n+1 (the create) and 2n+2 (the decision)."""
    call_id = f"live-{n}"
    created = await apis[maker].post("/function_calls", json=request_body(call_id))
    assert created.status_code == 200, created.text
    path, wait = f"/function_calls/{call_id}", {"wait": WAIT}
    waiters = {w: asyncio.create_task(timed(apis[w].get(path, params=wait))) for w in pages}
    waited: list[float] = []
    paged: list[float] = []
    try:
        # Each watching page hears of the create before the decision is made.
        for page in pages.values():
            await page.arrival(2 * n + 1)
        sent = time.monotonic()
        respond = f"/agent/function_calls/{call_id}/respond"
        decided = await apis[maker].post(respond, json=decision(n))
        assert decided.status_code == 200, decided.text
        for w, page in pages.items():
            paged.append(await page.arrival(2 * n + 2) - sent)
            async with asyncio.timeout(ANSWER_WITHIN):
                answer, arrived = await waiters[w]
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == decided.json()["status"]
            waited.append(arrived - sent)
    finally:
        for waiter in waiters.values():
            waiter.cancel()  # each has answered, unless this round failed
    return waited, paged


async def test_a_decision_on_one_replica_wakes_waiters_and_live_pages_on_the_others(
    tmp_path: Path, pg_url: str
) -> None:
    """Replica 0 creates and decides; replicas 1 and 2 hold a live page each and a waiter
    per request. The watching replicas change nothing, so each create and each decision
    wakes their page exactly once, through the NOTIFY: the k-th change is the k-th event.
    (The maker hears its own NOTIFY as well as its commit: its page could not be counted.)"""
    cluster = Cluster(tmp_path, {"GATEWAY_DATABASE_URL": pg_url})
    waiting: list[float] = []
    paging: list[float] = []
    try:
        replicas = await start_three(cluster)
        session = await console_session(replicas[0])
        maker, watching = 0, [1, 2]
        async with (
            clients(replicas) as apis,
            live_pages([replicas[w] for w in watching], session) as opened,
        ):
            pages = dict(zip(watching, opened, strict=True))
            for n in range(LIVE_ROUNDS):
                waited, paged = await live_round(apis, maker, pages, n)
                waiting += waited
                paging += paged
            # Each change woke each watching page once: no more events than changes.
            for w in watching:
                assert len(pages[w].arrivals) == 2 * LIVE_ROUNDS
    finally:
        await cluster.stop()
    print(f"\ndecided on replica 0: waiters on 1 and 2 {figures(waiting)}; pages {figures(paging)}")
    assert len(waiting) == len(paging) == 2 * LIVE_ROUNDS
    assert percentile(waiting, 99) < TARGET_P99, figures(waiting)
    assert percentile(paging, 99) < TARGET_P99, figures(paging)
