"""Routing: from a request to the targets that should see it.

The config file's people, teams, rules and projects, and how a target reference expands;
`gateway.policies.plans` decides which targets a request gets.
"""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from gateway.conditions import BadExpression, Condition, Facts
from gateway.errors import InvalidInput
from gateway.lifecycle import Kind
from gateway.seam.targets import Target
from gateway.vocabulary import ChannelName
from gateway.wire.models import MAX_DELAY_SECONDS, ContactChannel


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: object) -> object:
    """ "90s", "30m", "2h", "1d", or a number of seconds."""
    if isinstance(value, str) and value[-1:] in _UNITS and value[:-1].strip():
        try:
            return float(value[:-1]) * _UNITS[value[-1]]
        except ValueError:
            pass
    if isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration: use seconds or e.g. 90s, 30m, 2h, 1d")
    return value


Duration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0, le=MAX_DELAY_SECONDS)]


MIN_RETENTION_SECONDS = 86400.0  # a day: anything shorter would redact requests being read


def _at_least_a_day(seconds: float) -> float:
    if seconds < MIN_RETENTION_SECONDS:
        raise ValueError(f"a retention shorter than 1 day is refused ({seconds:g} s): use e.g. 90d")
    return seconds


class RetentionConfig(Strict):
    """How long a decided request keeps its content (gateway.policies.retention)."""

    decided_after: Annotated[
        float, BeforeValidator(parse_duration), AfterValidator(_at_least_a_day)
    ]


class EscalationStep(Strict):
    after: Duration
    target: str  # team:NAME, person:NAME or web: added to the request after `after`


class Timing(Strict):
    """Deadlines, reminders and escalation (gateway.policies.timers); a rule's setting wins over its
    team's, a team's over its project's."""

    expires_after: Duration | None = None
    expired_response: str | None = None  # a question's answer at its deadline
    remind_every: Duration | None = None
    max_reminders: Annotated[int, Field(ge=1, le=20)] | None = None
    escalate: list[EscalationStep] | None = None


class DelayedTarget(Strict):
    timeout: Duration
    target: str


class PolicyConfig(Strict):
    """A policy in the config file: any_of / all_of over targets, each a `team:NAME`,
    `person:NAME`, `web`, a {timeout, target} delayed branch or a nested policy."""

    any_of: list[str | DelayedTarget | PolicyConfig] | None = None
    all_of: list[str | DelayedTarget | PolicyConfig] | None = None
    approvals_required: Annotated[int, Field(ge=1, le=100)] | None = None

    @model_validator(mode="after")
    def _one_mode(self) -> PolicyConfig:
        if (self.any_of is None) == (self.all_of is None):
            raise ValueError("a policy needs exactly one of any_of or all_of")
        return self

    def refs(self) -> list[str]:
        """Every target reference in the tree."""
        found: list[str] = []
        for branch in self.any_of or self.all_of or []:
            if isinstance(branch, str):
                found.append(branch)
            elif isinstance(branch, DelayedTarget):
                found.append(branch.target)
            else:
                found += branch.refs()
        return found


class Person(Strict):
    name: str | None = None
    slack: str | None = None
    discord: str | None = None
    email: str | None = None
    teams: str | None = None  # Microsoft Entra (AAD) object id
    telegram: str | None = Field(default=None, pattern=r"^\d{1,20}$")  # Telegram user id
    # Web console sign-in: an argon2 hash (`gateway console hash-password`), and the
    # projects this person works in ("*": all): sees in the console, and may be named in
    # the spec.channel of that project's agents.
    password_hash: str | None = Field(default=None, repr=False)
    projects: list[str] = Field(default_factory=lambda: ["default"])
    # An admin decides any request of their projects in the console, sent to them or not.
    admin: bool = False


class Team(Timing):
    members: list[str] = Field(default_factory=list)
    # The projects whose agents may name this team in their own spec.channel ("*": all).
    projects: list[str] = Field(default_factory=lambda: ["*"])
    slack_channel: str | None = None
    discord_channel: str | None = None
    teams_channel: str | None = None  # a Teams channel's conversation id (19:…@thread.tacv2)
    telegram_chat: str | None = Field(default=None, pattern=r"^-?\d{1,20}$")  # a group's id
    email: str | None = None
    approvals_required: Annotated[int, Field(ge=1, le=100)] | None = None  # distinct people


class Rule(Timing):
    """Which requests it is for (globs, and a CEL `when` over the request), and either who
    must answer them (`target` or `policy`) or the decision it makes itself (`decide`)."""

    name: str | None = None  # required with `when` or `decide`: records and logs name it
    fn: str = "*"
    run_id: str = "*"
    kind: Kind | None = None
    when: str | None = None  # gateway.conditions
    decide: Literal["approve", "reject"] | None = None  # decided at create; nobody is asked
    comment: str | None = None  # the decision's comment
    target: str | None = None
    # Distinct people of `target` who must approve (instead of its team's own setting).
    approvals_required: Annotated[int, Field(ge=1, le=100)] | None = None
    policy: PolicyConfig | None = None  # instead of `target`
    # Whether its approvers are offered "Approve and allow…" (where one answer decides) and
    # "Edit and approve".
    grants: bool = True
    editable: bool = True
    _condition: Condition | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _compile_when(self) -> Rule:
        if (self.when is not None or self.decide is not None) and not self.name:
            raise ValueError("a rule with `when` or `decide` needs a `name`")
        if self.decide is not None and self.kind == Kind.HUMAN_CONTACT:
            raise ValueError(f"rule {self.name!r}: a question cannot be approved or rejected")
        if self.decide is not None:
            self.kind = Kind.FUNCTION_CALL  # it decides function calls only
        if self.approvals_required is not None and self.target is None:
            raise ValueError(
                f"rule {self.name!r}: approvals_required goes with `target` "
                "(in a policy, set it on the policy)"
            )
        if self.comment is not None and self.decide is None:
            raise ValueError(f"rule {self.name!r}: `comment` goes with `decide`")
        if self.when is not None:
            try:
                self._condition = Condition(str(self.name), self.when)
            except BadExpression as error:
                raise ValueError(f"rule {self.name!r}: its `when` is refused: {error}") from None
        return self

    @property
    def condition(self) -> Condition | None:
        return self._condition

    def matches(self, facts: Facts) -> bool:
        return self.holds(facts, self._condition)

    def holds(self, facts: Facts, condition: Condition | None) -> bool:
        """Whether it matches, given its `condition` (`RoutingConfig.first_match` has each
        rule's read already: a pydantic private attribute costs ~1.6 µs a read)."""
        return self._globs_match(facts) and (condition is None or condition.holds(facts))

    def _globs_match(self, facts: Facts) -> bool:
        return (
            (self.kind is None or self.kind == facts.kind)
            and fnmatchcase(facts.fn, self.fn)
            and fnmatchcase(facts.run_id, self.run_id)
        )

    def explain(self, facts: Facts) -> str:
        """Why it matches these facts or not, in words (`gateway rules test`)."""
        for what, value, pattern in (
            ("fn", facts.fn, self.fn),
            ("run_id", facts.run_id, self.run_id),
        ):
            if not fnmatchcase(value, pattern):
                return f"{what} {value!r} is not {pattern!r}"
        if self.kind is not None and self.kind != facts.kind:
            return f"kind {facts.kind} is not {self.kind.value}"
        return "matches" if self._condition is None else f"when: {self._condition.explain(facts)}"


class ProjectConfig(Timing):
    default_target: str | None = None
    policy: PolicyConfig | None = None  # instead of `default_target`
    # An agent's spec.channel.email.template renders (in a process of its own, on a budget)
    # only when its project allows it; otherwise the gateway's own template is used.
    allow_agent_templates: bool = False
    # Decided requests older than this lose their content to its hashes (None: kept).
    retention: RetentionConfig | None = None


class WebhookConfig(Strict):
    project: str = "default"
    url: str
    secret_env: str = Field(description="environment variable holding the whsec_ secret")
    events: list[str] | None = None


class RoutingConfig(Strict):
    people: dict[str, Person] = Field(default_factory=dict)
    teams: dict[str, Team] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)
    projects: dict[str, ProjectConfig] = Field(default_factory=dict)
    webhooks: list[WebhookConfig] = Field(default_factory=list)
    # The longest standing grant a person may give ("Approve and allow…"), and whether
    # "until revoked" is offered too.
    grant_max: Duration = 8 * 3600
    grant_until_revoked: bool = False
    # Each rule with its label and compiled `when`, read once per request rather than once
    # per rule (a pydantic private attribute costs ~1.6 µs a read).
    _matchers: list[tuple[Rule, str, Condition | None]] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _references_resolve(self) -> RoutingConfig:
        for team_name, team in self.teams.items():
            for member in team.members:
                if member not in self.people:
                    raise ValueError(f"team {team_name!r} lists unknown person {member!r}")
        names = [rule.name for rule in self.rules if rule.name]
        if len(set(names)) != len(names):
            raise ValueError(
                f"two rules are named {next(n for n in names if names.count(n) > 1)!r}"
            )
        for index, rule in enumerate(self.rules):
            self._check_refs(rule, rule_label(rule, index), rule.target)
        self._matchers = [(r, rule_label(r, i), r.condition) for i, r in enumerate(self.rules)]
        for name, project in self.projects.items():
            self._check_refs(project, f"project {name}", project.default_target)
        for name, team in self.teams.items():
            self._check_refs(team, f"team {name}", None)
        return self

    def _check_refs(self, where: Timing, via: str, target: str | None) -> None:
        policy: PolicyConfig | None = getattr(where, "policy", None)
        if isinstance(where, Rule) and where.decide is not None:
            if target is not None or policy is not None:
                raise ValueError(f"{via} decides itself: it takes no target or policy")
        elif isinstance(where, Rule) and (target is None) == (policy is None):
            raise ValueError(f"{via}: give a target or a policy (one of them)")
        refs = [*([target] if target else []), *(policy.refs() if policy else [])]
        refs += [step.target for step in where.escalate or []]
        for ref in refs:
            self.expand(ref, via=via)

    def first_match(self, facts: Facts) -> tuple[Rule, str] | None:
        """The first rule that matches the request, with its label."""
        for rule, label, condition in self._matchers:
            if rule.holds(facts, condition):
                return rule, label
        return None

    def expand(self, ref: str, *, via: str) -> list[Target]:
        """Targets for `team:NAME`, `person:NAME` or `web`; InvalidInput names what is wrong."""
        kind, _, name = ref.partition(":")
        if ref == ChannelName.WEB:
            return [web_target(via)]
        if kind == "team":
            return self._team_targets(name, via)
        if kind == "person":
            return self._person_targets(name, via)
        raise InvalidInput(f"unknown target {ref!r} ({via}): use team:NAME, person:NAME or web")

    def _team_targets(self, name: str, via: str) -> list[Target]:
        team = self.teams.get(name)
        if team is None:
            raise InvalidInput(f"unknown team {name!r} ({via}); known teams: {_known(self.teams)}")
        people = [self.people[member] for member in team.members]
        # A team's targets accept its members only: no member ids there means nobody.
        targets = []
        if team.slack_channel:
            address = {"channel": team.slack_channel}
            targets.append(_members(ChannelName.SLACK, address, [p.slack for p in people], via))
        if team.discord_channel:
            address = {"channel_id": team.discord_channel}
            ids = [p.discord for p in people]
            targets.append(_members(ChannelName.DISCORD, address, ids, via))
        if team.teams_channel:
            address = {"conversation_id": team.teams_channel}
            targets.append(_members(ChannelName.TEAMS, address, [p.teams for p in people], via))
        if team.telegram_chat:
            address = {"chat_id": team.telegram_chat}
            ids = [p.telegram for p in people]
            targets.append(_members(ChannelName.TELEGRAM, address, ids, via))
        if team.email:  # the list itself answers too, as one voter (its members' replies)
            address = {"address": team.email}
            ids = [team.email, *[p.email for p in people]]
            targets.append(_members(ChannelName.EMAIL, address, ids, via))
        return targets or [_members(ChannelName.WEB, {}, [p.email for p in people], via)]

    def _person_targets(self, name: str, via: str) -> list[Target]:
        person = self.people.get(name)
        if person is None:
            raise InvalidInput(
                f"unknown person {name!r} ({via}); known people: {_known(self.people)}"
            )
        targets = []
        if person.slack:
            targets.append(
                _target(ChannelName.SLACK, {"channel": person.slack}, [person.slack], via)
            )
        if person.discord:
            address = self.discord_dm(person.discord)
            targets.append(_target(ChannelName.DISCORD, address, [person.discord], via))
        if person.teams:  # a 1:1 chat, through the conversation the bot's install opened
            address = {"user_id": person.teams}
            targets.append(_target(ChannelName.TEAMS, address, [person.teams], via))
        if person.telegram:  # a private chat's id is the user's id
            address = {"chat_id": person.telegram}
            targets.append(_target(ChannelName.TELEGRAM, address, [person.telegram], via))
        if person.email:
            targets.append(
                _target(ChannelName.EMAIL, {"address": person.email}, [person.email], via)
            )
        return targets or [_members(ChannelName.WEB, {}, [person.email], via)]

    def allows_agent_templates(self, project: str) -> bool:
        configured = self.projects.get(project)
        return configured is not None and configured.allow_agent_templates

    def check_project(self, ref: str, project: str) -> None:
        """An agent of `project` may name this team or person (their `projects`); else
        InvalidInput. Rules, keys and projects the operator configured are not checked."""
        kind, _, name = ref.partition(":")
        found: Team | Person | None = (self.teams if kind == "team" else self.people).get(name)
        if found is not None and not {"*", project} & set(found.projects):
            raise InvalidInput(f"{kind} {name!r} is not available to project {project!r}")

    def warnings(self) -> list[str]:
        """What `gateway check` warns about: team channels nobody may answer in, and teams
        every project's agents may name while there is more than one project."""
        found = []
        for name, team in self.teams.items():
            people = [self.people[m] for m in team.members]
            for channel, where, ids in (
                ("Slack", team.slack_channel, [p.slack for p in people]),
                ("Discord", team.discord_channel, [p.discord for p in people]),
                ("Teams", team.teams_channel, [p.teams for p in people]),
                ("Telegram", team.telegram_chat, [p.telegram for p in people]),
            ):
                if where and not any(ids):
                    found.append(
                        f"team {name}: its {channel} channel accepts nobody (no member has "
                        f"a {channel} id); only the operator can answer there"
                    )
            if "*" in team.projects and len(self.projects) > 1:
                found.append(f"team {name}: every project's agents may name it (set projects)")
        return found

    def discord_dm(self, user_id: str) -> dict[str, Any]:
        """A DM address, with the channel of the first team listing that person as the
        place to post instead when Discord refuses the DM."""
        address: dict[str, Any] = {"user_id": user_id}
        for team in self.teams.values():
            members = [self.people[m].discord for m in team.members]
            if team.discord_channel and user_id in members:
                address["fallback_channel_id"] = team.discord_channel
                break
        return address


def rule_label(rule: Rule, index: int) -> str:
    """ "rule NAME", or "rule 3" (its place in the file) for a rule without a name."""
    return f"rule {rule.name}" if rule.name else f"rule {index + 1}"


def _known(names: dict[str, Any]) -> str:
    return ", ".join(sorted(names)) or "(none configured)"


def _target(
    channel: ChannelName, address: dict[str, Any], ids: list[str | None], via: str
) -> Target:
    responders = [i for i in ids if i]
    return Target(channel=channel, address=address, responders=responders or None, via=via)


def _members(
    channel: ChannelName, address: dict[str, Any], ids: list[str | None], via: str
) -> Target:
    """A configured team's or person's target: only these ids answer there (none: nobody
    but the operator), unlike an agent's own channel, which without ids is open."""
    return Target(channel=channel, address=address, responders=[i for i in ids if i], via=via)


def web_target(via: str) -> Target:
    return Target(channel=ChannelName.WEB, address={}, via=via)


def load_config(path: Path | None) -> RoutingConfig:
    """Read the TOML routing file; a missing setting means an empty configuration."""
    if path is None:
        return RoutingConfig()
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"GATEWAY_CONFIG points to {path}, which does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path} is not valid TOML: {error}") from None
    try:
        return RoutingConfig.model_validate(data)
    except (ValidationError, InvalidInput) as error:
        raise ValueError(f"{path}: {error}") from None


def channel_targets(config: RoutingConfig, channel: ContactChannel) -> list[Target]:
    """Targets named by a request's own `spec.channel`."""
    via = "spec.channel"
    targets: list[Target] = []
    if channel.team:
        targets += config.expand(f"team:{channel.team}", via=via)
    if channel.person:
        targets += config.expand(f"person:{channel.person}", via=via)
    if channel.slack:
        slack = channel.slack
        address = {
            "channel": slack.channel_or_user_id,
            "thread_ts": slack.thread_ts,
            "team_id": slack.team_id,
        }
        targets.append(
            _target(ChannelName.SLACK, address, list(slack.allowed_responder_ids or []), via)
        )
    if channel.email:
        email = channel.email
        extra = [r.address for r in email.additional_recipients or []]
        address = {"address": email.address}
        targets.append(_target(ChannelName.EMAIL, address, [email.address, *extra], via))
    if channel.discord:
        discord = channel.discord
        if discord.user_id:
            address = config.discord_dm(discord.user_id)
        else:
            address = {"channel_id": discord.channel_id}
        allowed = discord.allowed_responder_ids
        ids: list[str | None] = [*allowed] if allowed else [discord.user_id]
        targets.append(_target(ChannelName.DISCORD, address, ids, via))
    for phone in (ChannelName.SMS, ChannelName.WHATSAPP):
        value = getattr(channel, phone)
        if value is not None:
            targets.append(_target(phone, {"phone_number": value.phone_number}, [], via))
    return targets
