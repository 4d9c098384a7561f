"""A full store: GET by call_id, respond and the pending page with 100,000 pending requests,
next to the same on an empty store (the baseline), in one run.

    cd /work/main && .venv/bin/python bench/full_store.py [--pending 100000] [--postgres]

The pending requests are bulk-loaded into the database (creating them through the API
would take minutes). Each measurement is one request at a time from one client.
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

import httpx

from bench import common
from bench.load import load_pending

SAMPLES = 300
PAGE = 50


@dataclass
class Store:
    label: str
    get_ms: list[float] = field(default_factory=list)
    respond_ms: list[float] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)


async def timed(client: httpx.AsyncClient, method: str, url: str, **kwargs: object) -> float:
    started = time.perf_counter()
    answer = await client.request(method, url, **kwargs)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert answer.status_code == 200, answer.text
    return elapsed


async def measure(gateway: common.Gateway, database: str, pending: int, label: str) -> Store:
    nonce = uuid.uuid4().hex[:6]
    measured = [f"m-{nonce}-{n}" for n in range(SAMPLES)]
    await load_pending(database, [f"p-{nonce}-{n}" for n in range(pending)] + measured)
    store = Store(label)
    async with httpx.AsyncClient(base_url=gateway.api_base, headers=gateway.headers()) as client:
        for call_id in measured:
            store.get_ms.append(await timed(client, "GET", f"/function_calls/{call_id}"))
        for call_id in measured:
            url = f"/agent/function_calls/{call_id}/respond"
            store.respond_ms.append(await timed(client, "POST", url, json={"approved": True}))
        for _ in range(SAMPLES):
            url = "/agent/function_calls/pending"
            store.page_ms.append(await timed(client, "GET", url, params={"limit": PAGE}))
    return store


def report(stores: list[Store]) -> None:
    empty = stores[0]
    rows = []
    for name in ("get_ms", "respond_ms", "page_ms"):
        base50 = common.percentile(getattr(empty, name), 50)
        for store in stores:
            values = getattr(store, name)
            p50 = common.percentile(values, 50)
            rows.append(
                [
                    f"{name.removesuffix('_ms')}: {store.label}",
                    common.fmt(common.ms(p50)),
                    common.fmt(common.ms(common.percentile(values, 99))),
                    common.ratio(p50, base50),
                ]
            )
    print()
    common.print_table(["measurement", "p50 ms", "p99 ms", "p50 vs empty"], rows)


async def run(pending: int, postgres: bool) -> None:
    stores = []
    for count in (0, pending):
        label = f"{count:,} pending"
        with common.gateway_server(common.sqlite_url(), "SQLite") as gateway:
            database = f"sqlite+aiosqlite:///{gateway.workdir}/gateway.db"
            stores.append(await measure(gateway, database, count, f"SQLite, {label}"))
        print(f"  measured SQLite, {label}", flush=True)
    if postgres:
        for count in (0, pending):
            label = f"{count:,} pending"
            with (
                common.throwaway_postgres("bench") as url,
                common.gateway_server(url, "PostgreSQL") as gateway,
            ):
                stores.append(await measure(gateway, url, count, f"PostgreSQL, {label}"))
            print(f"  measured PostgreSQL, {label}", flush=True)
    report(stores[:2])
    if postgres:
        report(stores[2:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args(argv)
    common.print_machine(f"a full store: {args.pending:,} pending requests")
    asyncio.run(run(args.pending, args.postgres))


if __name__ == "__main__":
    main()
