"""The writer survives a PostgreSQL outage: once the database is back, creates succeed again
(a dead connection is dropped after its batch fails, not reused for ever)."""

from __future__ import annotations

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
            # Each writer thread may fail once on the connection it held before the cut.
            codes = []
            for attempt in range(gateway.core.db.writer.threads + 2):
                codes.append(
                    (
                        await client.post("/function_calls", json=body(f"after-{attempt}"))
                    ).status_code
                )
            assert codes[-1] == 200 and 200 in codes[: gateway.core.db.writer.threads + 1], codes
            assert set(codes) <= {200, 503}, codes
            # A reader's stale connection fails once too; nothing of the refused create exists.
            reads = [(await client.get("/function_calls/during")).status_code for _ in range(3)]
            assert reads[-1] == 404 and set(reads) <= {404, 503}, reads
    finally:
        await door.close()
