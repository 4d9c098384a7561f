"""Two `gateway serve` replicas on one PostgreSQL database: a standing grant a person gave
approves creates on either replica, and a revoke through one replica's admin API counts on
the other from its next create (the grant is looked up in each create's own transaction)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import build_core
from gateway.core import Core
from gateway.doors import channel_context
from gateway.seam import Answered, ChannelName, Responder, Verb
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.vocabulary import AnsweredIn
from tests.factories import request_body
from tests.helpers import eventually
from tests.replicas.cluster import Cluster, Replica
from tests.services.inprocess import test_settings

pytestmark = pytest.mark.postgres

ALICE = Responder(AnsweredIn.SLACK, "U0ALICE", "Alice")
SLACK = {"slack": {"channel_or_user_id": "C1"}}


@asynccontextmanager
async def beside(pg_url: str) -> AsyncIterator[Core]:
    """A core on the replicas' database in this process: a third member of the cluster,
    where a person's answer arrives through the answer path every channel uses."""
    core = build_core(test_settings(pg_url), {})
    try:
        yield core
    finally:
        await core.db.aclose()


async def allow_more(core: Core, call_id: str) -> None:
    """Alice approves `call_id` in Slack and allows this function in this run for 1 hour."""
    project = await core.db.read(project_store.get_project, "default")
    assert project is not None and project.id is not None
    row = await core.db.read(request_store.get_by_call_id, project.id, call_id)
    assert row is not None
    answers = channel_context(core, ChannelName.SLACK).answers
    answered = await answers.answer(row.rid, Verb.GRANT, ALICE, grant="run:3600")
    assert isinstance(answered, Answered), answered


def agent(replica: Replica, key: str) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.AsyncClient(base_url=replica.process.api_base, headers=headers, timeout=30)


def admin(replica: Replica) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {replica.api_key}"}
    base = f"{replica.process.base_url}/gateway/v1"
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=30)


async def create(api: httpx.AsyncClient, call_id: str) -> dict[str, Any]:
    body = request_body(call_id, channel=SLACK, run_id="run-1", fn="read_file", kwargs={})
    response = await api.post("/function_calls", json=body)
    assert response.status_code == 200, response.text
    status: dict[str, Any] = response.json()["status"]
    return status


async def test_a_revoke_on_one_replica_counts_on_the_other_from_the_next_create(
    tmp_path: Path, pg_url: str
) -> None:
    cluster = Cluster(tmp_path, {"GATEWAY_DATABASE_URL": pg_url})
    try:
        a = await cluster.start()
        b = await cluster.start()
        assert a.process.api_key  # the agent key the first start printed
        async with (
            agent(b, a.process.api_key) as on_b,
            admin(a) as admin_a,
            admin(b) as admin_b,
            beside(pg_url) as core,
        ):
            assert (await create(on_b, "first"))["approved"] is None
            await allow_more(core, "first")

            # B hears of the new grant through NOTIFY (it forgets which keys have grants);
            # until then its creates go to people, as they may.
            probes = itertools.count(1)
            covered: dict[str, Any] = {}

            async def approved_at_once() -> bool:
                covered.update(await create(on_b, f"covered-{next(probes)}"))
                return covered["approved"] is True

            await eventually(approved_at_once)
            assert covered["user_info"]["channel"] == "grant"
            [grant] = (await admin_b.get("/grants")).json()["items"]
            assert grant["uses"] == 1 and grant["key"] == "first key"

            revoked = await admin_a.delete(f"/grants/{grant['id']}")
            assert revoked.status_code == 200, revoked.text
            assert revoked.json()["live"] is False

            after = await create(on_b, "after")
            assert after["approved"] is None  # to people again, at once
            assert (await admin_b.get("/grants")).json() == {"items": []}
    finally:
        await cluster.stop()
