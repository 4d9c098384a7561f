"""The console's insights page with 100,000 requests in the store: its load time (p50/p99
over sequential loads by one signed-in client), next to the console's queue page (the
baseline) in the same run, on SQLite and, with --postgres, PostgreSQL.

    .venv/bin/python bench/insights.py [--requests 100000] [--loads 50] [--postgres]

The requests are bulk-loaded into the database (the API would take minutes): spread over
the last 90 days, about 10% pending, the rest decided by people in Slack, the console, the
API and by email (each email reply with its own user_info), some under a two-person policy
(with votes), by rules, by standing grants and by deadlines; routed to two teams or to the
console; ~300 bytes of arguments each. The page is loaded for the last 30 days (its default)
and for the last 90 days (every request).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from sqlalchemy.engine import Connection

from bench import common
from gateway.security.crypto import new_rid
from gateway.store import Database, dumps, utcnow
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store import votes as vote_store
from gateway.store.rows import RequestRow, VoteRow
from tests.services.gateway_process import GatewayProcess

CHUNK = 2000  # rows per write (as bench/load.py)
DAYS = 90
CONFIG = """
[people.alice]
name = "Alice"
email = "alice@example.org"
slack = "U0ALICE"

[people.bob]
name = "Bob"
email = "bob@example.org"
slack = "U0BOB"

[teams.sre]
members = ["alice", "bob"]
slack_channel = "C0SRE"

[teams.ops]
members = ["alice"]
"""
ROUTES: list[list[dict[str, Any]]] = [
    [{"channel": "slack", "address": {"channel": "C0SRE"}, "responders": ["U0ALICE", "U0BOB"]}],
    [{"channel": "web", "address": {}, "responders": ["alice@example.org"]}],
    [{"channel": "web", "address": {}, "responders": None}],
]
PEOPLE: list[dict[str, Any]] = [
    {"channel": "slack", "user_id": "U0ALICE", "name": "alice"},
    {"channel": "slack", "user_id": "U0BOB", "name": "bob"},
    {"channel": "web", "user_id": "alice@example.org", "name": "Alice"},
    {"channel": "web", "user_id": "bob@example.org", "name": "Bob"},
    {"channel": "api", "user_id": "", "name": "operator", "key": "hlgw_abcdefg"},
    {"channel": "email", "user_id": "bob@example.org", "name": "Bob"},  # + its message's id
]
FNS = [f"tool_{n:02d}" for n in range(20)]
BODY = "Quarterly numbers attached; please review before Friday. " * 5  # ~300 bytes of kwargs


@dataclass
class Loads:
    label: str
    latencies: list[float] = field(default_factory=list)
    cpu: float = 0.0  # the server process's CPU seconds over these loads (its reader threads too)


def request(rng: random.Random, project_id: int, number: int) -> tuple[RequestRow, list[VoteRow]]:
    """One stored request as the gateway would have left it, and its votes."""
    made = utcnow() - timedelta(seconds=rng.uniform(0, DAYS * 86400))
    took = timedelta(seconds=min(rng.expovariate(1 / 600), 86400))
    route = [target | {"via": "spec.channel"} for target in rng.choice(ROUTES)]
    roll = rng.random()
    fields: dict[str, object] = {"status": "pending"}
    votes: list[VoteRow] = []
    rid = new_rid()
    if roll >= 0.10:  # decided
        who: dict[str, Any] = rng.choice(PEOPLE)
        if who["channel"] == "email":  # every reply its own user_info: the worst case
            who = who | {"message_id": f"<{number}@mail.example.org>"}
        status = "approved" if rng.random() < 0.75 else "rejected"
        if roll < 0.15:
            who = {"channel": "gateway", "user_id": "gateway", "name": "rule r1", "rule": "r1"}
            took = timedelta(0)
        elif roll < 0.22:
            who = {"channel": "grant", "user_id": "U0ALICE", "name": "alice", "grant": "g1"}
            status, took = "approved", timedelta(0)
        elif roll < 0.25:
            who, status = (
                {"channel": "gateway", "user_id": "gateway", "name": "the gateway"},
                "expired",
            )
        elif roll < 0.27:  # a two-person policy: two votes
            fields["policy_json"] = dumps({"any_of": [0], "approvals_required": 2})
            for person in ("person:alice", "person:bob"):
                votes.append(
                    VoteRow(
                        rid=rid,
                        person=person,
                        approve=status == "approved",
                        targets_json="[0]",
                        user_info_json=dumps(PEOPLE[0]),
                        at=made + took,
                    )
                )
        fields |= {"status": status, "user_info_json": dumps(who), "responded_at": made + took}
    fn = rng.choice(FNS)
    row = RequestRow(
        rid=rid,
        project_id=project_id,
        kind="function_call",
        call_id=f"c-{number}",
        run_id="bench",
        fn=fn,
        spec_json=dumps({"fn": fn, "kwargs": {"n": number, "to": "ops@example.com", "body": BODY}}),
        body_hash="bulk",
        route_json=dumps(route),
        requested_at=made,
        **fields,  # type: ignore[arg-type]
    )
    return row, votes


def _insert(conn: Connection, start: int, count: int) -> None:
    project = project_store.get_project(conn, "default")
    assert project is not None and project.id is not None
    rng = random.Random(start)  # the same rows on both databases
    for number in range(start, start + count):
        row, votes = request(rng, project.id, number)
        request_store.insert_request(conn, row)
        for vote in votes:
            vote_store.add(conn, vote)


def _analyze(conn: Connection) -> None:
    conn.exec_driver_sql("VACUUM ANALYZE" if conn.dialect.name == "postgresql" else "ANALYZE")


async def load(database_url: str, total: int) -> None:
    db = Database(database_url)
    try:
        writes = [
            db.write(_insert, start, min(CHUNK, total - start)) for start in range(0, total, CHUNK)
        ]
        await asyncio.gather(*writes)
        await db.scan(_analyze)  # what autovacuum (or an operator's ANALYZE) does after a load
    finally:
        await db.aclose()


@contextlib.contextmanager
def gateway(database_url: str) -> Iterator[GatewayProcess]:
    """`gateway serve` with the teams above; its first start prints a console sign-in link."""
    with tempfile.TemporaryDirectory(prefix="gw-bench-") as tmp:
        workdir = Path(tmp)
        (workdir / "routing.toml").write_text(CONFIG)
        env = {
            "GATEWAY_DATABASE_URL": database_url,
            "GATEWAY_SECRET_KEY": common.SECRET_KEY,
            "GATEWAY_LOG_LEVEL": "warning",
            "GATEWAY_CONFIG": str(workdir / "routing.toml"),
        }
        process = GatewayProcess(workdir, env=env)
        try:
            yield process.start(timeout=60)
        finally:
            process.stop()


async def measure(
    process: GatewayProcess, database_url: str, total: int, loads: int
) -> list[Loads]:
    assert process.console_link is not None, "no console link printed at first start"
    started = time.perf_counter()
    await load(database_url, total)
    print(f"  loaded {total:,} requests in {time.perf_counter() - started:.1f} s", flush=True)
    base = process.base_url
    async with httpx.AsyncClient(base_url=base, headers={"Origin": base}, timeout=60) as client:
        signed_in = await client.post(urllib.parse.urlsplit(process.console_link).path)
        assert signed_in.status_code == 303, signed_in.text
        pages = [
            Loads("queue page /console (baseline)"),
            Loads("insights, last 30 days"),
            Loads("insights, last 90 days (every request)"),
        ]
        urls = ["/console", "/console/insights", "/console/insights?days=90"]
        pid = process.proc.pid if process.proc else None
        for url in urls:  # once each first: nothing measured is a first load
            assert (await client.get(url)).status_code == 200
        for _ in range(loads):
            for page, url in zip(pages, urls, strict=True):
                cpu = common.process_cpu_seconds(pid)
                began = time.perf_counter()
                answer = await client.get(url)
                page.latencies.append(time.perf_counter() - began)
                assert answer.status_code == 200, answer.text
                page.cpu += common.process_cpu_seconds(pid) - cpu
    return pages


def run(database_url: str, label: str, total: int, loads: int) -> None:
    print(f"-- {label}", flush=True)
    with gateway(database_url) as process:
        if database_url.startswith("sqlite"):
            database_url = f"sqlite+aiosqlite:///{process.workdir}/gateway.db"
        baseline, *pages = asyncio.run(measure(process, database_url, total, loads))
    for page in (baseline, *pages):
        page.label = f"{label}: {page.label}"
    common.print_latencies(baseline, pages)
    for page in (baseline, *pages):
        per_load = common.ms(page.cpu / len(page.latencies))
        print(f"  server CPU per load, {page.label}: {common.fmt(per_load, 1)} ms")
    print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=50)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args(argv)
    common.print_machine(f"the insights page with {args.requests:,} requests")
    run(common.sqlite_url(), "SQLite", args.requests, args.loads)
    if args.postgres:
        with common.throwaway_postgres("bench") as url:
            run(url, "PostgreSQL", args.requests, args.loads)


if __name__ == "__main__":
    main()
