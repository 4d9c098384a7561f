"""Alembic environment: runs on the connection `gateway.store.migrate` hands over,
or on the gateway's own engine when the alembic CLI is used directly."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import gateway.store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)

target_metadata = SQLModel.metadata


def run_on(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_with_own_engine(url: str) -> None:
    from gateway.store.engine import make_engine

    engine = make_engine(url, for_migrations=True)
    with engine.begin() as conn:
        run_on(conn)
    engine.dispose()


connection = context.config.attributes.get("connection")
if connection is not None:
    run_on(connection)
else:
    run_with_own_engine(context.config.get_main_option("sqlalchemy.url") or "")
