"""Migrations that move data keep what a database already holds: a request posted to Slack
before `delivery.reply_key` still shows its `slack_message_ts` and is found by a reply in its
thread, and a job that waited for a channel still goes out when that channel connects."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic import command
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore

from channels.slack.install import Installations
from channels.slack.settings import SlackSettings
from gateway.doors.records import RecordsDoor
from gateway.seam import ChannelName
from gateway.store import Database
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.engine import make_engine
from gateway.store.migrate import alembic_config
from gateway.wire.output import to_wire
from tests.services.postgres import ThrowawayPostgres, createdb, dropdb

AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    """A database with no tables yet, to be migrated step by step."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/old.db"
        return
    server: ThrowawayPostgres = request.getfixturevalue("postgres_server")
    name = "m_" + uuid.uuid4().hex[:12]
    createdb(server, name)
    try:
        yield server.url(name)
    finally:
        dropdb(server, name)


def migrate_to(url: str, revision: str, *, down: bool = False) -> None:
    config = alembic_config(url)
    engine = make_engine(url, for_migrations=True)
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            (command.downgrade if down else command.upgrade)(config, revision)
    finally:
        engine.dispose()


def run(url: str, sql: str, **values: object) -> list[sa.Row[object]]:
    engine = make_engine(url, for_migrations=True)
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(sql), values)
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


def posted_to_slack_before_0010(url: str) -> None:
    """What 0009 stored for a request posted to Slack, and a job waiting for Slack."""
    run(url, "INSERT INTO project (id, name, created_at) VALUES (1, 'default', :at)", at=AT)
    run(
        url,
        "INSERT INTO request (rid, project_id, kind, call_id, run_id, spec_json, body_hash,"
        " route_json, status, slack_message_ts, requested_at)"
        " VALUES ('rid-1', 1, 'function_call', 'c1', 'r', '{\"fn\":\"f\",\"kwargs\":{}}',"
        " 'h', '[]', 'pending', '1700000000.000100', :at)",
        at=AT,
    )
    run(
        url,
        "INSERT INTO delivery (rid, channel, target_json, status, ref_json, updated_at)"
        " VALUES ('rid-1', 'slack', '{}', 'sent',"
        ' \'{"channel":"C1","ts":"1700000000.000100"}\', :at)',
        at=AT,
    )
    for kind, error in (
        ("deliver", "slack is not connected: retrying: no answer within 10 s"),
        ("update", "slack unreachable: ClientConnectorError"),
    ):
        run(
            url,
            "INSERT INTO outbox_job (kind, rid, project_id, payload_json, status, attempts,"
            " max_attempts, run_at, last_error, created_at, updated_at)"
            " VALUES (:kind, 'rid-1', 1, '{}', 'pending', 0, 8, :later, :error, :at, :at)",
            kind=kind,
            error=error,
            later=datetime(2030, 1, 1, tzinfo=UTC),
            at=AT,
        )


def test_0010_and_0011_keep_slack_posts_and_waiting_jobs(empty_url: str) -> None:
    migrate_to(empty_url, "0009")
    posted_to_slack_before_0010(empty_url)

    migrate_to(empty_url, "head")

    engine = make_engine(empty_url, for_migrations=True)
    try:
        with engine.begin() as conn:
            row = request_store.get_by_rid(conn, "rid-1")
            assert row is not None
            assert to_wire(row)["status"]["slack_message_ts"] == "1700000000.000100"
            found = request_store.find_by_reply_key(conn, "slack", "C1:1700000000.000100")
            assert found == "rid-1"
            assert request_store.find_by_reply_key(conn, "slack", "C2:1700000000.000100") is None
            assert outbox_store.resume_waiting(conn, "slack") == 1  # not the update job
            due = outbox_store.next_due_at(conn)
            assert due is not None and due < datetime(2030, 1, 1, tzinfo=UTC)
    finally:
        engine.dispose()


def test_0010_downgrades_to_the_slack_column(empty_url: str) -> None:
    migrate_to(empty_url, "0009")
    posted_to_slack_before_0010(empty_url)
    migrate_to(empty_url, "head")

    migrate_to(empty_url, "0009", down=True)

    [(ts,)] = run(empty_url, "SELECT slack_message_ts FROM request WHERE rid = 'rid-1'")
    assert ts == "1700000000.000100"


def test_0012_carries_over_the_workspaces_slack_sdk_installed(empty_url: str) -> None:
    """An "Add to Slack" install made before 0012, kept by slack_sdk's own store, still
    gives its workspace's requests their bot token."""
    migrate_to(empty_url, "0011")
    engine = make_engine(empty_url, for_migrations=True)
    try:
        old = SQLAlchemyInstallationStore(client_id="111.222", engine=engine)
        old.create_tables()  # type: ignore[no-untyped-call]  # slack_sdk's, untyped
        for token in ("xoxb-first", "xoxb-reinstalled"):  # the latest install wins
            old.save(Installation(app_id="A1", team_id="T2", user_id="U1", bot_token=token))
    finally:
        engine.dispose()

    migrate_to(empty_url, "head")

    async def found() -> tuple[str | None, str | None]:
        db = Database(empty_url)
        try:
            records = RecordsDoor(db, ChannelName.SLACK)
            settings = SlackSettings(_env_file=None, client_id="111.222", client_secret="s")
            installations = Installations(settings, records)
            return await installations.bot_token("T2"), await installations.bot_token(None)
        finally:
            await db.aclose()

    assert asyncio.run(found()) == ("xoxb-reinstalled", "xoxb-reinstalled")


def test_0013_keeps_what_existing_keys_could_do(
    empty_url: str,
) -> None:
    """A key made before scopes could respond, escalate and read /gateway/v1: it becomes an
    admin key. Keys made after keep the scope they were made with (`gateway keys create`
    makes agent keys unless told otherwise: tests/test_sdk_compat.py uses the first one)."""
    migrate_to(empty_url, "0012")
    run(empty_url, "INSERT INTO project (id, name, created_at) VALUES (1, 'default', :at)", at=AT)
    run(
        empty_url,
        "INSERT INTO api_key (project_id, name, key_hash, prefix, created_at)"
        " VALUES (1, 'old', 'h-old', 'hlgw_old', :at)",
        at=AT,
    )
    migrate_to(empty_url, "head")
    engine = make_engine(empty_url, for_migrations=True)
    try:
        with engine.begin() as conn:
            project_store.insert_key(
                conn,
                project_id=1,
                name="new",
                key_hash="h-new",
                prefix="hlgw_new",
                target=None,
                scope="agent",
            )
            keys = {key.name: (key.scope, key.person) for key, _ in project_store.list_keys(conn)}
    finally:
        engine.dispose()
    assert keys == {"old": ("admin", None), "new": ("agent", None)}
