"""`GET /metrics`: Prometheus text (read with prometheus_client's own parser) whose counters
move as requests are created, decided and expired through the real API; off by default."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from gateway.runtime.metrics import outbox_families, owns, singleton_family
from gateway.store import tables
from gateway.store.metrics import Snapshot
from tests.factories import RequestFactory
from tests.helpers import add_webhook, eventually, outbox_idle
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.receiver import WebhookReceiver

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
TOKEN = "metrics-test-token"


@pytest.fixture
async def metered(db_url: str) -> AsyncIterator[RunningGateway]:
    async with running_gateway(test_settings(db_url, metrics_enabled=True)) as running:
        yield running


async def scrape(gateway: RunningGateway, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as client:
        return await client.get("/metrics", headers=headers)


async def samples(gateway: RunningGateway) -> Samples:
    response = await scrape(gateway)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    found: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


async def respond(gateway: RunningGateway, path: str, body: dict[str, Any]) -> None:
    async with gateway.client() as client:
        response = await client.post(path, json=body)
    assert response.status_code == 200, response.text


async def test_counters_move_as_requests_are_created_and_decided(
    metered: RunningGateway, request_factory: RequestFactory, receiver: WebhookReceiver
) -> None:
    await add_webhook(metered, receiver.url)
    before = await samples(metered)
    assert value(before, "gateway_database_up") == 1
    assert value(before, "gateway_requests_created_total", kind="function_call", channel="web") in (
        None,
        0,
    )

    for call_id in ("m-1", "m-2"):
        await request_factory(metered, call_id)
    await request_factory(metered, "m-3", contact=True)
    created = await samples(metered)
    assert (
        value(created, "gateway_requests_created_total", kind="function_call", channel="web") == 2
    )
    assert (
        value(created, "gateway_requests_created_total", kind="human_contact", channel="web") == 1
    )
    assert value(created, "gateway_requests_pending", kind="function_call", older_than="0") == 2
    assert value(created, "gateway_requests_pending", kind="function_call", older_than="60") == 0

    await respond(metered, "/agent/function_calls/m-1/respond", {"approved": True})
    await respond(metered, "/agent/human_contacts/m-3/respond", {"response": "eu-west"})
    await eventually(lambda: outbox_idle(metered))  # both webhooks went out
    decided = await samples(metered)
    fc_api = {"kind": "function_call", "channel": "api"}
    assert value(decided, "gateway_requests_decided_total", **fc_api, outcome="approved") == 1
    assert (
        value(
            decided,
            "gateway_requests_decided_total",
            kind="human_contact",
            channel="api",
            outcome="responded",
        )
        == 1
    )
    assert value(decided, "gateway_requests_pending", kind="function_call", older_than="0") == 1
    assert value(decided, "gateway_requests_pending", kind="human_contact", older_than="0") == 0
    assert value(decided, "gateway_decision_latency_seconds_count", **fc_api) == 1
    assert value(decided, "gateway_decision_latency_seconds_bucket", **fc_api, le="+Inf") == 1
    assert value(decided, "gateway_decision_latency_seconds_bucket", **fc_api, le="60") == 1
    assert 0 <= (value(decided, "gateway_decision_latency_seconds_sum", **fc_api) or -1) < 60
    webhook_ok = {"kind": "webhook", "outcome": "succeeded"}
    assert value(decided, "gateway_outbox_attempts_total", **webhook_ok) == 2
    assert value(decided, "gateway_outbox_attempts_total", kind="webhook", outcome="failed") == 0
    assert value(decided, "gateway_outbox_oldest_due_seconds") == 0
    assert value(decided, "gateway_deliveries", channel="web", status="sent") == 3


async def test_an_expired_request_counts_as_expired_not_decided(
    metered: RunningGateway, request_factory: RequestFactory
) -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    await request_factory(metered, "x-1", fn="read_table", expires_at=soon)
    async with metered.client() as client:  # the long-poll answers when the deadline passes
        waited = await client.get("/function_calls/x-1", params={"wait": 10})
    assert waited.json()["status"]["user_info"]["channel"] == "gateway"

    found = await samples(metered)
    assert value(found, "gateway_requests_expired_total", kind="function_call", channel="web") == 1
    assert not [key for key in found if ("channel", "gateway") in key[1]]
    assert value(found, "gateway_outbox_attempts_total", kind="timer", outcome="succeeded") == 1


async def test_a_nul_stored_in_user_info_before_the_api_refused_it_is_counted(
    metered: RunningGateway, request_factory: RequestFactory
) -> None:
    """PostgreSQL refuses to read any field of a JSON document holding the escape \\u0000:
    a decision stored with one (older data; the API now refuses it) must not fail scrapes."""
    created = await request_factory(metered, "nul-1")
    await respond(metered, "/agent/function_calls/nul-1/respond", {"approved": True})

    def nul_in_name(tx: Any) -> None:
        request = tables.Request.__table__  # type: ignore[attr-defined]
        held = '{"channel": "api", "name": "a\\u0000b"}'
        tx.execute(
            sa.update(request).where(request.c.rid == created.rid).values(user_info_json=held)
        )

    await metered.core.db.write(nul_in_name)
    found = await samples(metered)
    fc_api = {"kind": "function_call", "channel": "api"}
    assert value(found, "gateway_requests_decided_total", **fc_api, outcome="approved") == 1


async def test_metrics_are_off_unless_enabled(sqlite_gateway: RunningGateway) -> None:
    response = await scrape(sqlite_gateway)
    assert response.status_code == 404
    assert "gateway_" not in response.text


async def test_a_metrics_token_is_required_when_set(tmp_path: object) -> None:
    settings = test_settings(
        f"sqlite+aiosqlite:///{tmp_path}/gw.db", metrics_enabled=True, metrics_token=TOKEN
    )
    async with running_gateway(settings) as gateway:
        assert (await scrape(gateway)).status_code == 401
        assert (await scrape(gateway, Authorization="Bearer nope")).status_code == 401
        assert (await scrape(gateway, Authorization=f"Bearer {gateway.api_key}")).status_code == 401
        allowed = await scrape(gateway, Authorization=f"Bearer {TOKEN}")
    assert allowed.status_code == 200
    assert "gateway_database_up 1.0" in allowed.text


def test_ownership_comes_from_channel_state() -> None:
    alone = {"name": "discord", "connection": "connected", "owner": None, "replica": None}
    owner = {"name": "slack", "connection": "connected (owned by this replica, a:1)"} | {
        "owner": "a:1",
        "replica": "a:1",
    }
    standby = {"name": "email", "connection": "standby (owned by a:1)"} | {
        "owner": "a:1",
        "replica": "b:2",
    }
    without = {"name": "web", "connection": None, "owner": None, "replica": None}
    assert [owns(state) for state in (alone, owner, standby, without)] == [
        True,
        True,
        False,
        False,
    ]
    family = singleton_family([alone, owner, standby, without])
    assert {s.labels["singleton"]: s.value for s in family.samples} == {
        "discord": 1.0,
        "slack": 1.0,
        "email": 0.0,
    }


def test_attempts_by_outcome_follow_each_jobs_status() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    snap = Snapshot(
        requests=[],
        routed=[],
        deliveries=[],
        # kind, status, jobs, attempts, due now, oldest due run_at
        jobs=[
            ("webhook", "done", 2, 5, 0, None),  # 2 worked after 3 failures between them
            ("webhook", "dead", 1, 8, 0, None),  # 8 failures
            ("webhook", "pending", 1, 2, 1, now - timedelta(seconds=90)),  # 2 failed, due
            ("deliver", "running", 1, 1, 0, None),  # its first attempt is under way
        ],
        now=now,
    )
    found = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in outbox_families(snap)
        for sample in family.samples
    }
    attempts = "gateway_outbox_attempts_total"
    assert found[(attempts, (("kind", "webhook"), ("outcome", "succeeded")))] == 2
    assert found[(attempts, (("kind", "webhook"), ("outcome", "failed")))] == 13
    assert found[(attempts, (("kind", "deliver"), ("outcome", "failed")))] == 0
    assert found[("gateway_outbox_oldest_due_seconds", ())] == 90
    assert found[("gateway_outbox_due_jobs", (("kind", "webhook"),))] == 1
    assert ("gateway_outbox_jobs", (("kind", "webhook"), ("status", "done"))) not in found
