"""PostgreSQL creates per second: `gateway serve --workers 1` against `--workers 2`, under wrk.

    cd /work/main && .venv/bin/python bench/workers.py [--seconds 10]

One throwaway PostgreSQL (fsync and `synchronous_commit` on). In one run, interleaved
(workers 1, 2, 1, 2), each round a fresh database and a fresh `gateway serve --workers N`
(GATEWAY_WORKERS), measured with `wrk` posting unique function calls (bench/wrk.py) at 16 and
64 connections, each `--seconds` after a 2 s warm-up not counted. Prints req/s, p50/p99 and,
over the measured seconds, the CPU (user + system) taken by the gateway (its parent and
workers) and by PostgreSQL's processes (the postmaster and every backend), as a share of the
machine's cores and per request; then the ratio workers 2 / workers 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench import common, wrk
from tests.services.postgres import ThrowawayPostgres, createdb

ROUNDS = (1, 2, 1, 2)  # worker counts, in this order
CONNECTIONS = (16, 64)
WARMUP_SECONDS = 2.0
SETTLE_TIMEOUT = 30.0  # for every worker to have started, before the warm-up
QUIET_CPU = 0.1  # the gateway's processes took less CPU than this over QUIET_WINDOW ...
QUIET_WINDOW = 0.5  # ... seconds: its workers are done starting
BUSY_REST = 0.10  # wrk takes a few % of the cores: above this, something else ran too


@dataclass
class Row:
    workers: int
    round: int  # 1-based, per worker count
    connections: int
    result: wrk.WrkResult
    wall: float  # seconds measured
    gateway_cpu: float  # seconds of CPU, the gateway's parent and workers
    postgres_cpu: float  # seconds of CPU, PostgreSQL's processes
    busy: float  # the machine's busy share (every process), 0..1

    def share(self, cpu: float) -> float:
        """CPU seconds as a share of the machine's cores over the measured seconds."""
        return cpu / (self.wall * (os.cpu_count() or 1))

    @property
    def rest(self) -> float:
        """The machine's busy share besides the gateway and PostgreSQL: wrk, and whatever
        else ran meanwhile."""
        return max(0.0, self.busy - self.share(self.gateway_cpu + self.postgres_cpu))

    def per_request_ms(self, cpu: float) -> float:
        return common.ms(cpu / max(self.result.requests, 1))


def machine_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat's cpu line;
    idle and iowait are not busy (guest time is inside user already)."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    tick = os.sysconf("SC_CLK_TCK")
    total = sum(fields)
    return (total - fields[3] - fields[4]) / tick, total / tick


@contextlib.contextmanager
def gateway_with_workers(url: str, workers: int) -> Iterator[common.Gateway]:
    """`common.gateway_server` as `gateway serve` with GATEWAY_WORKERS=workers (its
    GatewayProcess copies this process's environment); afterwards, no worker is left."""
    label = f"--workers {workers}"
    seen: set[int] = set()
    with (
        mock.patch.dict(os.environ, {"GATEWAY_WORKERS": str(workers)}),
        common.gateway_server(url, label) as gateway,
    ):
        assert gateway.pid is not None
        settle(gateway.pid, workers)
        seen.update(common.process_tree(gateway.pid))
        try:
            yield gateway
        finally:
            seen.update(common.process_tree(gateway.pid))
    for pid in seen - {gateway.pid}:  # a worker whose parent had to be killed runs on
        with contextlib.suppress(OSError):
            if b"--listen-fd" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)


def settle(parent: int, workers: int) -> None:
    """Until the parent has its workers (none with one worker: the parent serves) and
    their start-up is over (their CPU goes quiet), at most SETTLE_TIMEOUT."""
    expected = 1 if workers == 1 else workers + 1
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        before = common.tree_cpu_seconds(parent)
        time.sleep(QUIET_WINDOW)
        quiet = common.tree_cpu_seconds(parent) - before < QUIET_CPU
        if quiet and len(common.process_tree(parent)) >= expected:
            return
    print(f"  note: the workers had not settled after {SETTLE_TIMEOUT:.0f} s", flush=True)


def measure(
    gateway: common.Gateway,
    postmaster: int,
    workers: int,
    round_: int,
    connections: int,
    seconds: float,
) -> Row:
    url = gateway.api_base.removesuffix(common.API_PREFIX)
    key, nonce = gateway.api_key, uuid.uuid4().hex[:8]
    wrk.post_creates(
        url, connections=connections, seconds=WARMUP_SECONDS, api_key=key, nonce=nonce + "w"
    )
    assert gateway.pid is not None
    gateway_before = common.tree_cpu_seconds(gateway.pid)
    postgres_before = common.tree_cpu_seconds(postmaster)
    busy_before, total_before = machine_seconds()
    started = time.monotonic()
    result = wrk.post_creates(
        url, connections=connections, seconds=seconds, api_key=key, nonce=nonce
    )
    wall = time.monotonic() - started
    busy_after, total_after = machine_seconds()
    return Row(
        workers=workers,
        round=round_,
        connections=connections,
        result=result,
        wall=wall,
        gateway_cpu=common.tree_cpu_seconds(gateway.pid) - gateway_before,
        postgres_cpu=common.tree_cpu_seconds(postmaster) - postgres_before,
        busy=(busy_after - busy_before) / max(total_after - total_before, 1e-9),
    )


def stored(gateway: common.Gateway) -> int:
    """The API's count of function calls: what was acknowledged was stored."""
    answer = httpx.get(
        gateway.api_base + "/function_calls", params={"limit": 1}, headers=gateway.headers()
    )
    answer.raise_for_status()
    return int(answer.json()["total"])


def run_rounds(server: ThrowawayPostgres, seconds: float) -> list[Row]:
    rows: list[Row] = []
    postmaster = common.postmaster_pid(server)
    for index, workers in enumerate(ROUNDS):
        round_ = ROUNDS[: index + 1].count(workers)
        database = f"bench_workers_{index}"
        createdb(server, database)
        print(f"-- round {index + 1}/{len(ROUNDS)}: --workers {workers}", flush=True)
        with gateway_with_workers(server.url(database), workers) as gateway:
            for connections in CONNECTIONS:
                row = measure(gateway, postmaster, workers, round_, connections, seconds)
                rows.append(row)
                print(f"  {connections} connections: {row.result.rps:,.0f} req/s", flush=True)
            total = stored(gateway)
            measured = sum(r.result.requests for r in rows[-len(CONNECTIONS) :])
            print(f"  {total:,} function calls stored ({measured:,} in the measured runs)")
    return rows


# --- output -------------------------------------------------------------------------------


def percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def report(rows: Sequence[Row]) -> None:
    table = [
        [
            f"--workers {row.workers} (round {row.round})",
            row.connections,
            f"{row.result.rps:,.0f}",
            common.fmt(row.result.p50_ms),
            common.fmt(row.result.p99_ms),
            row.result.errors,
            percent(row.share(row.gateway_cpu)),
            common.fmt(row.per_request_ms(row.gateway_cpu), 3),
            percent(row.share(row.postgres_cpu)),
            common.fmt(row.per_request_ms(row.postgres_cpu), 3),
            percent(row.busy),
            percent(row.rest) + (" *" if row.rest > BUSY_REST else ""),
        ]
        for row in rows
    ]
    headers = [
        "gateway",
        "conns",
        "req/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "gw CPU",
        "gw ms/req",
        "PG CPU",
        "PG ms/req",
        "machine",
        "rest",
    ]
    print()
    common.print_table(headers, table)
    cores = os.cpu_count() or 0
    print(
        f"(gw CPU: the gateway's parent and workers; PG CPU: every PostgreSQL process; machine: "
        f"every process; rest: machine - gw - PG, that is wrk and anything else running; each "
        f"a share of the {cores} cores over the measured seconds. ms/req: CPU per request)"
    )
    if any(row.rest > BUSY_REST for row in rows):
        print(
            f"* rest above {percent(BUSY_REST)}: other processes took CPU during that "
            "measurement (wrk alone takes a few %); its figures are low"
        )
    print()
    print("workers 2 / workers 1:")
    ratio_rows = []
    for connections in CONNECTIONS:
        ones = [r for r in rows if r.workers == 1 and r.connections == connections]
        twos = [r for r in rows if r.workers == 2 and r.connections == connections]
        paired = zip(ones, twos, strict=True)
        pairs = [common.ratio(two.result.rps, one.result.rps) for one, two in paired]
        mean1 = sum(r.result.rps for r in ones) / len(ones)
        mean2 = sum(r.result.rps for r in twos) / len(twos)
        ratio_rows.append(
            [connections, f"{mean1:,.0f}", f"{mean2:,.0f}", common.ratio(mean2, mean1), *pairs]
        )
    pair_headers = [f"round {n + 1}" for n in range(ROUNDS.count(1))]
    common.print_table(
        ["conns", "workers 1 req/s", "workers 2 req/s", "ratio (means)", *pair_headers],
        ratio_rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    args = parser.parse_args(argv)
    if not wrk.available():
        print("wrk is not installed: `make bench` provisions it (apt-get install wrk)")
        return 1
    if not common.postgres_available():
        print("no PostgreSQL binaries on this machine (tests/services/provision.sh)")
        return 1
    common.print_machine("PostgreSQL creates per second: gateway serve --workers 1 vs 2 (wrk)")
    print(
        f"rounds (interleaved): {', '.join(f'--workers {n}' for n in ROUNDS)}, each on a fresh "
        f"database; {' and '.join(map(str, CONNECTIONS))} connections, {args.seconds:g} s each "
        f"after a {WARMUP_SECONDS:g} s warm-up; wrk, the gateway and PostgreSQL share the cores"
    )
    print()
    started = time.monotonic()
    with common.postgres_server("bench_workers") as (server, _url):
        rows = run_rounds(server, args.seconds)
    report(rows)
    print(f"(run took {time.monotonic() - started:.0f} s)")
    return 1 if any(row.result.errors for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
