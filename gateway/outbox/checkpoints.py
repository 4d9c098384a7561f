"""Audit checkpoints: every `GATEWAY_AUDIT_CHECKPOINT_SECONDS`, each project's audit chain
head (its last seq and link, `gateway.store.audit`) is published, when it grew since the last
time: a log line, and an `audit.checkpoint` webhook to each endpoint that asked for that
event by name. A copy kept outside the database then proves that the history up to it was
not rewritten since (`gateway audit verify --checkpoint SEQ:HASH`).

Every replica runs the loop; the checkpoint is recorded under a lock, so one of them
publishes it each period."""

from __future__ import annotations

import asyncio
import json
import logging

from gateway.core import Core
from gateway.outbox.webhooks import CHECKPOINT_EVENT, new_message_id
from gateway.store import Tx, dumps, utcnow
from gateway.store import audit as audit_store
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.vocabulary import JobKind

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0  # after a failed attempt (the database is away)


async def keep_publishing(core: Core) -> None:
    """Publish checkpoints as they come due, until cancelled."""
    period = core.settings.audit_checkpoint_seconds
    while True:
        try:  # every database call: one failing must not end the loop
            due_in = await core.db.read(audit_store.checkpoint_due_in, utcnow(), period)
            await asyncio.sleep(due_in)  # a timer: nothing to wait on instead
            if not await core.db.read(audit_store.heads_grew):  # no write if nothing changed
                await asyncio.sleep(period)
                continue
            published = await core.db.write(publish, period, core.settings.webhook_delays)
        except Exception as error:  # the next attempt tries again
            log.warning("audit checkpoint: %s; trying again in %.0f s", error, RETRY_SECONDS)
            await asyncio.sleep(min(period, RETRY_SECONDS))
            continue
        for head in published:
            log.info(
                "audit checkpoint: project %r (id %d) seq %d hash %s",
                *(head.project, head.project_id, head.seq, head.hash),
            )
        if not published:  # nothing grew, or another replica published: a period on
            await asyncio.sleep(period)


def publish(
    conn: Tx, period_seconds: float, schedule: tuple[float, ...]
) -> list[audit_store.Published]:
    """Record the heads due, and queue their webhooks, in one transaction."""
    published = audit_store.take_checkpoints(conn, utcnow(), period_seconds)
    for head in published:
        body = dumps(
            {
                "type": CHECKPOINT_EVENT,
                "event": {
                    "project": head.project,
                    "project_id": head.project_id,
                    "seq": head.seq,
                    "hash": head.hash,
                    "at": audit_store.timestamp(head.at),
                },
                "is_test": False,
            }
        )
        for endpoint in project_store.list_webhooks(conn, head.project_id, enabled_only=True):
            if CHECKPOINT_EVENT in json.loads(endpoint.events_json):  # by name only
                payload = {"endpoint_id": endpoint.id, "msg_id": new_message_id(), "body": body}
                outbox_store.enqueue(
                    conn,
                    JobKind.WEBHOOK,
                    payload,
                    project_id=head.project_id,
                    max_attempts=len(schedule),
                )
    return published
