"""What the web console reads and changes, as the core offers it: the console (a channel)
never issues SQL or writes outbox jobs itself. Rows come back as read-only values."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from gateway.core import Core
from gateway.lifecycle import Status
from gateway.policies import evaluator, votes
from gateway.policies.routing import RoutingConfig
from gateway.seam.views import Progress
from gateway.store import console as console_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store import votes as vote_store
from gateway.store.console import Filters, LiveSession, LoginUse
from gateway.store.rows import Delivery, OutboxJob, Request, RequestEvent, WebhookEndpoint
from gateway.store.values import utcnow

__all__ = ["Filters", "LiveSession", "LoginUse"]

Sees = Callable[[str], bool]  # whether the signed-in person may see a project


async def search(
    core: Core,
    *,
    projects: Sequence[str] | None,
    pending: bool,
    filters: Filters,
    user_info: dict[str, Any] | None = None,
) -> list[tuple[Request, str]]:
    """The queue (`pending`) or the history, newest first, with each project's name;
    `filters.mine` keeps what the person answering as `user_info` may still answer."""
    found = await core.db.scan(
        console_store.search_requests, projects=projects, pending=pending, filters=filters
    )
    if not filters.mine:
        return found
    return [] if user_info is None else await waiting_on(core, found, user_info)


async def waiting_on(
    core: Core, found: list[tuple[Request, str]], user_info: dict[str, Any]
) -> list[tuple[Request, str]]:
    """The pending requests among `found` that wait on this person: under a policy, their
    vote would count for a target that is active now and they have not voted yet; without
    one, the route asks them (lists them, or has a target open to anyone, as the console's)."""
    person = votes.person_of(core.config, user_info)
    pending = [(row, project) for row, project in found if row.status == Status.PENDING]
    with_policy = [row.rid for row, _ in pending if row.policy_json is not None]
    voted: set[str] = set()
    if with_policy:  # one query for the listed requests, whatever their number
        voted = await core.db.scan(console_store.voted_on, with_policy, person)
    now = utcnow()
    return [
        (row, project)
        for row, project in pending
        if row.rid not in voted and asks(core.config, row, user_info, person, now=now)
    ]


def asks(
    config: RoutingConfig, row: Request, user_info: dict[str, Any], person: str, *, now: datetime
) -> bool:
    """Whether the request asks this person (`votes.person_of`) at `now`, votes aside."""
    route = json.loads(row.route_json)
    targets = votes.counted_targets(config, route, user_info, person)
    if row.policy_json is None:
        return bool(targets) or any(target.get("responders") is None for target in route)
    tree = evaluator.from_dict(json.loads(row.policy_json))
    return bool(targets & evaluator.active_targets(tree, votes.seconds_since(row, now)))


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


async def standing(core: Core, row: Request) -> Progress | None:
    """Where a request under a policy stands now: its votes replayed against its policy as
    it is (escalation may have widened it since the last vote), with each node active or
    not at this moment; None when the first answer decides."""
    if row.policy_json is None:
        return None
    rows = await core.db.read(vote_store.list_for, row.rid)
    replayed = [
        evaluator.Vote(
            vote.person,
            vote.approve,
            frozenset(json.loads(vote.targets_json)),
            votes.seconds_since(row, vote.at),
        )
        for vote in rows
    ]
    tree = evaluator.from_dict(json.loads(row.policy_json))
    verdict = evaluator.evaluate(tree, replayed, now=votes.seconds_since(row, utcnow()))
    return votes.progress(verdict, rows, json.loads(row.route_json))


async def next_timer(core: Core, rid: str) -> OutboxJob | None:
    """The request's next timer still to run: its deadline, a reminder or an escalation."""
    return await core.db.read(console_store.next_timer, rid)


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
