"""The core's shared handles, built once by the composition root, and the waiters a commit
wakes (long-polls and live pages)."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gateway.lifecycle import Kind, Status
from gateway.routing import RoutingConfig
from gateway.seam.channel import Channel
from gateway.seam.grants import GrantChoice, offered
from gateway.seam.views import RequestView, load_progress
from gateway.security import signed
from gateway.security.crypto import SecretBox
from gateway.security.key_cache import KeyCache
from gateway.settings import Settings
from gateway.store import Changes, Database
from gateway.store.grants import GrantedKeys
from gateway.store.rows import ApiKeyRow, ProjectRow, RequestRow

LINK_TTL_SECONDS = 14 * 24 * 3600  # an emailed request link lets its recipient decide


# --- long-poll waiters and live pages, woken by `Core.signal` after a commit changed their
# request: a commit in this process, a NOTIFY from another replica (PostgreSQL) or the change
# feed (SQLite). Nobody polls the database for them.

ANY = "*"  # watchers of every change: the console's live pages


class Signal:
    """An `asyncio.Event` for one waiter (wait, set, clear), without the Event's queue of
    waiters: 10,000 agents may each wait on one."""

    __slots__ = ("_future", "_set")

    def __init__(self) -> None:
        self._set = False
        self._future: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> bool:
        if not self._set:
            if self._future is None or self._future.done():
                self._future = asyncio.get_running_loop().create_future()
            await self._future
        return True


class Waiters:
    def __init__(self) -> None:
        self._events: defaultdict[str, set[Signal]] = defaultdict(set)

    @contextmanager
    def watch(self, rid: str) -> Iterator[Signal]:
        """Register before re-reading the row, so a decision in between is not missed."""
        event = Signal()
        self._events[rid].add(event)
        try:
            yield event
        finally:
            waiting = self._events.get(rid)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._events[rid]

    def wake(self, rids: Iterable[str]) -> None:
        """The watchers of these requests, and of ANY."""
        for rid in rids:
            for event in self._events.get(rid, ()):
                event.set()
        self.changed()

    def changed(self) -> None:
        """Something was created or decided: wake the watchers of ANY."""
        for event in self._events.get(ANY, ()):
            event.set()

    def wake_all(self) -> None:
        """Every waiter re-reads (after missed notifications, and at shutdown)."""
        for events in self._events.values():
            for event in events:
                event.set()

    def __len__(self) -> int:
        return sum(len(events) for events in self._events.values())


@dataclass(frozen=True)
class Caller:
    """Who is calling the API: the project comes from the key, never from the body."""

    project: ProjectRow
    key: ApiKeyRow
    core: Core = field(repr=False)  # the gateway this caller reached (the API's handles)

    @property
    def project_id(self) -> int:
        assert self.project.id is not None
        return self.project.id


@dataclass
class Core:
    settings: Settings
    db: Database
    config: RoutingConfig
    box: SecretBox
    waiters: Waiters = field(default_factory=Waiters)
    keys: KeyCache = field(default_factory=KeyCache)
    granted_keys: GrantedKeys = field(default_factory=GrantedKeys)  # which keys have grants
    outbox_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # set once, at shutdown
    # Filled by the composition root right after the core is made: each channel is built
    # with a context over the core (`gateway.doors.channel_context`).
    channels: dict[str, Channel] = field(default_factory=dict)

    def stop(self) -> None:
        """The process is shutting down (SIGTERM): long-polls answer with the current state
        now, live pages end, new long-polls do not wait, and the outbox claims no more jobs."""
        self.stopping.set()
        self.waiters.wake_all()
        self.outbox_wakeup.set()

    def signal(self, changes: Changes) -> None:
        """The one place where a durable commit is told to whoever waits for it (the store
        calls it after every batch, and for other processes' changes)."""
        if changes.everything:
            self.waiters.wake_all()
        elif changes.rids:
            self.waiters.wake(changes.rids)
        if changes.jobs or changes.everything:
            self.outbox_wakeup.set()
        if changes.keys:
            self.keys.clear()
        if changes.keys or changes.everything:
            self.granted_keys.clear()

    def link(self, rid: str, email: str | None = None) -> str | None:
        """The request's page; with `email`, a token that lets that recipient decide there
        without signing in (the link in the email sent to them)."""
        base = self.settings.public_url
        if not base:
            return None
        url = f"{base.rstrip('/')}/r/{rid}"
        if email is None:
            return url
        claims = {"r": rid, "e": email.lower()}
        return f"{url}?t={signed.sign(self.link_key, claims, LINK_TTL_SECONDS)}"

    @property
    def link_key(self) -> bytes:
        return self.box.subkey("request-link")

    def grant_choices(self, row: RequestRow) -> tuple[GrantChoice, ...]:
        """What "Approve and allow…" offers on this request now (nothing once decided)."""
        if not row.offers_grant or row.status != Status.PENDING:
            return ()
        return offered(self.config.grant_max, self.config.grant_until_revoked)

    def view(self, row: RequestRow, project: str, *, with_secrets: bool = True) -> RequestView:
        """The request as channels see it; `with_secrets=False` leaves the agent's
        write-only values sealed (the console never uses them)."""
        sealed = row.sealed_secrets if with_secrets else None
        secrets = json.loads(self.box.open(sealed)) if sealed else {}
        return RequestView(
            rid=row.rid,
            project=project,
            kind=Kind(row.kind),
            call_id=row.call_id,
            run_id=row.run_id,
            spec=json.loads(row.spec_json),
            status=Status(row.status),
            requested_at=row.requested_at,
            link=self.link(row.rid),
            comment=row.comment,
            option_name=row.option_name,
            response=row.response,
            user_info=json.loads(row.user_info_json) if row.user_info_json else None,
            responded_at=row.responded_at,
            route=json.loads(row.route_json),
            progress=load_progress(row.progress_json),
            expires_at=row.expires_at,
            secrets=secrets,
            agent_templates=self.config.allows_agent_templates(project),
            grant_choices=self.grant_choices(row),
            editable=row.offers_edit and row.status == Status.PENDING,
            updated_kwargs=json.loads(row.updated_kwargs_json) if row.updated_kwargs_json else None,
        )
