"""Approval policies: a pure tree over a request's route targets that decides the request.

A policy is stored as JSON with the request (`to_dict`/`from_dict`); `evaluate` replays the
votes received so far and says whether the request is pending, approved, rejected or expired.
No I/O: the caller supplies the clock (`now`, seconds since the request was created).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Mode(StrEnum):
    ANY_OF = "any_of"
    ALL_OF = "all_of"


class Resolution(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


def _check_count(name: str, value: object, minimum: int) -> None:
    # bool is an int subclass, but `"target": true` in stored JSON is a bug, not index 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_delay(value: object) -> None:
    # `not 0 <= value < inf` also refuses NaN, which compares false to everything.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise ValueError(f"delay must be a finite number >= 0 (seconds), got {value!r}")


@dataclass(frozen=True)
class Leaf:
    target: int
    delay: float = 0.0
    approvals_required: int = 1

    def __post_init__(self) -> None:
        _check_count("target", self.target, 0)
        _check_delay(self.delay)
        _check_count("approvals_required", self.approvals_required, 1)


@dataclass(frozen=True)
class Group:
    mode: Mode
    children: tuple[Node, ...]
    delay: float = 0.0
    approvals_required: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.mode, Mode):
            raise ValueError(f"mode must be one of {_MODE_NAMES}, got {self.mode!r}")
        if not isinstance(self.children, tuple) or not self.children:
            raise ValueError(f"children must be a non-empty tuple, got {self.children!r}")
        _check_delay(self.delay)
        _check_count("approvals_required", self.approvals_required, 1)


Node = Leaf | Group
_MODE_NAMES = ", ".join(repr(mode.value) for mode in Mode)


@dataclass(frozen=True)
class Vote:
    person: str
    approve: bool
    targets: frozenset[int]
    at: float


@dataclass(frozen=True)
class Progress:
    required: int
    approved: bool
    active: bool
    approved_by: tuple[str, ...] = ()
    children: tuple[Progress, ...] = ()
    target: int | None = None
    mode: Mode | None = None


@dataclass(frozen=True)
class Verdict:
    outcome: Resolution
    decisive: Vote | None
    progress: Progress


def default_policy(targets: int) -> Node:
    """Return today's behaviour for a route of `targets` targets: the first answer decides.

    Args:
        targets: how many targets the route has (at least one).

    Raises:
        ValueError: `targets` is less than one.
    """
    if targets < 1:
        raise ValueError(f"a route needs at least one target, got {targets}")
    if targets == 1:
        return Leaf(0)
    return Group(Mode.ANY_OF, tuple(Leaf(index) for index in range(targets)))


# --- serialization ---------------------------------------------------------------------------

_LEAF_KEYS = frozenset({"target", "delay", "approvals_required"})
_GROUP_KEYS = frozenset({"mode", "children", "delay", "approvals_required"})


def to_dict(node: Node) -> dict[str, Any]:
    """Return `node` as a JSON-able dict that `from_dict` turns back into an equal node."""
    if isinstance(node, Leaf):
        return {
            "target": node.target,
            "delay": node.delay,
            "approvals_required": node.approvals_required,
        }
    return {
        "mode": node.mode.value,
        "children": [to_dict(child) for child in node.children],
        "delay": node.delay,
        "approvals_required": node.approvals_required,
    }


def from_dict(data: object) -> Node:
    """Parse a policy stored by `to_dict`; `delay` and `approvals_required` may be omitted.

    Raises:
        ValueError: the data is not a valid policy; the message names the node and field,
            as in ``policy.children[1]: target must be an int >= 0, got -1``.
    """
    return _parse(data, "policy")


@contextmanager
def _at(path: str) -> Iterator[None]:
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _parse(data: object, path: str) -> Node:
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: expected an object, got {type(data).__name__}")
    if "target" in data and "mode" in data:
        raise ValueError(f"{path}: has both 'target' (a leaf) and 'mode' (a group)")
    if "target" not in data and "mode" not in data:
        raise ValueError(f"{path}: needs 'target' (a leaf) or 'mode' (a group)")
    allowed = _LEAF_KEYS if "target" in data else _GROUP_KEYS
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}, expected some of {sorted(allowed)}")
    if "target" in data:
        with _at(path):
            return Leaf(data["target"], data.get("delay", 0.0), data.get("approvals_required", 1))
    return _parse_group(data, path)


def _parse_group(data: Mapping[str, Any], path: str) -> Group:
    mode, children = data["mode"], data.get("children")
    if not isinstance(mode, str) or mode not in {m.value for m in Mode}:
        raise ValueError(f"{path}: mode must be one of {_MODE_NAMES}, got {mode!r}")
    if not isinstance(children, list | tuple) or not children:
        raise ValueError(f"{path}: children must be a non-empty list, got {children!r}")
    nodes = tuple(_parse(child, f"{path}.children[{i}]") for i, child in enumerate(children))
    with _at(path):
        return Group(Mode(mode), nodes, data.get("delay", 0.0), data.get("approvals_required", 1))


# --- activation ------------------------------------------------------------------------------


def _leaves(node: Node, offset: float = 0.0) -> Iterator[tuple[Leaf, float]]:
    """Yield every leaf in pre-order with its effective delay (its own plus its ancestors')."""
    start = offset + node.delay
    if isinstance(node, Leaf):
        yield node, start
        return
    for child in node.children:
        yield from _leaves(child, start)


def active_targets(policy: Node, now: float) -> frozenset[int]:
    """Return the targets of the leaves whose effective delay has passed at `now`."""
    return frozenset(leaf.target for leaf, start in _leaves(policy) if start <= now)


def next_activation(policy: Node, now: float) -> float | None:
    """Return the earliest effective delay after `now`, or None if every leaf is active."""
    return min((start for _, start in _leaves(policy) if start > now), default=None)


# --- evaluation ------------------------------------------------------------------------------


def evaluate(
    policy: Node, votes: Iterable[Vote], *, now: float, expires_at: float | None = None
) -> Verdict:
    """Replay `votes` against `policy` and say where the request stands at `now`.

    Votes are taken in order of `at` (ties keep their given order). A vote counts for a leaf
    whose target it names and which was active at `vote.at`; a person's first counted vote
    per leaf stands. The first counted rejection rejects; the counted approval that approves
    the root approves; either is the decisive vote, and later votes change nothing. Votes at
    or after `expires_at` never count, and once `now >= expires_at` an undecided request is
    expired.

    Args:
        policy: the request's policy tree.
        votes: every vote received, in any order.
        now: seconds since the request was created, for `Progress.active` and expiry.
        expires_at: seconds since creation at which the request expires, if it does.

    Returns:
        The outcome, the decisive vote (None unless approved or rejected) and the progress
        made by the votes that counted up to the decision.
    """
    leaves = list(_leaves(policy))
    counted: list[dict[str, int]] = [{} for _ in leaves]  # per leaf: approver -> vote order
    decisive: Vote | None = None
    for order, vote in enumerate(sorted(votes, key=lambda vote: vote.at)):
        if expires_at is not None and vote.at >= expires_at:
            break  # sorted, so no later vote counts either
        if _count(vote, order, leaves, counted) and (
            not vote.approve or _approved(policy, iter(counted))[0]
        ):
            decisive = vote
            break
    progress, _ = _tally(policy, iter(counted), 0.0, now)
    if decisive is not None:
        return Verdict(
            Resolution.APPROVED if decisive.approve else Resolution.REJECTED, decisive, progress
        )
    expired = expires_at is not None and now >= expires_at
    return Verdict(Resolution.EXPIRED if expired else Resolution.PENDING, None, progress)


def _count(
    vote: Vote, order: int, leaves: list[tuple[Leaf, float]], counted: list[dict[str, int]]
) -> bool:
    """Record `vote` where it counts; return whether it counted for any leaf."""
    fresh = [
        index
        for index, (leaf, start) in enumerate(leaves)
        if leaf.target in vote.targets and start <= vote.at and vote.person not in counted[index]
    ]
    if vote.approve:
        for index in fresh:
            counted[index][vote.person] = order
    return bool(fresh)


def _rule(node: Group, children: Iterable[bool], approvers: int) -> bool:
    """Whether a group is approved, given which children are and its distinct approvers."""
    combine = any if node.mode is Mode.ANY_OF else all
    return combine(children) and approvers >= node.approvals_required


def _approved(node: Node, counted: Iterator[dict[str, int]]) -> tuple[bool, set[str]]:
    """Whether `node` is approved, and by whom; the cheap check `evaluate` runs per vote."""
    if isinstance(node, Leaf):
        approvals = next(counted)
        return len(approvals) >= node.approvals_required, set(approvals)
    parts = [_approved(child, counted) for child in node.children]
    approvers = set().union(*(people for _, people in parts))
    return _rule(node, (ok for ok, _ in parts), len(approvers)), approvers


def _tally(
    node: Node, counted: Iterator[dict[str, int]], offset: float, now: float
) -> tuple[Progress, dict[str, int]]:
    """Build `node`'s progress, consuming its leaves' approvals from `counted` in pre-order."""
    start = offset + node.delay
    if isinstance(node, Leaf):
        approvals = next(counted)
        approved = len(approvals) >= node.approvals_required
        leaf = Progress(
            node.approvals_required, approved, start <= now, tuple(approvals), target=node.target
        )
        return leaf, approvals
    parts = [_tally(child, counted, start, now) for child in node.children]
    first: dict[str, int] = {}  # person -> their earliest counted approval in the subtree
    for _, approvals in parts:
        for person, order in approvals.items():
            first[person] = min(order, first.get(person, order))
    children = tuple(progress for progress, _ in parts)
    approved = _rule(node, (child.approved for child in children), len(first))
    active = any(child.active for child in children)
    approved_by = tuple(sorted(first, key=first.__getitem__))
    group = Progress(
        node.approvals_required, approved, active, approved_by, children, mode=node.mode
    )
    return group, first


# --- display ---------------------------------------------------------------------------------


def summary(progress: Progress) -> tuple[int, int]:
    """Return (approvals so far, approvals needed) for a "1 of 2 approvals" display.

    `needed` is the fewest approvals that could approve the node: a leaf needs its
    `required`; an any_of needs max(required, its cheapest child's need); an all_of needs
    max(required, the sum of its children's needs). `missing` is computed the same way from
    what is still lacking (max(required - distinct approvers, 0) at each node, min over an
    any_of's children, sum over an all_of's), and "so far" is needed - missing. So both the
    simple cases ("2 of 3 people", "each of two teams") read naturally, "so far" never
    decreases as approvals arrive, and it equals `needed` exactly when the node is approved.
    """
    needed, missing = _shortfall(progress)
    return needed - missing, needed


def _shortfall(progress: Progress) -> tuple[int, int]:
    """Return (approvals needed, approvals still missing) for one node of the progress tree."""
    own_missing = max(progress.required - len(progress.approved_by), 0)
    if progress.mode is None:
        return progress.required, own_missing
    parts = [_shortfall(child) for child in progress.children]
    needs, missings = [need for need, _ in parts], [missing for _, missing in parts]
    if progress.mode is Mode.ANY_OF:
        # As close as its closest child: any one child approving is enough.
        return max(progress.required, min(needs)), max(own_missing, min(missings))
    return max(progress.required, sum(needs)), max(own_missing, sum(missings))
