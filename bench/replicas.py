"""Replicas: intake and decision latency, 1 and 3 `gateway serve` on one PostgreSQL.

    cd /work/main && .venv/bin/python bench/replicas.py [--seconds 5]

One throwaway PostgreSQL (fsync and `synchronous_commit` on). Replica 1 starts first and
prints the API key that every replica accepts; it is measured alone, then replicas 2 and 3
join the same database and the three are measured together.

(a) intake, Python clients: 6 clients (one connection each, spread round-robin over the
    replicas) pace their creates at 150/s in all, a moderate load; p50/p99 of a create
    ("cut short": they fell more than 10 % behind that pace, the machine was saturated).
(b) decision: create on replica A, long-poll on C, respond on B (with one replica, A = B = C),
    one at a time (bench/decision_latency.py's loop); from sending the respond to the
    waiter's answer, which crosses replicas by PostgreSQL's NOTIFY.
(c) intake, `wrk` (when installed): one wrk per replica in parallel, 24 connections in all,
    as fast as they can; req/s in all, and the replicas' CPU (user + system) per request.
Baselines in the same run, under the same load generators: a bare ASGI function under
uvicorn. The machine's cores are shared by the replicas, PostgreSQL and the load generator.
The 3-replica run finds the 1-replica run's rows in the database (some thousands).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sys
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench import common, decision_latency, wrk
from bench.decision_latency import Phase

REPLICAS = (1, 3)  # measured in turn; the later count adds replicas to the running ones
CLIENTS = 6  # Python intake clients; 6 spread evenly over 1 or 3 replicas
RATE = 150.0  # creates per second from all of them (paced): a moderate load
WARMUP = 5  # creates per client first, not counted
CAPACITY_SECONDS = 2.0  # the Python clients unpaced against the bare baseline
WRK_CONNECTIONS = 24  # in all, split evenly over the wrk processes (one per replica)
WRK_WARMUP = 1.0  # seconds, not counted
MAX_PER_CLIENT = 5000  # creates, unpaced
TIMEOUT = 10.0  # for one request


@dataclass
class WrkRow:
    label: str
    results: list[wrk.WrkResult]
    cpu_ms: float  # the servers' CPU per request

    @property
    def rps(self) -> float:
        return sum(result.rps for result in self.results)

    @property
    def p50_ms(self) -> float:  # the slowest wrk process's
        return max(result.p50_ms for result in self.results)

    @property
    def p99_ms(self) -> float:
        return max(result.p99_ms for result in self.results)

    @property
    def errors(self) -> int:
        return sum(result.errors for result in self.results)


@dataclass
class Run:
    """What one replica count measured."""

    replicas: int
    intake: Phase
    decision: Phase
    wrk: WrkRow | None


# --- (a) intake from Python clients ------------------------------------------------------


async def client_creates(
    client: httpx.AsyncClient, phase: Phase, name: str, interval: float, deadline: float
) -> None:
    """Creates one after another, each `interval` after the last one started (0: at once),
    until `deadline` or the count the interval allows."""
    loop = asyncio.get_running_loop()
    paced = math.ceil((deadline - loop.time()) / interval) if interval else MAX_PER_CLIENT
    due = loop.time()
    for index in range(WARMUP + paced):
        due = max(due, loop.time())
        await asyncio.sleep(due - loop.time())
        if loop.time() >= deadline:
            return
        started = time.perf_counter()
        if not await decision_latency.create(client, f"{name}-{index}"):
            phase.errors["create failed"] += 1
        elif index >= WARMUP:
            phase.latencies.append(time.perf_counter() - started)
        due += interval


async def intake_phase(
    label: str, api_bases: Sequence[str], api_key: str, seconds: float, rate: float | None
) -> Phase:
    """CLIENTS clients, client i on api_bases[i % len]; paced at `rate` creates/s in all, or
    as fast as they go (None). Every client stops after `seconds`."""
    phase = Phase(label)
    tag = uuid.uuid4().hex[:8]
    interval = CLIENTS / rate if rate else 0.0
    headers = {"Authorization": f"Bearer {api_key}"}
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=api_bases[i % len(api_bases)], headers=headers, timeout=TIMEOUT
                )
            )
            for i in range(CLIENTS)
        ]
        deadline = asyncio.get_running_loop().time() + seconds
        await asyncio.gather(
            *(
                client_creates(client, phase, f"{tag}-{i}", interval, deadline)
                for i, client in enumerate(clients)
            )
        )
    sent = len(phase.latencies) + sum(phase.errors.values()) + CLIENTS * WARMUP
    phase.cut_short = rate is not None and sent < 0.9 * rate * seconds  # fell behind the pace
    return phase


def generator_capacity(server: common.BaselineProcess) -> float:
    """Creates per second the Python clients manage unpaced against the bare baseline."""
    started = time.monotonic()
    phase = asyncio.run(
        intake_phase("capacity", [server.api_base], "unused", CAPACITY_SECONDS, None)
    )
    return (len(phase.latencies) + CLIENTS * WARMUP) / (time.monotonic() - started)


# --- (b) decision latency across replicas -----------------------------------------------


async def decision_phase(replicas: Sequence[common.Gateway]) -> Phase:
    """Create on the first replica, long-poll on the last, respond on the second."""
    agent_on, human_on, poller_on = replicas[0], replicas[1 % len(replicas)], replicas[-1]
    async with contextlib.AsyncExitStack() as stack:
        agent, human, poller = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=gateway.api_base,
                    headers=gateway.headers(),
                    timeout=decision_latency.WAIT + TIMEOUT,
                )
            )
            for gateway in (agent_on, human_on, poller_on)
        ]
        for client in (agent, human, poller):  # open each client's connection
            (await client.get("/project")).raise_for_status()
        return await decision_latency.long_poll_phase(agent, poller, human)


# --- (c) intake from wrk -----------------------------------------------------------------


def parallel_wrk(urls: Sequence[str], api_key: str, seconds: float) -> list[wrk.WrkResult]:
    """One wrk per url, all at once, WRK_CONNECTIONS split evenly among them."""
    nonce = uuid.uuid4().hex[:8]

    def one(index: int) -> wrk.WrkResult:
        return wrk.post_creates(
            urls[index],
            connections=WRK_CONNECTIONS // len(urls),
            seconds=seconds,
            api_key=api_key,
            nonce=f"{nonce}-{index}",
            threads=2 if len(urls) == 1 else 1,  # wrk threads in all: 2 or 3
        )

    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(one, range(len(urls))))


def wrk_row(
    label: str, urls: Sequence[str], api_key: str, seconds: float, pids: Sequence[int | None]
) -> WrkRow:
    """`parallel_wrk` after a warm-up; the CPU of the processes `pids` per request."""
    parallel_wrk(urls, api_key, WRK_WARMUP)
    before = sum(common.process_cpu_seconds(pid) for pid in pids)
    results = parallel_wrk(urls, api_key, seconds)
    cpu = sum(common.process_cpu_seconds(pid) for pid in pids) - before
    requests = sum(result.requests for result in results)
    return WrkRow(label, results, common.ms(cpu / max(requests, 1)))


def wrk_baselines(seconds: float) -> list[WrkRow]:
    """The bare baseline under both shapes of the load: one wrk, and three at once."""
    with common.baseline_server() as server:
        pids = [server.pid]
        return [
            wrk_row(f"bare ASGI (baseline), {n} wrk", [server.base_url] * n, "x", seconds, pids)
            for n in REPLICAS
        ]


# --- the replicas ------------------------------------------------------------------------


def add_replica(stack: contextlib.ExitStack, url: str, replicas: list[common.Gateway]) -> None:
    """One more `gateway serve` on the database; the first one's key is everyone's."""
    key = replicas[0].api_key if replicas else None
    label = f"replica {len(replicas) + 1}"
    replicas.append(stack.enter_context(common.gateway_server(url, label, api_key=key)))


def measure(replicas: Sequence[common.Gateway], seconds: float, with_wrk: bool) -> Run:
    count = len(replicas)
    label = f"{count} replica" + ("s" if count > 1 else "")
    intake = asyncio.run(
        intake_phase(
            f"{label}: create",
            [gateway.api_base for gateway in replicas],
            replicas[0].api_key,
            seconds,
            RATE,
        )
    )
    print(f"  {intake.label}: {len(intake.latencies)} measured", flush=True)
    decision = asyncio.run(decision_phase(replicas))
    decision.label = f"{label}: respond -> long-poll answer"
    print(f"  {decision.label}: {len(decision.latencies)} measured", flush=True)
    row = None
    if with_wrk:
        urls = [gateway.api_base.removesuffix(common.API_PREFIX) for gateway in replicas]
        pids = [gateway.pid for gateway in replicas]
        row = wrk_row(f"{label}: create", urls, replicas[0].api_key, seconds, pids)
        print(f"  {row.label} under wrk: {row.rps:,.0f} req/s", flush=True)
    return Run(count, intake, decision, row)


def run_replicas(seconds: float, with_wrk: bool) -> list[Run]:
    runs = []
    with (
        common.throwaway_postgres("bench_replicas") as url,
        contextlib.ExitStack() as stack,
    ):
        replicas: list[common.Gateway] = []
        for count in REPLICAS:
            while len(replicas) < count:
                add_replica(stack, url, replicas)
            print(f"-- {count} replica(s) on one PostgreSQL", flush=True)
            runs.append(measure(replicas, seconds, with_wrk))
        print_logs(replicas)
    return runs


def print_logs(replicas: Sequence[common.Gateway]) -> None:
    """What a replica logged at error level, if anything (a lost NOTIFY, a failed write)."""
    for gateway in replicas:
        lines = [line for line in gateway.log_lines() if "ERROR" in line or "Traceback" in line]
        if lines:
            print(f"  {gateway.label} logged {len(lines)} error line(s); first:")
            for line in lines[:5]:
                print(f"    {line}")


# --- output --------------------------------------------------------------------------------


def print_wrk(rows: Sequence[WrkRow]) -> None:
    bare = rows[0].rps
    table = [
        [
            row.label,
            f"{row.rps:,.0f}",
            common.fmt(row.p50_ms),
            common.fmt(row.p99_ms),
            common.fmt(row.cpu_ms, 3),
            row.errors,
            common.ratio(row.rps, bare),
        ]
        for row in rows
    ]
    print()
    print(f"intake under wrk ({WRK_CONNECTIONS} connections in all, one wrk per replica):")
    headers = ["target", "req/s", "p50 ms", "p99 ms", "CPU ms/req", "errors", "vs bare"]
    common.print_table(headers, table)
    print("(p50/p99: the slowest wrk process's; CPU: the replicas' processes, not PostgreSQL's)")


def print_ratios(one: Run, three: Run) -> None:
    def row(label: str, a: Sequence[float], b: Sequence[float]) -> list[str]:
        return [
            label,
            common.ratio(common.percentile(b, 50), common.percentile(a, 50)),
            common.ratio(common.percentile(b, 99), common.percentile(a, 99)),
        ]

    table = [
        row("create, Python clients (paced)", one.intake.latencies, three.intake.latencies),
        row("respond -> long-poll answer", one.decision.latencies, three.decision.latencies),
    ]
    if one.wrk is not None and three.wrk is not None:
        table.append(
            [
                "create under wrk (saturated)",
                common.ratio(three.wrk.p50_ms, one.wrk.p50_ms),
                common.ratio(three.wrk.p99_ms, one.wrk.p99_ms),
            ]
        )
    print()
    print("3 replicas / 1 replica:")
    common.print_table(["measurement", "p50", "p99"], table)
    if one.wrk is not None and three.wrk is not None:
        print(f"creates/s under wrk: {common.ratio(three.wrk.rps, one.wrk.rps)}")


def print_headroom(capacity: float, wrk_rows: Sequence[WrkRow]) -> None:
    print()
    print(
        f"load generator headroom: the Python clients, unpaced, took {capacity:,.0f} creates/s "
        f"from the bare baseline, {capacity / RATE:.1f}x the {RATE:.0f}/s they are paced at."
    )
    if wrk_rows:
        bare = min(row.rps for row in wrk_rows if row.label.startswith("bare"))
        fastest = max(row.rps for row in wrk_rows if not row.label.startswith("bare"))
        print(
            f"wrk took {bare:,.0f} req/s from the bare baseline, {bare / fastest:.1f}x the "
            f"fastest gateway figure ({fastest:,.0f}/s): wrk is not the bottleneck."
        )


def report(baselines: tuple[Phase, Phase], runs: Sequence[Run], wrk_rows: list[WrkRow]) -> None:
    print()
    print(f"intake, Python clients ({CLIENTS} clients round-robin, paced at {RATE:.0f}/s in all):")
    common.print_latencies(baselines[0], [run.intake for run in runs])
    print()
    print("decision: create on A, long-poll on C, respond on B (one replica: all on it):")
    common.print_latencies(baselines[1], [run.decision for run in runs])
    if wrk_rows:
        print_wrk(wrk_rows)
    print_ratios(runs[0], runs[-1])
    for phase in [*baselines, *(p for run in runs for p in (run.intake, run.decision))]:
        if phase.errors:
            print(f"errors for {phase.label}: {dict(phase.errors)}")


def print_header(seconds: float) -> None:
    common.print_machine("replicas: 1 and 3 `gateway serve` on one PostgreSQL")
    cores = os.cpu_count() or 0
    print(
        f"note: the {cores} core(s) are shared by every replica, PostgreSQL and the load "
        "generator: 3 replicas compete with each other for CPU, so more replicas cannot add "
        "throughput here; compare medians and the 3/1 ratios, not absolute figures."
    )
    print(
        f"intake phases: {seconds:g} s each; decision: up to {decision_latency.N} decisions "
        f"or {decision_latency.PHASE_LIMIT:g} s, the respond sent "
        f"{common.ms(decision_latency.SETTLE):.0f} ms after the waiter's request"
    )
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per intake phase")
    parser.add_argument("--no-wrk", action="store_true", help="skip the wrk throughput runs")
    args = parser.parse_args(argv)
    if not common.postgres_available():
        print("no PostgreSQL binaries on this machine (tests/services/provision.sh)")
        return 1
    with_wrk = not args.no_wrk and wrk.available()
    print_header(args.seconds)
    started = time.monotonic()
    print("-- baselines: bare ASGI function under uvicorn", flush=True)
    with common.baseline_server() as server:
        capacity = generator_capacity(server)
        intake_base = asyncio.run(
            intake_phase("baseline: create", [server.api_base], "x", args.seconds, RATE)
        )
        decision_base = asyncio.run(decision_latency.baseline_round_trips(server))
    wrk_rows = wrk_baselines(args.seconds) if with_wrk else []
    runs = run_replicas(args.seconds, with_wrk)
    wrk_rows += [run.wrk for run in runs if run.wrk is not None]
    report((intake_base, decision_base), runs, wrk_rows)
    print_headroom(capacity, wrk_rows)
    if not with_wrk:
        print("wrk: skipped (--no-wrk, or not installed: apt-get install wrk)")
    print(f"(run took {time.monotonic() - started:.0f} s)")
    phases = [intake_base, decision_base, *(p for r in runs for p in (r.intake, r.decision))]
    failed = any(p.errors or not p.latencies for p in phases)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
