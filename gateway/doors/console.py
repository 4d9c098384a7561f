"""The console door (`gateway.seam.console.Console`): what the web console reads and changes,
as the core offers it. The console never issues SQL or writes outbox jobs itself, and gets
request views, never store rows. Standing grants are listed and revoked through
`gateway.policies.grants`, here limited to the projects the person sees and to what they
may revoke."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from gateway.core import ANY, Core, Signal
from gateway.doors import insights
from gateway.lifecycle import Status
from gateway.policies import evaluator, grants, votes
from gateway.routing import Person, RoutingConfig, Rule, rule_label
from gateway.runtime.channel_states import channel_states
from gateway.seam.connections import ChannelState
from gateway.seam.console import (
    ConsolePerson,
    DeliveryView,
    EndpointView,
    EventView,
    Filters,
    KeyView,
    ListedGrant,
    LiveSession,
    LoginUse,
    Revoked,
    RuleView,
    Sees,
    Standing,
    TimerView,
    WebhookJobView,
)
from gateway.seam.grants import GrantView
from gateway.seam.insights import Insights
from gateway.seam.views import RequestView
from gateway.store import console as console_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.rows import JobRow, RequestRow
from gateway.store.values import utcnow
from gateway.vocabulary import ChannelName


class ConsoleDoor:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.db = core.db

    def __repr__(self) -> str:
        return "ConsoleDoor()"

    @property
    def public_url(self) -> str | None:
        return self.core.settings.public_url

    @property
    def local_url(self) -> str:
        return f"http://{self.core.settings.host}:{self.core.settings.port}"

    @property
    def stopping(self) -> asyncio.Event:
        return self.core.stopping

    @contextmanager
    def watch_changes(self) -> Iterator[Signal]:
        with self.core.waiters.watch(ANY) as changed:
            yield changed

    # --- requests

    async def search(
        self,
        *,
        projects: Sequence[str] | None,
        pending: bool,
        filters: Filters,
        user_info: dict[str, Any] | None = None,
        limit: int = 200,
    ) -> list[RequestView]:
        found = await self.db.scan(
            console_store.search_requests,
            projects=projects,
            pending=pending,
            filters=filters,
            limit=limit,
        )
        if filters.mine:
            found = [] if user_info is None else await self._waiting_on(found, user_info)
        return [self.core.view(row, project, with_secrets=False) for row, project in found]

    async def _waiting_on(
        self, found: list[tuple[RequestRow, str]], user_info: dict[str, Any]
    ) -> list[tuple[RequestRow, str]]:
        """The pending requests among `found` that wait on this person: under a policy,
        their vote would count for a target that is active now and they have not voted yet;
        without one, the route asks them (lists them, or has a target open to anyone)."""
        config = self.core.config
        person = votes.person_of(config, user_info)
        pending = [(row, project) for row, project in found if row.status == Status.PENDING]
        with_policy = [row.rid for row, _ in pending if row.policy_json is not None]
        voted: set[str] = set()
        if with_policy:  # one query for the listed requests, whatever their number
            voted = await self.db.scan(console_store.voted_on, with_policy, person)
        now = utcnow()
        return [
            (row, project)
            for row, project in pending
            if row.rid not in voted and asks(config, row, user_info, person, now=now)
        ]

    async def project_names(self, sees: Sees) -> list[str]:
        return [p.name for p in await self.db.read(project_store.list_projects) if sees(p.name)]

    async def request(self, rid: str, sees: Sees) -> RequestView | None:
        row, project = await self.db.read(request_store.get_with_project, rid)
        if row is None or project is None or not sees(project):
            return None
        return self.core.view(row, project, with_secrets=False)

    async def trail(self, rid: str) -> tuple[list[DeliveryView], list[EventView]]:
        deliveries, events = await self.db.read(console_store.deliveries_and_events, rid)
        shown = [DeliveryView(d.id or 0, d.channel, d.status, d.error) for d in deliveries]
        return shown, [EventView(e.type, e.at, e.detail_json) for e in events]

    async def standing(self, rid: str) -> Standing | None:
        """Votes replayed against the policy as it is now (escalation may have widened it
        since the last vote), with each node active or not at this moment."""
        row, rows = await self.db.read(console_store.with_votes, rid)
        if row is None or row.policy_json is None:
            return None
        replayed = [votes.replayed(row, vote) for vote in rows]
        tree = evaluator.from_dict(json.loads(row.policy_json))
        verdict = evaluator.evaluate(tree, replayed, now=votes.seconds_since(row, utcnow()))
        return votes.standing(tree, verdict, rows, row)

    async def next_timer(self, rid: str) -> TimerView | None:
        job = await self.db.read(console_store.next_timer, rid)
        if job is None:
            return None
        payload = json.loads(job.payload_json)
        timer = str(payload.get("timer"))
        return TimerView(timer, job.run_at, payload.get("number"), payload.get("target"))

    # --- standing grants

    async def grants(self, sees: Sees, user_info: dict[str, Any]) -> list[ListedGrant]:
        listed = await grants.listing(self.core)
        return [
            ListedGrant(grant, self._may_revoke(grant, user_info))
            for grant in listed
            if sees(grant.project)
        ]

    async def revoke_grant(
        self,
        grant_id: str,
        sees: Sees,
        user_info: dict[str, Any],
        by: str,
        *,
        whole_key: bool = False,
    ) -> Revoked:
        grant = await grants.find(self.core, grant_id)
        if grant is None or not sees(grant.project):
            return Revoked(found=False)
        if not self._may_revoke(grant, user_info):
            return Revoked(allowed=False)
        if whole_key and self._revokes_any(user_info):
            return Revoked(
                tuple(await grants.revoke_key(self.core, grant.project_id, grant.key, by))
            )
        chosen = [grant]
        if whole_key:  # the live grants of this key that this person gave
            live = await grants.listing(self.core, project_id=grant.project_id, live_only=True)
            chosen = [g for g in live if g.key == grant.key and self._may_revoke(g, user_info)]
        live_ids = [g.id for g in chosen if g.live]  # revoked or expired: nothing to do
        if not live_ids:
            return Revoked()
        revoked = await grants.revoke_ids(self.core, live_ids, by, project_id=grant.project_id)
        return Revoked(tuple(revoked))

    def _revokes_any(self, user_info: dict[str, Any]) -> bool:
        """The operator and admins revoke any grant they see."""
        person = votes.person_of(self.core.config, user_info)
        return person == votes.OPERATOR or votes.is_admin(self.core.config, person)

    def _may_revoke(self, grant: GrantView, user_info: dict[str, Any]) -> bool:
        """An admin, the operator, or the person who gave it (however they answered then)."""
        if self._revokes_any(user_info):
            return True
        config = self.core.config
        person = votes.person_of(config, user_info)
        return person.startswith("person:") and person == votes.person_of(config, grant.granted_by)

    # --- webhooks and channels

    async def webhooks(self, sees: Sees) -> tuple[list[EndpointView], list[WebhookJobView]]:
        projects = {p.id: p.name for p in await self.db.read(project_store.list_projects) if p.id}
        visible = [pid for pid, name in projects.items() if sees(name)]
        hooks = await self.db.read(project_store.list_webhooks)
        jobs = await self.db.scan(console_store.webhook_jobs, visible)
        endpoints = [
            EndpointView(
                hook.id or 0,
                projects.get(hook.project_id, "?"),
                hook.url,
                json.loads(hook.events_json),
                hook.enabled,
                hook.disabled_reason,
            )
            for hook in hooks
            if hook.project_id in visible
        ]
        return endpoints, [_webhook_job(job) for job in jobs]

    async def keys(self, sees: Sees) -> list[KeyView]:
        rows = await self.db.read(project_store.list_keys)
        return [
            KeyView(
                key.id or 0,
                project,
                key.prefix,
                key.name,
                key.scope,
                key.person,
                key.revoked_at is not None,
            )
            for key, project in rows
            if sees(project)
        ]

    def rules(self) -> list[RuleView]:
        return [_rule_view(rule, index) for index, rule in enumerate(self.core.config.rules)]

    async def insights(
        self, projects: Sequence[str] | None, since: datetime, until: datetime
    ) -> Insights:
        return await insights.gather(self.core, projects, since, until)

    async def redeliver(self, job_id: int, sees: Sees) -> bool:
        return await self.db.write(console_store.redeliver_webhook, job_id, sees)

    async def delivery_errors(self) -> dict[str, tuple[str, datetime]]:
        return await self.db.scan(console_store.last_delivery_errors)

    def channel_states(self) -> list[ChannelState]:
        platforms = {n: c for n, c in self.core.channels.items() if n != ChannelName.WEB}
        return channel_states(platforms)

    def people(self) -> list[ConsolePerson]:
        return [
            _console_person(person)
            for person in self.core.config.people.values()
            if person.email and person.password_hash
        ]

    def person_with_email(self, email: str) -> ConsolePerson | None:
        wanted = email.strip().lower()
        for person in self.core.config.people.values():
            if (person.email or "").lower() == wanted:
                return _console_person(person)
        return None

    # --- sessions and sign-in links (only their hashes are stored)

    async def live_session(self, sid_hash: str) -> LiveSession | None:
        return await self.db.read(console_store.live_session, sid_hash)

    async def start_session(
        self,
        sid_hash: str,
        *,
        email: str | None,
        name: str,
        projects: Sequence[str] | None,
        ttl: timedelta,
    ) -> None:
        await self.db.write(
            console_store.create_session,
            sid_hash,
            email=email,
            name=name,
            projects=projects,
            ttl=ttl,
        )

    async def end_session(self, sid_hash: str) -> None:
        await self.db.write(console_store.revoke_session, sid_hash)

    async def end_sessions_of(self, email: str | None) -> int:
        return await self.db.write(console_store.revoke_sessions_of, email)

    async def set_flash(self, sid_hash: str, path: str, text: str) -> None:
        await self.db.write(console_store.set_flash, sid_hash, path, text)

    async def take_flash(self, sid_hash: str, path: str, text: str) -> bool:
        return await self.db.write(console_store.take_flash, sid_hash, path, text)

    async def create_login(self, token_hash: str, email: str | None, ttl: timedelta) -> None:
        await self.db.write(console_store.create_login, token_hash, email, ttl)

    async def use_login(self, token_hash: str) -> LoginUse:
        return await self.db.write(console_store.use_login, token_hash)


def asks(
    config: RoutingConfig,
    row: RequestRow,
    user_info: dict[str, Any],
    person: str,
    *,
    now: datetime,
) -> bool:
    """Whether the request asks this person (`votes.person_of`) at `now`, votes aside."""
    route = json.loads(row.route_json)
    targets = votes.counted_targets(config, route, user_info, person)
    if row.policy_json is None:
        return bool(targets) or any(target.get("responders") is None for target in route)
    tree = evaluator.from_dict(json.loads(row.policy_json))
    return bool(targets & evaluator.active_targets(tree, votes.seconds_since(row, now)))


def _rule_view(rule: Rule, index: int) -> RuleView:
    kind = "any request" if rule.kind is None else f"{rule.kind.value}s".replace("_", " ")
    applies_to = f'fn "{rule.fn}", run_id "{rule.run_id}", {kind}'
    if rule.decide is not None:
        then = rule.decide + (f': "{rule.comment}"' if rule.comment else "")
    elif rule.policy is not None:
        policy = rule.policy.model_dump(exclude_none=True)
        then = "policy " + json.dumps(policy, separators=(", ", ": "))
    else:
        then = str(rule.target)
    return RuleView(rule_label(rule, index), applies_to, rule.when, then)


def _webhook_job(job: JobRow) -> WebhookJobView:
    payload = json.loads(job.payload_json)
    return WebhookJobView(
        id=job.id or 0,
        endpoint_id=payload.get("endpoint_id"),
        msg_id=payload.get("msg_id"),
        rid=job.rid,
        status=job.status,
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        last_error=job.last_error,
        updated_at=job.updated_at,
    )


def _console_person(person: Person) -> ConsolePerson:
    assert person.email is not None
    projects = None if "*" in person.projects else tuple(person.projects)
    return ConsolePerson(person.name or person.email, person.email, person.password_hash, projects)
