"""Shutdown, piece by piece, on SQLite in this process: when the server begins to stop, its
long-polls answer with the state as it is and its console streams end (so it stops within
moments); a long-poll that arrives meanwhile does not wait; the outbox worker lets a quick
job finish and hands back one that would not; the writer commits every write queued before
it closed and refuses any after. The signal itself (SIGTERM, exit status 0, within 10 s
under load) is tests/replicas/test_sigterm.py's."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from sqlalchemy.engine import Connection

from channels.web.auth import create_sign_in_link
from gateway import intake
from gateway.api.auth import find_caller
from gateway.app import Server, build_core, serving_app
from gateway.cli import bootstrap
from gateway.core import Caller, Core
from gateway.lifecycle import Kind
from gateway.runtime.dispatch import Dispatcher, Record
from gateway.runtime.supervisor import shutdown_step
from gateway.store import Database, migrate
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store.rows import JobRow
from gateway.vocabulary import JobKind, JobStatus
from gateway.wire.models import FunctionCallIn
from tests.factories import request_body
from tests.helpers import eventually, follow_console_events
from tests.services.inprocess import RunningGateway, test_settings
from tests.services.net import bound_socket, port_of

LONG_POLLS = 50
PROMPTLY = 2.0  # seconds: a long-poll of 50 s, or a stream of 300 s, ends well within this


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path}/gw.db"


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[Core]:
    """The core with its store, no server."""
    core = build_core(test_settings(sqlite_url(tmp_path)))
    await migrate.upgrade(core.db)
    core.db.on_changes = core.signal
    try:
        yield core
    finally:
        await core.db.aclose()


async def caller_of(core: Core) -> Caller:
    return await find_caller(core, (await bootstrap.create_key(core, name="test")).key)


async def create(core: Core, caller: Caller, call_id: str) -> None:
    body = FunctionCallIn.model_validate(request_body(call_id))
    await intake.create(core, caller, Kind.FUNCTION_CALL, body)


async def waiting(core: Core, count: int) -> None:
    async def registered() -> bool:
        return len(core.waiters) == count

    await eventually(registered)


# --- long-polls


async def test_a_waiting_long_poll_answers_when_the_gateway_stops(core: Core) -> None:
    caller = await caller_of(core)
    await create(core, caller, "c1")
    poll = asyncio.create_task(intake.get(core, caller, Kind.FUNCTION_CALL, "c1", wait=50))
    await waiting(core, 1)
    core.stop()
    async with asyncio.timeout(PROMPTLY):
        wire = await poll
    assert wire["gateway_status"] == "pending"


async def test_a_long_poll_during_shutdown_does_not_wait(core: Core) -> None:
    caller = await caller_of(core)
    await create(core, caller, "c1")
    core.stop()
    async with asyncio.timeout(PROMPTLY):
        wire = await intake.get(core, caller, Kind.FUNCTION_CALL, "c1", wait=50)
    assert wire["gateway_status"] == "pending"
    assert len(core.waiters) == 0


# --- the outbox


class Stuck(Dispatcher):
    """Webhooks never answer (until cancelled); timers finish at once."""

    def __init__(self, core: Core, http: httpx.AsyncClient) -> None:
        super().__init__(core, http)
        self.started = asyncio.Event()

    async def _webhook(self, job: JobRow) -> Record:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("a stuck webhook never ends by itself")

    async def _timer(self, job: JobRow) -> Record:
        return lambda _conn: None


async def test_the_outbox_finishes_what_it_can_and_hands_back_the_rest(core: Core) -> None:
    stuck = await core.db.write(outbox_store.enqueue, JobKind.WEBHOOK, {}, max_attempts=5)
    quick = await core.db.write(outbox_store.enqueue, JobKind.TIMER, {}, max_attempts=5)
    async with httpx.AsyncClient() as http:
        dispatcher = Stuck(core, http)
        worker = asyncio.create_task(dispatcher.run())
        async with asyncio.timeout(10):
            await dispatcher.started.wait()
        await dispatcher.finish(worker, within=0.2)
    assert worker.done()
    handed_back = await core.db.read(outbox_store.get_job, stuck)
    done = await core.db.read(outbox_store.get_job, quick)
    assert handed_back is not None and done is not None
    assert handed_back.status == JobStatus.PENDING  # another replica may take it now
    assert handed_back.locked_until is None
    assert handed_back.attempts == 0  # cut short by the shutdown, not failed
    assert done.status == JobStatus.DONE
    assert done.attempts == 1


# --- the writer


async def test_the_writer_commits_what_was_queued_and_refuses_what_comes_after(
    tmp_path: Path,
) -> None:
    db = Database(sqlite_url(tmp_path))
    await migrate.upgrade(db)
    entered, gate = threading.Event(), threading.Event()

    def held(_conn: Connection) -> None:
        entered.set()
        gate.wait(10)  # keeps the writer busy while the others queue behind it

    first = asyncio.create_task(db.write(held))
    assert await asyncio.to_thread(entered.wait, 10)
    queued = [
        asyncio.create_task(db.write(project_store.ensure_project, f"p{n}")) for n in range(20)
    ]

    async def behind(count: int) -> bool:
        return db.writer.pending() == count

    await eventually(lambda: behind(20))
    closing = asyncio.create_task(asyncio.to_thread(db.writer.close))
    await eventually(lambda: behind(21))  # the writes, then the writer thread's end
    gate.set()
    async with asyncio.timeout(10):
        await closing
        await first
        projects = await asyncio.gather(*queued)
    assert sorted(project.name for project in projects) == sorted(f"p{n}" for n in range(20))
    with pytest.raises(RuntimeError, match="closed"):  # at once, not queued for ever
        await db.write(project_store.ensure_project, "late")
    await db.aclose()

    reopened = Database(sqlite_url(tmp_path))
    try:
        for n in range(20):
            assert await reopened.read(project_store.get_project, f"p{n}") is not None
        assert await reopened.read(project_store.get_project, "late") is None
    finally:
        await reopened.aclose()


# --- the server


@asynccontextmanager
async def serving(core: Core) -> AsyncIterator[tuple[Server, asyncio.Task[None], RunningGateway]]:
    """`gateway serve`'s server, on a free port, in this event loop."""
    listening = bound_socket()
    port = port_of(listening)
    config = uvicorn.Config(serving_app(core), log_level="warning", lifespan="on")
    server = Server(config, core)
    served = asyncio.create_task(server.serve(sockets=[listening]))

    async def started() -> bool:
        if served.done():
            served.result()  # its error, if it failed to start
        return server.started

    await eventually(started)
    key = (await bootstrap.create_key(core, name="test")).key
    try:
        yield server, served, RunningGateway(core, f"http://127.0.0.1:{port}", key)
    finally:
        server.should_exit = True
        await served


async def test_a_stopping_server_answers_long_polls_and_ends_streams(tmp_path: Path) -> None:
    core = build_core(test_settings(sqlite_url(tmp_path)))
    async with serving(core) as (server, served, gateway):
        limits = httpx.Limits(max_connections=LONG_POLLS)
        async with gateway.client(limits=limits) as api:
            for n in range(LONG_POLLS):
                created = await api.post("/function_calls", json=request_body(f"poll-{n}"))
                assert created.status_code == 200, created.text
            polls = [
                asyncio.create_task(api.get(f"/function_calls/poll-{n}", params={"wait": 50}))
                for n in range(LONG_POLLS)
            ]
            opened = asyncio.Event()
            link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
            stream = asyncio.create_task(follow_console_events(gateway.base_url, link, opened))
            await opened.wait()
            await waiting(core, LONG_POLLS + 1)  # and the stream's

            stopped_at = time.monotonic()
            server.should_exit = True  # what uvicorn's SIGTERM handler does
            async with asyncio.timeout(PROMPTLY):
                answers = await asyncio.gather(*polls)
                stream_ended = await stream
                await served
    assert core.stopping.is_set()
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.json()["gateway_status"] == "pending"
    assert stream_ended - stopped_at < PROMPTLY


async def test_a_shutdown_step_that_hangs_or_fails_costs_its_bound_and_the_rest_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def hangs() -> None:
        await asyncio.Event().wait()  # a database that never answers

    async def fails() -> None:
        raise OSError("connection refused")

    loop = asyncio.get_running_loop()
    started = loop.time()
    await shutdown_step("a hanging step", hangs(), 0.1)
    await shutdown_step("a failing step", fails(), 5)
    assert loop.time() - started < 1
    said = [r.getMessage() for r in caplog.records]
    assert any("a hanging step did not stop cleanly" in line for line in said)
    assert any("a failing step did not stop cleanly" in line for line in said)
