"""A gateway whose routing config has rules with `when` and `decide`, and small readers of
what it stored: the record as the HumanLayer API shows it and its audit trail."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway.vocabulary import KeyScope
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

ANN = "ann@example.org"
BOB = "bob@example.org"
AGENT_MAILBOX = "agent@evil.example"
PUBLIC_READS_COMMENT = "public files need no person"
RM_ROOT_COMMENT = "never rm -rf /"

# A raw string: the TOML literal string holds `\\s`, which CEL reads as the regex's `\s`.
# The two rules that decide by themselves, shared by the configs of these tests.
DECIDING_RULES = r"""
[[rules]]
name = "public-reads"
fn = "read_file"
when = 'kwargs.path.startsWith("/srv/public/")'
decide = "approve"
comment = "public files need no person"

[[rules]]
name = "no-rm-root"
when = 'fn == "run" && kwargs.cmd.matches("^rm\\s+-rf\\s+/\\s*$")'
decide = "reject"
comment = "never rm -rf /"
"""

CONFIG = (
    r"""
[people.ann]
email = "ann@example.org"

[people.bob]
email = "bob@example.org"

[teams.finance]
members = ["ann", "bob"]
approvals_required = 2

[teams.ops]
members = ["ann", "bob"]

"""
    + DECIDING_RULES
    + r"""
[[rules]]
name = "big-wires"
when = 'fn == "wire_money" && kwargs.amount > 10000'
target = "team:finance"

[[rules]]
name = "small-refunds"
fn = "refund"
when = 'kwargs.amount < 100'
decide = "approve"
comment = "small refunds are fine"

[[rules]]
name = "other-refunds"
fn = "refund"
target = "team:ops"
"""
)

GATEWAY_USER = {"channel": "gateway", "user_id": "gateway"}


def decided_by(rule: str) -> dict[str, str]:
    """The user_info of a request a rule decided."""
    return GATEWAY_USER | {"name": f"rule {rule}", "rule": rule}


@asynccontextmanager
async def rules_gateway(
    db_url: str, tmp_path: Path, config: str = CONFIG
) -> AsyncIterator[RunningGateway]:
    path = write_config(tmp_path / "routing.toml", config)
    async with running_gateway(settings_for(db_url, config=path)) as running:
        yield running


async def create(
    gateway: RunningGateway,
    call_id: str,
    fn: str,
    kwargs: dict[str, Any],
    *,
    key: str | None = None,
    run_id: str = "r",
    **spec: Any,
) -> dict[str, Any]:
    """POST /function_calls (asserting a 200): the wire answer of the create."""
    body = {"run_id": run_id, "call_id": call_id, "spec": {"fn": fn, "kwargs": kwargs} | spec}
    async with gateway.client(key) as client:
        response = await client.post("/function_calls", json=body)
    assert response.status_code == 200, response.text
    made: dict[str, Any] = response.json()
    return made


async def stored(gateway: RunningGateway, call_id: str) -> dict[str, Any]:
    """GET /humanlayer/v1/function_calls/{call_id}, as the operator's key reads it."""
    async with gateway.client() as client:
        response = await client.get(f"/function_calls/{call_id}")
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()
    return record


async def respond_as(
    gateway: RunningGateway, person: str, call_id: str, *, approved: bool = True
) -> dict[str, Any]:
    """`person` decides through a responder key bound to them: the wire answer."""
    key = await gateway.new_key("default", name=person, scope=KeyScope.RESPONDER, person=person)
    async with gateway.client(key) as client:
        answer = await client.post(
            f"/agent/function_calls/{call_id}/respond", json={"approved": approved}
        )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result
