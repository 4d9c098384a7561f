"""Answers under an approval policy: each is a vote, replayed by `gateway.policies.evaluator` in the
transaction that records it, so concurrent votes see each other and only the vote that
resolves the root decides.

A person is one voter however many copies they click: a configured person by any of their
Slack, Discord, Teams, Telegram or email ids (or their console sign-in name), else the
platform's own id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gateway.policies import evaluator
from gateway.routing import RoutingConfig
from gateway.seam.console import PolicyNode, Standing
from gateway.seam.people import BY_LINK
from gateway.seam.views import Progress
from gateway.store import Tx, dumps, utcnow
from gateway.store import requests as request_store
from gateway.store import votes as vote_store
from gateway.store.rows import RequestRow, VoteRow
from gateway.vocabulary import AnsweredIn

# The project's operator: the CLI, an API key bound to no person and the console's operator
# sign-in are one voter, whose vote counts in every branch (and once toward a quorum).
OPERATOR = "operator"


def person_of(config: RoutingConfig, info: dict[str, Any]) -> str:
    """The voter's identity: `person:NAME` when the config knows them, the operator, else
    `via:id`. Only what the gateway itself recorded counts: the platform's user id, the
    address a reply came from or a console sign-in, the key's bound person; never an API
    caller's own `user_info`, which is display text."""
    via, ident = str(info.get("channel") or ""), str(info.get("user_id") or "")
    if via == AnsweredIn.API:
        bound = str(info.get("person") or "")
        return f"person:{bound}" if bound else OPERATOR
    signed_in = via == AnsweredIn.WEB and info.get("by") != BY_LINK
    if via == AnsweredIn.CLI or (signed_in and ident == OPERATOR):
        return OPERATOR
    email = ident.lower() if via in (AnsweredIn.EMAIL, AnsweredIn.WEB) else ""
    for name, person in config.people.items():
        if (
            (via == AnsweredIn.SLACK and ident == person.slack)
            or (via == AnsweredIn.DISCORD and ident == person.discord)
            or (via == AnsweredIn.TEAMS and ident == person.teams)
            or (via == AnsweredIn.TELEGRAM and ident == person.telegram)
            or (email and email == (person.email or "").lower())
        ):
            return f"person:{name}"
    return f"{via}:{ident}"


def is_admin(config: RoutingConfig, person: str) -> bool:
    """A configured person with `admin = true`: decides any request in the console."""
    configured = config.people.get(person.removeprefix("person:"))
    return person.startswith("person:") and configured is not None and configured.admin


def _ids_of(config: RoutingConfig, person: str) -> set[str]:
    """Every platform id a configured person answers with."""
    configured = config.people.get(person.removeprefix("person:"))
    if not person.startswith("person:") or configured is None:
        return set()
    ids = (configured.slack, configured.discord, configured.teams, configured.telegram)
    return {i for i in (*ids, configured.email) if i}


def counted_targets(
    config: RoutingConfig,
    route: list[dict[str, Any]],
    info: dict[str, Any],
    person: str,
    copy: int | None = None,
) -> frozenset[int]:
    """The route targets this voter answers for: the copy they answered (`copy`, a route
    index), when it is open to anyone there; any target that lists one of their ids; the
    console's open target for a console answer; every target for the operator."""
    if person == OPERATOR:
        return frozenset(range(len(route)))
    via, ident = str(info.get("channel") or ""), str(info.get("user_id") or "")
    own = {ident} if via != AnsweredIn.API else set()  # an API user_id is display text
    ids = {i.lower() for i in _ids_of(config, person) | own}
    # The console's open target is for people signed in, not for holders of an emailed link.
    console = via == AnsweredIn.WEB and info.get("by") != BY_LINK
    found = set()
    for index, target in enumerate(route):
        responders = target.get("responders")
        # One click is one copy: never every open target of the platform it came from.
        answered = index == copy or (console and target["channel"] == AnsweredIn.WEB)
        open_here = responders is None and answered
        if open_here or (responders is not None and ids & {r.lower() for r in responders}):
            found.add(index)
    return frozenset(found)


def seconds_since(row: RequestRow, moment: datetime) -> float:
    return (moment - row.requested_at).total_seconds()


@dataclass(frozen=True)
class Counted:
    verdict: evaluator.Verdict | None  # None when nothing was evaluated (`reversed`)
    votes: list[VoteRow]
    fresh: bool  # False: it adds nothing to what this person answered; nothing was stored
    reversed: bool = False  # they answered the other way before: that answer stands


def _covered(tree: evaluator.Node, row: RequestRow, theirs: list[VoteRow]) -> frozenset[int]:
    """The targets a person's earlier votes counted for (each while it was open)."""
    covered: set[int] = set()
    for vote in theirs:
        opened = evaluator.active_targets(tree, seconds_since(row, vote.at))
        covered |= set(json.loads(vote.targets_json)) & opened
    return frozenset(covered)


def record(
    conn: Tx,
    config: RoutingConfig,
    row: RequestRow,
    approve: bool,
    user_info: dict[str, Any],
    *,
    comment: str | None,
    option_name: str | None,
    copy: int | None = None,
) -> Counted | None:
    """Store one vote and replay them all; None when it counts for no active target (not
    theirs, or not yet). An answer that adds nothing to the person's earlier ones (a repeated
    click, a second copy of one email) is not stored; one that reverses theirs is refused."""
    route = json.loads(row.route_json)
    person = person_of(config, user_info)
    targets = counted_targets(config, route, user_info, person, copy)
    tree = evaluator.from_dict(json.loads(row.policy_json or "{}"))
    now = utcnow()
    open_now = targets & evaluator.active_targets(tree, seconds_since(row, now))
    if not open_now:
        return None
    votes = vote_store.list_for(conn, row.rid)
    theirs = [v for v in votes if v.person == person]
    if any(v.approve != approve for v in theirs):
        return Counted(None, votes, fresh=False, reversed=True)
    fresh = not open_now <= _covered(tree, row, theirs)
    if fresh:
        vote = VoteRow(
            rid=row.rid,
            person=person,
            approve=approve,
            targets_json=dumps(sorted(targets)),
            user_info_json=dumps(user_info),
            comment=comment,
            option_name=option_name,
            at=now,
        )
        vote_store.add(conn, vote)
        votes.append(vote)
    replay = [replayed(row, v) for v in votes]
    return Counted(evaluator.evaluate(tree, replay, now=seconds_since(row, now)), votes, fresh)


def replayed(row: RequestRow, vote: VoteRow) -> evaluator.Vote:
    """A stored vote as the evaluator counts it (its time in seconds after the request)."""
    targets = frozenset(json.loads(vote.targets_json))
    return evaluator.Vote(vote.person, vote.approve, targets, seconds_since(row, vote.at))


def decisive_row(verdict: evaluator.Verdict, rows: list[VoteRow]) -> VoteRow:
    """The stored vote the verdict names (the evaluator works on replayed copies)."""
    decisive = verdict.decisive
    assert decisive is not None
    return next(v for v in rows if v.person == decisive.person and v.approve == decisive.approve)


def progress(verdict: evaluator.Verdict, rows: list[VoteRow]) -> Progress:
    """Where the request stands, as every copy shows it."""
    approvals, needed = evaluator.summary(verdict.progress)
    infos = _first_infos(rows)
    return Progress(approvals, needed, tuple(infos[p] for p in verdict.progress.approved_by))


def _first_infos(rows: list[VoteRow]) -> dict[str, dict[str, Any]]:
    """Each voter's user_info, as their first vote gave it."""
    infos: dict[str, dict[str, Any]] = {}
    for vote in rows:
        infos.setdefault(vote.person, json.loads(vote.user_info_json))
    return infos


def standing(
    tree: evaluator.Node, verdict: evaluator.Verdict, rows: list[VoteRow], row: RequestRow
) -> Standing:
    """Where a request stands, for its console page: the progress every copy shows, and each
    node of its policy with who approved it, its delay and when it begins."""
    route = json.loads(row.route_json)
    infos = _first_infos(rows)
    shown = _node(tree, verdict.progress, route, infos, row.requested_at, 0.0)
    return Standing(progress(verdict, rows), shown)


def _node(
    node: evaluator.Node,
    part: evaluator.Progress,
    route: list[dict[str, Any]],
    infos: dict[str, dict[str, Any]],
    requested_at: datetime,
    offset: float,
) -> PolicyNode:
    """One node of the tree; `part` is its part of the verdict's progress (same shape)."""
    approvals, needed = evaluator.summary(part)
    begins = requested_at + timedelta(seconds=offset + _first_leaf(node))
    names = tuple(str(infos[p].get("name") or p) for p in part.approved_by if p in infos)
    common = (approvals, needed, part.required, part.approved, part.active, names, node.delay)
    if isinstance(node, evaluator.Leaf):
        return PolicyNode(*common, begins_at=begins, target=route[node.target])
    start = offset + node.delay
    children = tuple(
        _node(child, child_part, route, infos, requested_at, start)
        for child, child_part in zip(node.children, part.children, strict=True)
    )
    return PolicyNode(*common, begins_at=begins, mode=node.mode.value, children=children)


def _first_leaf(node: evaluator.Node) -> float:
    """Seconds from its parent's start until the node's first leaf becomes active."""
    if isinstance(node, evaluator.Leaf):
        return node.delay
    return node.delay + min(_first_leaf(child) for child in node.children)


def _tree(
    node: evaluator.Progress, route: list[dict[str, Any]], infos: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    names = [str(infos[p].get("name") or p) for p in node.approved_by if p in infos]
    shown: dict[str, Any] = {
        "required": node.required,
        "approved": node.approved,
        "active": node.active,
        "approved_by": names,
    }
    if node.target is not None:
        target = route[node.target]
        return shown | {"channel": target["channel"], "via": target.get("via")}
    children = [_tree(child, route, infos) for child in node.children]
    return shown | {"mode": str(node.mode), "children": children}


def save_progress(
    conn: Tx, rid: str, verdict: evaluator.Verdict, rows: list[VoteRow], route: list[dict[str, Any]]
) -> str:
    """Store where the request stands: what every copy shows and, for the API's
    `policy_progress`, the policy with each node's progress."""
    shown = progress(verdict, rows)
    stored = {
        "approvals": shown.approvals,
        "needed": shown.needed,
        "approvers": list(shown.approvers),
        "tree": _tree(verdict.progress, route, _first_infos(rows)),
    }
    progress_json = dumps(stored)
    request_store.set_progress(conn, rid, progress_json)
    return progress_json
