"""0015 chains the events a database already holds: per project, in the order the trail was
always read in (by id), from seq 1; and it downgrades."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from alembic import command

from gateway.store.engine import make_engine
from gateway.store.migrate import alembic_config
from tests.audit.chain import assert_one_chain_each, gateway_audit, sql
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


def trails_before_0015(url: str) -> None:
    """Two projects' requests, their events interleaved as concurrent writes left them."""
    for project_id, name in ((1, "default"), (2, "acme")):
        sql(
            url,
            "INSERT INTO project (id, name, created_at) VALUES (:i, :n, :at)",
            i=project_id,
            n=name,
            at=AT,
        )
    for rid, project_id in (("rid-a", 1), ("rid-b", 2), ("rid-c", 1)):
        sql(
            url,
            "INSERT INTO request (rid, project_id, kind, call_id, run_id, spec_json, body_hash,"
            " route_json, status, requested_at, grantable, editable)"
            " VALUES (:rid, :p, 'function_call', :rid, 'r', '{}', 'h', '[]', 'pending', :at,"
            " false, false)",
            rid=rid,
            p=project_id,
            at=AT,
        )
    for rid in ("rid-a", "rid-b", "rid-c", "rid-a", "rid-b"):
        sql(
            url,
            "INSERT INTO request_event (rid, type, detail_json, at)"
            " VALUES (:rid, 'created', :d, :at)",
            rid=rid,
            d='{"call_id":"x","n":1.5}',
            at=AT,
        )


async def test_0015_chains_the_events_already_stored(empty_url: str) -> None:
    migrate_to(empty_url, "0014")
    trails_before_0015(empty_url)

    migrate_to(empty_url, "head")

    assert assert_one_chain_each(empty_url) == {1: 3, 2: 2}
    order = sql(empty_url, "SELECT id, project_id, seq FROM request_event ORDER BY id")
    assert [(p, seq) for _, p, seq in order] == [(1, 1), (2, 1), (1, 2), (1, 3), (2, 2)]
    verified = await gateway_audit(empty_url, "verify")
    assert verified.returncode == 0 and verified.stdout.count(": intact: ") == 2, verified

    migrate_to(empty_url, "0014", down=True)
    assert sql(empty_url, "SELECT count(*) FROM request_event") == [(5,)]
