"""Routing: from a request to the targets that should see it.

First match wins: the request's own `spec.channel`, a rule from the config file, the API
key's default target, the project's default target, then the web console alone.
"""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gateway.errors import InvalidInput
from gateway.lifecycle import Kind
from gateway.models import ContactChannel
from gateway.vocabulary import ChannelName


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Person(Strict):
    name: str | None = None
    slack: str | None = None
    discord: str | None = None
    email: str | None = None
    # Web console sign-in: an argon2 hash (`gateway console hash-password`), and the
    # projects this person sees there ("*": all).
    password_hash: str | None = Field(default=None, repr=False)
    projects: list[str] = Field(default_factory=lambda: ["default"])


class Team(Strict):
    members: list[str] = Field(default_factory=list)
    slack_channel: str | None = None
    discord_channel: str | None = None
    email: str | None = None


class Rule(Strict):
    fn: str = "*"
    run_id: str = "*"
    kind: Kind | None = None
    target: str


class ProjectConfig(Strict):
    default_target: str | None = None


class WebhookConfig(Strict):
    project: str = "default"
    url: str
    secret_env: str = Field(description="environment variable holding the whsec_ secret")
    events: list[str] | None = None


# The gateway serves these itself (the console reads the store): nothing to send or edit.
SERVED_BY_GATEWAY = frozenset({ChannelName.WEB})


class Target(BaseModel):
    """One place a request goes: a channel and a channel-specific address."""

    channel: ChannelName
    address: dict[str, Any]
    responders: list[str] | None = None  # platform ids or emails allowed to answer
    via: str


class RoutingConfig(Strict):
    people: dict[str, Person] = Field(default_factory=dict)
    teams: dict[str, Team] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)
    projects: dict[str, ProjectConfig] = Field(default_factory=dict)
    webhooks: list[WebhookConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references_resolve(self) -> RoutingConfig:
        for team_name, team in self.teams.items():
            for member in team.members:
                if member not in self.people:
                    raise ValueError(f"team {team_name!r} lists unknown person {member!r}")
        for index, rule in enumerate(self.rules):
            self.expand(rule.target, via=f"rule {index + 1}")
        for name, project in self.projects.items():
            if project.default_target:
                self.expand(project.default_target, via=f"project {name}")
        return self

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
        targets = []
        if team.slack_channel:
            address = {"channel": team.slack_channel}
            targets.append(_target(ChannelName.SLACK, address, [p.slack for p in people], via))
        if team.discord_channel:
            address = {"channel_id": team.discord_channel}
            targets.append(_target(ChannelName.DISCORD, address, [p.discord for p in people], via))
        if team.email:
            address = {"address": team.email}
            targets.append(_target(ChannelName.EMAIL, address, [p.email for p in people], via))
        return targets or [web_target(via)]

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
        if person.email:
            targets.append(
                _target(ChannelName.EMAIL, {"address": person.email}, [person.email], via)
            )
        return targets or [web_target(via)]

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


def _known(names: dict[str, Any]) -> str:
    return ", ".join(sorted(names)) or "(none configured)"


def _target(
    channel: ChannelName, address: dict[str, Any], ids: list[str | None], via: str
) -> Target:
    responders = [i for i in ids if i]
    return Target(channel=channel, address=address, responders=responders or None, via=via)


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


def resolve(
    config: RoutingConfig,
    *,
    channel: ContactChannel | None,
    kind: Kind,
    fn: str,
    run_id: str,
    key_target: str | None,
    project_target: str | None,
) -> list[Target]:
    if channel is not None:
        targets = channel_targets(config, channel)
        if targets:
            return targets
    for index, rule in enumerate(config.rules):
        if (
            (rule.kind is None or rule.kind == kind)
            and fnmatchcase(fn, rule.fn)
            and fnmatchcase(run_id, rule.run_id)
        ):
            return config.expand(rule.target, via=f"rule {index + 1}")
    if key_target:
        return config.expand(key_target, via="api key")
    if project_target:
        return config.expand(project_target, via="project")
    return [web_target("default")]
