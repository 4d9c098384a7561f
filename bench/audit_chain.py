"""What the audit chain costs: create-and-decide throughput with it, against without it.

    cd /work/main && .venv/bin/python bench/audit_chain.py [--seconds 8] [--rounds 2]
        [--no-postgres]

`gateway serve` in a subprocess (SQLite with `synchronous=FULL`; then a throwaway PostgreSQL,
fsync on), loaded by 16 concurrent agents (httpx, in this process), each creating a function
call and approving it, again and again, for `--seconds` after a 2 s warm-up. Two phases per
round, alternating, each on a fresh database:
- "chain": the gateway as shipped;
- "no chain": the same code with the chain turned off (`gateway.store.audit.CHAINED =
  False`, set by a sitecustomize on the server's PYTHONPATH): events are written as before
  the chain, with no digest, no link and no head lock.
Prints create+decide pairs per second, create and decide latency p50/p99, the server's CPU
per pair, each phase's ratio to "no chain" in its round, and the chain's cost in %.
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
PHASES = ("chain", "no chain")
UNCHAINED = "import gateway.store.audit\ngateway.store.audit.CHAINED = False\n"


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
def unchained_pythonpath() -> Iterator[None]:
    """A sitecustomize that turns the chain off in every Python started meanwhile with
    this PYTHONPATH (the server: `gateway serve` and its `keys create`)."""
    with tempfile.TemporaryDirectory(prefix="gw-unchained-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(UNCHAINED)
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = tmp + (f":{saved}" if saved else "")
        try:
            yield
        finally:
            if saved is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved


def measure(url: str, phase: str, seconds: float) -> tuple[Load, float]:
    """One phase on a fresh database: the load, and the server's CPU ms per pair."""
    chained = phase == "chain"
    with (
        nullcontext() if chained else unchained_pythonpath(),
        common.gateway_server(url, f"gateway, {phase}") as gateway,
    ):
        before = common.process_cpu_seconds(gateway.pid)
        load = asyncio.run(run_load(gateway, seconds))
        cpu = common.process_cpu_seconds(gateway.pid) - before
        linked, unlinked = linked_events(url, gateway)
    if unlinked if chained else linked:  # the phase ran the code it names
        raise RuntimeError(f"{phase}: {linked} events linked, {unlinked} not")
    return load, common.ms(cpu / max(load.pairs, 1))


def linked_events(url: str, gateway: common.Gateway) -> tuple[int, int]:
    """How many audit events the phase's database holds in a chain, and outside one."""
    if url.startswith("sqlite"):
        url = f"sqlite:///{gateway.workdir / 'gateway.db'}"
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            query = "SELECT count(seq), count(*) - count(seq) FROM request_event"
            linked, unlinked = conn.exec_driver_sql(query).one()
    finally:
        engine.dispose()
    return int(linked), int(unlinked)


def rounds(database: str, urls: Iterator[str], args: argparse.Namespace) -> list[list[object]]:
    rows: list[list[object]] = []
    costs: list[float] = []
    cpu_costs: list[float] = []
    for round_ in range(1, args.rounds + 1):
        results = {phase: measure(next(urls), phase, args.seconds) for phase in PHASES}
        base = results["no chain"][0].pairs
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
        costs.append(100 * (1 - results["chain"][0].pairs / max(base, 1)))
        cpu_costs.append(100 * (results["chain"][1] / results["no chain"][1] - 1))
    print(
        f"{database}: with the chain, {statistics.median(costs):.1f} % fewer pairs/s and "
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
    args = parser.parse_args(argv)
    common.print_machine(f"audit chain: create + approve, {AGENTS} agents (httpx)")
    rows = rounds("SQLite", sqlite_urls(), args)
    if not args.no_postgres and common.postgres_available():
        with postgres_urls() as urls:
            rows += rounds("PostgreSQL", urls, args)
    headers = [
        *("database", "round", "phase", "pairs/s", "create p50", "create p99"),
        *("decide p50", "decide p99", "CPU ms/pair", "errors", "vs no chain"),
    ]
    print()
    common.print_table(headers, rows)


if __name__ == "__main__":
    main()
