"""The command line with rules: `gateway serve` and `gateway check` refuse a config whose
`when` is malformed, naming the rule and the position; `gateway rules test` tells which rule
a function call would match and what would happen to it, one line per rule tried."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gateway.cli import rules
from tests.rules.helpers import DECIDING_RULES
from tests.services.cli import Cli
from tests.services.inprocess import test_settings as settings_for
from tests.services.inprocess import write_config

# The example of the brief (/tmp/rt/config.toml), and one rule over the key and the state.
CONFIG = (
    r"""
[people.ann]
email = "ann@example.org"
[people.bob]
email = "bob@example.org"
[teams.finance]
members = ["ann", "bob"]
email = "finance@example.org"
approvals_required = 2
expires_after = "1h"

"""
    + DECIDING_RULES
    + r"""
[[rules]]
name = "big-wires"
when = 'fn == "wire_money" && kwargs.amount > 10000'
target = "team:finance"

[[rules]]
name = "ci-staging"
fn = "deploy"
when = 'key == "ci-bot" && state.env == "staging"'
decide = "approve"
"""
)
MALFORMED = """
[people.ann]
email = "ann@example.org"

[[rules]]
name = "big-wires"
when = 'fn == "wire_money" && kwargs.amount >'
target = "person:ann"
"""
NO_MATCH = (
    "=> no rule matches: the request goes where its spec.channel says, else to its key's or "
    "project's default target, else to the web console"
)


def parse(*argv: str) -> argparse.Namespace:
    """The arguments of `gateway rules test ARGV`."""
    parser = argparse.ArgumentParser(prog="gateway rules test")
    rules.add_arguments(parser)
    return parser.parse_args(argv)


def rules_test(capsys: pytest.CaptureFixture[str], config: Path, *argv: str) -> list[str]:
    """`gateway rules test ARGV` (gateway.cli.rules, which `gateway.cli.main` dispatches to),
    in this process: the lines it printed. `gateway serve` and `gateway check` below run as
    subprocesses, as an operator runs them."""
    settings = settings_for("sqlite+aiosqlite:///unused.db", config=config)
    assert rules.run(settings, parse(*argv)) == 0
    out: str = capsys.readouterr().out
    return out.splitlines()


def test_rules_test_an_approve_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    lines = rules_test(capsys, config, "--fn", "read_file", "--kwargs", '{"path": "/srv/public/a"}')
    assert lines == [
        "rule public-reads: when: true",
        '=> rule public-reads matches: approved at once with the comment "public files need no '
        'person"; nobody is contacted',
    ]


def test_rules_test_a_reject_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    lines = rules_test(capsys, config, "--fn", "run", "--kwargs", '{"cmd": "rm -rf /"}')
    assert lines == [
        "rule public-reads: fn 'run' is not 'read_file'",
        "rule no-rm-root: when: true",
        '=> rule no-rm-root matches: rejected at once with the comment "never rm -rf /"; '
        "nobody is contacted",
    ]


def test_rules_test_a_routing_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    lines = rules_test(capsys, config, "--fn", "wire_money", "--kwargs", '{"amount": 12000}')
    assert lines == [
        "rule public-reads: fn 'wire_money' is not 'read_file'",
        "rule no-rm-root: when: false: does not match",
        "rule big-wires: when: true",
        "=> rule big-wires matches: sent to team:finance (email finance@example.org); "
        "2 approval(s) required; expires after 1h",
    ]


def test_rules_test_no_match(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    lines = rules_test(capsys, config, "--fn", "wire_money", "--kwargs", '{"amount": 500}')
    assert lines == [
        "rule public-reads: fn 'wire_money' is not 'read_file'",
        "rule no-rm-root: when: false: does not match",
        "rule big-wires: when: false: does not match",
        "rule ci-staging: fn 'wire_money' is not 'deploy'",
        NO_MATCH,
    ]


def test_rules_test_says_an_evaluation_error_does_not_match(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    lines = rules_test(capsys, config, "--fn", "wire_money", "--kwargs", '{"sum": 12000}')
    assert lines[2].startswith("rule big-wires: when: evaluation error (")
    assert lines[2].endswith("): does not match")
    assert "amount" in lines[2]
    assert lines[-1] == NO_MATCH


def test_rules_test_reads_the_key_and_the_state(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    staging = ("--fn", "deploy", "--state", '{"env": "staging"}')
    lines = rules_test(capsys, config, *staging, "--key", "ci-bot")
    assert lines[-2:] == [
        "rule ci-staging: when: true",
        "=> rule ci-staging matches: approved at once; nobody is contacted",
    ]
    lines = rules_test(capsys, config, *staging, "--key", "laptop")
    assert lines[-2:] == ["rule ci-staging: when: false: does not match", NO_MATCH]


PROJECT_DEADLINE = """
[people.ann]
email = "ann@example.org"

[projects.default]
expires_after = "2h"

[[rules]]
name = "big-wires"
when = 'fn == "wire_money" && kwargs.amount > 10000'
target = "person:ann"
"""


def test_rules_test_tells_the_projects_deadline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Under a rule without a deadline of its own the project's applies (see
    tests/gate/test_rule_floors.py, test_an_agents_team_times_nothing_under_a_rule): what
    `rules test --project default` says would happen must include it."""
    config = write_config(tmp_path / "routing.toml", PROJECT_DEADLINE)
    wire = ("--fn", "wire_money", "--kwargs", '{"amount": 12000}', "--project", "default")
    lines = rules_test(capsys, config, *wire)
    assert lines[-1].startswith("=> rule big-wires matches: sent to person:ann ")
    assert lines[-1].endswith("; expires after 2h"), lines[-1]


def test_rules_test_refuses_kwargs_that_are_not_a_json_object(tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    settings = settings_for("sqlite+aiosqlite:///unused.db", config=config)
    for given in ("{amount: 1}", "[1, 2]"):
        with pytest.raises(ValueError, match="--kwargs"):
            rules.run(settings, parse("--fn", "f", "--kwargs", given))


async def test_the_rules_test_command_runs_as_an_operator_runs_it(cli: Cli, tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    wire = ("--fn", "wire_money", "--kwargs", '{"amount": 12000}')
    result = await cli("rules", "test", *wire, GATEWAY_CONFIG=str(config))
    assert result.returncode == 0, result
    assert result.stdout.splitlines()[-2:] == [
        "rule big-wires: when: true",
        "=> rule big-wires matches: sent to team:finance (email finance@example.org); "
        "2 approval(s) required; expires after 1h",
    ]


async def test_serve_stops_at_a_malformed_when(cli: Cli, tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", MALFORMED)
    result = await cli.serve_until_it_exits(GATEWAY_CONFIG=str(config))
    assert result.returncode != 0, result
    assert "rule 'big-wires'" in result.stderr, result
    assert "line 1, column 38" in result.stderr, result
    assert "listening on" not in result.stdout


async def test_check_reports_a_malformed_when(cli: Cli, tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", MALFORMED)
    checked = await cli("check", GATEWAY_CONFIG=str(config))
    assert checked.returncode == 1, checked
    [failure] = [line for line in checked.stdout.splitlines() if line.startswith("FAIL config")]
    assert "rule 'big-wires'" in checked.stdout
    assert "line 1, column 38" in checked.stdout
    assert str(config) in failure


def test_rules_test_refuses_a_malformed_when(tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", MALFORMED)
    settings = settings_for("sqlite+aiosqlite:///unused.db", config=config)
    with pytest.raises(ValueError) as raised:
        rules.run(settings, parse("--fn", "wire_money"))
    assert "rule 'big-wires'" in str(raised.value) and "line 1, column 38" in str(raised.value)
