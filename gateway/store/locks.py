"""PostgreSQL advisory locks for singleton ownership (`gateway.runtime.ownership`), on the raw
asyncpg connection that holds them: the lock lives as long as that session."""

from __future__ import annotations

from typing import Any

# Fixed keys of the transaction-level locks that make start-up safe to run N at once.
MIGRATIONS = 0x6877_6D69_6772_6174  # the first process migrates; the rest wait, find it done
FIRST_KEY = 0x6877_6669_7273_746B  # exactly one process makes (and prints) the first key

# Who holds advisory locks on this database, other than us: a bigint key shows in pg_locks
# as classid (its high 32 bits) and objid (its low 32 bits), with objsubid 1.
_HOLDERS = """
SELECT (l.classid::bigint << 32) | l.objid::bigint AS key, a.application_name AS holder
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.pid <> pg_backend_pid()
"""
_TRY = "SELECT k, pg_try_advisory_lock(k) FROM unnest($1::bigint[]) AS k"


def take_for_transaction(conn: Any, key: int) -> None:
    """On PostgreSQL, wait for the lock `key`, held until this transaction ends (SQLite: the
    transaction's BEGIN IMMEDIATE already excludes every other process's writer)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({key})")


async def try_locks(conn: Any, keys: list[int]) -> list[int]:
    """Take whichever of `keys` are free, never waiting; returns those taken."""
    if not keys:
        return []
    return [key for key, got in await conn.fetch(_TRY, keys) if got]


async def holders(conn: Any) -> dict[int, str]:
    """Each lock another session holds, and that session's `application_name`."""
    return {key: holder for key, holder in await conn.fetch(_HOLDERS)}


async def still_held(conn: Any) -> None:
    """A round trip: the session, and so its locks, is alive (raises otherwise)."""
    await conn.fetchval("SELECT 1")


async def release_all(conn: Any) -> None:
    await conn.execute("SELECT pg_advisory_unlock_all()")
