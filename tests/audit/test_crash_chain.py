"""kill -9 while 8 writers create and decide: the chain each project has after the restart is
whole (`gateway audit verify` passes), and it goes on from there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.audit.chain import assert_one_chain_each, writers
from tests.services.crashable import Crashable

pytestmark = pytest.mark.serial  # a subprocess killed mid-load, as tests/test_crash.py

KILL_AFTER = 24  # decisions acknowledged before the kill, of 8 x 20


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> dict[str, str]:
    """The subprocess's database setting: its own SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return {}
    return {"GATEWAY_DATABASE_URL": request.getfixturevalue("pg_url")}


@pytest.fixture
async def crashable(database: dict[str, str], tmp_path: Path) -> AsyncIterator[Crashable]:
    gateway = Crashable(tmp_path)
    gateway.env |= database
    try:
        yield gateway
    finally:
        if gateway.process is not None:
            gateway.process.stop()


def database_url(crashable: Crashable) -> str:
    assert crashable.process is not None
    return crashable.process.env["GATEWAY_DATABASE_URL"]


async def test_kill_9_under_load_leaves_every_chain_whole(crashable: Crashable) -> None:
    await crashable.start()
    assert crashable.process is not None
    process = crashable.process
    enough = asyncio.Event()
    acknowledged = 0

    def answered() -> None:
        nonlocal acknowledged
        acknowledged += 1
        if acknowledged >= KILL_AFTER:
            enough.set()

    async with clients_of(process.base_url, [crashable.api_key]) as clients:
        load = asyncio.create_task(writers(clients, "k", each=20, answered=answered))
        await enough.wait()
        process.kill()
        codes = await load
    assert 0 < codes.count(200) < len(codes), "the kill should land mid-load"

    await crashable.start()
    assert crashable.process is not None
    async with clients_of(crashable.process.base_url, [crashable.api_key]) as clients:
        assert set(await writers(clients, "after", each=1)) == {200}  # the chain goes on
    verified = crashable.cli("audit", "verify")  # exits 0, else cli() fails
    assert "project 'default' (id 1): intact: " in verified, verified
    assert list(assert_one_chain_each(database_url(crashable))) == [1]


@contextlib.asynccontextmanager
async def clients_of(base_url: str, keys: list[str]) -> AsyncIterator[list[httpx.AsyncClient]]:
    """An API client per key, closed on exit."""
    async with contextlib.AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {k}"})
            )
            for k in keys
        ]
