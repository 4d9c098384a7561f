"""`gateway rules test`: which rule of the routing config a request would match, and what
would happen to it, without a running gateway or a database."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gateway.conditions import Facts
from gateway.policies import plans
from gateway.policies.evaluator import Group
from gateway.routing import RoutingConfig, Rule, load_config, rule_label
from gateway.seam.sentences import spoken
from gateway.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fn", required=True, help="the function's name")
    parser.add_argument("--kwargs", default="{}", help="its arguments, a JSON object")
    parser.add_argument("--run-id", default="cli", help="the agent's run_id")
    parser.add_argument("--key", default="", help="the name of the agent's API key")
    parser.add_argument("--project", default="default")
    parser.add_argument("--state", default="{}", help="the request's state, a JSON object")


def run(settings: Settings, args: argparse.Namespace) -> int:
    config = load_config(settings.config)
    facts = Facts(
        kind="function_call",
        fn=args.fn,
        run_id=args.run_id,
        kwargs=_object("--kwargs", args.kwargs),
        project=args.project,
        key=args.key,
        state=_object("--state", args.state),
    )
    for index, rule in enumerate(config.rules):
        why = rule.explain(facts)
        print(f"{rule_label(rule, index)}: {why}")
        if rule.matches(facts):
            print(f"=> {rule_label(rule, index)} matches: {outcome(config, rule, facts)}")
            return 0
    print(
        "=> no rule matches: the request goes where its spec.channel says, else to its "
        "key's or project's default target, else to the web console"
    )
    return 0


def outcome(config: RoutingConfig, rule: Rule, facts: Facts) -> str:
    """What the matching rule does with the request, in one line."""
    if rule.decide is not None:
        comment = f' with the comment "{rule.comment}"' if rule.comment else ""
        decided = {"approve": "approved", "reject": "rejected"}[rule.decide]
        return f"{decided} at once{comment}; nobody is contacted"
    project = config.projects.get(facts.project)
    made = plans.plan(
        config,
        channel=None,
        facts=facts,
        key_target=None,
        project=project,
        project_target=project.default_target if project else None,
    )
    asks = rule.target or "policy " + json.dumps(
        rule.policy.model_dump(exclude_none=True) if rule.policy else {}, separators=(",", ":")
    )
    places = ", ".join(f"{t.channel.value} {_address(t.address)}" for t in made.targets)
    root = made.policy
    needed = root.approvals_required if isinstance(root, Group) else 1
    decides = "the first answer decides" if root is None else f"{needed} approval(s) required"
    expires = made.schedule.expires_after
    deadline = f"; expires after {spoken(expires)}" if expires is not None else ""
    return f"sent to {asks} ({places or 'the web console'}); {decides}{deadline}"


def _address(address: dict[str, Any]) -> str:
    return " ".join(str(v) for v in address.values() if v is not None) or "(console)"


def _object(flag: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{flag} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} must be a JSON object, like '{{\"amount\": 12000}}'")
    return value
