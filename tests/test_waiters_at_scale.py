"""Waiters never poll the database one by one: 1,000 long-polls cost no queries while they
wait, and a decision made by another process (`gateway approve`, SQLite) still reaches its
waiter through the one change feed the process reads each poll period."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from gateway.store import projects as project_store
from gateway.store import requests as request_store
from tests.factories import RequestFactory, request_row
from tests.helpers import eventually
from tests.services.inprocess import running_gateway, test_settings

WAITERS = 1_000
READS_REQUESTS = re.compile(r"\bFROM request\b")  # the table, not request_event


def insert_pending(conn: Connection, count: int) -> None:
    project = project_store.get_project(conn, "default")
    assert project is not None and project.id is not None
    for n in range(count):
        assert request_store.insert_request(conn, request_row(project.id, f"idle-{n}"))


class Statements:
    """The SQL an engine runs, from any thread, from `start()` until `stop()`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.seen: list[str] = []

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.seen.append(statement)

    def start(self) -> Statements:
        self.seen = []
        event.listen(self.engine, "before_cursor_execute", self._record)
        return self

    def stop(self) -> list[str]:
        event.remove(self.engine, "before_cursor_execute", self._record)
        return self.seen

    def reading_requests(self) -> list[str]:
        return [statement for statement in self.seen if READS_REQUESTS.search(statement)]


async def approve_from_the_cli(workdir: Path, database_url: str, call_id: str) -> None:
    env = os.environ | {
        "GATEWAY_DATABASE_URL": database_url,
        "GATEWAY_SECRET_KEY": "test-secret-key",
    }
    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "approve",
        call_id,
        "--comment",
        "from the CLI",
        cwd=workdir,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await cli.communicate()
    assert cli.returncode == 0, out.decode()


async def test_a_cli_decision_wakes_its_waiter_and_idle_waiters_cost_no_queries(
    tmp_path: Path, request_factory: RequestFactory
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/gw.db"
    period = 0.2
    async with running_gateway(test_settings(url, outbox_poll_seconds=period)) as gateway:
        await request_factory(gateway, "target")
        await gateway.core.db.write(insert_pending, WAITERS)
        limits = httpx.Limits(max_connections=WAITERS + 10)
        sql = Statements(gateway.core.db.engine)
        async with gateway.client(limits=limits) as client:
            sql.start()
            params = {"wait": 30}
            idle = [
                asyncio.create_task(client.get(f"/function_calls/idle-{n}", params=params))
                for n in range(WAITERS)
            ]
            target = asyncio.create_task(client.get("/function_calls/target", params=params))

            async def all_waiting() -> bool:
                # Each long-poll reads its request, watches it, and reads it once more.
                return len(sql.reading_requests()) >= 2 * (WAITERS + 1)

            await eventually(all_waiting, within=60)
            sql.stop()
            assert len(gateway.core.waiters) == WAITERS + 1

            sql.start()
            await asyncio.sleep(5 * period)  # a span of idle time, to count what it costs
            idle_reads, feed_reads = (
                sql.reading_requests(),
                [q for q in sql.stop() if "FROM change_feed" in q],
            )

            sql.start()
            await approve_from_the_cli(tmp_path, url, "target")
            answer = (await target).json()
            rereads = sql.reading_requests()
            sql.stop()
            assert answer["status"]["approved"] is True
            assert all(not task.done() for task in idle)  # still waiting, undisturbed
            for task in idle:
                task.cancel()
            await asyncio.gather(*idle, return_exceptions=True)

    assert idle_reads == [], idle_reads[:3]
    # The feed is read once per period (two statements), whatever the number of waiters.
    assert 0 < len(feed_reads) <= 2 * 7
    # Waking the one waiter re-read one request, not a thousand.
    assert 1 <= len(rereads) <= 3, rereads
