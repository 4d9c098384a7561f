"""Apply Alembic migrations to the gateway's database."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from gateway.store.engine import Database

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _upgrade(connection: Connection, url: str) -> None:
    config = alembic_config(url)
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


async def upgrade(db: Database) -> None:
    async with db.write() as conn:
        await conn.run_sync(_upgrade, db.url)


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def schema_behind(db: Database) -> str | None:
    """Why the schema is not at the latest migration, or None when it is."""
    async with db.read() as conn:
        current = await conn.run_sync(_current)
    head = ScriptDirectory.from_config(alembic_config(db.url)).get_current_head()
    if current == head:
        return None
    return (
        f"the database schema is at {current or 'nothing'}, not {head}: "
        "run `gateway db upgrade` (`gateway serve` does it too)"
    )
