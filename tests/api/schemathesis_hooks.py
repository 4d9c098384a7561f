"""What the schemathesis run must know that no schema can say: this gateway's routing config,
the seeded requests' options and the clock. Loaded by the `st run` of test_schemathesis.

Only schema-valid (positive) cases are touched, and only where the OpenAPI document says the
value must name something that exists or lie in the future: `team` and `person` name the
config's (CONFIG), option names the seeded requests' (OPTIONS), `expires_at` lies in the
future, an escalation mails an allowed domain, and a list of options has unique names (which
JSON Schema cannot state). Schema-violating (negative) cases are sent exactly as generated.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.generation import GenerationMode
from schemathesis.generation.case import Case

TEAM = "st-team"
PERSON = "st-person"
ALLOWED_DOMAIN = "a.test"
# The test's routing config: the one team and person that positive cases name.
CONFIG = f"""
[people.{PERSON}]
email = "person@{ALLOWED_DOMAIN}"

[teams.{TEAM}]
members = ["{PERSON}"]
"""
OPTIONS = ["later", "never"]  # every seeded request's reject_options / response_options
FUTURE_YEAR = "2096"  # a leap year: 29 February stays a date
NAMED = {"team": TEAM, "person": PERSON}
OPTION_CHOICES = ("reject_option_name", "response_option_name")
OPTION_LISTS = ("reject_options", "response_options")


def _unique_names(options: list[Any]) -> list[Any]:
    seen: set[str] = set()
    for number, option in enumerate(options):
        if isinstance(option, dict) and isinstance(option.get("name"), str):
            if option["name"] in seen:
                option["name"] = f"{option['name'][:200]}-{number}"
            seen.add(option["name"])
    return options


def _as_deployed(value: Any, key: str | None = None) -> Any:
    """`value` with what must exist, exist, and what must be future, in the future."""
    if isinstance(value, list):
        items = [_as_deployed(item) for item in value]
        return _unique_names(items) if key in OPTION_LISTS else items
    if isinstance(value, dict):
        return {name: _as_deployed(item, name) for name, item in value.items()}
    if not isinstance(value, str):
        return value
    if key in NAMED:
        return NAMED[key]
    if key in OPTION_CHOICES:
        return OPTIONS[len(value) % len(OPTIONS)]
    if key == "expires_at":
        return FUTURE_YEAR + value[4:]
    if key == "address":  # an email address: escalations mail allowed domains only
        return f"st@{ALLOWED_DOMAIN}"
    return value


@schemathesis.hook
def map_case(context: schemathesis.HookContext, case: Case[Any]) -> Case[Any]:
    meta = case.meta
    if meta is not None and meta.generation.mode is GenerationMode.POSITIVE:
        case.body = _as_deployed(case.body)
    return case
