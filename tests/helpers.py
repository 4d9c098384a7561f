"""Small test helpers shared by several test files."""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import sqlalchemy as sa

from gateway.doors import offline_context
from gateway.outbox.webhooks import add_endpoint
from gateway.runtime.logs import ACCESS_LOGGER
from gateway.seam import ChannelContext, ChannelName
from gateway.store import projects as project_store
from gateway.store import tables
from gateway.store.values import utcnow
from tests.services.inprocess import RunningGateway, test_settings


async def eventually(check: Callable[[], Awaitable[bool]], *, within: float = 15) -> None:
    """Wait until an observable condition holds (fails with TimeoutError otherwise)."""
    # The condition lives in another process or the database: there is no event to await.
    async with asyncio.timeout(within):
        while True:
            if await check():
                return
            await asyncio.sleep(0.02)


def detached(name: str) -> ChannelContext:
    """The context of a channel a test drives directly, with no gateway running: it may talk
    to its platform (a fake), and any door to the core says it needs `gateway serve`."""
    return offline_context(test_settings("sqlite:///unused.db"), ChannelName(name))


async def add_webhook(gateway: RunningGateway, url: str, project: str = "default") -> str:
    row = await gateway.core.db.read(project_store.get_project, project)
    assert row is not None and row.id is not None
    _endpoint_id, secret = await add_endpoint(gateway.core, project_id=row.id, url=url, events=None)
    return secret


async def jobs(gateway: RunningGateway, **params: Any) -> list[dict[str, Any]]:
    async with gateway.client() as client:
        response = await client.get(f"{gateway.base_url}/gateway/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        items: list[dict[str, Any]] = response.json()["items"]
        return items


async def outbox_idle(gateway: RunningGateway, *, but: str | None = None) -> bool:
    """Nothing left to run in the outbox; `but`: a kind of job still waiting is fine (a
    grant's note, due a minute on)."""
    busy = [job for job in await jobs(gateway) if job["status"] in ("pending", "running")]
    return not [job for job in busy if job["kind"] != but]


async def make_due(gateway: RunningGateway, job_id: int) -> None:
    """Run a job now that is due later (a grant's note, a minute on), as if time had passed."""
    table = tables.OutboxJob.__table__  # type: ignore[attr-defined]

    def now(tx: Any) -> None:
        tx.execute(sa.update(table).where(table.c.id == job_id).values(run_at=utcnow()))

    await gateway.core.db.write(now)
    gateway.core.outbox_wakeup.set()


async def events(gateway: RunningGateway, call_id: str) -> dict[str, Any]:
    async with gateway.client() as client:
        response = await client.get(f"{gateway.base_url}/gateway/v1/calls/{call_id}/events")
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result


async def follow_console_events(base_url: str, link: str, opened: asyncio.Event) -> float:
    """Sign in with a one-time console link and follow the live updates (`opened` once the
    stream is open) until the server ends them: when they ended. A stream cut off raises."""
    headers = {"Origin": base_url}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as browser:
        signed_in = await browser.post(urllib.parse.urlsplit(link).path)
        assert signed_in.status_code == 303, signed_in.text
        async with browser.stream("GET", "/console/events") as stream:
            assert stream.status_code == 200
            chunks = stream.aiter_text()
            assert (await anext(chunks)).startswith("retry:")
            opened.set()
            async for _chunk in chunks:
                pass
    return time.monotonic()


def access_record(target: str) -> logging.LogRecord:
    """The record uvicorn's access logger makes for `GET <target>` answered 200."""
    message = '%s - "%s %s HTTP/%s" %d'
    values = ("127.0.0.1:5000", "GET", target, "1.1", 200)
    return logging.LogRecord(ACCESS_LOGGER, logging.INFO, __file__, 1, message, values, None)
