"""What the web console reads and changes through the core (`ChannelContext.console`): the
queue and the history as request views, a request's trail and where its policy stands,
the insights page's figures (`gateway.seam.insights`), standing grants and their revokes,
webhooks, channel states, people who may sign in, sessions and one-time sign-in links.
The console never sees a store row or issues SQL; only hashes of its secrets are stored."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from gateway.seam.connections import ChannelState
from gateway.seam.grants import GrantView
from gateway.seam.insights import Insights
from gateway.seam.views import Progress, RequestView

Sees = Callable[[str], bool]  # whether the signed-in person may see a project


@dataclass(frozen=True)
class Filters:
    """The queue's and the history's filters; None means any."""

    project: str | None = None
    kind: str | None = None
    run_id: str | None = None
    fn: str | None = None
    text: str | None = None  # history search: call id, run id, function, comment, answer
    mine: bool = False  # the queue: only what the signed-in person may still answer


@dataclass(frozen=True)
class DeliveryView:
    id: int
    channel: str
    status: str
    error: str | None


@dataclass(frozen=True)
class EventView:
    """One entry of a request's audit trail; `detail_json` as stored."""

    type: str
    at: datetime
    detail_json: str


@dataclass(frozen=True)
class TimerView:
    """A request's next timer: its deadline, a reminder (`number`) or an escalation (`target`)."""

    timer: str  # a `gateway.vocabulary.Timer`
    run_at: datetime
    number: int | None = None
    target: str | None = None


@dataclass(frozen=True)
class PolicyNode:
    """One node of a request's policy as it stands now; a leaf has its route `target`."""

    approvals: int
    needed: int
    required: int
    approved: bool
    active: bool
    approved_by: tuple[str, ...]
    delay: float  # seconds after its parent's start
    begins_at: datetime  # when its first target is (or was) contacted
    mode: str | None = None  # "any_of" or "all_of" for a group
    target: dict[str, Any] | None = None
    children: tuple[PolicyNode, ...] = ()


@dataclass(frozen=True)
class Standing:
    """Where a request under a policy stands, replayed now: its progress and its tree."""

    progress: Progress
    tree: PolicyNode


@dataclass(frozen=True)
class EndpointView:
    id: int
    project: str
    url: str
    events: list[str]  # empty: every event
    enabled: bool
    disabled_reason: str | None


@dataclass(frozen=True)
class KeyView:
    """An API key as the console lists it: what it may do, never the key itself."""

    id: int
    project: str
    prefix: str
    name: str
    scope: str  # agent, responder or admin
    person: str | None  # who a responder key votes as
    revoked: bool


@dataclass(frozen=True)
class RuleView:
    """A rule of the routing config as the console lists it, in the file's order."""

    label: str  # "rule NAME" (or "rule 3")
    applies_to: str  # 'fn "drop_*", run_id "*", function calls'
    when: str | None  # its CEL expression
    then: str  # 'reject: "never rm -rf /"', "team:finance", 'policy {"all_of": [...]}'


@dataclass(frozen=True)
class ListedGrant:
    """A standing grant on the console's grants page, and whether the viewer may revoke it."""

    grant: GrantView
    may_revoke: bool


@dataclass(frozen=True)
class Revoked:
    """What a revoke from the console did: the grants it revoked (those already revoked or
    expired stay as they were); `found` is False for a grant the person cannot see (unknown,
    or another project's), `allowed` False for one they may not revoke. Nothing changed then."""

    grants: tuple[GrantView, ...] = ()
    found: bool = True
    allowed: bool = True


@dataclass(frozen=True)
class WebhookJobView:
    id: int
    endpoint_id: int | None
    msg_id: str | None
    rid: str | None
    status: str
    attempts: int
    max_attempts: int
    last_error: str | None
    updated_at: datetime


@dataclass(frozen=True)
class ConsolePerson:
    """A person of the routing config with an email: with a `password_hash`, they may sign
    in with a password; any of them may get a one-time sign-in link."""

    name: str
    email: str
    password_hash: str | None = field(repr=False)
    projects: tuple[str, ...] | None  # None: every project ("*")


@dataclass(frozen=True)
class LiveSession:
    """A session that has not ended: whose it is, and its pending notice."""

    email: str | None
    name: str
    projects: tuple[str, ...] | None
    flash: str | None
    flash_path: str | None


@dataclass(frozen=True)
class LoginUse:
    """What spending a one-time sign-in link did: whose it was, or why it was refused."""

    ok: bool
    email: str | None = None
    reason: str = ""


class Changed(Protocol):
    """What a live page waits on: set by a change, cleared once the page has looked."""

    async def wait(self) -> object: ...

    def clear(self) -> None: ...


class Console(Protocol):
    """The core's door for the web console."""

    @property
    def public_url(self) -> str | None:
        """GATEWAY_PUBLIC_URL, when set."""
        ...

    @property
    def local_url(self) -> str:
        """Where this process listens (`http://host:port`), for links made without one."""
        ...

    @property
    def stopping(self) -> asyncio.Event:
        """Set once the process begins to shut down: live pages end."""
        ...

    def watch_changes(self) -> AbstractContextManager[Changed]:
        """Set whenever a request is created or changes (live pages)."""
        ...

    async def search(
        self,
        *,
        projects: Sequence[str] | None,
        pending: bool,
        filters: Filters,
        user_info: dict[str, Any] | None = None,
        limit: int = 200,
    ) -> list[RequestView]:
        """The queue (`pending`) or the history, newest first, at most `limit`;
        `filters.mine` keeps what the person answering as `user_info` may still answer."""
        ...

    async def project_names(self, sees: Sees) -> list[str]: ...
    async def request(self, rid: str, sees: Sees) -> RequestView | None:
        """A request, if the person may see its project."""
        ...

    async def trail(self, rid: str) -> tuple[list[DeliveryView], list[EventView]]: ...
    async def standing(self, rid: str) -> Standing | None:
        """Where a request under a policy stands now; None when the first answer decides."""
        ...

    async def next_timer(self, rid: str) -> TimerView | None: ...
    async def grants(self, sees: Sees, user_info: dict[str, Any]) -> list[ListedGrant]:
        """The standing grants of the projects the person sees, newest first, each with
        whether this person (answering as `user_info`) may revoke it: the operator, an admin
        or the person who gave it."""
        ...

    async def revoke_grant(
        self,
        grant_id: str,
        sees: Sees,
        user_info: dict[str, Any],
        by: str,
        *,
        whole_key: bool = False,
    ) -> Revoked:
        """Revoke one grant, recording `by` (who revoked it, in words); with `whole_key`, the
        live grants of the agent key it is for (in its project): every one for the operator
        or an admin, the ones they gave for anyone else."""
        ...

    async def webhooks(self, sees: Sees) -> tuple[list[EndpointView], list[WebhookJobView]]:
        """The endpoints and recent deliveries of the projects the person may see."""
        ...

    async def keys(self, sees: Sees) -> list[KeyView]:
        """The API keys of the projects the person may see, with their scopes."""
        ...

    def rules(self) -> list[RuleView]:
        """The routing config's rules, first match first."""
        ...

    async def insights(
        self, projects: Sequence[str] | None, since: datetime, until: datetime
    ) -> Insights:
        """How decisions flowed in these projects (None: every project) between `since`
        and `until`, and what is pending now."""
        ...

    async def redeliver(self, job_id: int, sees: Sees) -> bool:
        """Queue a webhook delivery again with its message id; False if the person cannot."""
        ...

    async def delivery_errors(self) -> dict[str, tuple[str, datetime]]:
        """Each channel's most recent failed delivery: its error and when."""
        ...

    def channel_states(self) -> list[ChannelState]:
        """Every platform channel's configuration and connection (the console itself aside)."""
        ...

    def people(self) -> list[ConsolePerson]:
        """The people who may sign in with a password (a `password_hash`)."""
        ...

    def person_with_email(self, email: str) -> ConsolePerson | None:
        """A configured person with this email, with or without a password."""
        ...

    # --- sessions and sign-in links (only their hashes are stored)

    async def live_session(self, sid_hash: str) -> LiveSession | None: ...
    async def start_session(
        self,
        sid_hash: str,
        *,
        email: str | None,
        name: str,
        projects: Sequence[str] | None,
        ttl: timedelta,
    ) -> None: ...
    async def end_session(self, sid_hash: str) -> None: ...
    async def end_sessions_of(self, email: str | None) -> int: ...
    async def set_flash(self, sid_hash: str, path: str, text: str) -> None: ...
    async def take_flash(self, sid_hash: str, path: str, text: str) -> bool: ...
    async def create_login(self, token_hash: str, email: str | None, ttl: timedelta) -> None: ...
    async def use_login(self, token_hash: str) -> LoginUse: ...
