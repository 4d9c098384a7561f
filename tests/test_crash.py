"""kill -9 with work in flight: nothing decided is lost, nothing is applied twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from tests.services.crashable import Crashable
from tests.services.net import free_port
from tests.services.receiver import WebhookReceiver

CALLS = 20
CONTACTS = 5
BATCHED = 300  # creates in flight when the process is killed


@pytest.fixture
async def crashable(tmp_path: Path) -> AsyncIterator[Crashable]:
    gateway = Crashable(tmp_path)
    try:
        yield gateway
    finally:
        if gateway.process is not None:
            gateway.process.stop()


async def create_and_decide(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    outcomes: dict[str, dict[str, Any]] = {}
    for i in range(CALLS):
        call_id = f"crash-fc-{i}"
        spec = {"fn": "wire_money", "kwargs": {"amount": i}, "state": {"n": i, "nul": "a\u0000b"}}
        created = await client.post(
            "/humanlayer/v1/function_calls",
            json={"run_id": "crash", "call_id": call_id, "spec": spec},
        )
        assert created.status_code == 200, created.text
        decision = {"approved": i % 3 != 0, "comment": f"decision {i}"}
        reply = await client.post(
            f"/humanlayer/v1/agent/function_calls/{call_id}/respond", json=decision
        )
        assert reply.status_code == 200, reply.text
        outcomes[call_id] = reply.json()["status"]
    for i in range(CONTACTS):
        call_id = f"crash-hc-{i}"
        spec = {"msg": f"question {i}", "state": {"n": i}}
        created = await client.post(
            "/humanlayer/v1/contact_requests",
            json={"run_id": "crash", "call_id": call_id, "spec": spec},
        )
        assert created.status_code == 200, created.text
        reply = await client.post(
            f"/humanlayer/v1/agent/human_contacts/{call_id}/respond",
            json={"response": f"answer {i}"},
        )
        assert reply.status_code == 200, reply.text
        outcomes[call_id] = reply.json()["status"]
    return outcomes


async def every_webhook_failed_once(client: httpx.AsyncClient) -> None:
    """Until each webhook job has been tried against the dead receiver at least once."""
    async with asyncio.timeout(20):
        while True:
            jobs = (await client.get("/gateway/v1/jobs", params={"limit": 1000})).json()["items"]
            hooks = [job for job in jobs if job["kind"] == "webhook"]
            if len(hooks) == CALLS + CONTACTS and all(
                job["attempts"] >= 1 and job["last_error"] for job in hooks
            ):
                assert {job["status"] for job in hooks} <= {"pending", "running"}
                return
            await asyncio.sleep(0.05)


async def test_webhooks_survive_kill_9(crashable: Crashable) -> None:
    receiver_port = free_port()  # reserved for a receiver that is down for now
    await crashable.start()
    hook_url = f"http://127.0.0.1:{receiver_port}/hook"
    secret = crashable.cli("webhooks", "add", hook_url).strip().splitlines()[-1]
    assert secret.startswith("whsec_")

    async with crashable.client() as client:
        outcomes = await create_and_decide(client)
        await every_webhook_failed_once(client)
    assert crashable.process is not None
    crashable.process.kill()

    await crashable.start()
    receiver = await WebhookReceiver(port=receiver_port).start()
    try:
        await receiver.wait_for(CALLS + CONTACTS, within=30)
    finally:
        await receiver.stop()

    verified = [Webhook(secret).verify(r.body, r.headers) for r in receiver.received]
    ids = {r.headers["webhook-id"] for r in receiver.received}
    by_call = {event["event"]["call_id"]: event for event in verified}
    assert set(by_call) == set(outcomes) and len(ids) == len(outcomes)
    for call_id, status in outcomes.items():
        event = by_call[call_id]
        assert event["is_test"] is False
        assert event["event"]["status"] == status  # the decision as it was made, unchanged
        expected_type = "function_call" if "-fc-" in call_id else "human_contact"
        assert event["type"] == f"{expected_type}.completed"
    assert by_call["crash-fc-4"]["event"]["spec"]["state"] == {"n": 4, "nul": "a\u0000b"}

    async with crashable.client() as client:
        for call_id, status in outcomes.items():
            trail = (await client.get(f"/gateway/v1/calls/{call_id}/events")).json()
            assert [e["type"] for e in trail["events"]].count("decided") == 1
            kind = "function_calls" if "-fc-" in call_id else "contact_requests"
            stored = (await client.get(f"/humanlayer/v1/{kind}/{call_id}")).json()
            assert stored["status"] == status


async def test_kill_9_during_decisions_loses_no_acknowledged_decision(
    crashable: Crashable,
) -> None:
    await crashable.start()
    async with crashable.client() as client:
        for i in range(CALLS):
            body = {"run_id": "r", "call_id": f"k-{i}", "spec": {"fn": "f", "kwargs": {}}}
            assert (
                await client.post("/humanlayer/v1/function_calls", json=body)
            ).status_code == 200

    async def decide(i: int) -> tuple[str, int | None]:
        try:
            async with crashable.client() as client:
                reply = await client.post(
                    f"/humanlayer/v1/agent/function_calls/k-{i}/respond",
                    json={"approved": True, "comment": f"c{i}"},
                )
                return f"k-{i}", reply.status_code
        except httpx.TransportError:
            return f"k-{i}", None  # the server died before answering

    assert crashable.process is not None
    process = crashable.process
    decisions = [asyncio.create_task(decide(i)) for i in range(CALLS)]
    await asyncio.wait(decisions, return_when=asyncio.FIRST_COMPLETED)
    process.kill()
    results = dict(await asyncio.gather(*decisions))
    acknowledged = [call_id for call_id, code in results.items() if code == 200]
    assert acknowledged, "the kill should land after at least one decision"

    await crashable.start()
    async with crashable.client() as client:
        for call_id in results:
            stored = (await client.get(f"/humanlayer/v1/function_calls/{call_id}")).json()
            trail = (await client.get(f"/gateway/v1/calls/{call_id}/events")).json()
            decided = [e["type"] for e in trail["events"]].count("decided")
            if call_id in acknowledged:
                assert stored["status"]["approved"] is True and decided == 1
            else:  # committed before the kill or not at all: never twice
                assert decided == (0 if stored["status"]["approved"] is None else 1)
            again = await client.post(
                f"/humanlayer/v1/agent/function_calls/{call_id}/respond",
                json={"approved": False, "comment": "late"},
            )
            assert again.status_code == (200 if decided == 0 else 409)


async def test_kill_9_during_batched_creates_loses_no_acknowledged_create(
    crashable: Crashable,
) -> None:
    """Creates in flight share batched commits: those acknowledged survive, none is stored
    twice, and sending one again after the restart finds it (or stores it) once."""
    await crashable.start()
    assert crashable.process is not None
    process = crashable.process
    limits = httpx.Limits(max_connections=32)

    def body(i: int) -> dict[str, Any]:
        return {"run_id": "r", "call_id": f"b-{i}", "spec": {"fn": "f", "kwargs": {"i": i}}}

    async with crashable.client(limits=limits) as client:

        async def create(i: int) -> tuple[int, int | None]:
            try:
                reply = await client.post("/humanlayer/v1/function_calls", json=body(i))
                return i, reply.status_code
            except httpx.TransportError:
                return i, None  # the server died before answering

        creates = [asyncio.create_task(create(i)) for i in range(BATCHED)]
        await asyncio.wait(creates, return_when=asyncio.FIRST_COMPLETED)
        process.kill()
        results = dict(await asyncio.gather(*creates))
    acknowledged = {i for i, code in results.items() if code == 200}
    assert acknowledged and len(acknowledged) < BATCHED, "the kill should land mid-load"

    await crashable.start()
    async with crashable.client() as client:
        for i in acknowledged:
            stored = await client.get(f"/humanlayer/v1/function_calls/b-{i}")
            assert stored.status_code == 200 and stored.json()["spec"]["kwargs"] == {"i": i}
        for i in range(BATCHED):  # the agent's retry: the same body again
            again = await client.post("/humanlayer/v1/function_calls", json=body(i))
            assert again.status_code == 200, again.text
        listed = await client.get("/humanlayer/v1/function_calls", params={"limit": 1000})
        assert listed.json()["total"] == BATCHED  # each once
