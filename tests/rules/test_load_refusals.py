"""A rule the gateway cannot apply stops the config from loading, with the rule's name and
what is wrong (and where, for an expression): no gateway, no database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gateway.conditions import Facts
from gateway.policies.plans import plan
from gateway.routing import RoutingConfig, load_config
from tests.services.inprocess import write_config


def refusal(*rules: dict[str, Any]) -> str:
    """The message of RoutingConfig.model_validate for these rules (which must fail)."""
    with pytest.raises(ValidationError) as raised:
        RoutingConfig.model_validate({"rules": list(rules)})
    return str(raised.value)


def when_rule(when: str, name: str = "wires") -> dict[str, Any]:
    return {"name": name, "when": when, "target": "web"}


def test_a_syntax_error_names_the_rule_and_its_position() -> None:
    message = refusal(when_rule("kwargs.amount >", name="big-wires"))
    assert "rule 'big-wires'" in message
    assert "line 1, column 16" in message
    assert "syntax error" in message


def test_a_syntax_error_from_the_file_names_the_rule_and_its_position(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "routing.toml",
        '[[rules]]\nname = "big-wires"\nwhen = \'fn == "wire_money" && \'\ntarget = "web"\n',
    )
    with pytest.raises(ValueError) as raised:
        load_config(path)
    message = str(raised.value)
    assert str(path) in message
    assert "rule 'big-wires'" in message and "line 1, column 23" in message


def test_a_syntax_error_on_a_later_line_gives_that_line() -> None:
    message = refusal(when_rule('fn == "wire_money" &&\n  kwargs.amount >'))
    assert "rule 'wires'" in message and "line 2, column 18" in message


def test_a_syntax_error_on_a_later_line_is_told_as_plainly_as_on_the_first() -> None:
    """conditions._parse_error drops the binding's "ERROR: <input>:…" prefix and the
    parser's list of every token it wanted; it must do so for a multi-line `when` too."""
    message = refusal(when_rule('fn == "wire_money" &&\n  kwargs.amount >'))
    assert "ERROR: <input>" not in message
    assert "expecting {" not in message


def test_a_misspelt_name_is_refused_with_the_names_an_expression_sees() -> None:
    message = refusal(when_rule("kwrags.amount > 1"))
    assert "rule 'wires'" in message
    assert "unknown name 'kwrags' at line 1, column 1" in message
    assert "fn, kwargs, run_id, kind, project, key, state" in message


def test_an_unknown_name_after_the_first_is_placed() -> None:
    message = refusal(when_rule('fn == "wire_money" && amount > 1'))
    assert "unknown name 'amount' at line 1, column 23" in message


@pytest.mark.parametrize(
    ("when", "name", "column"),
    [
        ("frobnicate(fn)", "frobnicate", 1),
        ('fn.startswith("read_")', "startswith", 4),
        ("kwargs.amount > 1 && frobnicate(fn)", "frobnicate", 22),
    ],
)
def test_an_unknown_function_is_refused(when: str, name: str, column: int) -> None:
    message = refusal(when_rule(when))
    assert "rule 'wires'" in message
    assert f"unknown function {name!r} at line 1, column {column}" in message


@pytest.mark.parametrize(
    "when",
    [
        # Python's spelling of CEL's startsWith: the habit of every Python programmer.
        'kwargs.path.startswith("/srv/public/")',
        # CEL's function is matches(); match() does not exist.
        'fn == "run" && kwargs.cmd.match("^rm -rf")',
        # The usual shape of a rule: an empty request's fn is not "run", so && stops there.
        'fn == "run" && frobnicate(fn)',
        # Behind an || that an empty request short-circuits.
        'fn == "" || frobnicate(fn)',
    ],
)
def test_an_unknown_function_is_refused_wherever_it_stands(when: str) -> None:
    """The binding lists every function an expression calls (`references()["functions"]`),
    whatever the request: one it does not know is refused at load, not only when it happens
    to be reached while evaluating an empty request."""
    message = refusal(when_rule(when))
    assert "rule 'wires'" in message and "unknown function" in message


@pytest.mark.parametrize(("when", "gives"), [("1 + 1", "int"), ("fn", "str"), ('"yes"', "str")])
def test_an_expression_that_is_not_a_condition_is_refused(when: str, gives: str) -> None:
    message = refusal(when_rule(when))
    assert "rule 'wires'" in message
    assert f"it gives {gives}, not true or false" in message


@pytest.mark.parametrize(
    "when",
    [
        "kwargs.items.all(x, kwargs.items.exists(y, y == x))",
        "[1, 2].all(x, [3].all(y, x < y))",
        "kwargs.rows.map(r, r.all(c, c > 0)).size() > 0",
    ],
)
def test_a_comprehension_inside_a_comprehension_is_over_the_cost_limit(when: str) -> None:
    message = refusal(when_rule(when))
    assert "rule 'wires'" in message
    assert "over the limit" in message and "comprehension inside a comprehension" in message


def test_one_comprehension_is_within_the_cost_limit() -> None:
    config = RoutingConfig.model_validate(
        {"rules": [when_rule("kwargs.recipients.all(r, r.endsWith('@corp.example'))")]}
    )

    def to(*recipients: str) -> Facts:
        return Facts(
            kind="function_call", fn="send", run_id="r", kwargs={"recipients": list(recipients)}
        )

    [rule] = config.rules
    assert rule.matches(to("a@corp.example"))
    assert not rule.matches(to("a@corp.example", "x@evil.example"))


def test_an_expression_over_the_length_limit_is_refused() -> None:
    long = " || ".join(f'fn == "f{i}"' for i in range(400))
    message = refusal(when_rule(long))
    assert "rule 'wires'" in message and "the limit is 4000" in message


@pytest.mark.parametrize(
    "rule",
    [
        {"fn": "read_file", "decide": "approve"},
        {"when": 'fn == "read_file"', "target": "web"},
        {"name": "", "fn": "read_file", "decide": "approve"},
    ],
    ids=["decide", "when", "empty-name"],
)
def test_decide_or_when_without_a_name_is_refused(rule: dict[str, Any]) -> None:
    assert "needs a `name`" in refusal(rule)


@pytest.mark.parametrize(
    "extra", [{"target": "web"}, {"policy": {"any_of": ["web"]}}], ids=["target", "policy"]
)
def test_a_deciding_rule_takes_no_target_or_policy(extra: dict[str, Any]) -> None:
    message = refusal({"name": "public-reads", "fn": "read_file", "decide": "approve"} | extra)
    assert "rule public-reads decides itself: it takes no target or policy" in message


def test_two_rules_with_the_same_name_are_refused() -> None:
    message = refusal(
        {"name": "reads", "fn": "read_file", "decide": "approve"},
        {"name": "reads", "fn": "cat_file", "target": "web"},
    )
    assert "two rules are named 'reads'" in message


def test_a_comment_without_decide_is_refused() -> None:
    message = refusal({"name": "wires", "fn": "wire_money", "target": "web", "comment": "hm"})
    assert "rule 'wires'" in message and "`comment` goes with `decide`" in message


def test_a_question_cannot_be_decided_by_a_rule() -> None:
    message = refusal({"name": "asks", "kind": "human_contact", "decide": "approve"})
    assert "rule 'asks'" in message and "cannot be approved or rejected" in message


def test_decide_is_approve_or_reject() -> None:
    message = refusal({"name": "maybe", "fn": "f", "decide": "perhaps"})
    assert "'approve' or 'reject'" in message


def test_a_good_file_loads_and_its_deciding_rule_is_for_function_calls(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "routing.toml",
        """
[[rules]]
name = "public-reads"
fn = "read_file"
when = 'kwargs.path.startsWith("/srv/public/")'
decide = "approve"
comment = "public files need no person"

[[rules]]
name = "big-wires"
when = 'fn == "wire_money" && kwargs.amount > 10000'
target = "web"
""",
    )
    config = load_config(path)
    reads, wires = config.rules
    assert (reads.name, reads.decide, reads.comment) == (
        "public-reads",
        "approve",
        "public files need no person",
    )
    assert reads.kind is not None and reads.kind.value == "function_call"
    question = Facts(
        kind="human_contact", fn="read_file", run_id="r", kwargs={"path": "/srv/public/a"}
    )
    assert not reads.matches(question)
    assert wires.decide is None and wires.kind is None


def test_the_readmes_fail_closed_idiom_matches_what_is_not_a_number() -> None:
    """README: an agent sending "20000" as a string must not dodge the big-wires rule."""
    when = (
        'fn == "wire_money" && (!has(kwargs.amount) '
        "|| !(type(kwargs.amount) in [int, double]) || kwargs.amount > 10000)"
    )
    config = RoutingConfig.model_validate({"rules": [when_rule(when)]})

    def routed(amount: object) -> bool:
        kwargs = {} if amount is None else {"amount": amount}
        facts = Facts(kind="function_call", fn="wire_money", run_id="r", kwargs=kwargs)
        return config.first_match(facts) is not None

    assert [routed(a) for a in (12000, "20000", None, [1], 500, 9999.5)] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]


def test_a_rule_can_ask_for_more_approvals_than_its_team_and_only_with_a_target() -> None:
    people = {"ann": {"email": "ann@example.org"}, "bob": {"email": "bob@example.org"}}
    teams = {"finance": {"members": ["ann", "bob"], "email": "finance@example.org"}}
    rule = when_rule("kwargs.amount > 10000") | {"target": "team:finance"}
    config = RoutingConfig.model_validate(
        {"people": people, "teams": teams, "rules": [rule | {"approvals_required": 2}]}
    )
    facts = Facts(kind="function_call", fn="wire", run_id="r", kwargs={"amount": 20000})
    made = plan(
        config, channel=None, facts=facts, key_target=None, project=None, project_target=None
    )
    assert made.policy is not None and made.policy.approvals_required == 2

    policy = {"any_of": ["team:finance"]}
    message = refusal(
        when_rule("true") | {"target": None, "policy": policy, "approvals_required": 2}
    )
    assert "approvals_required goes with `target`" in message
