"""Intake: function calls created per second, under load from `wrk`.

    cd /work/main && .venv/bin/python bench/intake.py [--seconds 10] [--no-postgres]

In one run, each under the same load (POST /humanlayer/v1/function_calls, unique call_ids,
16 and 64 connections, a 2 s warm-up not counted): two baselines, a bare ASGI function
returning a fixed body, and FastAPI validating the same body with the gateway's own pydantic
model (no store); then `gateway serve` on SQLite (a file on disk, `synchronous=FULL`) and on
a throwaway PostgreSQL with fsync and `synchronous_commit` on. Prints req/s, p50/p99, the
server's CPU per request (user + system, every thread) and the ratio to each baseline.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench import common, wrk

CONNECTIONS = (16, 64)
WARMUP_SECONDS = 2.0
TARGET_RPS = 4000  # the SQLite target: the bare baseline must be far above it


@dataclass
class Row:
    target: str
    connections: int
    result: wrk.WrkResult
    cpu_ms: float  # server CPU per request


class Server:
    """What a measurement needs of a server: where to post, with which key, its pid."""

    def __init__(self, label: str, api_base: str, api_key: str, pid: int | None) -> None:
        self.label, self.api_base, self.api_key, self.pid = label, api_base, api_key, pid


def measure(server: Server, connections: int, seconds: float) -> Row:
    url = server.api_base.removesuffix(common.API_PREFIX)
    key, nonce = server.api_key, uuid.uuid4().hex[:8]
    wrk.post_creates(
        url, connections=connections, seconds=WARMUP_SECONDS, api_key=key, nonce=nonce + "w"
    )
    before = common.process_cpu_seconds(server.pid)
    result = wrk.post_creates(
        url, connections=connections, seconds=seconds, api_key=key, nonce=nonce
    )
    cpu = common.process_cpu_seconds(server.pid) - before
    return Row(server.label, connections, result, common.ms(cpu / max(result.requests, 1)))


def servers(postgres: bool) -> Iterator[Server]:
    """Each server in turn, running while it is measured."""
    for kind, label in (("bare", "bare ASGI (baseline)"), ("fastapi", "FastAPI + body (baseline)")):
        with common.baseline_server(kind) as base:
            yield Server(label, base.api_base, "unused", base.pid)
    with common.gateway_server(common.sqlite_url(), "gateway, SQLite") as gateway:
        yield Server(gateway.label, gateway.api_base, gateway.api_key, gateway.pid)
        stored(gateway)
    if postgres:
        with (
            common.throwaway_postgres("bench") as url,
            common.gateway_server(url, "gateway, PostgreSQL") as gateway,
        ):
            yield Server(gateway.label, gateway.api_base, gateway.api_key, gateway.pid)
            stored(gateway)


def stored(gateway: common.Gateway) -> None:
    """Check that what was acknowledged was stored (the API's count of function calls)."""
    answer = httpx.get(
        gateway.api_base + "/function_calls", params={"limit": 1}, headers=gateway.headers()
    )
    print(f"{gateway.label}: {answer.json()['total']} function calls stored")


def report(rows: list[Row]) -> None:
    base = {(r.target, r.connections): r.result.rps for r in rows}
    table = []
    for row in rows:
        bare = base[("bare ASGI (baseline)", row.connections)]
        fast = base[("FastAPI + body (baseline)", row.connections)]
        table.append(
            [
                row.target,
                row.connections,
                f"{row.result.rps:,.0f}",
                common.fmt(row.result.p50_ms),
                common.fmt(row.result.p99_ms),
                common.fmt(row.cpu_ms, 3),
                row.result.errors,
                common.ratio(row.result.rps, bare),
                common.ratio(row.result.rps, fast),
            ]
        )
    headers = [
        "target",
        "conns",
        "req/s",
        "p50 ms",
        "p99 ms",
        "CPU ms/req",
        "errors",
        "vs bare",
        "vs FastAPI",
    ]
    print()
    common.print_table(headers, table)
    floor = min(rps for (target, _c), rps in base.items() if target.startswith("bare"))
    print(
        f"\nload generator headroom: the bare baseline took {floor:,.0f} req/s, "
        f"{floor / TARGET_RPS:.1f}x the {TARGET_RPS:,}/s target (wrk is not the bottleneck)."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args(argv)
    if not wrk.available():
        sys.exit("wrk is not installed: `make bench` provisions it (apt-get install wrk)")
    common.print_machine("intake: creates per second (wrk)")
    postgres = not args.no_postgres and common.postgres_available()
    rows: list[Row] = []
    started = time.monotonic()
    for server in servers(postgres):
        for connections in CONNECTIONS:
            rows.append(measure(server, connections, args.seconds))
            print(f"  measured {server.label} at {connections} connections", flush=True)
    report(rows)
    print(f"(run took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
