"""`/healthz` is liveness (no database), `/readyz` readiness: 503 while the database is down
or behind the latest migration, 200 once it is back; every answer carries a request id.
Anyone sees whether it is ready and which checks failed; why (errors, hosts, ports, missing
settings, channel states) only an admin key or GATEWAY_METRICS_TOKEN sees."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory

from gateway.store import migrate
from tests.fakes.discord import FakeDiscord
from tests.helpers import eventually
from tests.services.door import Door
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.net import free_port
from tests.services.postgres import ThrowawayPostgres

METRICS_TOKEN = "metrics-token-for-tests"


async def get(gateway: RunningGateway, path: str, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as client:
        return await client.get(path, headers=headers)


async def readyz_as(gateway: RunningGateway, token: str) -> httpx.Response:
    return await get(gateway, "/readyz", Authorization=f"Bearer {token}")


@pytest.mark.postgres
async def test_readyz_is_503_while_the_database_is_down_then_200(
    postgres_server: ThrowawayPostgres, pg_url: str
) -> None:
    door = Door()  # the gateway reaches PostgreSQL only through this relay, which we cut
    await door.open(postgres_server.port)
    url = pg_url.replace(f":{postgres_server.port}/", f":{door.port}/")
    try:
        # No outbox claims (writes) while the door is shut: readiness is what is tested here,
        # and the writer does not yet replace a connection lost in an outage (reported).
        settings = test_settings(
            url, metrics_enabled=True, metrics_token=METRICS_TOKEN, outbox_poll_seconds=60
        )
        async with running_gateway(settings) as gateway:
            up = await readyz_as(gateway, METRICS_TOKEN)
            assert up.status_code == 200, up.text
            assert up.json()["checks"] == {"database": "ok", "schema": "ok"}

            await door.close()
            down = await readyz_as(gateway, METRICS_TOKEN)
            assert down.status_code == 503, down.text
            assert down.json()["status"] == "not ready"
            assert down.json()["checks"]["database"].startswith("unreachable")
            assert "database" in down.json()["detail"]
            anonymous = await get(gateway, "/readyz")
            assert anonymous.status_code == 503
            assert anonymous.json() == {"status": "not ready", "failed": ["database"]}
            assert str(door.port) not in anonymous.text
            assert (await get(gateway, "/healthz")).status_code == 200  # alive all the same
            scraped = await scrape(gateway)  # this replica's own figures only
            assert scraped.status_code == 200
            assert "gateway_database_up 0.0" in scraped.text
            assert "gateway_requests_pending" not in scraped.text

            await door.open(postgres_server.port)
            back = await get(gateway, "/readyz")
            assert back.status_code == 200, back.text
            assert back.json() == {"status": "ready", "failed": []}
            assert "gateway_database_up 1.0" in (await scrape(gateway)).text
    finally:
        await door.close()


async def scrape(gateway: RunningGateway) -> httpx.Response:
    return await get(gateway, "/metrics", Authorization=f"Bearer {METRICS_TOKEN}")


async def test_readyz_is_503_while_the_schema_is_behind(tmp_path: Path) -> None:
    path = tmp_path / "gw.db"
    async with running_gateway(test_settings(f"sqlite+aiosqlite:///{path}")) as gateway:
        head = _revision(path)
        _set_revision(path, "0001_initial_schema")
        behind = await readyz_as(gateway, gateway.api_key)  # an admin key
        anonymous = await get(gateway, "/readyz")
        _set_revision(path, head)
        again = await readyz_as(gateway, gateway.api_key)
    assert behind.status_code == 503
    assert behind.json()["checks"]["database"] == "ok"
    assert "gateway db upgrade" in behind.json()["checks"]["schema"]
    assert anonymous.status_code == 503
    assert anonymous.json() == {"status": "not ready", "failed": ["schema"]}
    assert again.status_code == 200 and again.json()["checks"]["schema"] == "ok"


def _revision(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        [(revision,)] = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    head = ScriptDirectory.from_config(
        migrate.alembic_config(f"sqlite:///{path}")
    ).get_current_head()
    assert revision == head
    return str(revision)


def _set_revision(path: Path, revision: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))


async def test_readyz_reports_every_channel_to_an_admin_key(
    sqlite_gateway: RunningGateway,
) -> None:
    ready = (await readyz_as(sqlite_gateway, sqlite_gateway.api_key)).json()
    channels = {channel["name"]: channel for channel in ready["channels"]}
    assert set(channels) == set(sqlite_gateway.core.channels)
    assert channels["web"]["configured"] is True
    assert channels["discord"]["missing"] == ["DISCORD_BOT_TOKEN"]  # reported, still ready
    assert ready["status"] == "ready"


async def test_anonymous_readyz_names_no_host_port_error_or_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discord is pointed at an internal address that refuses: its state names the host and
    port, and an admin key or the metrics token reads it there. Anonymous callers, an agent's
    key and a wrong token get only the status and the failed checks (none: a platform
    never makes the gateway unready)."""
    refusing = free_port()
    monkeypatch.setenv("DISCORD_BOT_TOKEN", FakeDiscord.TOKEN)
    monkeypatch.setenv("DISCORD_API_URL", f"http://127.0.0.1:{refusing}/api/v10")
    monkeypatch.setenv("DISCORD_GATEWAY_URL", f"ws://127.0.0.1:{refusing}/gateway")
    settings = test_settings(
        f"sqlite+aiosqlite:///{tmp_path}/gw.db",
        metrics_token=METRICS_TOKEN,
        channel_connect_timeout_seconds=1,
        channel_retry_cap_seconds=1,
    )
    async with running_gateway(settings) as gateway:

        async def discord_retrying() -> bool:
            ready = (await readyz_as(gateway, METRICS_TOKEN)).json()
            states = {c["name"]: c.get("connection") or "" for c in ready["channels"]}
            return states["discord"].startswith("retrying")

        await eventually(discord_retrying)
        detailed = await readyz_as(gateway, gateway.api_key)  # an admin key
        assert str(refusing) in detailed.text and "SLACK_BOT_TOKEN" in detailed.text
        agent = await gateway.new_key("default")
        for headers in ({}, {"Authorization": f"Bearer {agent}"}, {"Authorization": "Bearer x"}):
            anonymous = await get(gateway, "/readyz", **headers)
            assert anonymous.status_code == 200, anonymous.text
            assert anonymous.json() == {"status": "ready", "failed": []}
            for secret in (str(refusing), "127.0.0.1", "retrying", "_TOKEN", "discord"):
                assert secret.lower() not in anonymous.text.lower(), (headers, anonymous.text)


async def test_healthz_keeps_its_paths_and_answer(sqlite_gateway: RunningGateway) -> None:
    for path in ("/healthz", "/humanlayer/v1/healthz"):
        response = await get(sqlite_gateway, path)
        assert (response.status_code, response.json()) == (200, {"status": "ok"})


async def test_each_answer_carries_a_request_id(sqlite_gateway: RunningGateway) -> None:
    kept = await get(sqlite_gateway, "/healthz", **{"X-Request-ID": "lb-7f3a.1"})
    assert kept.headers["x-request-id"] == "lb-7f3a.1"
    made = await get(sqlite_gateway, "/healthz")
    other = await get(sqlite_gateway, "/healthz")
    assert len(made.headers["x-request-id"]) == 16
    assert made.headers["x-request-id"] != other.headers["x-request-id"]
    odd = await get(sqlite_gateway, "/healthz", **{"X-Request-ID": "two words"})
    assert odd.headers["x-request-id"] != "two words"
