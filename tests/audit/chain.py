"""Helpers of the audit chain tests: load that creates and decides, the database read and
tampered with by plain SQL (as someone with database access would), and `gateway audit`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import httpx
import sqlalchemy as sa

from gateway.cli import audit as audit_cli
from gateway.settings import Settings
from gateway.store import audit
from gateway.store.engine import make_engine
from tests.services.cli import Result

WRITERS = 8
DECIDE = {"approved": True, "comment": "fine"}


async def create_and_decide(client: httpx.AsyncClient, call_id: str, n: int) -> int | None:
    """A function call made and decided (approved, or rejected every third); the respond's
    status code (None: the server was gone before it answered)."""
    body = {"run_id": "audit", "call_id": call_id, "spec": {"fn": "pay", "kwargs": {"n": n}}}
    try:
        made = await client.post("/humanlayer/v1/function_calls", json=body)
        assert made.status_code == 200, made.text
        decision = DECIDE if n % 3 else {"approved": False, "comment": f"no {n}"}
        path = f"/humanlayer/v1/agent/function_calls/{call_id}/respond"
        return (await client.post(path, json=decision)).status_code
    except httpx.TransportError:
        return None


async def writers(
    clients: Sequence[httpx.AsyncClient],
    prefix: str,
    each: int,
    answered: Callable[[], None] = lambda: None,
) -> list[int | None]:
    """WRITERS tasks at once, each creating and deciding `each` requests in turn, the
    clients taken in turn (several projects, several replicas); `answered` is called after
    each decision the server acknowledged."""

    async def writer(w: int) -> list[int | None]:
        client = clients[w % len(clients)]
        codes = []
        for i in range(each):
            codes.append(code := await create_and_decide(client, f"{prefix}-{w}-{i}", i))
            if code == 200:
                answered()
        return codes

    done = await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    return [code for codes in done for code in codes]


def sql(url: str, statement: str, **values: Any) -> list[tuple[Any, ...]]:
    """One statement in its own transaction, straight on the database."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(statement), values)
            return [tuple(row) for row in result.all()] if result.returns_rows else []
    finally:
        engine.dispose()


def chains(url: str) -> dict[int, list[tuple[int, str, str]]]:
    """Each project's chain as stored: (seq, prev_hash, hash) in seq order."""
    found: dict[int, list[tuple[int, str, str]]] = {}
    rows = sql(url, "SELECT project_id, seq, prev_hash, hash FROM request_event ORDER BY seq")
    for project_id, seq, prev, link in rows:
        found.setdefault(project_id, []).append((seq, prev, link))
    return found


def assert_one_chain_each(url: str) -> dict[int, int]:
    """Every event is in its request's project's chain, each chain runs 1..N without a gap
    or a repeat and each link names the one before, and the heads are the last links.
    Returns each project's event count."""
    [(unchained,)] = sql(
        url,
        "SELECT count(*) FROM request_event e JOIN request r ON r.rid = e.rid"
        " WHERE e.project_id IS NULL OR e.project_id <> r.project_id",
    )
    assert unchained == 0
    heads = {p: (seq, link) for p, seq, link in sql(url, "SELECT * FROM audit_head")}
    counts = {}
    for project_id, chain in chains(url).items():
        assert [seq for seq, _, _ in chain] == list(range(1, len(chain) + 1))
        links = [link for _, _, link in chain]
        assert [prev for _, prev, _ in chain] == ["0" * 64, *links[:-1]]
        assert heads[project_id] == (len(chain), links[-1])
        counts[project_id] = len(chain)
    return counts


async def gateway_audit(url: str, *args: str) -> Result:
    """`gateway audit ARGS` through the command line's own parser and commands, in this
    process: a subprocess spends seconds importing what this one has loaded."""
    parser = argparse.ArgumentParser(prog="gateway")
    audit_cli.add_commands(parser.add_subparsers(dest="command", required=True))
    parsed = parser.parse_args(["audit", *args])
    settings = Settings(_env_file=None, database_url=url)
    out = io.StringIO()

    def run() -> int:
        with contextlib.redirect_stdout(out):
            code: int = parsed.run(settings, parsed)
            return code

    return Result(await asyncio.to_thread(run), out.getvalue(), "")


def event_ids(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"event (\d+)", text)}


def rechain(url: str, project_id: int) -> None:
    """What someone who knows the rule could do after an edit: recompute every digest and
    link of the project's chain, and its head, so that the chain is whole again."""
    rows = sql(
        url,
        "SELECT id, rid, type, at, detail_json FROM request_event WHERE project_id = :p"
        " ORDER BY seq",
        p=project_id,
    )
    prev = audit.GENESIS
    for seq, (event_id, rid, type_, at, detail) in enumerate(rows, start=1):
        moment = datetime.fromisoformat(at) if isinstance(at, str) else at  # SQLite: text
        digest = audit.event_digest(rid, type_, moment, json.loads(detail))
        link = audit.link_hash(project_id, seq, prev, digest)
        sql(
            url,
            "UPDATE request_event SET digest = :d, prev_hash = :p, hash = :h WHERE id = :i",
            d=digest,
            p=prev,
            h=link,
            i=event_id,
        )
        prev = link
    sql(url, "UPDATE audit_head SET hash = :h WHERE project_id = :p", h=prev, p=project_id)
