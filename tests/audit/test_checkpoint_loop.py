"""The checkpoint loop outlives a database error: the next period tries again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gateway.core import Core
from gateway.outbox.checkpoints import keep_publishing
from gateway.store import Database
from tests.factories import RequestFactory
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway


class ReadFailsOnce:
    """The gateway's database, but its first read raises (the database was away)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.failed = False

    async def read(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise ConnectionError("the database is away")
        return await self.db.read(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


async def test_a_failed_read_does_not_end_the_loop(
    sqlite_gateway: RunningGateway,
    request_factory: RequestFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.outbox.checkpoints")
    await request_factory(sqlite_gateway, "c-1")  # the chain grew: a checkpoint is due
    real = sqlite_gateway.core
    settings = real.settings.model_copy(update={"audit_checkpoint_seconds": 0.05})
    flaky = ReadFailsOnce(real.db)
    core = cast(Core, SimpleNamespace(db=flaky, settings=settings))
    loop = asyncio.create_task(keep_publishing(core))
    try:
        await eventually(lambda: _published(caplog, loop))
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    assert flaky.failed
    assert "audit checkpoint: the database is away; trying again" in caplog.text


async def _published(caplog: pytest.LogCaptureFixture, loop: asyncio.Task[None]) -> bool:
    if loop.done():
        loop.result()  # the loop ended: its error fails the test now
    return "audit checkpoint: project 'default' (id 1) seq " in caplog.text
