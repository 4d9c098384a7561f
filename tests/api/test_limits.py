"""The limits on creates (README "Limits"), over real HTTP: the targets one request may
contact, the channels in its spec.channel, and each API key's create rate. Each refusal
names the limit and its setting, and leaves nothing stored; the agent cannot lift them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.helpers import FC, HC, JSON, detail_text
from tests.factories import request_body
from tests.mcp.helpers import mcp_session, tool_error
from tests.services.inprocess import (
    RunningGateway,
    running_gateway,
    test_settings,
    write_config,
)

BOTH = pytest.mark.parametrize("path", [FC, HC], ids=["function_call", "human_contact"])
# A team that reaches its members in Slack, Discord and by email: three targets.
CONFIG = """
[people.alice]
slack = "U1"
discord = "111"
email = "alice@example.com"

[teams.ops]
members = ["alice"]
slack_channel = "C1"
discord_channel = "222"
email = "ops@example.com"
"""


@asynccontextmanager
async def gateway_with(tmp_path: Path, **settings: Any) -> AsyncIterator[RunningGateway]:
    url = f"sqlite+aiosqlite:///{tmp_path}/gw.db"
    async with running_gateway(test_settings(url, **settings)) as gateway:
        yield gateway


def emails(count: int) -> list[dict[str, Any]]:
    return [{"email": {"address": f"p{n}@example.com"}} for n in range(count)]


def wide_channel(targets: int) -> dict[str, Any]:
    """`targets` email channels, in any_of groups of at most 20 (the wire's branch limit)."""
    channels = emails(targets)
    groups = [{"any_of": channels[start : start + 20]} for start in range(0, targets, 20)]
    return {"any_of": groups}


def abusive_channel(fanout: int, depth: int) -> dict[str, Any]:
    """The shape of the 1.3 MiB create that expanded to ~96,000 targets: wide any_of groups
    nested deep, several channels in each leaf (`fanout ** depth` leaves)."""
    leaf = {
        "sms": {"phone_number": "1"},
        "whatsapp": {"phone_number": "2"},
        "email": {"address": "a@example.com"},
    }
    channel: dict[str, Any] = leaf
    for _ in range(depth):
        channel = {"any_of": [channel] * fanout}
    return channel


async def assert_not_stored(client: httpx.AsyncClient, path: str, call_id: str) -> None:
    found = await client.get(f"{path}/{call_id}")
    assert found.status_code == 404, found.text[:300]


# --- targets per request ------------------------------------------------------------------


@BOTH
async def test_more_targets_than_the_cap_is_a_422_naming_it_and_stores_nothing(
    tmp_path: Path, path: str
) -> None:
    async with gateway_with(tmp_path) as gateway, gateway.client() as client:
        contact = path == HC
        at_cap = request_body("fifty", contact=contact, channel=wide_channel(50))
        over = request_body("fifty-one", contact=contact, channel=wide_channel(51))
        allowed = await client.post(path, json=at_cap)
        refused = await client.post(path, json=over)
        assert allowed.status_code == 200, allowed.text
        assert len(allowed.json()["route"]) == 50
        text = detail_text(refused, 422)
        assert "more than 50 targets" in text and "GATEWAY_MAX_TARGETS" in text
        await assert_not_stored(client, path, "fifty-one")


async def test_targets_count_after_teams_expand_and_the_cap_is_a_setting(tmp_path: Path) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    gateway_running = gateway_with(tmp_path, config=config, max_targets=3)
    async with gateway_running as gateway, gateway.client() as client:
        team = await client.post(FC, json=request_body("team", channel={"team": "ops"}))
        assert team.status_code == 200, team.text
        assert len(team.json()["route"]) == 3  # Slack, Discord and email
        more = {"team": "ops", "email": {"address": "bob@example.com"}}
        refused = await client.post(FC, json=request_body("team-and-bob", channel=more))
        text = detail_text(refused, 422)
        assert "more than 3 targets" in text and "GATEWAY_MAX_TARGETS" in text
        await assert_not_stored(client, FC, "team-and-bob")


async def test_the_huge_fan_out_is_refused_by_its_channel_count_before_validation(
    tmp_path: Path,
) -> None:
    """8,421 channels (32,000 targets) in 1.1 MB: refused by GATEWAY_MAX_POLICY_NODES. Each
    leaf also carries a Discord id the validation would refuse: the count answers first,
    before a model is built for any of them."""
    huge = abusive_channel(fanout=20, depth=3)
    huge["any_of"][0]["any_of"][0]["any_of"][0]["discord"] = {"channel_id": "not-a-number"}
    body = json.dumps(request_body("huge", channel=huge)).encode()
    assert len(body) > 1_000_000
    async with gateway_with(tmp_path) as gateway, gateway.client() as client:
        refused = await client.post(FC, content=body, headers=JSON)
        text = detail_text(refused, 422)
        assert "more than 100 channels" in text and "GATEWAY_MAX_POLICY_NODES" in text
        assert "channel_id" not in text  # not validated: counted first
        await assert_not_stored(client, FC, "huge")


@BOTH
async def test_channels_are_counted_through_delayed_branches(tmp_path: Path, path: str) -> None:
    delayed = [{"timeout": 60, "channel": {"any_of": emails(2)}}] * 3
    channel = {"any_of": delayed}  # 1 + 3 delayed channels + 6 emails = 10 channels
    async with gateway_with(tmp_path, max_policy_nodes=9) as gateway, gateway.client() as client:
        refused = await client.post(
            path, json=request_body("d", contact=path == HC, channel=channel)
        )
        assert "more than 9 channels" in detail_text(refused, 422)
        await assert_not_stored(client, path, "d")


# --- the create rate of each API key ------------------------------------------------------


async def test_a_key_over_its_create_rate_gets_429_with_retry_after(tmp_path: Path) -> None:
    settings = {"creates_per_second": 0.01, "create_burst": 3}  # 3 now, then one per 100 s
    async with gateway_with(tmp_path, **settings) as gateway:
        agent = await gateway.new_key("default")
        other = await gateway.new_key("default", name="other-agent")
        async with gateway.client(agent) as client:
            for n, path in enumerate([FC, HC, FC]):  # both kinds of create draw on one bucket
                made = await client.post(path, json=request_body(f"ok-{n}", contact=path == HC))
                assert made.status_code == 200, made.text
            for path in (FC, HC):
                refused = await client.post(path, json=request_body("over", contact=path == HC))
                text = detail_text(refused, 429)
                assert "create rate" in text and "GATEWAY_CREATES_PER_SECOND" in text
                assert 1 <= int(refused.headers["retry-after"]) <= 100
                await assert_not_stored(client, path, "over")
            listed = await client.get(FC)  # reads are not creates
            assert listed.status_code == 200
        async with gateway.client(other) as client:  # another key has its own bucket
            made = await client.post(FC, json=request_body("other"))
            assert made.status_code == 200, made.text


async def test_the_agent_cannot_lift_its_own_rate(tmp_path: Path) -> None:
    """Nothing the agent sends makes another bucket: not the run_id, not the spelling of its
    Authorization header, not the MCP door instead of the HTTP API."""
    async with gateway_with(tmp_path, creates_per_second=0.01, create_burst=1) as gateway:
        agent = await gateway.new_key("default")
        async with gateway.client(agent) as client:
            made = await client.post(FC, json=request_body("first"))
            assert made.status_code == 200, made.text
            tries = [
                (request_body("run", run_id="another-run"), {}),
                (request_body("spelled"), {"Authorization": f"bearer   {agent}"}),
            ]
            for body, headers in tries:
                refused = await client.post(FC, json=body, headers=headers)
                assert refused.status_code == 429, refused.text
        async with mcp_session(gateway, agent) as session:
            message = await tool_error(
                session, "request_approval", action="drop_table", arguments={}, wait_seconds=0
            )
        assert "create rate" in message and "GATEWAY_CREATES_PER_SECOND" in message
        async with gateway.client(agent) as client:
            assert (await client.get(FC)).json()["total"] == 1


async def test_a_rate_of_zero_is_no_limit(tmp_path: Path) -> None:
    unlimited = gateway_with(tmp_path, creates_per_second=0, create_burst=1)
    async with unlimited as gateway, gateway.client() as client:
        for n in range(5):
            made = await client.post(FC, json=request_body(f"c-{n}"))
            assert made.status_code == 200, made.text


async def test_the_create_routes_document_429_and_retry_after(tmp_path: Path) -> None:
    async with gateway_with(tmp_path) as gateway, gateway.client() as client:
        paths = (await client.get(f"{gateway.base_url}/openapi.json")).json()["paths"]
    for path in ("function_calls", "contact_requests", "human_contacts"):
        responses = paths[f"/humanlayer/v1/{path}"]["post"]["responses"]
        assert "Retry-After" in responses["429"]["headers"], path
        assert "429" not in paths[f"/humanlayer/v1/{path}"]["get"]["responses"], path
