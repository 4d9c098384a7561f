"""`gateway serve --workers N`: worker processes on one port are replicas of each other on
PostgreSQL (one owner per singleton, decisions heard across them, one SIGTERM stops all),
and are refused on SQLite. Replicas started at the same instant on an empty database all
come up, and exactly one of them prints the first key."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from alembic.script import ScriptDirectory

from gateway.cli.workers import STOP_SECONDS
from gateway.store.migrate import alembic_config
from tests.factories import request_body
from tests.helpers import eventually
from tests.replicas.cluster import SINGLETONS
from tests.replicas.test_singletons import Platforms, platforms
from tests.services.gateway_process import KEY_LINE, GatewayProcess
from tests.services.postgres import ThrowawayPostgres, createdb, dropdb

pytestmark = pytest.mark.postgres

__all__ = ["platforms"]  # the fixture, shared with the singleton tests

RACE_ROUNDS = 5
RACED_BY = "another gateway process on this database created the first API key"


@pytest.fixture
def empty_database(postgres_server: ThrowawayPostgres) -> Iterator[str]:
    """A database with no schema at all, as on a first rollout."""
    name = "empty_" + os.urandom(6).hex()
    createdb(postgres_server, name)
    try:
        yield postgres_server.url(name)
    finally:
        dropdb(postgres_server, name)


def schema_revision(postgres_server: ThrowawayPostgres, url: str) -> str | None:
    dsn = postgres_server.dsn(url.rsplit("/", 1)[1])
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return None if row is None else str(row[0])


async def start_together(processes: list[GatewayProcess]) -> None:
    started = await asyncio.gather(
        *(asyncio.to_thread(p.start, 60) for p in processes), return_exceptions=True
    )
    failed = [error for error in started if isinstance(error, BaseException)]
    assert failed == [], failed


@pytest.mark.parametrize("round_", range(RACE_ROUNDS))
async def test_three_replicas_start_at_once_on_an_empty_database(
    tmp_path: Path, postgres_server: ThrowawayPostgres, empty_database: str, round_: int
) -> None:
    env = {"GATEWAY_DATABASE_URL": empty_database}
    processes = [
        GatewayProcess(tmp_path, env | {"GATEWAY_WORKERS": "2" if n == 0 else "1"})
        for n in range(3)
    ]
    try:
        await start_together(processes)
        assert all(p.alive() for p in processes)
    finally:
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in processes))
    printed = [len(KEY_LINE.findall("".join(p.output))) for p in processes]
    assert sorted(printed) == [0, 0, 1], printed
    # One that lost the race to make it says so; one that came after, nothing (a restart).
    told = [RACED_BY in "".join(p.output) for p in processes]
    assert not any(t and n for t, n in zip(told, printed, strict=True))
    head = ScriptDirectory.from_config(alembic_config(empty_database)).get_current_head()
    assert schema_revision(postgres_server, empty_database) == head
    # Each process said so in one line, and nothing of Alembic's start-up chatter.
    assert all("alembic" not in "".join(p.output) for p in processes)


def test_more_workers_than_one_are_refused_on_sqlite(tmp_path: Path) -> None:
    process = GatewayProcess(tmp_path, {"GATEWAY_WORKERS": "2"})
    ran = subprocess.run(
        [sys.executable, "-m", "gateway", "serve"],
        cwd=tmp_path,
        env=process.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2
    assert "--workers 2 needs PostgreSQL" in ran.stderr
    assert "once per poll period" in ran.stderr  # why, not only no
    assert not (tmp_path / "gateway.db").exists()  # refused before touching anything


async def worker_clients(base_url: str, key: str) -> dict[str, httpx.AsyncClient]:
    """A client with one kept-alive connection to each worker, by the worker's replica id
    (which GET /gateway/v1/channels names): the kernel spreads connections among them."""
    found: dict[str, httpx.AsyncClient] = {}
    headers = {"Authorization": f"Bearer {key}"}
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    for _ in range(60):
        client = httpx.AsyncClient(base_url=base_url, headers=headers, limits=one, timeout=30)
        worker = await serving_worker(client)
        if worker in found or len(found) == 2:
            await client.aclose()
        else:
            found[worker] = client
    return found


async def channel_states(client: httpx.AsyncClient) -> dict[str, dict[str, object]]:
    reply = await client.get("/gateway/v1/channels")
    assert reply.status_code == 200, reply.text
    return {c["name"]: c for c in reply.json()["channels"]}


async def serving_worker(client: httpx.AsyncClient) -> str:
    states = await channel_states(client)
    return str(states[SINGLETONS[0]]["replica"])


async def singletons_run_once(clients: dict[str, httpx.AsyncClient], platforms: Platforms) -> None:
    """Both workers name one owner, one of them, for each singleton, and it is connected;
    one Discord session, one Socket Mode connection and one IMAP session exist in all."""

    async def agreed() -> bool:
        views = [await channel_states(client) for client in clients.values()]
        for name in SINGLETONS:
            named = {str(view[name]["owner"]) for view in views}
            if len(named) != 1 or not named <= set(clients):
                return False
            owner_view = views[list(clients).index(named.pop())]
            if not str(owner_view[name]["connection"]).startswith("connected"):
                return False
        return True

    await eventually(agreed, within=20)
    assert platforms.discord.identify_count == 1
    assert platforms.socket_mode_opens() == 1
    assert await platforms.imap_sessions() == 1


async def test_two_workers_are_replicas_of_each_other(
    tmp_path: Path, pg_url: str, platforms: Platforms
) -> None:
    gateway = GatewayProcess(tmp_path, platforms.env(tmp_path, pg_url) | {"GATEWAY_WORKERS": "2"})
    await asyncio.to_thread(gateway.start, 60)
    clients: dict[str, httpx.AsyncClient] = {}
    try:
        admin = await asyncio.to_thread(gateway.new_key, "admin", "--name", "operator")
        clients = await worker_clients(gateway.base_url, admin)
        assert len(clients) == 2, "both workers accept on the shared port"
        (_one, one_client), (_other, other_client) = clients.items()
        await singletons_run_once(clients, platforms)

        # A long-poll waiting on one worker is answered by a decision made on the other.
        created = await one_client.post(
            "/humanlayer/v1/function_calls", json=request_body("across", channel={"web": {}})
        )
        assert created.status_code == 200, created.text
        waiting = asyncio.ensure_future(
            one_client.get("/humanlayer/v1/function_calls/across", params={"wait": 20})
        )
        decided = await other_client.post(
            "/humanlayer/v1/agent/function_calls/across/respond", json={"approved": True}
        )
        assert decided.status_code == 200, decided.text
        started = time.monotonic()
        answered = await asyncio.wait_for(waiting, timeout=10)
        assert answered.json()["status"]["approved"] is True
        assert time.monotonic() - started < 5  # woken by NOTIFY, not by the 20 s wait ending

        pids = [int(replica.rsplit(":", 1)[1]) for replica in clients]
    finally:
        for client in clients.values():
            await client.aclose()
        stopped_in = await asyncio.to_thread(stop_timed, gateway)
    assert stopped_in < STOP_SECONDS, stopped_in
    assert gateway.proc is not None and gateway.proc.returncode == 0
    assert not any(alive(pid) for pid in pids), "every worker has exited"


def stop_timed(gateway: GatewayProcess) -> float:
    started = time.monotonic()
    gateway.stop()
    return time.monotonic() - started


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
