"""SIGTERM under load (issue 15): the replica stops taking requests, lets the ones in flight
finish, answers its open long-polls with the state as it is, ends its console streams, hands
back the outbox job it was running, and exits with status 0 within 10 s. A second replica on
the same PostgreSQL database holds every create the first acknowledged (and none it did
not), and runs the handed-back job at once rather than when its lease runs out."""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.security.crypto import new_webhook_secret
from tests.factories import request_body
from tests.helpers import eventually, follow_console_events
from tests.replicas.cluster import Cluster, Replica, webhook_env
from tests.services.net import free_port
from tests.services.receiver import HoldingReceiver

pytestmark = pytest.mark.postgres

EXIT_WITHIN = 10.0  # issue 15
ANSWER_WITHIN = 2.0  # after SIGTERM; what uvicorn still waits for is cut only after 3 s
LONG_POLLS = 200  # each on its own connection
WRITERS = 8  # concurrent agents creating requests
CREATES_EACH = 500  # at most, per writer
ACKED_BEFORE_SIGTERM = 200  # the load is well under way


@dataclass
class Load:
    """What each create's agent heard back."""

    acked: set[str] = field(default_factory=set)  # 2xx: the gateway said it is stored
    acked_after_sigterm: int = 0
    refused: set[str] = field(default_factory=set)  # connection refused, or 503
    unanswered: set[str] = field(default_factory=set)  # closed without an answer
    enough: asyncio.Event = field(default_factory=asyncio.Event)
    sigterm_at: float | None = None

    def attempted(self) -> set[str]:
        return self.acked | self.refused | self.unanswered


async def write(replica: Replica, writer: int, load: Load) -> None:
    """One agent creating function calls one after another, until the replica refuses it."""
    async with replica.client() as api:
        for n in range(CREATES_EACH):
            call_id = f"load-{writer}-{n}"
            body = request_body(call_id, run_id="load")
            try:
                response = await api.post("/function_calls", json=body)
            except httpx.ConnectError:  # the replica no longer listens
                load.refused.add(call_id)
                return
            except (httpx.RemoteProtocolError, httpx.ReadError):
                load.unanswered.add(call_id)  # a kept-alive connection the replica closed
                continue
            if response.status_code == 503:
                load.refused.add(call_id)
                return
            assert response.status_code == 200, response.text
            load.acked.add(call_id)
            if load.sigterm_at is not None:
                load.acked_after_sigterm += 1
            if len(load.acked) >= ACKED_BEFORE_SIGTERM:
                load.enough.set()


def pollers(replica: Replica) -> httpx.AsyncClient:
    """A client with a connection for every long-poll."""
    return httpx.AsyncClient(
        base_url=replica.process.api_base,
        headers={"Authorization": f"Bearer {replica.api_key}"},
        timeout=60,
        limits=httpx.Limits(max_connections=LONG_POLLS),
    )


async def long_poll(api: httpx.AsyncClient, call_id: str) -> tuple[float, int, dict[str, Any]]:
    """GET …?wait=50: (when it answered, the status code, the body)."""
    response = await api.get(f"/function_calls/{call_id}", params={"wait": 50})
    return time.monotonic(), response.status_code, response.json()


async def stored_call_ids(replica: Replica, run_id: str) -> set[str]:
    """Every function call of `run_id`, as this replica lists it."""
    found: set[str] = set()
    async with replica.client() as api:
        for page in range(20):  # 20,000 calls: more than the load can create
            params: dict[str, str | int] = {"run_id": run_id, "limit": 1000, "offset": page * 1000}
            listing = (await api.get("/function_calls", params=params)).json()
            found |= {item["call_id"] for item in listing["items"]}
            if not listing["has_more"]:
                return found
    raise AssertionError("more calls than the load could have created")


async def sigterm(replica: Replica, sent: float) -> tuple[float, int]:
    """SIGTERM, then wait for the process: (seconds until it exited, its exit status)."""
    replica.proc.send_signal(signal.SIGTERM)
    return await exited(replica, sent)


async def exited(replica: Replica, sent: float) -> tuple[float, int]:
    status = await asyncio.to_thread(replica.proc.wait, EXIT_WITHIN + 10)  # fails the test past it
    return time.monotonic() - sent, status


async def refuses_connections(replica: Replica) -> bool:
    try:
        async with replica.client() as api:
            await api.get("/healthz")
    except httpx.ConnectError:
        return True
    return False


async def test_sigterm_under_load_loses_nothing_acknowledged(tmp_path: Path, pg_url: str) -> None:
    cluster = Cluster(tmp_path, {"GATEWAY_DATABASE_URL": pg_url})
    try:
        stopping = await cluster.start()
        witness = await cluster.start()
        async with pollers(stopping) as api:
            for n in range(LONG_POLLS):
                created = await api.post("/function_calls", json=request_body(f"poll-{n}"))
                assert created.status_code == 200, created.text
            polls = [asyncio.create_task(long_poll(api, f"poll-{n}")) for n in range(LONG_POLLS)]
            opened = asyncio.Event()
            link = stopping.process.console_link
            assert link, "the first replica prints a console sign-in link"
            base_url = stopping.process.base_url
            stream = asyncio.create_task(follow_console_events(base_url, link, opened))
            load = Load()
            writers = [asyncio.create_task(write(stopping, n, load)) for n in range(WRITERS)]
            async with asyncio.timeout(60):
                await opened.wait()
                await load.enough.wait()
            assert not any(poll.done() for poll in polls)  # still waiting, 50 s to go

            load.sigterm_at = time.monotonic()
            exited_after, status = await sigterm(stopping, load.sigterm_at)
            answers = await asyncio.gather(*polls)
            stream_ended = await stream
            await asyncio.gather(*writers)

        assert status == 0, "".join(stopping.process.output[-40:])
        assert exited_after < EXIT_WITHIN
        for answered_at, code, body in answers:
            assert code == 200, body
            assert body["gateway_status"] == "pending", body
            assert answered_at - load.sigterm_at < ANSWER_WITHIN
        assert stream_ended - load.sigterm_at < ANSWER_WITHIN

        stored = await stored_call_ids(witness, "load")
        assert load.acked <= stored  # every acknowledged create is stored
        assert not (load.refused | load.unanswered) & stored  # nothing unanswered is
        assert stored <= load.attempted()
        assert load.refused, "the load ran on past the shutdown"
        slowest = max(answered_at for answered_at, _code, _body in answers) - load.sigterm_at
        print(
            f"\nSIGTERM with {LONG_POLLS} long-polls and {WRITERS} writers: exit {status} after "
            f"{exited_after:.2f} s; long-polls answered within {slowest:.2f} s; "
            f"{len(load.acked)} creates acknowledged ({load.acked_after_sigterm} after the "
            f"signal), {len(load.refused)} refused, {len(load.unanswered)} closed unanswered"
        )
    finally:
        await cluster.stop()


async def webhook_job(replica: Replica) -> dict[str, Any]:
    """The one webhook job, once done, as this replica lists it."""
    found: list[dict[str, Any]] = []

    async def done() -> bool:
        async with replica.client() as api:
            jobs = await api.get(f"{replica.process.base_url}/gateway/v1/jobs")
        found[:] = [job for job in jobs.json()["items"] if job["kind"] == "webhook"]
        return len(found) == 1 and found[0]["status"] == "done"

    await eventually(done, within=EXIT_WITHIN)
    return found[0]


async def test_sigterm_hands_back_the_job_it_was_running(tmp_path: Path, pg_url: str) -> None:
    receiver = HoldingReceiver(port=free_port(), secret=new_webhook_secret())
    await receiver.start()
    # The held delivery would wait a minute for its answer: only the shutdown cuts it short.
    env = webhook_env(tmp_path, pg_url, receiver) | {"GATEWAY_WEBHOOK_TIMEOUT_SECONDS": "60"}
    cluster = Cluster(tmp_path, env)
    try:
        stopping = await cluster.start()
        async with stopping.client() as api:
            assert (await api.post("/function_calls", json=request_body("hook"))).is_success
            approve = {"approved": True, "comment": "fine"}
            answer = await api.post("/agent/function_calls/hook/respond", json=approve)
            assert answer.status_code == 200, answer.text
        held = await receiver.holding(within=20)  # the only replica has claimed the job
        witness = await cluster.start()  # the job is leased to the other one, which renews it

        sent = time.monotonic()
        stopping.proc.send_signal(signal.SIGTERM)
        await eventually(lambda: refuses_connections(stopping), within=1.0)
        # Still finishing the job it holds: it stopped listening first, not by exiting.
        assert stopping.proc.poll() is None
        exited_after, status = await exited(stopping, sent)
        await receiver.wait_until(bool, within=EXIT_WITHIN)  # delivered by the witness
        handed_over_after = time.monotonic() - sent
        [delivered] = receiver.verified
        job = await webhook_job(witness)

        assert status == 0, "".join(stopping.process.output[-40:])
        assert exited_after < EXIT_WITHIN
        assert delivered.webhook_id == held.headers["webhook-id"]  # the same job, run again
        assert handed_over_after < EXIT_WITHIN
        assert job["attempts"] == 1, job  # given back, not reclaimed once the lease ran out
        print(
            f"\nSIGTERM with a job running: exit {status} after {exited_after:.2f} s; the other "
            f"replica delivered it {handed_over_after:.2f} s after the signal"
        )
    finally:
        receiver.release.set()
        await cluster.stop()
        await receiver.stop()
