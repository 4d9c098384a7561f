"""Long-poll scale: what thousands of waiting agents cost, and how fast a decision among them
reaches its waiter.

    cd /work/main && .venv/bin/python bench/longpoll_scale.py [--waiters 1000,10000]

For each N: `gateway serve` on SQLite with N pending function calls (bulk-loaded), N agents
long-polling (`GET /function_calls/{id}?wait=60`, aiohttp, one connection each). Then, with
everyone waiting: the server's CPU over 10 s of idleness and its RSS; and respond -> waiter
latency for decisions made one at a time among them (respond sent, to the waiter's answer
received). Baseline, in the same run: the same decisions with no other waiter connected.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from bench import common
from bench.load import load_pending

IDLE_SECONDS = 10.0
DECISIONS = 200
WAIT = 60  # seconds each long-poll may wait; the measurement ends well before


@dataclass
class Result:
    label: str
    waiters: int
    idle_cpu_pct: float = float("nan")
    rss_mb: float = float("nan")
    latencies: list[float] = field(default_factory=list)


def rss_mb(pid: int | None) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def wait_for(session: aiohttp.ClientSession, url: str) -> dict[str, object]:
    async with session.get(url, params={"wait": WAIT}) as answer:
        body: dict[str, object] = await answer.json()
        return body


async def decide_among(
    gateway: common.Gateway, session: aiohttp.ClientSession, call_ids: list[str]
) -> list[float]:
    """Respond to each call in turn while its own waiter (and the others) wait."""
    latencies = []
    base = gateway.api_base
    for call_id in call_ids:
        waiter = asyncio.create_task(wait_for(session, f"{base}/function_calls/{call_id}"))
        await asyncio.sleep(0.05)  # the waiter's GET reaches the server and starts waiting
        started = time.perf_counter()
        async with session.post(
            f"{base}/agent/function_calls/{call_id}/respond", json={"approved": True}
        ) as answer:
            assert answer.status == 200, await answer.text()
        decided = await waiter
        latencies.append(time.perf_counter() - started)
        assert decided["status"]["approved"] is True  # type: ignore[index]
    return latencies


async def measure(gateway: common.Gateway, waiters: int, label: str) -> Result:
    database = f"sqlite+aiosqlite:///{gateway.workdir}/gateway.db"
    nonce = uuid.uuid4().hex[:6]
    idle_ids = [f"idle-{nonce}-{n}" for n in range(waiters)]
    decided_ids = [f"decide-{nonce}-{n}" for n in range(DECISIONS)]
    await load_pending(database, idle_ids + decided_ids)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=WAIT + 30)
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, headers=gateway.headers()
    ) as session:
        idle = [
            asyncio.create_task(wait_for(session, f"{gateway.api_base}/function_calls/{call_id}"))
            for call_id in idle_ids
        ]
        await asyncio.sleep(min(20.0, 2 + waiters / 1000))  # every waiter connects and waits
        result = Result(label, waiters)
        before = common.process_cpu_seconds(gateway.pid)
        await asyncio.sleep(IDLE_SECONDS)
        used = common.process_cpu_seconds(gateway.pid) - before
        result.idle_cpu_pct = 100 * used / IDLE_SECONDS
        result.rss_mb = rss_mb(gateway.pid)
        result.latencies = await decide_among(gateway, session, decided_ids)
        still_waiting = sum(1 for task in idle if not task.done())
        for task in idle:
            task.cancel()
        await asyncio.gather(*idle, return_exceptions=True)
    if still_waiting != waiters:
        print(f"  note: {waiters - still_waiting} of {waiters} waiters ended early")
    return result


def report(results: list[Result]) -> None:
    base = results[0]
    rows = []
    for result in results:
        p50 = common.percentile(result.latencies, 50)
        p99 = common.percentile(result.latencies, 99)
        rows.append(
            [
                result.label,
                result.waiters,
                common.fmt(result.idle_cpu_pct, 1),
                common.fmt(result.rss_mb, 0),
                common.fmt(common.ms(p50)),
                common.fmt(common.ms(p99)),
                common.ratio(p50, common.percentile(base.latencies, 50)),
                common.ratio(p99, common.percentile(base.latencies, 99)),
            ]
        )
    print()
    headers = [
        "run",
        "other waiters",
        "idle CPU %",
        "RSS MB",
        "p50 ms",
        "p99 ms",
        "p50 vs base",
        "p99 vs base",
    ]
    common.print_table(headers, rows)


async def run(counts: list[int]) -> None:
    results = []
    for waiters in [0, *counts]:
        label = "baseline: no other waiter" if waiters == 0 else f"{waiters:,} waiting"
        with common.gateway_server(common.sqlite_url(), "gateway, SQLite") as gateway:
            results.append(await measure(gateway, waiters, label))
        print(f"  measured {label}", flush=True)
    report(results)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", default="1000,10000")
    args = parser.parse_args(argv)
    common.print_machine("long-poll scale: idle waiters and decisions among them")
    asyncio.run(run([int(n) for n in args.waiters.split(",")]))


if __name__ == "__main__":
    main()
