"""Approval policies under failure and contention: a deadline survives kill -9 and fires
exactly once after the restart; two approvals completing a quorum at the same instant make
one decision and one webhook, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from gateway.store import votes as vote_store
from gateway.vocabulary import KeyScope
from tests.factories import rid_of
from tests.helpers import add_webhook, events, jobs
from tests.services.crashable import Crashable
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for
from tests.services.receiver import WebhookReceiver

# --- a deadline pending across kill -9

DEADLINE = 3  # seconds: long enough to kill the process before it, short for the test
EXPIRED = f"No decision within {DEADLINE}s; expired"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"policy-durability-secret-32byte").decode()
DEADLINE_CONFIG = """
[[rules]]
fn = "wire_money"
target = "web"
expires_after = {deadline}

[[webhooks]]
url = "{url}"
secret_env = "POLICY_TEST_WEBHOOK_SECRET"
"""


@pytest.fixture
async def crashable(tmp_path: Path, receiver: WebhookReceiver) -> AsyncIterator[Crashable]:
    """`gateway serve` with the deadline rule and a webhook to `receiver`, both from the
    config file (read again at the restart, as an operator's would be)."""
    gateway = Crashable(tmp_path)
    config = DEADLINE_CONFIG.format(deadline=DEADLINE, url=receiver.url)
    gateway.env["GATEWAY_CONFIG"] = str(write_config(tmp_path / "routing.toml", config))
    gateway.env["POLICY_TEST_WEBHOOK_SECRET"] = WEBHOOK_SECRET
    try:
        yield gateway
    finally:
        if gateway.process is not None:
            gateway.process.stop()


async def outbox_jobs(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    listed = await client.get("/gateway/v1/jobs", params={"limit": 1000})
    assert listed.status_code == 200, listed.text
    items: list[dict[str, Any]] = listed.json()["items"]
    return items


async def settled(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The outbox's jobs once none is pending or running (bounded by the caller)."""
    while True:
        jobs = await outbox_jobs(client)
        if all(job["status"] in ("done", "dead") for job in jobs):
            return jobs
        await asyncio.sleep(0.05)  # another process's outbox: nothing to await instead


@pytest.mark.parametrize("restart", ["at once", "once the deadline has passed"])
async def test_a_deadline_pending_at_kill_9_fires_once_after_the_restart(
    crashable: Crashable, receiver: WebhookReceiver, restart: str
) -> None:
    await crashable.start()

    async with crashable.client() as client:
        body = {"run_id": "r", "call_id": "dl-1", "spec": {"fn": "wire_money", "kwargs": {}}}
        sent_at = time.monotonic()  # the deadline is DEADLINE after the gateway got it
        created = await client.post("/humanlayer/v1/function_calls", json=body)
        assert created.status_code == 200, created.text
        assert created.json()["status"]["approved"] is None
        [timer] = [job for job in await outbox_jobs(client) if job["kind"] == "timer"]
        assert timer["status"] == "pending" and timer["attempts"] == 0
    assert crashable.process is not None
    crashable.process.kill()  # SIGKILL: the timer exists only in the database now
    assert time.monotonic() - sent_at < DEADLINE, "killed too late to test a pending timer"

    if restart == "once the deadline has passed":  # it comes due while nothing runs
        await asyncio.sleep(DEADLINE - (time.monotonic() - sent_at) + 0.2)
    await crashable.start()

    [delivered] = await receiver.wait_for(1, within=10)
    async with crashable.client() as client:
        async with asyncio.timeout(10):
            jobs = await settled(client)
        stored = (await client.get("/humanlayer/v1/function_calls/dl-1")).json()
        trail = (await client.get("/gateway/v1/calls/dl-1/events")).json()

    status = stored["status"]
    assert (status["approved"], status["comment"]) == (False, EXPIRED)
    assert status["user_info"]["channel"] == "gateway"
    requested = datetime.fromisoformat(status["requested_at"])
    assert datetime.fromisoformat(status["responded_at"]) - requested >= timedelta(seconds=DEADLINE)
    types = [event["type"] for event in trail["events"]]
    assert types.count("decided") == 1 and types.count("webhook_delivered") == 1
    [timer] = [job for job in jobs if job["kind"] == "timer"]
    # Ran (not cancelled by a decision from elsewhere) and finished.
    assert (timer["status"], timer["last_error"]) == ("done", None) and timer["attempts"] >= 1
    [hook_job] = [job for job in jobs if job["kind"] == "webhook"]
    assert hook_job["status"] == "done"
    assert len(receiver.received) == 1  # everything settled: no second delivery is coming
    payload = Webhook(WEBHOOK_SECRET).verify(delivered.body, delivered.headers)
    assert payload["type"] == "function_call.completed"
    assert payload["event"]["call_id"] == "dl-1"
    assert payload["event"]["status"] == status


# --- two approvals completing a quorum at once

QUORUM = 3
QUORUM_CONFIG = f"""
[people.alice]
email = "alice@example.com"

[people.bob]
email = "bob@example.com"

[people.carol]
email = "carol@example.com"

[people.dave]
email = "dave@example.com"

[teams.dba]
members = ["alice", "bob", "carol", "dave"]
approvals_required = {QUORUM}

[[rules]]
fn = "drop_*"
target = "team:dba"
"""
ROUNDS = 5


@pytest.fixture
async def quorum_gateway(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", QUORUM_CONFIG)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


async def approve(gateway: RunningGateway, call_id: str, key: str, comment: str) -> httpx.Response:
    # A client each: separate connections, as separate people would have.
    async with gateway.client(key) as client:
        body = {"approved": True, "comment": comment}
        return await client.post(f"/agent/function_calls/{call_id}/respond", json=body)


async def test_two_approvals_completing_a_quorum_at_once_decide_once(
    quorum_gateway: RunningGateway, receiver: WebhookReceiver
) -> None:
    """Four responder keys bound to the four DBAs are four people. Two approve one by one,
    then the last two at the same instant; either would make the third approval. The one
    whose transaction comes second finds the request decided: it gets 409 and its vote is
    not stored, as for any late answer."""
    gateway = quorum_gateway
    secret = await add_webhook(gateway, receiver.url)
    keys = [
        await gateway.new_key("default", name=p, scope=KeyScope.RESPONDER, person=p)
        for p in ("alice", "bob", "carol", "dave")
    ]
    for round_ in range(ROUNDS):
        call_id = f"quorum-{round_}"
        async with gateway.client() as client:
            body = {"run_id": "r", "call_id": call_id, "spec": {"fn": "drop_table", "kwargs": {}}}
            made = await client.post("/function_calls", json=body)
        assert made.status_code == 200, made.text
        assert made.json()["policy"]["approvals_required"] == QUORUM
        for n, key in enumerate(keys[:2], start=1):
            early = await approve(gateway, call_id, key, f"early {n}")
            assert early.status_code == 200, early.text
            assert early.json()["status"]["approved"] is None
            assert early.json()["policy_progress"]["approvals"] == n

        replies = await asyncio.gather(
            approve(gateway, call_id, keys[2], "last 3"),
            approve(gateway, call_id, keys[3], "last 4"),
        )

        assert sorted(reply.status_code for reply in replies) == [200, 409], [
            reply.text for reply in replies
        ]
        [won] = [reply.json() for reply in replies if reply.status_code == 200]
        [lost] = [reply.json() for reply in replies if reply.status_code == 409]
        assert won["status"]["approved"] is True and won["gateway_status"] == "approved"
        assert won["status"]["comment"] in ("last 3", "last 4")
        assert won["policy_progress"]["approvals"] == QUORUM
        assert lost["detail"].startswith(f"function call '{call_id}' was already approved by ")
        async with gateway.client() as client:
            stored = (await client.get(f"/function_calls/{call_id}")).json()
        assert stored["status"] == won["status"]
        trail = [e["type"] for e in (await events(gateway, call_id))["events"]]
        assert trail.count("decided") == 1
        assert trail.count("voted") == 2  # the early two; the winner's vote decided
        stored_votes = await gateway.core.db.read(
            vote_store.list_for, await rid_of(gateway, call_id)
        )
        assert [vote.comment for vote in stored_votes] == [
            "early 1",
            "early 2",
            won["status"]["comment"],
        ]

    deliveries = await receiver.wait_for(ROUNDS)
    await _webhooks_done(gateway, ROUNDS)
    assert len(receiver.received) == ROUNDS
    payloads = [Webhook(secret).verify(d.body, d.headers) for d in deliveries]
    assert sorted(p["event"]["call_id"] for p in payloads) == [f"quorum-{i}" for i in range(ROUNDS)]
    assert {p["event"]["status"]["approved"] for p in payloads} == {True}
    assert len({d.headers["webhook-id"] for d in deliveries}) == ROUNDS


async def _webhooks_done(gateway: RunningGateway, count: int) -> None:
    """Until exactly `count` webhook jobs exist and all are done (bounded)."""
    async with asyncio.timeout(10):
        while True:
            hooks = [job for job in await jobs(gateway) if job["kind"] == "webhook"]
            if len(hooks) >= count and all(job["status"] == "done" for job in hooks):
                assert len(hooks) == count
                return
            await asyncio.sleep(0.02)  # the outbox's progress is read from the database
