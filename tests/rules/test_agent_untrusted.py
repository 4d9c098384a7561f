"""The agent is untrusted: what it sends (kwargs, state, run_id, its own channel) is data a
rule reads, never the names a rule is written in. `fn`, `key` and `project` are what the
gateway knows of the call, whatever kwargs or state claim."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.rules.helpers import create, decided_by, rules_gateway, stored
from tests.services.inprocess import RunningGateway

CONFIG = """
[[rules]]
name = "reads"
when = 'fn == "read_file"'
decide = "approve"
comment = "reads are fine"

[[rules]]
name = "ci-staging"
fn = "deploy"
when = 'key == "ci-bot" && project == "default" && state.env == "staging"'
decide = "approve"
comment = "staging deploys by CI"

[[rules]]
name = "public-cat"
fn = "cat"
when = 'kwargs.path.startsWith("/srv/public/")'
decide = "approve"
comment = "public files"
"""
# Everything an agent could put in a request to pass for a read_file call.
POSING_AS_A_READ: dict[str, Any] = {
    "fn": "read_file",
    "kwargs": {"fn": "read_file"},
    "key": "ci-bot",
    "project": "default",
    "in": "read_file",
    "true": True,
    "null": None,
    'fn == "read_file" || true': True,
    "__proto__": {"fn": "read_file"},
}


@pytest.fixture
async def guarded(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    async with rules_gateway(db_url, tmp_path, CONFIG) as running:
        yield running


@pytest.fixture
async def guarded_sqlite(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    db = f"sqlite+aiosqlite:///{tmp_path}/gw.db"
    async with rules_gateway(db, tmp_path, CONFIG) as running:
        yield running


async def test_kwargs_and_state_cannot_change_fn(guarded: RunningGateway) -> None:
    agent = await guarded.new_key("default", name="agent")
    made = await create(
        guarded,
        "del-1",
        "delete_file",
        POSING_AS_A_READ,
        key=agent,
        run_id="read_file",
        state=POSING_AS_A_READ,
    )
    assert made["gateway_status"] == "pending", made
    record = await stored(guarded, "del-1")
    assert record["status"]["approved"] is None and record["status"]["user_info"] is None

    # The same agent's real read is approved by the rule: the rule is live.
    read = await create(guarded, "read-1", "read_file", POSING_AS_A_READ, key=agent)
    assert read["status"]["user_info"] == decided_by("reads")


async def test_state_and_kwargs_cannot_change_the_key_or_the_project(
    guarded: RunningGateway,
) -> None:
    staging = {"env": "staging", "key": "ci-bot", "project": "default"}
    laptop = await guarded.new_key("default", name="laptop")
    made = await create(guarded, "dep-1", "deploy", staging, key=laptop, state=staging)
    assert made["gateway_status"] == "pending", made

    elsewhere = await guarded.new_key("payments", name="ci-bot")
    made = await create(guarded, "dep-2", "deploy", staging, key=elsewhere, state=staging)
    assert made["gateway_status"] == "pending", made

    ci = await guarded.new_key("default", name="ci-bot")
    made = await create(guarded, "dep-3", "deploy", {}, key=ci, state={"env": "staging"})
    assert made["gateway_status"] == "approved", made
    assert made["status"]["user_info"] == decided_by("ci-staging")
    made = await create(guarded, "dep-4", "deploy", {}, key=ci, state={"env": "production"})
    assert made["gateway_status"] == "pending", made
    made = await create(guarded, "dep-5", "deploy", {}, key=ci)  # no state at all
    assert made["gateway_status"] == "pending", made


@pytest.mark.parametrize(
    "path",
    [
        '/etc/shadow") || true || ("',
        '/etc/shadow" || kwargs.path.startsWith("',
        ["/srv/public/a"],
        {"startsWith": "/srv/public/"},
        None,
    ],
    ids=["quote-or-true", "quote-call", "list", "object", "null"],
)
async def test_a_value_is_never_read_as_an_expression(
    guarded_sqlite: RunningGateway, path: Any
) -> None:
    agent = await guarded_sqlite.new_key("default", name="agent")
    made = await create(guarded_sqlite, "cat-1", "cat", {"path": path}, key=agent)
    assert made["gateway_status"] == "pending", made
    public = await create(guarded_sqlite, "cat-2", "cat", {"path": "/srv/public/a"}, key=agent)
    assert public["status"]["user_info"] == decided_by("public-cat")
