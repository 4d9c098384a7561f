"""Outbox leases across replicas: a worker renews the lease of a job it is still running
(a slow webhook, a rate limit waited out), so another replica never runs it a second time;
only a dead worker's lease runs out (tests/replicas/test_failover_under_load.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.runtime import dispatch
from gateway.security.crypto import new_webhook_secret
from gateway.store.tables import OutboxJob
from gateway.store.values import as_utc
from tests.factories import request_body
from tests.helpers import add_webhook, eventually
from tests.services.inprocess import running_gateway, test_settings
from tests.services.net import free_port
from tests.services.receiver import HoldingReceiver

pytestmark = pytest.mark.postgres

LEASE = timedelta(seconds=1.5)  # short, so that a missed renewal shows within the test
_job = OutboxJob.__table__  # type: ignore[attr-defined]


def webhook_lease(conn: Connection) -> tuple[str, int, datetime | None]:
    """(status, attempts, lease end) of the one webhook job."""
    query = sa.select(_job.c.status, _job.c.attempts, _job.c.locked_until).where(
        _job.c.kind == "webhook"
    )
    status, attempts, locked_until = conn.execute(query).one()
    return str(status), int(attempts), as_utc(locked_until) if locked_until else None


async def test_a_job_running_longer_than_its_lease_stays_with_its_worker(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "LEASE", LEASE)
    monkeypatch.setattr(dispatch, "RENEW_EVERY_SECONDS", LEASE.total_seconds() / 3)
    receiver = HoldingReceiver(port=free_port(), secret=new_webhook_secret())
    await receiver.start()
    settings = test_settings(pg_url, webhook_timeout_seconds=60, outbox_poll_seconds=0.1)
    try:
        async with running_gateway(settings) as first, running_gateway(settings) as second:
            await add_webhook(first, receiver.url)
            async with first.client() as api:
                assert (await api.post("/function_calls", json=request_body("slow"))).is_success
                decided = await api.post(
                    "/agent/function_calls/slow/respond", json={"approved": True}
                )
                assert decided.status_code == 200, decided.text
            await receiver.holding(within=10)  # one worker is running it, and waits on it
            _status, _attempts, claimed_until = await first.core.db.read(webhook_lease)

            assert claimed_until is not None

            async def renewed_past_three_leases() -> bool:
                status, attempts, locked_until = await second.core.db.read(webhook_lease)
                # The other replica polls every 0.1 s: had the lease run out, it took the job.
                assert (status, attempts) == ("running", 1), "run a second time"
                return locked_until is not None and locked_until > claimed_until + 3 * LEASE

            await eventually(renewed_past_three_leases, within=10)
            receiver.release.set()  # the gateways stop without waiting on it
            assert (len(receiver.held), receiver.verified, receiver.refused) == (1, [], [])
    finally:
        receiver.release.set()
        await receiver.stop()
