"""What every command line command on the database does around its work: open the
database, bring its schema to the latest migration (commands that write, as `gateway serve`
does) or refuse when it is behind (commands that only read), run, close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from gateway.settings import Settings
from gateway.store import Database
from gateway.store.migrate import schema_behind, upgrade

T = TypeVar("T")


@asynccontextmanager
async def ready(db: Database, *, migrate: bool) -> AsyncIterator[Database]:
    """`db` at the latest schema, closed at the end; `migrate` False: a command that only
    reads must not rewrite the schema, so one behind is refused (exit 2)."""
    try:
        if migrate:
            await upgrade(db)
        elif (behind := await schema_behind(db)) is not None:
            raise RuntimeError(f"{behind}; this command only reads, it does not migrate")
        yield db
    finally:
        await db.aclose()


def run_on_database(
    settings: Settings, command: Callable[[Database], Awaitable[T]], *, migrate: bool
) -> T:
    """`command` on the settings' database, in its own event loop."""

    async def main() -> T:
        async with ready(Database(settings.database_url), migrate=migrate) as db:
            return await command(db)

    return asyncio.run(main())
