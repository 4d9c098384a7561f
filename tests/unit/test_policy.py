"""The approval-policy evaluator: hand-written cases per rule, then an exhaustive sweep."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from gateway.policies.evaluator import (
    Group,
    Leaf,
    Mode,
    Node,
    Resolution,
    Verdict,
    Vote,
    active_targets,
    default_policy,
    evaluate,
    from_dict,
    next_activation,
    summary,
    to_dict,
)

ANY, ALL = Mode.ANY_OF, Mode.ALL_OF
PENDING, APPROVED, REJECTED, EXPIRED = Resolution


def yes(person: str, *targets: int, at: float = 0.0) -> Vote:
    return Vote(person, True, frozenset(targets), at)


def no(person: str, *targets: int, at: float = 0.0) -> Vote:
    return Vote(person, False, frozenset(targets), at)


def run(
    policy: Node, *votes: Vote, now: float = 1000.0, expires_at: float | None = None
) -> Verdict:
    return evaluate(policy, votes, now=now, expires_at=expires_at)


def sequential(*votes: Vote) -> tuple[Vote, ...]:
    """The same votes, one second apart, so their order is the order written."""
    return tuple(Vote(v.person, v.approve, v.targets, float(i)) for i, v in enumerate(votes))


QUORUM = Group(ANY, (Leaf(0), Leaf(1), Leaf(2)), approvals_required=2)
BOTH = Group(ALL, (Leaf(0), Leaf(1)))
ALL_IN_ANY = Group(ANY, (Group(ALL, (Leaf(0), Leaf(1))), Leaf(2)))
ANY_IN_ALL = Group(ALL, (Group(ANY, (Leaf(0), Leaf(1))), Leaf(2)))
DELAYED = Group(ANY, (Leaf(0), Leaf(1, delay=60.0)))
# Effective delays: leaf 0 at 1, leaf 1 at 1 + 10 + 5 = 16, leaf 2 at 1 + 10 = 11.
NESTED_DELAYS = Group(
    ANY, (Leaf(0), Group(ALL, (Leaf(1, delay=5.0), Leaf(2)), delay=10.0)), delay=1.0
)
HAND_WRITTEN: list[Node] = [
    Leaf(0),
    Leaf(0, approvals_required=2),
    default_policy(3),
    QUORUM,
    BOTH,
    ALL_IN_ANY,
    ANY_IN_ALL,
    DELAYED,
    NESTED_DELAYS,
    Group(ALL, (Leaf(0), Leaf(1)), approvals_required=3, delay=2.5),
]


# --- default policy and the simple shapes -----------------------------------------------------


def test_default_policy_is_a_leaf_or_a_flat_any_of() -> None:
    assert default_policy(1) == Leaf(0)
    assert default_policy(3) == Group(ANY, (Leaf(0), Leaf(1), Leaf(2)))
    with pytest.raises(ValueError, match="at least one target"):
        default_policy(0)


@pytest.mark.parametrize("target", range(3))
@pytest.mark.parametrize("approve", [True, False])
def test_default_policy_the_first_answer_from_anywhere_decides(target: int, approve: bool) -> None:
    first = Vote("alice", approve, frozenset({target}), 1.0)
    verdict = run(default_policy(3), first, no("bob", 0, at=2.0), yes("carol", 1, at=3.0))
    assert verdict.outcome is (APPROVED if approve else REJECTED)
    assert verdict.decisive == first


def test_single_leaf() -> None:
    assert run(Leaf(0)).outcome is PENDING
    assert run(Leaf(0), yes("alice", 0)).outcome is APPROVED
    assert run(Leaf(0), no("alice", 0)).outcome is REJECTED
    assert run(Leaf(0), yes("alice", 1), no("bob", 7)).outcome is PENDING  # not its target
    two = Leaf(0, approvals_required=2)
    assert run(two, *sequential(yes("alice", 0), yes("alice", 0))).outcome is PENDING
    assert run(two, *sequential(yes("alice", 0), yes("bob", 0))).outcome is APPROVED


@pytest.mark.parametrize(
    "targets", [s for n in range(4) for s in itertools.combinations(range(3), n)]
)
@pytest.mark.parametrize("policy", [default_policy(3), Group(ALL, (Leaf(0), Leaf(1), Leaf(2)))])
def test_any_of_needs_one_child_and_all_of_needs_every_child(
    policy: Group, targets: tuple[int, ...]
) -> None:
    verdict = run(policy, *(yes(f"p{t}", t) for t in targets))
    approved = len(targets) >= 1 if policy.mode is ANY else len(targets) == 3
    assert verdict.outcome is (APPROVED if approved else PENDING)


@pytest.mark.parametrize(
    "targets", [s for n in range(4) for s in itertools.combinations(range(3), n)]
)
def test_nested_groups(targets: tuple[int, ...]) -> None:
    # One person approving through several targets satisfies each of them.
    votes = [yes("alice", t, at=float(i)) for i, t in enumerate(targets)]
    given = set(targets)
    all_in_any = {0, 1} <= given or 2 in given
    any_in_all = bool({0, 1} & given) and 2 in given
    assert run(ALL_IN_ANY, *votes).outcome is (APPROVED if all_in_any else PENDING)
    assert run(ANY_IN_ALL, *votes).outcome is (APPROVED if any_in_all else PENDING)


# --- quorum and one-person-once --------------------------------------------------------------


def test_quorum_one_person_in_two_copies_is_one_approval() -> None:
    alice_0, alice_1, bob_2 = sequential(yes("alice", 0), yes("alice", 1), yes("bob", 2))
    pending = run(QUORUM, alice_0, alice_1)
    assert pending.outcome is PENDING and pending.decisive is None
    assert pending.progress.approved_by == ("alice",)
    assert summary(pending.progress) == (1, 2)
    approved = run(QUORUM, alice_0, alice_1, bob_2)
    assert approved.outcome is APPROVED
    assert approved.decisive == bob_2
    assert approved.progress.approved_by == ("alice", "bob")
    assert summary(approved.progress) == (2, 2)


def test_one_vote_through_several_targets_counts_once_per_node() -> None:
    both = yes("alice", 0, 1, 2)
    assert run(QUORUM, both).outcome is PENDING
    assert run(BOTH, both).outcome is APPROVED  # the same person may satisfy two leaves


def test_the_first_counted_vote_of_a_person_at_a_leaf_stands() -> None:
    # An approval then a rejection by the same person through the same leaf: the rejection
    # is a duplicate at that leaf and is ignored; through another leaf it counts, and vetoes.
    votes = sequential(yes("alice", 0), no("alice", 0))
    assert run(QUORUM, *votes).outcome is PENDING
    votes = sequential(yes("alice", 0), no("alice", 1))
    assert run(QUORUM, *votes).outcome is REJECTED


# --- veto ------------------------------------------------------------------------------------


def test_a_rejection_after_partial_approvals_rejects() -> None:
    votes = sequential(yes("alice", 0), no("bob", 2), yes("carol", 1))
    verdict = run(QUORUM, *votes)
    assert verdict.outcome is REJECTED
    assert verdict.decisive == votes[1]
    assert verdict.progress.approved_by == ("alice",)


@pytest.mark.parametrize(("policy", "target"), [(BOTH, 0), (ANY_IN_ALL, 1)])
def test_a_rejection_in_an_already_approved_all_of_branch_rejects(
    policy: Group, target: int
) -> None:
    # An approval completes the all_of's first branch, then a rejection arrives through it.
    votes = sequential(yes("alice", target), no("bob", 0))
    partial = run(policy, votes[0])
    assert partial.progress.children[0].approved and partial.outcome is PENDING
    assert run(policy, *votes).outcome is REJECTED


def test_a_rejection_that_does_not_count_changes_nothing() -> None:
    approval = yes("alice", 0, at=1.0)
    before = run(QUORUM, approval)
    assert run(QUORUM, approval, no("bob", 5, at=2.0)) == before  # not a target of the policy
    assert run(QUORUM, approval, no("bob", at=2.0)) == before  # through no target at all
    assert run(Leaf(0), no("bob", 1)).outcome is PENDING  # not this leaf's target
    assert run(DELAYED, no("bob", 1, at=59.0)).outcome is PENDING  # leaf 1 not yet active
    assert run(DELAYED, no("bob", 1, at=60.0)).outcome is REJECTED


# --- delayed branches ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "active", "upcoming"),
    [(0.0, {0}, 60.0), (59.9, {0}, 60.0), (60.0, {0, 1}, None), (61.0, {0, 1}, None)],
)
def test_a_delayed_leaf_activates_at_its_delay(
    now: float, active: set[int], upcoming: float | None
) -> None:
    assert active_targets(DELAYED, now) == active
    assert next_activation(DELAYED, now) == upcoming
    progress = run(DELAYED, now=now).progress
    assert [child.active for child in progress.children] == [True, 1 in active]


@pytest.mark.parametrize(
    ("now", "active", "upcoming"),
    [
        (0.0, set(), 1.0),
        (1.0, {0}, 11.0),
        (10.9, {0}, 11.0),
        (11.0, {0, 2}, 16.0),
        (15.9, {0, 2}, 16.0),
        (16.0, {0, 1, 2}, None),
    ],
)
def test_nested_group_delays_add_up(now: float, active: set[int], upcoming: float | None) -> None:
    assert active_targets(NESTED_DELAYS, now) == active
    assert next_activation(NESTED_DELAYS, now) == upcoming
    progress = run(NESTED_DELAYS, now=now).progress
    assert progress.active is bool(active)  # a group is active once any of its leaves is
    assert progress.children[1].active is bool(active & {1, 2})


@pytest.mark.parametrize(("now", "active"), [(0.0, False), (4.9, False), (5.0, True)])
def test_a_group_is_active_once_any_of_its_leaves_is(now: float, active: bool) -> None:
    policy = Group(ALL, (Leaf(0, delay=5.0), Leaf(1, delay=7.0)))
    assert run(policy, now=now).progress.active is active


def test_a_vote_through_a_delayed_leaf_before_its_delay_does_not_count() -> None:
    early = yes("alice", 1, at=59.0)
    assert run(DELAYED, early, now=100.0).outcome is PENDING  # active now, but not at 59 s
    assert run(DELAYED, early, now=100.0).progress.approved_by == ()
    on_time = yes("alice", 1, at=60.0)
    assert run(DELAYED, early, on_time).decisive == on_time
    # Nested: leaf 1 becomes active at 16 s, leaf 2 at 11 s.
    votes = (yes("alice", 2, at=11.0), yes("bob", 1, at=15.0), yes("bob", 1, at=16.0))
    assert run(NESTED_DELAYS, *votes[:2]).outcome is PENDING
    assert run(NESTED_DELAYS, *votes).decisive == votes[2]
    assert run(NESTED_DELAYS, yes("alice", 0, at=0.5)).outcome is PENDING
    assert run(NESTED_DELAYS, yes("alice", 0, at=1.0)).outcome is APPROVED


# --- expiry ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("now", "outcome"), [(9.0, PENDING), (10.0, EXPIRED), (11.0, EXPIRED)])
def test_expired_once_the_deadline_passes_undecided(now: float, outcome: Resolution) -> None:
    verdict = run(QUORUM, yes("alice", 0, at=1.0), now=now, expires_at=10.0)
    assert verdict.outcome is outcome and verdict.decisive is None
    assert verdict.progress.approved_by == ("alice",)


@pytest.mark.parametrize("at", [10.0, 10.5])
@pytest.mark.parametrize("approve", [True, False])
def test_a_vote_at_or_after_the_deadline_does_not_count(at: float, approve: bool) -> None:
    late = Vote("alice", approve, frozenset({0}), at)
    expired = run(Leaf(0), late, now=20.0, expires_at=10.0)
    assert expired.outcome is EXPIRED and expired.progress.approved_by == ()
    # Before the deadline has passed on the clock, a late vote still does not count.
    assert run(Leaf(0), late, now=9.0, expires_at=10.0).outcome is PENDING


@pytest.mark.parametrize("approve", [True, False])
def test_decided_before_the_deadline_stays_decided(approve: bool) -> None:
    vote = Vote("alice", approve, frozenset({0}), 9.99)
    for now in (9.99, 10.0, 1e9):
        verdict = run(Leaf(0), vote, no("bob", 0, at=10.0), now=now, expires_at=10.0)
        assert verdict.outcome is (APPROVED if approve else REJECTED)
        assert verdict.decisive == vote


# --- order -----------------------------------------------------------------------------------


def test_the_decisive_vote_resolved_it_and_later_votes_change_nothing() -> None:
    votes = sequential(yes("alice", 0), yes("bob", 1), no("carol", 0), yes("dave", 1))
    verdict = run(BOTH, *votes)
    assert verdict.outcome is APPROVED
    assert verdict.decisive == votes[1]
    assert verdict == run(BOTH, *votes[:2])  # the progress stops at the decision too
    assert run(BOTH, *reversed(votes)) == verdict  # sorted by `at`, whatever the input order


@pytest.mark.parametrize("first", [True, False])
def test_votes_at_the_same_time_keep_their_given_order(first: bool) -> None:
    a, b = Vote("alice", first, frozenset({0}), 5.0), Vote("bob", not first, frozenset({0}), 5.0)
    assert run(default_policy(2), a, b).decisive == a
    assert run(default_policy(2), b, a).decisive == b


# --- progress and summary --------------------------------------------------------------------


def test_progress_mirrors_the_policy() -> None:
    # alice's first counted approval (through leaf 1) precedes bob's, so she is listed first.
    votes = sequential(yes("alice", 1), yes("bob", 1), yes("alice", 0))
    progress = run(ANY_IN_ALL, *votes, now=0.5).progress
    inner, leaf_2 = progress.children
    assert (progress.mode, inner.mode, leaf_2.mode) == (ALL, ANY, None)
    assert [child.target for child in inner.children] == [0, 1]
    assert leaf_2.target == 2 and progress.target is None and inner.target is None
    assert [child.approved_by for child in inner.children] == [("alice",), ("alice", "bob")]
    assert inner.approved_by == progress.approved_by == ("alice", "bob")
    assert leaf_2.approved_by == () and not leaf_2.approved
    assert inner.approved and not progress.approved
    assert progress.required == 1 and progress.active


SUMMARY_CASES: list[tuple[Node, tuple[Vote, ...], tuple[int, int]]] = [
    (Leaf(0), (), (0, 1)),
    (Leaf(0), (yes("a", 0),), (1, 1)),
    (Leaf(0, approvals_required=2), (yes("a", 0),), (1, 2)),
    (default_policy(3), (), (0, 1)),
    (QUORUM, sequential(yes("a", 0), yes("a", 1)), (1, 2)),
    (BOTH, (yes("a", 0),), (1, 2)),
    (BOTH, sequential(yes("a", 0), yes("a", 1)), (2, 2)),  # one person for each team
    (ANY_IN_ALL, (yes("a", 1),), (1, 2)),
    (ALL_IN_ANY, (yes("a", 0),), (0, 1)),  # the cheapest way (leaf 2) has none yet
    (Group(ALL, (Leaf(0), Leaf(1)), approvals_required=3), (yes("a", 0), yes("b", 1)), (2, 3)),
    (Group(ANY, (Leaf(0, approvals_required=2), Leaf(1))), (yes("a", 0),), (0, 1)),
]


@pytest.mark.parametrize(("policy", "votes", "expected"), SUMMARY_CASES)
def test_summary(policy: Node, votes: tuple[Vote, ...], expected: tuple[int, int]) -> None:
    progress = run(policy, *votes).progress
    assert summary(progress) == expected
    assert (expected[0] == expected[1]) is progress.approved


# --- serialization ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", HAND_WRITTEN)
def test_to_dict_round_trips_through_json(policy: Node) -> None:
    data = json.loads(json.dumps(to_dict(policy)))
    assert from_dict(data) == policy


def test_from_dict_fills_in_defaults() -> None:
    data = {"mode": "all_of", "children": [{"target": 0}, {"target": 3, "delay": 5}]}
    assert from_dict(data) == Group(ALL, (Leaf(0), Leaf(3, delay=5.0)))


def group(*children: Any, **fields: Any) -> dict[str, Any]:
    return {"mode": "any_of", "children": list(children), **fields}


MALFORMED: list[tuple[Any, str]] = [
    ([{"target": 0}], "policy: expected an object, got list"),
    (None, "policy: expected an object, got NoneType"),
    ({}, "policy: needs 'target' (a leaf) or 'mode' (a group)"),
    ({"target": 0, "mode": "any_of"}, "policy: has both 'target' (a leaf) and 'mode' (a group)"),
    ({"target": 0, "children": []}, "policy: unknown keys ['children']"),
    (group({"target": 0}, extra=1), "policy: unknown keys ['extra']"),
    ({"mode": "some_of", "children": [{"target": 0}]}, "policy: mode must be one of"),
    ({"mode": None, "children": [{"target": 0}]}, "got None"),
    ({"mode": ["any_of"], "children": [{"target": 0}]}, "got ['any_of']"),
    (group(), "policy: children must be a non-empty list, got []"),
    ({"mode": "all_of"}, "policy: children must be a non-empty list, got None"),
    ({"mode": "all_of", "children": {"target": 0}}, "children must be a non-empty list"),
    ({"target": -1}, "policy: target must be an int >= 0, got -1"),
    ({"target": "0"}, "policy: target must be an int >= 0, got '0'"),
    ({"target": 1.0}, "policy: target must be an int >= 0, got 1.0"),
    ({"target": True}, "policy: target must be an int >= 0, got True"),
    ({"target": None}, "policy: target must be an int >= 0, got None"),
    ({"target": 0, "delay": -1}, "policy: delay must be a finite number >= 0"),
    ({"target": 0, "delay": "5"}, "policy: delay must be a finite number >= 0 (seconds), got '5'"),
    ({"target": 0, "delay": float("nan")}, "delay must be a finite number >= 0 (seconds), got nan"),
    ({"target": 0, "delay": float("inf")}, "delay must be a finite number >= 0 (seconds), got inf"),
    ({"target": 0, "delay": False}, "delay must be a finite number >= 0 (seconds), got False"),
    (group({"target": 0}, delay=-0.5), "policy: delay must be a finite number >= 0"),
    ({"target": 0, "approvals_required": 0}, "policy: approvals_required must be an int >= 1"),
    (group({"target": 0}, approvals_required=0), "policy: approvals_required must be an int >= 1"),
    (group({"target": 0}, approvals_required=1.5), "approvals_required must be an int >= 1"),
    (group({"target": 0}, approvals_required="2"), "approvals_required must be an int >= 1"),
    (group({"target": 0}, {"target": -2}), "policy.children[1]: target must be an int >= 0"),
    (group(group({"target": 0}, 7)), "policy.children[0].children[1]: expected an object, got int"),
    (
        group(group({"mode": "x", "children": [{"target": 0}]})),
        "policy.children[0].children[0]: mode",
    ),
]


@pytest.mark.parametrize(("data", "message"), MALFORMED)
def test_from_dict_names_what_is_wrong(data: Any, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        from_dict(data)
    assert message in str(raised.value), str(raised.value)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Leaf(-1), "target must be an int >= 0"),
        (lambda: Leaf(0, delay=-1.0), "delay must be a finite number >= 0"),
        (lambda: Leaf(0, approvals_required=0), "approvals_required must be an int >= 1"),
        (lambda: Group(ANY, ()), "children must be a non-empty tuple"),
        (lambda: Group("any_of", (Leaf(0),)), "mode must be one of 'any_of', 'all_of'"),  # type: ignore[arg-type]
    ],
)
def test_an_invalid_node_cannot_be_built(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


# --- the exhaustive sweep --------------------------------------------------------------------

REQUIRED = (1, 2)


def _groups(options: list[tuple[Node, ...]]) -> list[Group]:
    return [
        Group(mode, kids, approvals_required=r)
        for kids in options
        for mode in Mode
        for r in REQUIRED
    ]


def _flat(start: int, count: int) -> list[tuple[Node, ...]]:
    # Non-decreasing approvals_required: other orders are the same tree with targets renamed.
    return [
        tuple(Leaf(start + i, approvals_required=r) for i, r in enumerate(required))
        for required in itertools.combinations_with_replacement(REQUIRED, count)
    ]


def family() -> list[Node]:
    """Every policy of depth <= 2 over 1 to 3 leaves (targets 0.. in pre-order), both modes,
    approvals_required 1 or 2 at every node; up to renaming targets, which the sweep's votes
    are symmetric in. A nested group has two children (with one it is a leaf in disguise)."""
    leaves: list[Node] = [Leaf(0, approvals_required=r) for r in REQUIRED]
    flat = _groups(_flat(0, 1) + _flat(0, 2) + _flat(0, 3))
    nested = _groups([(leaf, inner) for (leaf,) in _flat(0, 1) for inner in _groups(_flat(1, 2))])
    return leaves + flat + nested


FAMILY = family()


def _count_targets(node: Node) -> int:
    return 1 if isinstance(node, Leaf) else sum(_count_targets(child) for child in node.children)


def _model_approved(node: Node, approvals: set[tuple[str, int]]) -> tuple[bool, set[str]]:
    """The rules read straight off the brief, over an unordered set of (person, target)."""
    if isinstance(node, Leaf):
        people = {person for person, target in approvals if target == node.target}
        return len(people) >= node.approvals_required, people
    parts = [_model_approved(child, approvals) for child in node.children]
    people = set().union(*(p for _, p in parts))
    children = [ok for ok, _ in parts]
    enough = any(children) if node.mode is ANY else all(children)
    return enough and len(people) >= node.approvals_required, people


def _target(vote: Vote) -> int:
    (target,) = vote.targets
    return target


def _check_step(policy: Node, votes: tuple[Vote, ...], before: Verdict, after: Verdict) -> None:
    """The invariants between the verdict on `votes[:-1]` and on `votes`."""
    last = votes[-1]
    earlier = {(v.person, _target(v)) for v in votes[:-1] if v.approve}
    if before.outcome is not PENDING:
        assert after == before  # a later vote never changes a resolved outcome
        return
    if (last.person, _target(last)) in earlier:
        assert after == before  # a duplicate (approval or change of mind) changes nothing
        return
    if not last.approve:
        assert after.outcome is REJECTED and after.decisive == last
        assert after.progress == before.progress
        return
    approved, _ = _model_approved(policy, earlier | {(last.person, _target(last))})
    assert after.outcome is (APPROVED if approved else PENDING)
    assert after.decisive == (last if approved else None)
    assert after.progress.approved is approved
    assert after.progress.approved_by == tuple(dict.fromkeys(v.person for v in votes if v.approve))
    (so_far, needed), (was, was_needed) = summary(after.progress), summary(before.progress)
    assert needed == was_needed and so_far >= was  # summary never decreases
    assert (so_far == needed) is approved


def _check_approval(votes: tuple[Vote, ...], verdict: Verdict) -> None:
    """APPROVED only if every rejection before the decisive vote was one that did not count."""
    if verdict.outcome is not APPROVED:
        return
    assert verdict.decisive is not None
    cut = votes.index(verdict.decisive)
    for index, vote in enumerate(votes[:cut]):
        if not vote.approve:
            counted_before = {(v.person, _target(v)) for v in votes[:index] if v.approve}
            assert (vote.person, _target(vote)) in counted_before


def _sweep(policy: Node, votes: tuple[Vote, ...], before: Verdict, choices: list[Vote]) -> int:
    """Extend `votes` by every choice, up to three votes; return how many verdicts it checked."""
    if len(votes) == 3:
        return 0
    checked = 0
    # Persons are interchangeable, so the first vote is always alice's.
    for choice in choices if votes else [c for c in choices if c.person == "alice"]:
        extended = (*votes, Vote(choice.person, choice.approve, choice.targets, float(len(votes))))
        after = evaluate(policy, extended, now=10.0)
        _check_step(policy, extended, before, after)
        _check_approval(extended, after)
        checked += 1
        # A resolved prefix is extended by one vote each (checked above), not further.
        if after.outcome is PENDING:
            checked += _sweep(policy, extended, after, choices)
    return checked


def _name(node: Node) -> str:
    """A short test id: `all2(0:1,any1(1:1,2:2))` is an all_of needing 2 approvers, etc."""
    if isinstance(node, Leaf):
        return f"{node.target}:{node.approvals_required}"
    inner = ",".join(_name(child) for child in node.children)
    return f"{node.mode.value[:3]}{node.approvals_required}({inner})"


@pytest.mark.parametrize("policy", FAMILY, ids=_name)
def test_exhaustive_invariants(policy: Node) -> None:
    assert from_dict(to_dict(policy)) == policy
    choices = [
        Vote(person, approve, frozenset({target}), 0.0)
        for person in ("alice", "bob")
        for approve in (True, False)
        for target in range(_count_targets(policy))
    ]
    empty = evaluate(policy, (), now=10.0)
    assert empty.outcome is PENDING and summary(empty.progress)[0] == 0
    assert _sweep(policy, (), empty, choices) > 0


def test_the_family_covers_every_shape() -> None:
    assert len(FAMILY) == len(set(FAMILY)) == 2 + 4 * (2 + 3 + 4) + 4 * 2 * 4 * 3
    nested = [n for n in FAMILY if isinstance(n, Group) and isinstance(n.children[-1], Group)]
    modes = {(n.mode, n.children[-1].mode) for n in nested if isinstance(n.children[-1], Group)}
    assert len(nested) == 96 and modes == set(itertools.product(Mode, Mode))
