"""A write's new audit events wait in its transaction and are inserted, linked, as it
commits: until then the write's own reads of the trail see them, retention's redaction
reaches them, and a rolled-back attempt leaves none behind."""

from __future__ import annotations

import asyncio
import threading

import pytest
from sqlalchemy.engine import Connection

from gateway.store import Database, audit, utcnow
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.rows import EventRow
from gateway.vocabulary import AuditEvent
from tests.factories import request_row
from tests.helpers import eventually


def _new(conn: Connection, call_id: str) -> str:
    project = project_store.ensure_project(conn, "default")
    assert project.id is not None
    row = request_row(project.id, call_id)
    assert request_store.insert_request(conn, row)
    return row.rid


async def test_a_write_reads_its_own_new_events_and_they_commit_linked(db: Database) -> None:
    def write(conn: Connection) -> tuple[str, list[EventRow]]:
        rid = _new(conn, "c1")
        request_store.add_event(conn, rid, AuditEvent.CREATED, {"call_id": "c1"})
        request_store.add_event(conn, rid, AuditEvent.DECIDED, {"idempotency": "k"})
        return rid, request_store.list_events(conn, rid)

    rid, seen = await db.write(write)
    assert [event.type for event in seen] == [AuditEvent.CREATED, AuditEvent.DECIDED]
    stored = await db.read(request_store.list_events, rid)
    assert [event.type for event in stored] == [AuditEvent.CREATED, AuditEvent.DECIDED]
    assert [event.seq for event in stored] == [1, 2]
    assert stored[1].prev_hash == stored[0].hash
    assert all(event.digest == kept.digest for event, kept in zip(seen, stored, strict=True))


async def test_redaction_reaches_events_not_yet_inserted(db: Database) -> None:
    def write(conn: Connection) -> tuple[str, int]:
        rid = _new(conn, "c2")
        request_store.add_event(conn, rid, AuditEvent.DECIDED, {"comment": "secret text"})
        return rid, audit.redact_events(conn, rid, utcnow())

    rid, redacted = await db.write(write)
    assert redacted == 1
    [event] = await db.read(request_store.list_events, rid)
    assert "secret text" not in event.detail_json and event.redacted_at is not None


async def test_a_rolled_back_attempt_leaves_no_event(db: Database) -> None:
    """One write of a batch raises: the batch runs again without it, and only the events
    of the writes that committed are stored, each once."""
    rid = await db.write(_new, "c3")

    def kept(conn: Connection) -> None:
        request_store.add_event(conn, rid, AuditEvent.ROUTED, {"targets": 1})

    def failing(conn: Connection) -> None:
        request_store.add_event(conn, rid, AuditEvent.ESCALATED, {"escalation_msg": "x"})
        raise RuntimeError("this write fails")

    release, holding = threading.Event(), threading.Event()

    def hold(_conn: Connection) -> None:
        holding.set()
        release.wait(30)

    held = asyncio.ensure_future(db.write_for(rid, hold))  # the next two queue behind it
    await asyncio.to_thread(holding.wait, 30)
    outcomes = asyncio.gather(
        db.write_for(rid, kept), db.write_for(rid, failing), return_exceptions=True
    )

    async def both_queued() -> bool:
        return db.writer.pending() == 2

    await eventually(both_queued)
    release.set()
    await held
    done = await outcomes
    assert done[0] is None and isinstance(done[1], RuntimeError)
    stored = await db.read(request_store.list_events, rid)
    assert [event.type for event in stored] == [AuditEvent.ROUTED]
    assert stored[0].seq == 1


async def test_an_event_outside_the_writer_is_refused_not_lost(db: Database) -> None:
    """Only the writer's transactions link and insert queued events: anywhere else an event
    would silently never reach the table, so writing one there fails loudly."""
    rid = await db.write(_new, "c4")
    with db.engine.begin() as conn, pytest.raises(RuntimeError, match="writer"):
        request_store.add_event(conn, rid, AuditEvent.ROUTED, {"targets": 1})
    assert await db.read(request_store.list_events, rid) == []
