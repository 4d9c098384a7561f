"""Retention: each project's `retention.decided_after` (routing config) says how long a
decided request keeps its content; after that, `gateway.store.retention.redact` replaces it
by its hashes. Runs daily in every gateway process (`keep_redacting`, a timer like the audit
checkpoints) and on demand (`gateway retention run [--dry-run]`). Pending requests are never
redacted; redacting twice changes nothing, so replicas running it at once agree."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from gateway.core import Core
from gateway.routing import RoutingConfig
from gateway.store import Database, utcnow
from gateway.store import retention as retention_store

log = logging.getLogger(__name__)

PERIOD_SECONDS = 86400.0  # daily
BATCH = 200  # requests redacted per transaction: a writer is never held long


async def run(
    db: Database,
    config: RoutingConfig,
    *,
    now: datetime | None = None,
    project: str | None = None,
    dry_run: bool = False,
) -> dict[str, int]:
    """Redact what is due in each project with a retention (or only `project`); returns how
    many requests each redacted (`dry_run`: would redact)."""
    now = now or utcnow()
    ids = await db.read(retention_store.project_ids)
    counts: dict[str, int] = {}
    for name, settings in sorted(config.projects.items()):
        if settings.retention is None or (project is not None and name != project):
            continue
        if name not in ids:  # configured, but no request made yet
            counts[name] = 0
            continue
        before = now - timedelta(seconds=settings.retention.decided_after)
        counts[name] = await _redact_project(db, ids[name], before, now, dry_run)
    # Every run, not only one that redacted: a reader may have kept the last one from it.
    if not dry_run and not await db.read(retention_store.truncate_wal):
        log.warning(
            "retention: a reader kept the SQLite write-ahead log from being emptied; "
            "content redacted may stay in it until the next run"
        )
    return counts


async def _redact_project(
    db: Database, project_id: int, before: datetime, now: datetime, dry_run: bool
) -> int:
    if dry_run:
        return await db.read(retention_store.count_due, project_id, before)
    done = 0
    while rids := await db.read(retention_store.due, project_id, before, BATCH):
        changed = await db.write(retention_store.redact, rids, now)
        done += changed
        if changed == 0:  # all taken by another replica meanwhile: it goes on from here
            break
    return done


async def keep_redacting(core: Core) -> None:
    """Redact what is due now and then daily, until cancelled."""
    while True:
        if any(p.retention for p in core.config.projects.values()):
            try:
                for name, count in (await run(core.db, core.config)).items():
                    if count:
                        log.info("retention: redacted %d requests of project %r", count, name)
            except Exception as error:  # the next day tries again
                log.warning("retention: %s", error)
        await asyncio.sleep(PERIOD_SECONDS)  # a timer: nothing to wait on instead
