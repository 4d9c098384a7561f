"""The store survives a PostgreSQL outage: once the database is back, every create and read
succeeds again (a connection that died while idle is replaced at its next use)."""

from __future__ import annotations

import asyncio

import pytest

from tests.services.door import Door
from tests.services.inprocess import running_gateway, test_settings

pytestmark = pytest.mark.postgres


def body(call_id: str) -> dict[str, object]:
    return {"run_id": "r", "call_id": call_id, "spec": {"fn": "f", "kwargs": {}}}


async def test_creates_succeed_again_after_the_database_comes_back(pg_url: str) -> None:
    door = Door()
    port = int(pg_url.rsplit(":", 1)[1].split("/", 1)[0])
    await door.open(port)
    try:
        through_door = pg_url.replace(f":{port}/", f":{door.port}/")
        # No outbox polling while the database is cut: only the creates below write.
        settings = test_settings(through_door, outbox_poll_seconds=60)
        async with running_gateway(settings) as gateway, gateway.client() as client:
            assert (await client.post("/function_calls", json=body("before"))).status_code == 200
            await door.close()
            failed = await client.post("/function_calls", json=body("during"))
            assert failed.status_code == 503  # the database is gone: refused, not stored
            await door.open(port)
            # Every writer and reader thread still holds a connection from before the cut:
            # each finds it dead at its next use and goes on with a new one, so nothing fails.
            threads = gateway.core.db.writer.threads
            codes = [
                (await client.post("/function_calls", json=body(f"after-{n}"))).status_code
                for n in range(threads + 2)
            ]
            together = await asyncio.gather(
                *(client.post("/function_calls", json=body(f"together-{n}")) for n in range(20))
            )
            codes += [response.status_code for response in together]
            assert codes == [200] * len(codes), codes
            reads = [(await client.get("/function_calls/during")).status_code for _ in range(8)]
            assert reads == [404] * 8, reads  # nothing of the refused create exists
    finally:
        await door.close()
