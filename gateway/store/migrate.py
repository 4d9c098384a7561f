"""Apply Alembic migrations to the gateway's database."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from gateway.store.engine import Database, make_engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _upgrade(url: str) -> None:
    config = alembic_config(url)
    engine = make_engine(url, for_migrations=True)
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    finally:
        engine.dispose()


async def upgrade(db: Database) -> None:
    await asyncio.to_thread(_upgrade, db.url)


def _current(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


async def schema_behind(db: Database) -> str | None:
    """Why the schema is not at the latest migration, or None when it is."""
    current = await asyncio.to_thread(_current, db.engine)
    head = ScriptDirectory.from_config(alembic_config(db.url)).get_current_head()
    if current == head:
        return None
    return (
        f"the database schema is at {current or 'nothing'}, not {head}: "
        "run `gateway db upgrade` (`gateway serve` does it too)"
    )
