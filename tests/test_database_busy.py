"""A database that stays locked past busy_timeout: 503 with Retry-After, nothing half-written."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from tests.services.inprocess import running_gateway, test_settings


async def test_locked_sqlite_is_503_and_writes_nothing(tmp_path: Path) -> None:
    database = tmp_path / "busy.db"
    async with running_gateway(test_settings(f"sqlite+aiosqlite:///{database}")) as gateway:
        holder = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
        await asyncio.to_thread(holder.execute, "BEGIN IMMEDIATE")  # another writer, stuck
        try:
            async with gateway.client() as client:
                body = {"run_id": "r", "call_id": "blocked", "spec": {"fn": "f", "kwargs": {}}}
                refused = await client.post("/function_calls", json=body)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        assert "retry" in refused.json()["detail"]
        async with gateway.client() as client:
            assert (await client.get("/function_calls/blocked")).status_code == 404
            accepted = await client.post("/function_calls", json=body)  # the retry works
        assert accepted.status_code == 200
