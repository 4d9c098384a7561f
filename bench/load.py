"""Bulk-loading pending function calls straight into a gateway's database, for benchmarks
that need many (the API would take minutes to create 100,000). The rows are what a create
through the API stores for a request routed to the web console alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sqlalchemy.engine import Connection

from gateway.security.crypto import new_rid
from gateway.store import Database, dumps, utcnow
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow

CHUNK = 2000  # rows per write: big enough to load fast, small enough to keep batches short
WEB_ROUTE = dumps([{"channel": "web", "address": {}, "responders": None, "via": "default"}])


def _insert(conn: Connection, project: str, call_ids: Sequence[str]) -> None:
    row = project_store.get_project(conn, project)
    assert row is not None and row.id is not None, f"no project {project!r}"
    now = utcnow()
    for call_id in call_ids:
        spec = {"fn": "send_email", "kwargs": {"to": "ops@example.com", "n": call_id}}
        request = RequestRow(
            rid=new_rid(),
            project_id=row.id,
            kind="function_call",
            call_id=call_id,
            run_id="bench",
            fn="send_email",
            spec_json=dumps(spec),
            body_hash="bulk",
            route_json=WEB_ROUTE,
            status="pending",
            requested_at=now,
        )
        request_store.insert_request(conn, request)


def _vacuum(conn: Connection) -> None:
    conn.exec_driver_sql("VACUUM ANALYZE request")


async def load_pending(
    database_url: str, call_ids: Sequence[str], project: str = "default"
) -> None:
    """Store a pending function call for each call_id, in chunks."""
    db = Database(database_url)
    try:
        writes = [
            db.write(_insert, project, call_ids[start : start + CHUNK])
            for start in range(0, len(call_ids), CHUNK)
        ]
        await asyncio.gather(*writes)
        if not db.is_sqlite:  # what autovacuum does soon after a bulk load, done at once
            await db.scan(_vacuum)
    finally:
        await db.aclose()
