"""Hot statements straight to the database driver.

SQLAlchemy's execution machinery (compiled-cache lookup, parameter processing, the result
object) costs several times the statement itself on the writer's hot path: about 30 µs a
statement on SQLite, where the statement takes about 5. An `Insert` is written once per
dialect, converts its values with the columns' own bind conversions (so it stores exactly
what SQLAlchemy would), and runs on the driver's cursor. A driver error is raised as
SQLAlchemy would have raised it, so callers see the same exceptions either way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic_core
import sqlalchemy as sa
from sqlalchemy.engine import Connection

Convert = Callable[[Any], Any]
_MARK = {"qmark": "?", "format": "%s", "pyformat": "%s", "numeric": "?"}


@dataclass(frozen=True)
class _Built:
    """An `Insert` for one dialect."""

    one: str  # one row (with RETURNING, if any)
    many: str  # several rows: executemany's on SQLite, one statement over JSON on PostgreSQL
    converts: tuple[tuple[int, Convert], ...]  # (column index, bind conversion) where needed


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
        self._skip_conflicts, self._returning = skip_conflicts, returning
        self._built: dict[str, _Built] = {}

    def one(self, conn: Connection, row: Mapping[str, Any]) -> Any:
        """Insert one row; the RETURNING column's value, or None when nothing was inserted."""
        built = self._for(conn)
        fetch = self._returning is not None
        found = execute(conn, built.one, self._values(built, row), fetch=fetch)
        return None if found is None else found[0]

    def many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert several rows: the driver's executemany on SQLite (one prepared statement);
        on PostgreSQL one statement of the same text whatever the count, over one JSON
        parameter (one round trip, one execution, and the driver prepares it once)."""
        if not rows:
            return
        built = self._for(conn)
        values = [self._values(built, row) for row in rows]
        if conn.dialect.name == "postgresql":
            records = [dict(zip(self._columns, each, strict=True)) for each in values]
            # pydantic-core's JSON: C, ~4x the standard library's; a time keeps its offset.
            execute(conn, built.many, (pydantic_core.to_json(records).decode(),))
        else:
            execute_many(conn, built.many, values)

    def _values(self, built: _Built, row: Mapping[str, Any]) -> list[Any]:
        values = [row[name] for name in self._columns]
        for index, convert in built.converts:
            if values[index] is not None:
                values[index] = convert(values[index])
        return values

    def _for(self, conn: Connection) -> _Built:
        built = self._built.get(conn.dialect.name)
        if built is None:
            built = self._built[conn.dialect.name] = self._build(conn.dialect)
        return built

    def _build(self, dialect: sa.Dialect) -> _Built:
        quote = dialect.identifier_preparer.quote
        columns = [self._table.c[name] for name in self._columns]
        names = ", ".join(quote(column.name) for column in columns)
        head = f"INSERT INTO {quote(self._table.name)} ({names})"
        tail = " ON CONFLICT DO NOTHING" if self._skip_conflicts else ""
        marks = ", ".join([_MARK[dialect.paramstyle]] * len(columns))
        one = many = f"{head} VALUES ({marks}){tail}"
        if self._returning is not None:
            one += f" RETURNING {quote(self._returning)}"
        if dialect.name == "postgresql":
            # One JSON text holds every row: dumping it is C code, where the driver's own
            # array parameters (unnest) cost more Python than the rest of the batch.
            fields = ", ".join(
                f"{quote(c.name)} {c.type.compile(dialect=dialect)}" for c in columns
            )
            many = f"{head} SELECT {names} FROM json_to_recordset(%s) AS x({fields}){tail}"
        processors = [c.type.dialect_impl(dialect).bind_processor(dialect) for c in columns]
        converts = tuple((i, p) for i, p in enumerate(processors) if p is not None)
        return _Built(one, many, converts)


def with_marks(conn: Connection, sql: str) -> str:
    """`sql` written with `?` markers, in the driver's own."""
    return sql.replace("?", _MARK[conn.dialect.paramstyle])


def rows(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Every row of a query (`sql` in the driver's markers, see `with_marks`)."""
    with _cursor(conn, sql, params) as cursor:
        cursor.execute(sql, params)
        return [tuple(row) for row in cursor.fetchall()]


def execute(
    conn: Connection, sql: str, params: Sequence[Any] = (), *, fetch: bool = False
) -> tuple[Any, ...] | None:
    """One statement on the driver's cursor (`params` positional, in the driver's own
    markers); with `fetch`, its first row."""
    with _cursor(conn, sql, params) as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone() if fetch else None
        return None if found is None else tuple(found)


def execute_many(conn: Connection, sql: str, params: Sequence[Sequence[Any]]) -> None:
    with _cursor(conn, sql, params) as cursor:
        cursor.executemany(sql, params)


@contextlib.contextmanager
def pipelined(conn: Connection) -> Iterator[None]:
    """On PostgreSQL, the statements run inside go out together (psycopg's pipeline mode):
    those whose results nobody reads cost one round trip between them, at the end. A read
    still waits for its own answer. Elsewhere, nothing changes."""
    if conn.dialect.name != "postgresql":
        yield
        return
    try:
        with conn.connection.dbapi_connection.pipeline():  # type: ignore[union-attr]
            yield
    except conn.dialect.loaded_dbapi.Error as error:  # a statement's, known at the end
        raise _as_sqlalchemy(conn, None, "(pipelined statements)", (), error) from error


@contextlib.contextmanager
def _cursor(conn: Connection, sql: str, params: Any) -> Iterator[Any]:
    """The driver's cursor, closed afterwards; a driver error raised as SQLAlchemy's."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        yield cursor
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
