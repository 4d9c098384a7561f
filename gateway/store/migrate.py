"""Apply Alembic migrations to the gateway's database."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from gateway.store import locks
from gateway.store.engine import Database, make_engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
log = logging.getLogger(__name__)
# Alembic says what it does at INFO (ten lines on a first start): only worth reading when a
# migration changes a database that already has a schema, and so data.
logging.getLogger("alembic").setLevel(logging.WARNING)


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
            # Replicas starting together take turns here: the first migrates, the others
            # then find the schema at head (SQLite: BEGIN IMMEDIATE does the same).
            locks.take_for_transaction(connection, locks.MIGRATIONS)
            current = MigrationContext.configure(connection).get_current_revision()
            head = ScriptDirectory.from_config(config).get_current_head()
            if current == head:
                return
            config.attributes["connection"] = connection
            with _told(current, head):
                command.upgrade(config, "head")
    finally:
        engine.dispose()


@contextlib.contextmanager
def _told(current: str | None, head: str | None) -> Iterator[None]:
    """Alembic's lines at INFO while it migrates a database that has a schema already."""
    if current is None:
        log.debug("creating the database schema (%s)", head)
        yield
        return
    log.info("migrating the database schema from %s to %s", current, head)
    alembic = logging.getLogger("alembic")
    alembic.setLevel(logging.INFO)
    try:
        yield
    finally:
        alembic.setLevel(logging.WARNING)


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
