"""0015 chains the events a database already holds: per project, in the order the trail was
always read in (by id), from seq 1; and it downgrades."""

from __future__ import annotations

from datetime import UTC, datetime

from tests import test_migrations
from tests.audit.chain import assert_one_chain_each, gateway_audit, sql
from tests.services.cli import Cli
from tests.test_migrations import migrate_to

AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
# The fixture of tests/test_migrations.py, by assignment (ruff drops a fixture imported by name).
empty_url = test_migrations.empty_url


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


async def test_audit_commands_refuse_a_schema_behind_and_leave_it(empty_url: str, cli: Cli) -> None:
    """verify and export only read: they do not migrate (exit 2, saying why)."""
    migrate_to(empty_url, "0014")
    for action in ("verify", "export"):
        refused = await cli("audit", action, GATEWAY_DATABASE_URL=empty_url)
        assert refused.returncode == 2, refused
        assert "the database schema is at 0014" in refused.stderr
        assert "this command only reads, it does not migrate" in refused.stderr
    assert sql(empty_url, "SELECT version_num FROM alembic_version") == [("0014",)]
