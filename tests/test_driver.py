"""Hot inserts straight to the driver (`gateway.store.driver`) store exactly what
SQLAlchemy's own insert stores, and fail with the exceptions SQLAlchemy raises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store import Database, driver, tables
from gateway.store import projects as project_store
from gateway.store.rows import RequestRow, changed, values
from tests.factories import request_row

_request = tables.Request.__table__  # type: ignore[attr-defined]
_event = tables.RequestEvent.__table__  # type: ignore[attr-defined]
_COLUMNS = [column.name for column in _request.columns]


def _two_rows(conn: Connection) -> tuple[RequestRow, RequestRow]:
    project = project_store.ensure_project(conn, "default")
    assert project.id is not None
    odd = changed(
        request_row(project.id, "via-driver"),
        # Every kind of value a request holds: None, booleans, an aware time in another
        # zone, microseconds, text with quotes, non-ASCII and a control character.
        comment='it\'s "fine" — ok\x01',
        grantable=True,
        editable=False,
        responded_at=datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC),
        expires_at=datetime(2026, 3, 4, 7, 6, 7, 1, tzinfo=timezone(timedelta(hours=2))),
        key_id=None,
    )
    return odd, changed(odd, rid=odd.rid[::-1], call_id="via-sqlalchemy")


def _stored(conn: Connection, rid: str) -> dict[str, Any]:
    """The row as the database holds it (SQLite's text timestamps included), less its keys."""
    quoted = ", ".join(conn.dialect.identifier_preparer.quote(name) for name in _COLUMNS)
    mark = driver.with_marks(conn, "?")
    found = driver.rows(conn, f"SELECT {quoted} FROM request WHERE rid = {mark}", (rid,))
    assert len(found) == 1
    return {
        name: value
        for name, value in zip(_COLUMNS, found[0], strict=True)
        if name not in ("rid", "call_id")
    }


async def test_an_insert_through_the_driver_stores_what_sqlalchemy_stores(db: Database) -> None:
    insert = driver.Insert(_request, _COLUMNS, skip_conflicts=True, returning="rid")

    def both(conn: Connection) -> tuple[dict[str, Any], dict[str, Any], Any]:
        ours, theirs = _two_rows(conn)
        returned = insert.one(conn, values(ours))
        conn.execute(sa.insert(_request), values(theirs))
        again = insert.one(conn, values(ours))  # the same rid: skipped, nothing returned
        return _stored(conn, ours.rid), _stored(conn, theirs.rid), (returned, again)

    ours, theirs, (returned, again) = await db.write(both)
    assert ours == theirs
    assert returned is not None and again is None


async def test_many_rows_through_the_driver_store_what_sqlalchemy_stores_in_order(
    db: Database,
) -> None:
    insert = driver.Insert(_event, ("rid", "type", "detail_json", "at", "redacted_at", "seq"))
    at = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    elsewhere = at.astimezone(timezone(timedelta(hours=-5, minutes=-30)))  # another zone

    def write(conn: Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        row, other = _two_rows(conn)
        conn.execute(sa.insert(_request), [values(row), values(other)])
        events: list[dict[str, Any]] = [
            {"type": f"t{n}", "detail_json": 'it\'s "fine" — ok\x01 \\n', "seq": None}
            | {"at": elsewhere if n % 2 else at}
            | {"redacted_at": None if n % 2 else at + timedelta(microseconds=n)}
            for n in range(5)
        ]
        insert.many(conn, [{"rid": row.rid} | event for event in events])
        conn.execute(sa.insert(_event), [{"rid": other.rid} | event for event in events])
        return _events(conn, row.rid), _events(conn, other.rid)

    ours, theirs = await db.write(write)
    assert ours == theirs
    assert [each[0] for each in ours] == [f"t{n}" for n in range(5)]


def _events(conn: Connection, rid: str) -> list[tuple[Any, ...]]:
    """The request's events as the database holds them (text timestamps on SQLite)."""
    mark = driver.with_marks(conn, "?")
    query = "SELECT type, detail_json, at, redacted_at, seq FROM request_event WHERE rid = "
    return driver.rows(conn, f"{query}{mark} ORDER BY id", (rid,))


async def test_a_driver_error_is_sqlalchemys(db: Database) -> None:
    insert = driver.Insert(_request, _COLUMNS)  # no ON CONFLICT: a duplicate fails

    def twice(conn: Connection) -> None:
        row, _ = _two_rows(conn)
        insert.one(conn, values(row))
        insert.one(conn, values(row))

    with pytest.raises(sa.exc.IntegrityError):
        await db.write(twice)


async def test_pipelined_statements_all_apply_and_a_failure_among_them_is_sqlalchemys(
    db: Database,
) -> None:
    """On PostgreSQL the statements go out together and fail only when they are answered,
    at the block's end: the failure is still SQLAlchemy's, and the store goes on working."""
    insert = driver.Insert(_request, _COLUMNS)  # no RETURNING: nothing read, nothing waited
    rows: list[RequestRow] = []

    def both(conn: Connection) -> None:
        rows.extend(_two_rows(conn))
        with driver.pipelined(conn):
            for row in rows:
                insert.one(conn, values(row))

    def again(conn: Connection) -> None:
        with driver.pipelined(conn):
            insert.one(conn, values(changed(rows[0], rid="a-new-one")))
            insert.one(conn, values(rows[1]))  # a duplicate: the block fails

    await db.write(both)
    with pytest.raises(sa.exc.IntegrityError):
        await db.write(again)

    def requests(conn: Connection) -> list[tuple[Any, ...]]:
        return driver.rows(conn, "SELECT rid FROM request ORDER BY rid")

    # The first two stand; of the failed block, nothing (its first insert did go out).
    assert await db.read(requests) == sorted((row.rid,) for row in rows)
