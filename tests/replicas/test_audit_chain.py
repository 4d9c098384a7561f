"""Two `gateway serve` replicas on one PostgreSQL database, both writing into the same
projects' audit chains under load: each project keeps one chain (seq 1..N, each link naming
the one before, the head its last link), no fork, no deadlock, and `gateway audit verify`
passes. How: gateway.store.audit (a head row per project, locked last in each transaction).
Both replicas run the checkpoint schedule; one of them publishes each period."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from tests.audit.chain import assert_one_chain_each, sql, writers
from tests.helpers import eventually
from tests.replicas.cluster import Cluster, Replica
from tests.services.postgres import ThrowawayPostgres

pytestmark = pytest.mark.postgres

EACH = 15  # requests each of the 8 writers creates and decides
PERIOD = 1.0  # GATEWAY_AUDIT_CHECKPOINT_SECONDS: both replicas run the schedule


async def checkpointed(url: str, counts: dict[int, int]) -> bool:
    """Each project's final head is checkpointed, and every checkpoint names its event's
    link."""
    rows = sql(
        url,
        "SELECT c.project_id, c.seq, c.hash = e.hash FROM audit_checkpoint c"
        " JOIN request_event e ON e.project_id = c.project_id AND e.seq = c.seq",
    )
    assert all(same for _, _, same in rows), rows
    return {(p, seq) for p, seq, _ in rows} >= set(counts.items())


@contextlib.asynccontextmanager
async def operators(
    replicas: list[Replica], keys: list[str]
) -> AsyncIterator[list[httpx.AsyncClient]]:
    """A client per (replica, project key), the replicas taken in turn."""
    async with contextlib.AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=replica.process.base_url,
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=30,
                )
            )
            for key in keys
            for replica in replicas
        ]


async def test_two_replicas_under_load_keep_one_chain_per_project(
    tmp_path: Path, pg_url: str, postgres_server: ThrowawayPostgres
) -> None:
    log = postgres_server.root / "server.log"
    log_from = log.stat().st_size
    env = {"GATEWAY_DATABASE_URL": pg_url, "GATEWAY_AUDIT_CHECKPOINT_SECONDS": str(PERIOD)}
    cluster = Cluster(tmp_path, env)
    try:
        first = await cluster.start()
        second = await cluster.start()
        acme = await asyncio.to_thread(first.process.new_key, "admin", "--project", "acme")
        async with operators([first, second], [first.api_key, acme]) as clients:
            codes = await writers(clients, "load", each=EACH)
        assert set(codes) == {200}

        counts = assert_one_chain_each(pg_url)
        assert len(counts) == 2 and sum(counts.values()) >= 8 * EACH * 4
        verified = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "gateway", "audit", "verify"],
            cwd=tmp_path,
            env=second.process.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert verified.stdout.count(": intact: ") == 2, verified.stdout
        await eventually(lambda: checkpointed(pg_url, counts), within=10 * PERIOD)
        published = sorted({at for (at,) in sql(pg_url, "SELECT at FROM audit_checkpoint")})
        gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(published)]
        assert all(gap >= PERIOD * 0.9 for gap in gaps), gaps  # one replica per period
        with log.open("rb") as server_log:
            server_log.seek(log_from)
            assert b"deadlock detected" not in server_log.read()
    finally:
        await cluster.stop()
