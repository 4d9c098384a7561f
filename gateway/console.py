"""What the web console reads and changes, as the core offers it: the console (a channel)
never issues SQL or writes outbox jobs itself. Rows come back as read-only values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from gateway.core import Core
from gateway.store import console as console_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.console import Filters, LiveSession, LoginUse
from gateway.store.rows import Delivery, OutboxJob, Request, RequestEvent, WebhookEndpoint

__all__ = ["Filters", "LiveSession", "LoginUse"]

Sees = Callable[[str], bool]  # whether the signed-in person may see a project


async def search(
    core: Core, *, projects: Sequence[str] | None, pending: bool, filters: Filters
) -> list[tuple[Request, str]]:
    """The queue (`pending`) or the history, newest first, with each project's name."""
    return await core.db.scan(
        console_store.search_requests, projects=projects, pending=pending, filters=filters
    )


async def project_names(core: Core, sees: Sees) -> list[str]:
    return [p.name for p in await core.db.read(project_store.list_projects) if sees(p.name)]


async def request(core: Core, rid: str, sees: Sees) -> tuple[Request, str] | None:
    """A request and its project's name, if the person may see that project."""
    row, project = await core.db.read(request_store.get_with_project, rid)
    if row is None or project is None or not sees(project):
        return None
    return row, project


async def trail(core: Core, rid: str) -> tuple[list[Delivery], list[RequestEvent]]:
    """A request's deliveries and audit events."""
    return await core.db.read(console_store.deliveries_and_events, rid)


async def webhooks(
    core: Core, sees: Sees
) -> tuple[dict[int, str], list[WebhookEndpoint], list[OutboxJob]]:
    """Project names by id, the endpoints and the recent deliveries the person may see."""
    projects = {p.id: p.name for p in await core.db.read(project_store.list_projects) if p.id}
    visible = [pid for pid, name in projects.items() if sees(name)]
    hooks = await core.db.read(project_store.list_webhooks)
    jobs = await core.db.scan(console_store.webhook_jobs, visible)
    return projects, [e for e in hooks if e.project_id in visible], jobs


async def redeliver(core: Core, job_id: int, sees: Sees) -> bool:
    """Queue a webhook delivery again with its message id; False if the person cannot."""
    return await core.db.write(console_store.redeliver_webhook, job_id, sees)


async def delivery_errors(core: Core) -> dict[str, tuple[str, datetime]]:
    """Each channel's most recent failed delivery: its error and when."""
    return await core.db.scan(console_store.last_delivery_errors)


# --- sessions and sign-in links (only their hashes are stored)


async def live_session(core: Core, sid_hash: str) -> LiveSession | None:
    return await core.db.read(console_store.live_session, sid_hash)


async def start_session(
    core: Core,
    sid_hash: str,
    *,
    email: str | None,
    name: str,
    projects: Sequence[str] | None,
    ttl: timedelta,
) -> None:
    await core.db.write(
        console_store.create_session, sid_hash, email=email, name=name, projects=projects, ttl=ttl
    )


async def end_session(core: Core, sid_hash: str) -> None:
    await core.db.write(console_store.revoke_session, sid_hash)


async def end_sessions_of(core: Core, email: str | None) -> int:
    return await core.db.write(console_store.revoke_sessions_of, email)


async def set_flash(core: Core, sid_hash: str, path: str, text: str) -> None:
    await core.db.write(console_store.set_flash, sid_hash, path, text)


async def take_flash(core: Core, sid_hash: str, path: str, text: str) -> bool:
    return await core.db.write(console_store.take_flash, sid_hash, path, text)


async def create_login(core: Core, token_hash: str, email: str | None, ttl: timedelta) -> None:
    await core.db.write(console_store.create_login, token_hash, email, ttl)


async def use_login(core: Core, token_hash: str) -> LoginUse:
    return await core.db.write(console_store.use_login, token_hash)
