"""Sixteen people answer one request at once: exactly one wins, everywhere."""

from __future__ import annotations

import asyncio
import json

import httpx
from standardwebhooks.webhooks import Webhook

from tests.helpers import add_webhook, events, eventually, jobs, outbox_idle
from tests.services.inprocess import RunningGateway
from tests.services.receiver import WebhookReceiver

RESPONDERS = 16
ROUNDS = 5


async def respond(gateway: RunningGateway, call_id: str, who: int) -> httpx.Response:
    # A client each: sixteen separate connections, as sixteen people would have.
    async with gateway.client() as client:
        body = {"approved": who % 2 == 0, "comment": f"person {who}"}
        return await client.post(f"/agent/function_calls/{call_id}/respond", json=body)


async def test_one_winner_among_sixteen(gateway: RunningGateway, receiver: WebhookReceiver) -> None:
    secret = await add_webhook(gateway, receiver.url)
    for round_ in range(ROUNDS):
        call_id = f"race-{round_}"
        async with gateway.client() as client:
            body = {"run_id": "r", "call_id": call_id, "spec": {"fn": "drop_db", "kwargs": {}}}
            assert (await client.post("/function_calls", json=body)).status_code == 200

        replies = await asyncio.gather(*(respond(gateway, call_id, i) for i in range(RESPONDERS)))

        statuses = sorted(reply.status_code for reply in replies)
        assert statuses == [200] + [409] * (RESPONDERS - 1)
        winner = next(reply.json() for reply in replies if reply.status_code == 200)
        for loser in (reply for reply in replies if reply.status_code == 409):
            assert f"already {winner['gateway_status']} by" in loser.json()["detail"]

        trail = await events(gateway, call_id)
        assert [e["type"] for e in trail["events"]].count("decided") == 1

    await receiver.wait_for(ROUNDS)
    await eventually(lambda: outbox_idle(gateway))
    webhook_jobs = [job for job in await jobs(gateway) if job["kind"] == "webhook"]
    assert len(webhook_jobs) == ROUNDS and {job["status"] for job in webhook_jobs} == {"done"}
    assert len(receiver.received) == ROUNDS
    delivered = [Webhook(secret).verify(r.body, r.headers) for r in receiver.received]
    assert sorted(d["event"]["call_id"] for d in delivered) == [f"race-{i}" for i in range(ROUNDS)]


async def test_contact_answered_once(gateway: RunningGateway) -> None:
    async with gateway.client() as client:
        body = {"run_id": "r", "call_id": "q", "spec": {"msg": "which region?"}}
        assert (await client.post("/contact_requests", json=body)).status_code == 200

    async def answer(who: int) -> httpx.Response:
        async with gateway.client() as client:
            reply = {"response": f"answer {who}"}
            return await client.post("/agent/human_contacts/q/respond", json=reply)

    replies = await asyncio.gather(*(answer(i) for i in range(RESPONDERS)))
    assert sorted(r.status_code for r in replies) == [200] + [409] * (RESPONDERS - 1)
    winner = next(r.json() for r in replies if r.status_code == 200)
    async with gateway.client() as client:
        stored = (await client.get("/human_contacts/q")).json()
    assert stored["status"]["response"] == winner["status"]["response"]
    assert json.dumps(stored["status"]["user_info"]) == json.dumps(winner["status"]["user_info"])


async def test_concurrent_identical_creates_store_one_request(gateway: RunningGateway) -> None:
    """An agent retrying a timed-out create: every copy gets the one stored record."""
    body = {"run_id": "r", "call_id": "dup", "spec": {"fn": "f", "kwargs": {"a": 1}}}

    async def create() -> httpx.Response:
        async with gateway.client() as client:
            return await client.post("/function_calls", json=body)

    replies = await asyncio.gather(*(create() for _ in range(RESPONDERS)))
    assert {reply.status_code for reply in replies} == {200}
    assert len({reply.json()["status"]["requested_at"] for reply in replies}) == 1
    async with gateway.client() as client:
        listed = (await client.get("/function_calls")).json()
    assert listed["total"] == 1
    assert [e["type"] for e in (await events(gateway, "dup"))["events"]].count("created") == 1
