"""Routing: the TOML config, target expansion and resolve() precedence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.conditions import Facts
from gateway.errors import InvalidInput
from gateway.policies.plans import plan
from gateway.routing import RoutingConfig, load_config
from gateway.seam.targets import Target
from gateway.wire.models import (
    ContactChannel,
    DiscordContactChannel,
    EmailContactChannel,
    EmailRecipient,
    SlackContactChannel,
)

CONFIG = """
[people.alice]
name = "Alice"
slack = "U-ALICE"
discord = "111"
email = "alice@example.com"

[people.bob]
slack = "U-BOB"
email = "bob@example.com"

[people.carol]
name = "Carol, no contact details"

[teams.ops]
members = ["alice", "bob"]
slack_channel = "C-OPS"
discord_channel = "999"
email = "ops@example.com"

[teams.quiet]
members = ["carol"]

[[rules]]
fn = "deploy_*"
target = "team:ops"

[[rules]]
fn = "deploy_prod"
target = "person:carol"

[[rules]]
run_id = "nightly-*"
kind = "human_contact"
target = "person:alice"

[[rules]]
fn = "delete_*"
run_id = "prod-*"
target = "person:bob"

[projects.default]
default_target = "person:bob"

[projects.other]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "routing.toml"
    path.write_text(text)
    return path


@pytest.fixture
def config(tmp_path: Path) -> RoutingConfig:
    return load_config(write(tmp_path, CONFIG))


def summary(targets: list[Target]) -> list[tuple[str, dict[str, Any], list[str] | None, str]]:
    return [(t.channel, t.address, t.responders, t.via) for t in targets]


def call(
    config: RoutingConfig,
    *,
    channel: ContactChannel | None = None,
    kind: str = "function_call",
    fn: str = "some_fn",
    run_id: str = "run-1",
    key_target: str | None = None,
    project_target: str | None = None,
) -> list[Target]:
    return plan(
        config,
        channel=channel,
        facts=Facts(kind=kind, fn=fn, run_id=run_id),
        key_target=key_target,
        project=None,
        project_target=project_target,
    ).targets


# --- loading ---------------------------------------------------------------------------


def test_load_config_reads_every_section(config: RoutingConfig) -> None:
    assert sorted(config.people) == ["alice", "bob", "carol"]
    assert config.people["alice"].slack == "U-ALICE"
    assert config.people["alice"].discord == "111"
    assert config.people["bob"].discord is None
    assert config.teams["ops"].members == ["alice", "bob"]
    assert config.teams["ops"].slack_channel == "C-OPS"
    assert [(r.fn, r.run_id, r.kind, r.target) for r in config.rules] == [
        ("deploy_*", "*", None, "team:ops"),
        ("deploy_prod", "*", None, "person:carol"),
        ("*", "nightly-*", "human_contact", "person:alice"),
        ("delete_*", "prod-*", None, "person:bob"),
    ]
    assert config.projects["default"].default_target == "person:bob"
    assert config.projects["other"].default_target is None


def test_load_config_none_is_empty() -> None:
    config = load_config(None)
    assert config == RoutingConfig()
    assert config.people == {} and config.teams == {} and config.rules == []


def test_load_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        load_config(tmp_path / "absent.toml")


def test_load_config_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not valid TOML"):
        load_config(write(tmp_path, "[people\n"))


def test_load_config_rejects_unknown_keys(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="slak"):
        load_config(write(tmp_path, '[people.alice]\nslak = "U1"\n'))


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[[rules]]\nfn = "x"\ntarget = "team:ghosts"\n', "ghosts"),
        ('[[rules]]\nfn = "x"\ntarget = "person:casper"\n', "casper"),
        ('[projects.p]\ndefault_target = "team:phantoms"\n', "phantoms"),
        ('[projects.p]\ndefault_target = "person:nobody"\n', "nobody"),
        ('[[rules]]\ntarget = "slack:#general"\n', "slack:#general"),
    ],
)
def test_load_config_unknown_reference_names_it(tmp_path: Path, toml: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        load_config(write(tmp_path, toml))


def test_load_config_team_member_must_be_a_person(tmp_path: Path) -> None:
    toml = '[people.alice]\nslack = "U1"\n\n[teams.ops]\nmembers = ["alice", "mallory"]\n'
    with pytest.raises(ValueError, match="mallory") as caught:
        load_config(write(tmp_path, toml))
    assert "ops" in str(caught.value)


def test_team_member_must_be_a_person_without_load_config() -> None:
    with pytest.raises(ValueError, match="mallory"):
        RoutingConfig.model_validate({"teams": {"ops": {"members": ["mallory"]}}})


# --- expansion -------------------------------------------------------------------------


def test_team_expands_to_slack_discord_email_with_member_ids(config: RoutingConfig) -> None:
    assert summary(config.expand("team:ops", via="test")) == [
        ("slack", {"channel": "C-OPS"}, ["U-ALICE", "U-BOB"], "test"),
        ("discord", {"channel_id": "999"}, ["111"], "test"),  # bob has no discord id
        (
            "email",
            {"address": "ops@example.com"},
            ["ops@example.com", "alice@example.com", "bob@example.com"],
            "test",
        ),
    ]


def test_team_without_channels_falls_back_to_web_for_its_members(config: RoutingConfig) -> None:
    # carol has no email to sign in to the console with: only the operator may answer there.
    assert summary(config.expand("team:quiet", via="test")) == [("web", {}, [], "test")]


def test_person_expands_to_each_contact(config: RoutingConfig) -> None:
    assert summary(config.expand("person:alice", via="v")) == [
        ("slack", {"channel": "U-ALICE"}, ["U-ALICE"], "v"),
        # alice is in a team with a Discord channel: it is where a refused DM goes instead.
        ("discord", {"user_id": "111", "fallback_channel_id": "999"}, ["111"], "v"),
        ("email", {"address": "alice@example.com"}, ["alice@example.com"], "v"),
    ]
    assert summary(config.expand("person:bob", via="v")) == [
        ("slack", {"channel": "U-BOB"}, ["U-BOB"], "v"),
        ("email", {"address": "bob@example.com"}, ["bob@example.com"], "v"),
    ]


def test_discord_dm_falls_back_only_to_a_team_listing_the_person(config: RoutingConfig) -> None:
    assert config.discord_dm("111") == {"user_id": "111", "fallback_channel_id": "999"}
    assert config.discord_dm("424242") == {"user_id": "424242"}


def test_person_without_contacts_falls_back_to_web_for_the_operator(
    config: RoutingConfig,
) -> None:
    assert summary(config.expand("person:carol", via="v")) == [("web", {}, [], "v")]


def test_web_ref(config: RoutingConfig) -> None:
    assert summary(config.expand("web", via="v")) == [("web", {}, None, "v")]


# --- resolve() precedence --------------------------------------------------------------


def test_spec_channel_adds_to_a_matching_rule(config: RoutingConfig) -> None:
    targets = call(
        config,
        channel=ContactChannel(person="bob"),
        fn="deploy_prod",  # matches rule 1
        key_target="person:alice",
        project_target="team:ops",
    )
    assert [t.via for t in targets] == ["spec.channel"] * 2 + ["rule 1"] * 3
    assert targets[0].address == {"channel": "U-BOB"}


def test_spec_channel_beats_key_and_project_when_no_rule_matches(config: RoutingConfig) -> None:
    targets = call(
        config,
        channel=ContactChannel(person="bob"),
        fn="read_table",
        key_target="person:alice",
        project_target="team:ops",
    )
    assert [t.channel for t in targets] == ["slack", "email"]
    assert {t.via for t in targets} == {"spec.channel"}


def test_empty_spec_channel_falls_through_to_rules(config: RoutingConfig) -> None:
    targets = call(config, channel=ContactChannel(), fn="deploy_x", key_target="person:bob")
    assert {t.via for t in targets} == {"rule 1"}
    assert targets[0].address == {"channel": "C-OPS"}


def test_first_matching_rule_wins(config: RoutingConfig) -> None:
    # deploy_prod matches rules 1 and 2; rule 1 comes first.
    targets = call(config, fn="deploy_prod", key_target="person:bob", project_target="web")
    assert {t.via for t in targets} == {"rule 1"}
    assert [t.channel for t in targets] == ["slack", "discord", "email"]


@pytest.mark.parametrize(
    ("kind", "fn", "run_id", "via"),
    [
        ("function_call", "deploy_app", "r", "rule 1"),
        ("function_call", "Deploy_app", "r", "api key"),  # globs are case-sensitive
        ("function_call", "xdeploy_app", "r", "api key"),
        ("human_contact", "", "nightly-7", "rule 3"),
        ("function_call", "other", "nightly-7", "api key"),  # rule 3 is for human contacts
        ("function_call", "delete_user", "prod-1", "rule 4"),
        ("function_call", "delete_user", "dev-1", "api key"),  # run_id glob must match too
        ("function_call", "ls", "prod-1", "api key"),  # fn glob must match too
    ],
)
def test_rule_matching(config: RoutingConfig, kind: str, fn: str, run_id: str, via: str) -> None:
    targets = call(config, kind=kind, fn=fn, run_id=run_id, key_target="person:carol")
    assert {t.via for t in targets} == {via}


def test_api_key_target_beats_project(config: RoutingConfig) -> None:
    targets = call(config, key_target="person:alice", project_target="person:bob")
    assert {t.via for t in targets} == {"api key"}
    assert [t.responders for t in targets] == [["U-ALICE"], ["111"], ["alice@example.com"]]


def test_project_target_when_no_key(config: RoutingConfig) -> None:
    project_target = config.projects["default"].default_target
    targets = call(config, project_target=project_target)
    assert summary(targets) == [
        ("slack", {"channel": "U-BOB"}, ["U-BOB"], "project"),
        ("email", {"address": "bob@example.com"}, ["bob@example.com"], "project"),
    ]


def test_nothing_matches_means_web(config: RoutingConfig) -> None:
    assert summary(call(config)) == [("web", {}, None, "default")]


def test_no_config_and_no_channel_means_web() -> None:
    assert summary(call(load_config(None))) == [("web", {}, None, "default")]


# --- spec.channel ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "named", "known"),
    [
        (ContactChannel(team="nope"), "'nope'", "known teams: ops, quiet"),
        (ContactChannel(person="ghost"), "'ghost'", "known people: alice, bob, carol"),
    ],
)
def test_unknown_spec_channel_ref_names_it_and_lists_known(
    config: RoutingConfig, channel: ContactChannel, named: str, known: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        call(config, channel=channel)
    message = str(caught.value)
    assert named in message
    assert known in message


def test_unknown_spec_channel_ref_without_config() -> None:
    with pytest.raises(InvalidInput, match=r"'ops'.*\(none configured\)"):
        call(RoutingConfig(), channel=ContactChannel(team="ops"))


def test_spec_channel_team_expands(config: RoutingConfig) -> None:
    targets = call(config, channel=ContactChannel(team="ops"))
    assert [(t.channel, t.responders) for t in targets] == [
        ("slack", ["U-ALICE", "U-BOB"]),
        ("discord", ["111"]),
        ("email", ["ops@example.com", "alice@example.com", "bob@example.com"]),
    ]


def test_slack_spec_channel_keeps_allowed_responders() -> None:
    slack = SlackContactChannel(
        channel_or_user_id="C123", allowed_responder_ids=["U1", "U2"], thread_ts="17.5"
    )
    targets = call(RoutingConfig(), channel=ContactChannel(slack=slack))
    assert summary(targets) == [
        (
            "slack",
            {"channel": "C123", "thread_ts": "17.5", "team_id": None},
            ["U1", "U2"],
            "spec.channel",
        )
    ]


def test_slack_spec_channel_without_allowed_responders_has_none() -> None:
    targets = call(
        RoutingConfig(), channel=ContactChannel(slack=SlackContactChannel(channel_or_user_id="C"))
    )
    assert [t.responders for t in targets] == [None]


def test_email_spec_channel_responders_include_additional_recipients() -> None:
    email = EmailContactChannel(
        address="lead@example.com",
        additional_recipients=[
            EmailRecipient(address="cc@example.com", field="cc"),
            EmailRecipient(address="bcc@example.com", field="bcc"),
        ],
    )
    targets = call(RoutingConfig(), channel=ContactChannel(email=email))
    assert summary(targets) == [
        (
            "email",
            {"address": "lead@example.com"},
            ["lead@example.com", "cc@example.com", "bcc@example.com"],
            "spec.channel",
        )
    ]


@pytest.mark.parametrize(
    ("discord", "address", "responders"),
    [
        (DiscordContactChannel(user_id="42"), {"user_id": "42"}, ["42"]),
        (DiscordContactChannel(channel_id="7"), {"channel_id": "7"}, None),
        (
            DiscordContactChannel(channel_id="7", allowed_responder_ids=["1", "2"]),
            {"channel_id": "7"},
            ["1", "2"],
        ),
    ],
)
def test_discord_spec_channel(
    discord: DiscordContactChannel, address: dict[str, Any], responders: list[str] | None
) -> None:
    targets = call(RoutingConfig(), channel=ContactChannel(discord=discord))
    assert summary(targets) == [("discord", address, responders, "spec.channel")]


def test_spec_channel_combines_team_person_and_direct_channels(config: RoutingConfig) -> None:
    channel = ContactChannel(
        team="quiet", person="bob", slack=SlackContactChannel(channel_or_user_id="C-DIRECT")
    )
    targets = call(config, channel=channel)
    assert [(t.channel, t.address.get("channel")) for t in targets] == [
        ("web", None),
        ("slack", "U-BOB"),
        ("email", None),
        ("slack", "C-DIRECT"),
    ]
