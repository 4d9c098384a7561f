"""Alembic environment: runs on the connection `gateway.store.migrate` hands over,
or on its own async engine when the alembic CLI is used directly."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel import SQLModel

import gateway.store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)

target_metadata = SQLModel.metadata


def run_on(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def run_with_own_engine(url: str) -> None:
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(run_on)
    await engine.dispose()


connection = context.config.attributes.get("connection")
if connection is not None:
    run_on(connection)
else:
    asyncio.run(run_with_own_engine(context.config.get_main_option("sqlalchemy.url") or ""))
