"""From a request and the routing config to its plan: the targets to contact (and when), the
approval policy over them, and its deadline, reminders and escalation.

A rule that decides (`decide = "approve" | "reject"`) settles the request at create, before
anything else: nobody is contacted, whatever the request's own `spec.channel` says. Any other
matching rule (the first in the file; `gateway.conditions` for its `when`) is the floor:
the request's own `spec.channel` (with HumanLayer's composite `any_of` / `all_of`) can only
add to it (`all_of` the rule's policy and the agent's channels), never replace or weaken it.
Without a rule, first match wins: the request's `spec.channel`, the API key's default
target, the project's policy or default target, then the web console alone. Timing settings
are looked up separately, field by field: the matching rule's, then the named team's, then the
project's, so a rule can put a deadline on requests an agent routes itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from gateway.conditions import Facts
from gateway.errors import InvalidInput
from gateway.policies.evaluator import Group, Leaf, Mode, Node
from gateway.routing import (
    DelayedTarget,
    EscalationStep,
    PolicyConfig,
    ProjectConfig,
    RoutingConfig,
    Rule,
    Timing,
    channel_targets,
    web_target,
)
from gateway.seam.targets import Target
from gateway.wire.models import ContactChannel, DelayedChannel

DEFAULT_MAX_REMINDERS = 3
T = TypeVar("T")


@dataclass(frozen=True)
class Schedule:
    """The timers of one request, in seconds after it was made."""

    expires_after: float | None = None
    expired_response: str | None = None
    remind_every: float | None = None
    max_reminders: int = DEFAULT_MAX_REMINDERS
    escalate: tuple[EscalationStep, ...] = ()

    def reminders(self) -> list[float]:
        """When each reminder is due: every `remind_every`, before the deadline."""
        if not self.remind_every:
            return []
        due = [self.remind_every * n for n in range(1, self.max_reminders + 1)]
        return [at for at in due if self.expires_after is None or at < self.expires_after]


@dataclass(frozen=True)
class Plan:
    targets: list[Target]
    delays: list[float]  # per target: seconds after the request before it is contacted
    policy: Node | None  # None: the first answer decides (no quorum, no all_of, no delay)
    schedule: Schedule = field(default_factory=Schedule)
    rule: Rule | None = None  # the config's rule that matched
    rule_label: str | None = None  # "rule NAME" (or "rule 3" for an unnamed one)

    @property
    def decided(self) -> bool:
        """The matching rule decides the request itself: nobody is contacted."""
        return self.rule is not None and self.rule.decide is not None

    def expires_at(self, requested_at: datetime, given: datetime | None) -> datetime | None:
        """The earlier of the request's own `expires_at` and its configured `expires_after`:
        an agent may shorten the operator's deadline, never lengthen it."""
        after = self.schedule.expires_after
        configured = None if after is None else requested_at + timedelta(seconds=after)
        return min((d for d in (given, configured) if d is not None), default=None)


class _Builder:
    """Collects targets while a policy tree is built over them."""

    def __init__(self, config: RoutingConfig, project: str, max_targets: int | None) -> None:
        self.config = config
        self.project = project
        self.max_targets = max_targets
        self.targets: list[Target] = []
        self.teams: list[str] = []  # teams named, for their timing settings

    def leaves(self, targets: list[Target]) -> list[Node]:
        start = len(self.targets)
        self.targets += targets
        if self.max_targets is not None and len(self.targets) > self.max_targets:
            raise _too_many_targets(self.max_targets)  # at once: the rest is never built
        return [Leaf(start + offset) for offset in range(len(targets))]

    def ref(self, ref: str, via: str, delay: float = 0.0, required: int | None = None) -> Node:
        """`team:NAME` (with the team's approvals_required unless `required` says otherwise),
        `person:NAME` or `web`."""
        nodes = self.leaves(self.config.expand(ref, via=via))
        kind, _, name = ref.partition(":")
        if kind == "team":
            self.teams.append(name)
            required = required or self.config.teams[name].approvals_required
        return _group(Mode.ANY_OF, nodes, delay, required or 1)

    def policy(self, policy: PolicyConfig, via: str, delay: float = 0.0) -> Node:
        mode = Mode.ALL_OF if policy.all_of is not None else Mode.ANY_OF
        nodes = []
        for branch in policy.all_of or policy.any_of or []:
            if isinstance(branch, str):
                nodes.append(self.ref(branch, via))
            elif isinstance(branch, DelayedTarget):
                nodes.append(self.ref(branch.target, via, branch.timeout))
            else:
                nodes.append(self.policy(branch, via))
        return _group(mode, nodes, delay, policy.approvals_required or 1)

    def rule(self, rule: Rule, via: str) -> Node:
        if rule.policy is not None:
            return self.policy(rule.policy, via)
        assert rule.target is not None  # the config's validation: a target or a policy
        return self.ref(rule.target, via, required=rule.approvals_required)

    def channel(self, channel: ContactChannel, delay: float = 0.0) -> Node | None:
        """A request's `spec.channel`: its own channels, then its composite branches."""
        refs = []
        if channel.team:
            refs.append(f"team:{channel.team}")
        if channel.person:
            refs.append(f"person:{channel.person}")
        nodes: list[Node] = []
        for ref in refs:
            self.config.check_project(ref, self.project)  # another project's people: 422
            nodes.append(self.ref(ref, "spec.channel"))
        direct = channel.model_copy(update={"team": None, "person": None})
        nodes += self.leaves(channel_targets(self.config, direct))
        for branch in channel.any_of or channel.all_of or []:
            if isinstance(branch, DelayedChannel):
                node = self.channel(branch.channel, branch.timeout)
            else:
                node = self.channel(branch)
            if node is not None:
                nodes.append(node)
        if not nodes:
            return None
        mode = Mode.ALL_OF if channel.all_of is not None else Mode.ANY_OF
        return _group(mode, nodes, delay, channel.approvals_required or 1)


def _too_many_targets(limit: int) -> InvalidInput:
    return InvalidInput(
        f"this request would contact more than {limit} targets (its channels, and each "
        f"channel of the teams and people it or the routing rules name); at most {limit} "
        "are allowed per request (GATEWAY_MAX_TARGETS)"
    )


def _group(mode: Mode, nodes: list[Node], delay: float, required: int) -> Node:
    """A group, or its only child when the group would add nothing."""
    if len(nodes) == 1 and required == 1:
        only = nodes[0]
        return _delayed_by(only, delay) if delay else only
    return Group(mode, tuple(nodes), delay, required)


def _delayed_by(node: Node, delay: float) -> Node:
    if isinstance(node, Leaf):
        return Leaf(node.target, node.delay + delay, node.approvals_required)
    return Group(node.mode, node.children, node.delay + delay, node.approvals_required)


def plan(
    config: RoutingConfig,
    *,
    channel: ContactChannel | None,
    facts: Facts,
    key_target: str | None,
    project: ProjectConfig | None,
    project_target: str | None,
    max_targets: int | None = None,
) -> Plan:
    """The request's plan; InvalidInput once it would contact more than `max_targets`."""
    matched = config.first_match(facts)
    if matched is not None and matched[0].decide is not None:  # before the agent's channel:
        return Plan([], [], None, rule=matched[0], rule_label=matched[1])  # nobody is asked
    builder = _Builder(config, facts.project, max_targets)
    rule, label = matched or (None, None)
    root = builder.channel(channel) if channel is not None else None
    timed_by = builder.teams  # the teams whose timing applies: the agent's, without a rule
    if rule is not None and label is not None:  # a floor: the agent's channels only add
        agents = len(builder.teams)
        floor = builder.rule(rule, label)
        root = floor if root is None else Group(Mode.ALL_OF, (floor, root))
        timed_by = builder.teams[agents:]  # the rule's own: the agent's teams time nothing
    if root is None and key_target:
        root = builder.ref(key_target, "api key")
    if root is None and project is not None and project.policy is not None:
        root = builder.policy(project.policy, "project")
    if root is None and project_target:
        root = builder.ref(project_target, "project")
    if root is None:
        root = builder.leaves([web_target("default")])[0]
    teams = [config.teams[name] for name in timed_by]
    return Plan(
        targets=builder.targets,
        delays=_delays(root, len(builder.targets)),
        policy=None if _first_answer_decides(root) else root,
        schedule=_schedule([rule, *teams, project]),
        rule=rule,
        rule_label=label,
    )


def _delays(root: Node, count: int) -> list[float]:
    delays = [0.0] * count
    _walk_delays(root, 0.0, delays)
    return delays


def _walk_delays(node: Node, offset: float, delays: list[float]) -> None:
    # A function of its own, not a closure: a recursive closure is a reference cycle per
    # create, left for the garbage collector.
    start = offset + node.delay
    if isinstance(node, Leaf):
        delays[node.target] = start
    else:
        for child in node.children:
            _walk_delays(child, start, delays)


def _first_answer_decides(node: Node) -> bool:
    """Whether the tree is today's behaviour: any one answer, anywhere, right away."""
    if node.delay or node.approvals_required != 1:
        return False
    if isinstance(node, Leaf):
        return True
    return node.mode is Mode.ANY_OF and all(map(_first_answer_decides, node.children))


def _schedule(sources: list[Timing | None]) -> Schedule:
    """Each setting from the first source that has it (rule, teams, project)."""
    found = [source for source in sources if source is not None]

    def first(pick: Callable[[Timing], T | None]) -> T | None:
        return next((value for s in found if (value := pick(s)) is not None), None)

    return Schedule(
        expires_after=first(lambda s: s.expires_after),
        expired_response=first(lambda s: s.expired_response),
        remind_every=first(lambda s: s.remind_every),
        max_reminders=first(lambda s: s.max_reminders) or DEFAULT_MAX_REMINDERS,
        escalate=tuple(first(lambda s: s.escalate) or ()),
    )
