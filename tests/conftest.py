"""Shared fixtures: the two databases, a running gateway, a webhook receiver."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.store import Database, migrate
from tests.factories import RequestFactory
from tests.services.cli import Cli
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.net import free_port
from tests.services.postgres import ThrowawayPostgres, createdb, dropdb, find_bindir
from tests.services.receiver import WebhookReceiver
from tests.services.smtp_sink import SmtpSink

IN_CI = os.environ.get("CI") == "true"
MIGRATED_TEMPLATE = "gw_template"
# Every setting the gateway or a channel reads from the environment (or ./.env) starts so.
SETTING_PREFIXES = (
    *("GATEWAY_", "SLACK_", "DISCORD_", "SMTP_", "IMAP_", "EMAIL_", "TEAMS_", "TELEGRAM_"),
)
# `make test` runs the suite on two workers (pytest-xdist), then these alone: they time a
# process's start, a takeover or a deadline to the second, which a busy neighbour would skew.
SERIAL = (
    "tests/replicas/",
    "tests/channels/test_platform_outages.py",
    "tests/channels/telegram/test_telegram_outage.py",
    "tests/channels/test_policies_e2e.py",
    "tests/test_policy_durability.py",
    "tests/test_policy_sdk_deadline.py",
    "tests/test_crash.py",
    "tests/unit/test_shutdown.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        if Path(str(item.path)).relative_to(root).as_posix().startswith(SERIAL):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(autouse=True)
def isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test sees only the settings it sets: the developer's shell and a `.env` in the
    repository (which `make run` writes) never change what is tested."""
    for name in list(os.environ):
        if name.startswith(SETTING_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def missing_service(what: str) -> None:
    """Under CI=true a missing service fails the run; elsewhere the test is skipped."""
    if IN_CI:
        pytest.fail(f"{what} is not available and CI=true: run `make test` to provision it")
    pytest.skip(f"{what} is not available")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[ThrowawayPostgres]:
    bindir = find_bindir()
    if bindir is None:
        missing_service("PostgreSQL (initdb, pg_ctl)")
    assert bindir is not None
    server = ThrowawayPostgres(bindir).start()
    try:
        createdb(server, MIGRATED_TEMPLATE)
        asyncio.run(_migrate(server.url(MIGRATED_TEMPLATE)))
        yield server
    finally:
        server.stop()


async def _migrate(url: str) -> None:
    database = Database(url)
    try:
        await migrate.upgrade(database)
    finally:
        await database.aclose()


@pytest.fixture
def pg_url(postgres_server: ThrowawayPostgres) -> Iterator[str]:
    """A fresh database per test, copied from one migrated once per session."""
    name = "t_" + uuid.uuid4().hex[:12]
    createdb(postgres_server, name, template=MIGRATED_TEMPLATE)
    try:
        yield postgres_server.url(name)
    finally:
        dropdb(postgres_server, name)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/gateway.db"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    """The store alone, migrated, on each database."""
    database = Database(db_url)
    await migrate.upgrade(database)
    try:
        yield database
    finally:
        await database.aclose()


@pytest.fixture
async def gateway(db_url: str) -> AsyncIterator[RunningGateway]:
    async with running_gateway(test_settings(db_url)) as running:
        yield running


@pytest.fixture
async def sqlite_gateway(tmp_path: object) -> AsyncIterator[RunningGateway]:
    async with running_gateway(test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db")) as running:
        yield running


@pytest.fixture
async def smtp_sink() -> AsyncIterator[SmtpSink]:
    """An SMTP submission server that requires STARTTLS and AUTH, fresh for each test."""
    sink = SmtpSink()
    try:
        sink.start()
        yield sink
        # Let clients finish their TLS close while this test's loop still runs.
        await sink.wait_until_disconnected()
    finally:
        sink.stop()


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    hook = await WebhookReceiver(port=free_port()).start()
    try:
        yield hook
    finally:
        await hook.stop()


@pytest.fixture
def request_factory() -> RequestFactory:
    """`await request_factory(gateway, "call-1", channel=..., contact=..., settle=True)`."""
    return RequestFactory()


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    # Only this test's settings: none leak in from the developer's shell.
    base = {name: value for name, value in os.environ.items() if not name.startswith("GATEWAY_")}
    env = base | {
        "GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/gw.db",
        "GATEWAY_SECRET_KEY": "test-secret-key",
        "GATEWAY_WEBHOOK_ALLOW_PRIVATE": "true",
        "GATEWAY_LOG_LEVEL": "warning",
    }
    return Cli(workdir=tmp_path, env=env)
