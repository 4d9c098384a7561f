"""Standing grants: a person who approves a function call may also allow more like it for a
while ("Approve and allow…"), and a create that such a grant covers is approved at once.

Only where one person's answer decides the request (no policy: no quorum, no all_of), never
where its rule says `grants = false` or decides itself, and only through a person's answer
on a channel or the console: `decisions.submit` is the one place that gives a grant, and an
API respond never carries one. The lookup runs inside the create's own transaction, so a
revoke on any replica counts from the next create.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gateway.core import Core
from gateway.errors import InvalidInput, NotAllowed, NotFound
from gateway.lifecycle import Kind, Status
from gateway.policies import votes
from gateway.policies.plans import Plan
from gateway.routing import RoutingConfig
from gateway.seam.grants import GrantChoice, GrantView, offered
from gateway.security.crypto import new_rid
from gateway.store import Tx, dumps, utcnow
from gateway.store import grants as grant_store
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.grants import GrantedKeys
from gateway.store.rows import GrantRow, RequestRow, changed
from gateway.vocabulary import AnsweredIn, AuditEvent, GrantScope, JobKind

NOTE_EVERY_SECONDS = 60  # a grant's note under its message: at most one a minute
NOTE_ATTEMPTS = 4


@dataclass(frozen=True)
class Note:
    """What a grant's next note tells: the grant, its uses so far, and how many of them no
    note told yet."""

    grant: GrantView
    uses: int
    new: int


def kwargs_hash(kwargs: Any) -> str:
    """The canonical hash of a call's arguments: key order and spacing do not matter."""
    canonical = json.dumps(kwargs or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def grantable(kind: Kind, plan: Plan) -> bool:
    """Whether a new request's approver may be offered a grant: a function call that one
    person's answer decides, whose rule neither decides it nor turns grants off."""
    rule = plan.rule
    one_answer = plan.policy is None and not plan.decided
    return kind == Kind.FUNCTION_CALL and one_answer and (rule is None or rule.grants)


def editable(kind: Kind, plan: Plan) -> bool:
    """Whether "Edit and approve" is offered: a function call one answer decides (an edit
    is one person's), unless its rule says `editable = false`."""
    rule = plan.rule
    one_answer = plan.policy is None and not plan.decided
    return kind == Kind.FUNCTION_CALL and one_answer and (rule is None or rule.editable)


def checked(config: RoutingConfig, row: RequestRow, value: str) -> GrantChoice:
    """The grant a person asked for, if this request offers it: NotAllowed where no grant is
    offered (a quorum, an all_of, a rule's `grants = false`), InvalidInput for a duration or
    scope it does not offer."""
    if not row.offers_grant:
        raise NotAllowed(
            "a standing grant is not offered on this request: only where one person's answer "
            "decides it"
        )
    choice = GrantChoice.parse(value)
    offers = offered(config.grant_max, config.grant_until_revoked)
    if choice is None or choice not in offers:
        longest = "until revoked" if config.grant_until_revoked else f"{config.grant_max:g}s"
        raise InvalidInput(
            f"{value!r} is not a grant this gateway offers: a scope of args, run or key and a "
            f"duration of at most {longest}"
        )
    return choice


def described(value: str, fn: str | None) -> str:
    """A checked choice in words: "read_file in this run, for 1 hour"."""
    choice = GrantChoice.parse(value)
    return "" if choice is None else choice.sentence(fn or "this function")


def give(tx: Tx, config: RoutingConfig, row: RequestRow, choice: GrantChoice) -> GrantRow:
    """Record the grant the person who approved `row` gave, in the decision's transaction."""
    assert row.key_id is not None  # `checked` refused a request without one
    now = utcnow()
    granted_by = row.user_info or {}
    spec = json.loads(row.spec_json)
    grant = GrantRow(
        id=new_rid(),
        project_id=row.project_id,
        key_id=row.key_id,
        fn=row.fn or "",
        scope=choice.scope.value,
        run_id=row.run_id if choice.scope == GrantScope.RUN else None,
        kwargs_hash=kwargs_hash(spec.get("kwargs")) if choice.scope == GrantScope.ARGS else None,
        granted_by_json=dumps(granted_by),
        person=votes.person_of(config, granted_by),
        source_rid=row.rid,
        created_at=now,
        expires_at=None if choice.seconds is None else now + timedelta(seconds=choice.seconds),
    )
    grant_store.add(tx, grant)
    detail = {"grant": grant.id, "scope": grant.scope, "fn": grant.fn, "until": _until(grant)}
    request_store.add_event(tx, row.rid, AuditEvent.GRANTED, detail | {"by": granted_by})
    return grant


def covering(tx: Tx, row: RequestRow, granted: GrantedKeys) -> GrantRow | None:
    """The live grant that approves this new request at create, if any (no lookup for a
    key that had no grant when `granted` last looked)."""
    if not row.offers_grant or row.fn is None or row.key_id is None:
        return None
    if not granted.may_have(tx, row.key_id, row.requested_at):
        return None
    spec = json.loads(row.spec_json)
    return grant_store.covering(
        tx,
        project_id=row.project_id,
        key_id=row.key_id,
        fn=row.fn,
        run_id=row.run_id,
        kwargs_hash=kwargs_hash(spec.get("kwargs")),
        now=row.requested_at,
    )


def approved_by(row: RequestRow, grant: GrantRow) -> RequestRow:
    """The new request as the grant decides it: approved, in the name of who granted it."""
    granted_by = grant.granted_by
    who = {
        "channel": AnsweredIn.GRANT,
        "user_id": str(granted_by.get("user_id") or ""),
        "name": str(granted_by.get("name") or "someone"),
        "grant": grant.id,
        "granted_by": granted_by,
    }
    return changed(
        row,
        status=Status.APPROVED.value,
        user_info_json=dumps(who),
        responded_at=row.requested_at,
    )


def auto_approved(tx: Tx, row: RequestRow, grant: GrantRow, targets: int) -> str | None:
    """The audit trail of a request a grant approved at create; the grant counts a use, and
    the first use since its last note schedules the next (a minute on: one note a minute).
    Returns the `auto_approved` event's digest (its receipt names that event)."""
    due = row.requested_at + timedelta(seconds=NOTE_EVERY_SECONDS)
    grant_store.used(tx, grant.id, row.requested_at, due)
    if grant.note_due is None:
        payload = {"grant": grant.id}
        outbox_store.enqueue(
            tx,
            JobKind.NOTE,
            payload,
            max_attempts=NOTE_ATTEMPTS,
            rid=grant.source_rid,
            project_id=grant.project_id,
            run_at=due,
        )
    detail = {"grant": grant.id, "granted_by": grant.granted_by, "scope": grant.scope}
    audit: list[tuple[AuditEvent, dict[str, Any]]] = [
        (AuditEvent.CREATED, {"call_id": row.call_id}),
        (AuditEvent.ROUTED, {"targets": targets, "grant": grant.id}),
        (AuditEvent.AUTO_APPROVED, detail),
    ]
    return request_store.add_events(tx, row.rid, audit, row.project_id)[2]


def revoke(tx: Tx, grant_ids: list[str], by: str) -> list[GrantRow]:
    """Revoke these grants (those still live); each is noted on the request that gave it."""
    revoked = grant_store.revoke(tx, grant_ids, by, utcnow())
    for grant in revoked:
        detail = {"grant": grant.id, "by": by}
        request_store.add_event(tx, grant.source_rid, AuditEvent.GRANT_REVOKED, detail)
    return revoked


async def listing(
    core: Core,
    *,
    project_id: int | None = None,
    live_only: bool = False,
    ids: list[str] | None = None,
) -> list[GrantView]:
    """Grants, newest first: a project's, or every project's (the CLI, the operator);
    `ids`: only these."""
    now = utcnow()
    live_at = now if live_only else None
    found = await core.db.read(grant_store.listing, project_id=project_id, live_at=live_at, ids=ids)
    return [_view(grant, key, project, now) for grant, key, project in found]


async def find(core: Core, grant_id: str) -> GrantView | None:
    """One grant, in whichever project it is."""
    return next(iter(await listing(core, ids=[grant_id])), None)


async def next_note(core: Core, grant_id: str) -> Note | None:
    """What the grant's note should tell now (None: no such grant)."""
    row = await core.db.read(grant_store.get, grant_id)
    view = await find(core, grant_id)
    if row is None or view is None:
        return None
    return Note(view, row.uses, row.uses - row.noted_uses)


async def revoke_ids(
    core: Core, grant_ids: list[str], by: str, *, project_id: int | None = None
) -> list[GrantView]:
    """Revoke these grants (of `project_id` only, when given): the ones found, whether
    live or not, so a revoke of an unknown or foreign grant is seen as such (404)."""
    known = await listing(core, project_id=project_id, ids=grant_ids)
    if not known:
        return []
    wanted = [grant.id for grant in known]
    await core.db.write(revoke, wanted, by)
    return await listing(core, project_id=project_id, ids=wanted)


async def revoke_key(core: Core, project_id: int, key_name: str, by: str) -> list[GrantView]:
    """Revoke every live grant of one agent key (by its name) in a project; NotFound for a
    key name the project does not have (a typo must not look like a revoke of nothing)."""
    keys = await core.db.read(project_store.list_keys, project_id)
    if not any(key.name == key_name for key, _project in keys):
        raise NotFound(f"no API key named {key_name!r} in this project")
    live = await listing(core, project_id=project_id, live_only=True)
    return await revoke_ids(core, [v.id for v in live if v.key == key_name], by)


def _view(grant: GrantRow, key: str, project: str, now: datetime) -> GrantView:
    live = grant.revoked_at is None and (grant.expires_at is None or grant.expires_at > now)
    return GrantView(
        id=grant.id,
        project=project,
        project_id=grant.project_id,
        key=key,
        fn=grant.fn,
        scope=GrantScope(grant.scope),
        run_id=grant.run_id,
        granted_by=grant.granted_by,
        source_rid=grant.source_rid,
        created_at=grant.created_at,
        expires_at=grant.expires_at,
        revoked_at=grant.revoked_at,
        revoked_by=grant.revoked_by,
        uses=grant.uses,
        last_used_at=grant.last_used_at,
        live=live,
    )


def _until(grant: GrantRow) -> str | None:
    return None if grant.expires_at is None else grant.expires_at.isoformat()
