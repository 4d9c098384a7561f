"""Intake throughput: function calls created per second by concurrent HTTP clients.

    cd /work/main && .venv/bin/python bench/intake.py [--no-postgres]

Targets, one at a time, each a subprocess on 127.0.0.1: the bare ASGI baseline, the gateway
on SQLite, the gateway on a throwaway PostgreSQL. Each gets a warm-up that is not counted,
then a bounded number of POST /humanlayer/v1/function_calls with unique call_ids from a
fixed number of concurrent clients, under a hard time limit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench import common

CONCURRENCY = 16
TOTAL = 2000
WARMUP = 100
TIME_LIMIT = 20.0  # seconds of measured load per target, at most
REQUEST_TIMEOUT = 10.0


@dataclass
class LoadResult:
    label: str
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    elapsed: float = math.nan
    cut_short: bool = False
    server_cpu: float = math.nan  # seconds of the server process's CPU during the run
    stored: int | None = None  # function calls the gateway lists afterwards

    @property
    def ok(self) -> int:
        return len(self.latencies)

    @property
    def rps(self) -> float:
        return self.ok / self.elapsed if self.elapsed > 0 else math.nan

    def p(self, pct: float) -> float:
        return common.ms(common.percentile(self.latencies, pct))

    @property
    def cpu_per_request_ms(self) -> float:
        return common.ms(self.server_cpu / self.ok) if self.ok else math.nan


async def run_load(
    clients: list[httpx.AsyncClient],
    *,
    label: str,
    prefix: str,
    total: int,
    time_limit: float,
) -> LoadResult:
    """`total` creates (fewer if `time_limit` runs out), one worker per client."""
    result = LoadResult(label)
    counter = itertools.count()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + time_limit

    async def worker(client: httpx.AsyncClient) -> None:
        while loop.time() < deadline:
            index = next(counter)
            if index >= total:
                return
            body = common.function_call_body(f"{prefix}-{index}")
            started = time.perf_counter()
            try:
                response = await client.post("/function_calls", json=body)
            except httpx.HTTPError as error:
                result.errors[type(error).__name__] += 1
                continue
            took = time.perf_counter() - started
            if response.status_code == 200:
                result.latencies.append(took)
            else:
                result.errors[f"HTTP {response.status_code}"] += 1
        result.cut_short = True

    started = time.perf_counter()
    try:
        # Workers take no new work after the deadline; this also bounds requests in flight.
        async with asyncio.timeout(time_limit + REQUEST_TIMEOUT + 5):
            await asyncio.gather(*(worker(client) for client in clients))
    except TimeoutError:
        result.cut_short = True
    result.elapsed = time.perf_counter() - started
    return result


async def measure(
    api_base: str, headers: dict[str, str], label: str, pid: int | None, *, gateway: bool
) -> LoadResult:
    """Warm-up, then the measured load, over the same clients and connections.

    One httpx.AsyncClient (one keep-alive connection) per concurrent client, as separate
    agents would have: one client shared by all makes httpx's pool the bottleneck.
    """
    tag = uuid.uuid4().hex[:8]
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=api_base, headers=headers, timeout=REQUEST_TIMEOUT)
            )
            for _ in range(CONCURRENCY)
        ]
        warm = await run_load(
            clients, label=label, prefix=f"warm-{tag}", total=WARMUP, time_limit=TIME_LIMIT
        )
        if warm.errors:
            print(f"  {label}: warm-up errors {dict(warm.errors)}", flush=True)
        cpu_before = common.process_cpu_seconds(pid)
        result = await run_load(
            clients, label=label, prefix=f"bench-{tag}", total=TOTAL, time_limit=TIME_LIMIT
        )
        result.server_cpu = common.process_cpu_seconds(pid) - cpu_before
        if gateway:  # every acknowledged create is stored
            listing = await clients[0].get("/function_calls", params={"limit": 1})
            result.stored = listing.json()["total"]
            expected = warm.ok + result.ok
            if result.stored != expected:
                print(f"  {label}: {result.stored} stored but {expected} acknowledged!")
    print(
        f"  {label}: {result.ok} ok, {sum(result.errors.values())} errors "
        f"in {result.elapsed:.2f} s",
        flush=True,
    )
    return result


def report_gateway_log(gateway: common.Gateway) -> None:
    lines = gateway.log_lines()
    if lines:
        print(f"  {gateway.label}: the gateway logged {len(lines)} line(s) at warning+; first:")
        for line in lines[:5]:
            print(f"    {line}")


@contextlib.contextmanager
def announced(what: str) -> Iterator[None]:
    print(f"-- {what}", flush=True)
    yield


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL run")
    args = parser.parse_args()

    common.print_machine("intake: POST /humanlayer/v1/function_calls")
    print(
        f"load: {CONCURRENCY} concurrent clients (one httpx.AsyncClient each, keep-alive), "
        f"{WARMUP} warm-up requests not counted, then {TOTAL} requests or "
        f"{TIME_LIMIT:.0f} s, whichever comes first; unique call_ids"
    )
    print()

    results: list[LoadResult] = []
    with announced("baseline: bare ASGI function under uvicorn"), common.baseline_server() as srv:
        headers = {"Authorization": "Bearer not-checked"}
        label = "baseline (bare ASGI)"
        results.append(asyncio.run(measure(srv.api_base, headers, label, srv.pid, gateway=False)))

    with (
        announced("gateway on SQLite"),
        common.gateway_server(common.sqlite_url(), "gateway/SQLite") as gw,
    ):
        results.append(
            asyncio.run(measure(gw.api_base, gw.headers(), gw.label, gw.pid, gateway=True))
        )
        report_gateway_log(gw)

    if args.no_postgres:
        print("-- gateway on PostgreSQL: skipped (--no-postgres)")
    elif not common.postgres_available():
        print("-- gateway on PostgreSQL: skipped (no PostgreSQL binaries on this machine)")
    else:
        with (
            announced("gateway on PostgreSQL (throwaway server, fsync=off)"),
            common.throwaway_postgres("bench_intake") as url,
            common.gateway_server(url, "gateway/PostgreSQL") as gw,
        ):
            results.append(
                asyncio.run(measure(gw.api_base, gw.headers(), gw.label, gw.pid, gateway=True))
            )
            report_gateway_log(gw)

    print()
    baseline = results[0]
    rows = []
    for result in results:
        rows.append(
            [
                result.label + (" (cut short)" if result.cut_short else ""),
                f"{result.ok}/{TOTAL}",
                common.fmt(result.rps, 1),
                common.fmt(result.p(50)),
                common.fmt(result.p(99)),
                sum(result.errors.values()),
                common.ratio(result.rps, baseline.rps),
                common.ratio(result.p(50), baseline.p(50)),
                common.fmt(result.cpu_per_request_ms),
                common.ratio(result.cpu_per_request_ms, baseline.cpu_per_request_ms),
            ]
        )
    common.print_table(
        [
            "target",
            "ok",
            "req/s",
            "p50 ms",
            "p99 ms",
            "errors",
            "req/s vs base",
            "p50 vs base",
            "server CPU ms/req",
            "CPU vs base",
        ],
        rows,
    )
    for result in results:
        if result.errors:
            print(f"errors for {result.label}: {dict(result.errors)}")
    print()
    print(
        "The baseline row is the ceiling of this load generator and uvicorn on this machine; "
        "'vs base' columns are gateway/baseline from this same run. Server CPU: the server "
        "process's user+system time during the measured run divided by the requests it "
        "answered (PostgreSQL's own processes not included)."
    )
    return 1 if any(result.errors for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
