"""Schemathesis with all its checks (`st run --checks all`) over every operation of
/openapi.json, against a gateway on a real port, on both databases: no answer is a 5xx, every
status, header and body is one the document lists, every request the document calls valid is
accepted and every one it calls invalid is refused (plus 405 with a right `Allow` for unlisted
methods, OPTIONS answering the listed ones, 401 without a key).

What no schema can say (the config's team and person names, the seeded requests' option
names, "in the future") is taught to the generator by schemathesis_hooks.py, for schema-valid
cases only.

Schemathesis runs as its CLI (`st run`, configured by a schemathesis.toml) in a subprocess,
so the gateway keeps serving from this test's event loop; its JSON report is checked. The
run is deterministic (fixed seed, no example database, no Hypothesis deadlines in the CLI).
(The pytest plugin's lazy schemas need pytest internals that pytest 9 no longer has.)"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api import schemathesis_hooks as hooks
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config

RUN_SECONDS = 240  # a bound, not a pace: the run takes ~45 s per database on two cores
# Examples per operation in the fuzzing phase; the coverage phase adds its own bounded set
# (boundaries, missing and wrong-typed fields, unlisted methods) for every operation.
MAX_EXAMPLES = 25
FUNCTION_CALLS = [f"st-fc-{n}" for n in range(4)]
HUMAN_CONTACTS = [f"st-hc-{n}" for n in range(4)]


@pytest.fixture
async def gateway(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """The gateway with the routing config and email domain the hooks name."""
    config = write_config(tmp_path / "routing.toml", hooks.CONFIG)
    settings = test_settings(db_url, config=config, email_allowed_domains=hooks.ALLOWED_DOMAIN)
    async with running_gateway(settings) as running:
        yield running


def config_text(api_key: str) -> str:
    return f"""
seed = 20260101
hooks = "{Path(hooks.__file__).resolve()}"
suppress-health-check = ["too_slow", "filter_too_much", "data_too_large"]

[generation]
max-examples = {MAX_EXAMPLES}
deterministic = true
database = "none"

[auth.openapi.api_key]
bearer = "{api_key}"

[phases.stateful]
enabled = false

# Half the generated call_ids name requests that exist (of the operation's kind), so respond,
# escalate and get reach past "no such request": a first decision 200, then 409s.
[dictionaries.function_calls]
values = {json.dumps(FUNCTION_CALLS)}

[dictionaries.human_contacts]
values = {json.dumps(HUMAN_CONTACTS)}

[dictionaries.any_request]
values = {json.dumps(FUNCTION_CALLS + HUMAN_CONTACTS)}

# A long-poll holds its answer up to `wait` seconds (60 at most) while a request is pending:
# keep it short. test_bad_input covers the bounds of `wait`.
[parameters]
"query.wait" = 0.05
"path.call_id" = {{ dictionary = "any_request", probability = 0.5 }}

[[operations]]
include-path-regex = '/function_calls/[{{]call_id[}}]'
[operations.parameters]
"query.wait" = 0.05
"path.call_id" = {{ dictionary = "function_calls", probability = 0.5 }}

[[operations]]
include-path-regex = '/(human_contacts|contact_requests)/[{{]call_id[}}]'
[operations.parameters]
"query.wait" = 0.05
"path.call_id" = {{ dictionary = "human_contacts", probability = 0.5 }}
"""


async def seed_requests(gateway: RunningGateway, request_factory: RequestFactory) -> None:
    """Pending requests with options and an email channel (so an escalation has a thread)."""
    first, *rest = hooks.OPTIONS
    options = [{"name": first, "title": "Not now"}, *({"name": name} for name in rest)]
    channel = {"email": {"address": f"seed@{hooks.ALLOWED_DOMAIN}"}}
    for call_id in FUNCTION_CALLS:
        await request_factory(gateway, call_id, channel=channel, reject_options=options)
    for call_id in HUMAN_CONTACTS:
        await request_factory(
            gateway, call_id, contact=True, channel=channel, response_options=options
        )


async def run_schemathesis(gateway: RunningGateway, workdir: Path) -> tuple[dict[str, Any], str]:
    config = workdir / "schemathesis.toml"
    config.write_text(config_text(gateway.api_key))
    report = workdir / "report.json"
    command = [
        *(sys.executable, "-m", "schemathesis.cli"),
        *("--config-file", str(config), "--no-color", "run"),
        *("--workers", "1", "--checks", "all"),
        *("--report", "json", "--report-json-path", str(report)),
        f"{gateway.base_url}/openapi.json",
    ]
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=workdir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(RUN_SECONDS):
            output, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = output.decode(errors="replace")
    (workdir / "output.txt").write_text(text)  # the whole run, for a failure's reader
    assert report.exists(), text[-5000:]
    result: dict[str, Any] = json.loads(report.read_text())
    return result, text


async def operation_count(gateway: RunningGateway) -> int:
    async with httpx.AsyncClient(base_url=gateway.base_url) as anonymous:
        paths = (await anonymous.get("/openapi.json")).json()["paths"]
    return sum(len(operations) for operations in paths.values())


async def test_all_checks_find_no_server_error_and_no_disagreement_with_the_document(
    gateway: RunningGateway, request_factory: RequestFactory, tmp_path: Path
) -> None:
    await seed_requests(gateway, request_factory)
    report, output = await run_schemathesis(gateway, tmp_path)
    operations = await operation_count(gateway)
    assert report["operations"]["total"] == operations, output[-5000:]
    assert report["operations"]["tested"] == operations, output[-5000:]
    assert report["failures"] == [], output[-10000:]
    assert report["errors"] == [], output[-10000:]
    assert report["test_cases"]["with_failures"] == 0, output[-10000:]
    assert report["test_cases"]["generated"] >= operations * MAX_EXAMPLES, output[-5000:]
    assert report["complete"] is True and report["exit_code"] == 0, output[-5000:]
    # The seeded requests were reached: respond decided some of each kind.
    async with gateway.client() as client:
        for path, call_ids in (
            ("/function_calls", FUNCTION_CALLS),
            ("/contact_requests", HUMAN_CONTACTS),
        ):
            listed = (await client.get(path, params={"limit": 1000})).json()["items"]
            statuses = {item["call_id"]: item["gateway_status"] for item in listed}
            assert any(statuses[call_id] != "pending" for call_id in call_ids), (path, statuses)
