"""Hot statements straight to the database driver.

SQLAlchemy's execution machinery (compiled-cache lookup, parameter processing, the result
object) costs several times the statement itself on the writer's hot path: about 30 µs a
statement on SQLite, where the statement takes about 5. An `Insert` is written once per
dialect, converts its values with the columns' own bind conversions (so it stores exactly
what SQLAlchemy would), and runs on the driver's cursor. A driver error is raised as
SQLAlchemy would have raised it, so callers see the same exceptions either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

Convert = Callable[[Any], Any] | None
_MARK = {"qmark": "?", "format": "%s", "pyformat": "%s", "numeric": "?"}
# PostgreSQL takes up to 65,535 parameters per statement: rows per multi-row INSERT.
_PG_PARAMETERS = 30_000


class Insert:
    """`INSERT INTO table (columns) VALUES (…)`, optionally ON CONFLICT DO NOTHING and
    RETURNING one column, for rows given as mappings by column name."""

    def __init__(
        self,
        table: sa.Table,
        columns: Sequence[str],
        *,
        skip_conflicts: bool = False,
        returning: str | None = None,
    ) -> None:
        self._table, self._columns = table, tuple(columns)
        self._tail = " ON CONFLICT DO NOTHING" if skip_conflicts else ""
        self._returning = returning
        self._built: dict[str, tuple[str, str, list[Convert]]] = {}

    def one(self, conn: Connection, row: Mapping[str, Any]) -> Any:
        """Insert one row; the RETURNING column's value, or None when nothing was inserted."""
        head, marks, converts = self._for(conn)
        sql = f"{head} VALUES {marks}{self._tail}"
        if self._returning is not None:
            sql += f" RETURNING {self._quote(conn, self._returning)}"
        found = execute(conn, sql, _convert(row, self._columns, converts), fetch=True)
        return None if found is None else found[0]

    def many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert several rows: one multi-row statement on PostgreSQL (one round trip and one
        execution), the driver's executemany on SQLite (one prepared statement)."""
        if not rows:
            return
        head, marks, converts = self._for(conn)
        params = [_convert(row, self._columns, converts) for row in rows]
        if conn.dialect.name != "postgresql":
            execute_many(conn, f"{head} VALUES {marks}{self._tail}", params)
            return
        per_statement = max(1, _PG_PARAMETERS // len(self._columns))
        for start in range(0, len(params), per_statement):
            chunk = params[start : start + per_statement]
            sql = f"{head} VALUES {', '.join([marks] * len(chunk))}{self._tail}"
            execute(conn, sql, tuple(value for each in chunk for value in each))

    def _for(self, conn: Connection) -> tuple[str, str, list[Convert]]:
        dialect = conn.dialect
        built = self._built.get(dialect.name)
        if built is None:
            names = ", ".join(self._quote(conn, name) for name in self._columns)
            head = f"INSERT INTO {self._quote(conn, self._table.name)} ({names})"
            marks = "(" + ", ".join([_MARK[dialect.paramstyle]] * len(self._columns)) + ")"
            converts: list[Convert] = [
                self._table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
                for name in self._columns
            ]
            built = self._built[dialect.name] = (head, marks, converts)
        return built

    @staticmethod
    def _quote(conn: Connection, name: str) -> str:
        return str(conn.dialect.identifier_preparer.quote(name))


def _convert(
    row: Mapping[str, Any], columns: tuple[str, ...], converts: list[Convert]
) -> tuple[Any, ...]:
    return tuple(
        value if convert is None or value is None else convert(value)
        for value, convert in zip((row[name] for name in columns), converts, strict=True)
    )


def execute(
    conn: Connection, sql: str, params: Sequence[Any] = (), *, fetch: bool = False
) -> tuple[Any, ...] | None:
    """One statement on the driver's cursor (`params` positional, in the driver's own
    markers); with `fetch`, its first row."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql, params)
        if not fetch:
            return None
        found = cursor.fetchone()
        return None if found is None else tuple(found)
    except conn.dialect.loaded_dbapi.Error as error:
        raise _as_sqlalchemy(conn, cursor, sql, params, error) from error
    finally:
        cursor.close()


def execute_many(conn: Connection, sql: str, params: Sequence[Sequence[Any]]) -> None:
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.executemany(sql, params)
    except conn.dialect.loaded_dbapi.Error as error:
        raise _as_sqlalchemy(conn, cursor, sql, params, error) from error
    finally:
        cursor.close()


def _as_sqlalchemy(
    conn: Connection, cursor: Any, sql: str, params: Any, error: Any
) -> sa.exc.StatementError:
    """The driver's error as SQLAlchemy raises it (IntegrityError, OperationalError, …;
    the API answers 503 for a database that is down)."""
    dropped = conn.dialect.is_disconnect(error, conn.connection.dbapi_connection, cursor)
    wrapped: sa.exc.StatementError = sa.exc.DBAPIError.instance(
        sql,
        params,
        error,
        conn.dialect.loaded_dbapi.Error,
        connection_invalidated=dropped,
        dialect=conn.dialect,
    )
    return wrapped
