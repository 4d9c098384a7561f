"""What the audit chain (or the decision rows) costs: create-and-decide throughput with it,
against without it.

    cd /work/main && .venv/bin/python bench/audit_chain.py [--seconds 8] [--rounds 2]
        [--no-postgres] [--switch chain|decision-rows]

`gateway serve` in a subprocess (SQLite with `synchronous=FULL`; then a throwaway PostgreSQL,
fsync on), loaded by 16 concurrent agents (httpx, in this process), each creating a function
call and approving it, again and again, for `--seconds` after a 2 s warm-up. Two phases per
round, alternating, each on a fresh database:
- "on": the gateway as shipped;
- "off": the same code with the switch turned off by a sitecustomize on the server's
  PYTHONPATH: `chain` sets `gateway.store.audit.CHAINED = False` (events are written as
  before the chain, with no digest, no link and no head lock); `decision-rows` sets
  `gateway.store.decided.RECORDED = False` (no `decision` row, which the insights read).
Prints create+decide pairs per second, create and decide latency p50/p99, the server's CPU
per pair, each phase's ratio to "off" in its round, and the switch's cost in %.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench import common
from gateway.store.engine import make_engine
from tests.services.postgres import createdb

AGENTS = 16
WARMUP_SECONDS = 2.0
PHASES = ("on", "off")


@dataclass(frozen=True)
class Switch:
    module: str
    flag: str
    proof: str  # a query counting (rows the switch writes, rows written without it)

    def off(self) -> str:
        return f"import {self.module}\n{self.module}.{self.flag} = False\n"


SWITCHES = {
    "chain": Switch(
        "gateway.store.audit",
        "CHAINED",
        "SELECT count(seq), count(*) - count(seq) FROM request_event",
    ),
    "decision-rows": Switch(
        "gateway.store.decided",
        "RECORDED",
        "SELECT (SELECT count(*) FROM decision), (SELECT count(*) FROM request"
        " WHERE status <> 'pending' AND rid NOT IN (SELECT rid FROM decision))",
    ),
}


@dataclass
class Load:
    pairs: int = 0
    creates: list[float] = field(default_factory=list)
    decides: list[float] = field(default_factory=list)
    errors: int = 0


async def agent(client: httpx.AsyncClient, load: Load, name: str, until: float) -> None:
    n = 0
    while time.monotonic() < until:
        call_id = f"{name}-{n}"
        n += 1
        started = time.perf_counter()
        made = await client.post("/function_calls", json=common.function_call_body(call_id))
        created = time.perf_counter()
        path = f"/agent/function_calls/{call_id}/respond"
        decided = await client.post(path, json={"approved": True, "comment": "ok"})
        done = time.perf_counter()
        if made.status_code != 200 or decided.status_code != 200:
            load.errors += 1
            continue
        load.pairs += 1
        load.creates.append(created - started)
        load.decides.append(done - created)


async def run_load(gateway: common.Gateway, seconds: float) -> Load:
    limits = httpx.Limits(max_connections=AGENTS)
    async with httpx.AsyncClient(
        base_url=gateway.api_base, headers=gateway.headers(), limits=limits, timeout=30
    ) as client:
        nonce = uuid.uuid4().hex[:8]
        warm = time.monotonic() + WARMUP_SECONDS
        await asyncio.gather(*(agent(client, Load(), f"w{nonce}-{i}", warm) for i in range(AGENTS)))
        load = Load()
        until = time.monotonic() + seconds
        await asyncio.gather(*(agent(client, load, f"{nonce}-{i}", until) for i in range(AGENTS)))
    return load


@contextmanager
def switched_off(switch: Switch) -> Iterator[None]:
    """A sitecustomize that turns `switch` off in every Python started meanwhile with this
    PYTHONPATH (the server: `gateway serve` and its `keys create`)."""
    with tempfile.TemporaryDirectory(prefix="gw-switched-off-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(switch.off())
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = tmp + (f":{saved}" if saved else "")
        try:
            yield
        finally:
            if saved is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved


def measure(url: str, switch: Switch, phase: str, seconds: float) -> tuple[Load, float]:
    """One phase on a fresh database: the load, and the server's CPU ms per pair."""
    on = phase == "on"
    with (
        nullcontext() if on else switched_off(switch),
        common.gateway_server(url, f"gateway, {switch.flag} {phase}") as gateway,
    ):
        before = common.process_cpu_seconds(gateway.pid)
        load = asyncio.run(run_load(gateway, seconds))
        cpu = common.process_cpu_seconds(gateway.pid) - before
        written, without = proof(url, gateway, switch)
    if without if on else written:  # the phase ran the code it names
        raise RuntimeError(f"{phase}: {written} rows written by the switch, {without} not")
    return load, common.ms(cpu / max(load.pairs, 1))


def proof(url: str, gateway: common.Gateway, switch: Switch) -> tuple[int, int]:
    """How many rows the phase's database holds that the switch wrote, and that it would
    have written but did not."""
    if url.startswith("sqlite"):
        url = f"sqlite:///{gateway.workdir / 'gateway.db'}"
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            written, without = conn.exec_driver_sql(switch.proof).one()
    finally:
        engine.dispose()
    return int(written), int(without)


def rounds(database: str, urls: Iterator[str], args: argparse.Namespace) -> list[list[object]]:
    switch = SWITCHES[args.switch]
    rows: list[list[object]] = []
    costs: list[float] = []
    cpu_costs: list[float] = []
    for round_ in range(1, args.rounds + 1):
        results = {phase: measure(next(urls), switch, phase, args.seconds) for phase in PHASES}
        base = results["off"][0].pairs
        for phase, (load, cpu) in results.items():
            rows.append(
                [
                    database,
                    round_,
                    phase,
                    f"{load.pairs / args.seconds:,.0f}",
                    common.fmt(common.ms(common.percentile(load.creates, 50))),
                    common.fmt(common.ms(common.percentile(load.creates, 99))),
                    common.fmt(common.ms(common.percentile(load.decides, 50))),
                    common.fmt(common.ms(common.percentile(load.decides, 99))),
                    common.fmt(cpu, 3),
                    load.errors,
                    common.ratio(load.pairs, base),
                ]
            )
        costs.append(100 * (1 - results["on"][0].pairs / max(base, 1)))
        cpu_costs.append(100 * (results["on"][1] / results["off"][1] - 1))
    print(
        f"{database}: with {args.switch}, {statistics.median(costs):.1f} % fewer pairs/s and "
        f"{statistics.median(cpu_costs):.1f} % more server CPU per pair (medians of "
        f"{args.rounds} rounds)",
        flush=True,
    )
    return rows


def sqlite_urls() -> Iterator[str]:
    while True:  # each gateway_server runs in a new directory: a new file
        yield common.sqlite_url()


@contextmanager
def postgres_urls() -> Iterator[Iterator[str]]:
    with common.postgres_server("bench_audit_0") as (server, first):

        def urls() -> Iterator[str]:
            yield first
            for n in range(1, 1000):
                createdb(server, f"bench_audit_{n}")
                yield server.url(f"bench_audit_{n}")

        yield urls()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--switch", choices=sorted(SWITCHES), default="chain")
    args = parser.parse_args(argv)
    common.print_machine(f"{args.switch}: create + approve, {AGENTS} agents (httpx)")
    rows = rounds("SQLite", sqlite_urls(), args)
    if not args.no_postgres and common.postgres_available():
        with postgres_urls() as urls:
            rows += rounds("PostgreSQL", urls, args)
    headers = [
        *("database", "round", "phase", "pairs/s", "create p50", "create p99"),
        *("decide p50", "decide p99", "CPU ms/pair", "errors", "vs off"),
    ]
    print()
    common.print_table(headers, rows)


if __name__ == "__main__":
    main()
