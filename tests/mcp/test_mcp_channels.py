"""MCP requests reach people like any other: approved in Slack while the tool call waits, and
decided by an email reply after the tool call returned a ticket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.channels.email.helpers import email_gateway, email_settings, reply, sent_for
from tests.channels.slack.helpers import button_rid, click, send, slack_channel
from tests.fakes.slack import FakeSlack
from tests.helpers import eventually, outbox_idle
from tests.mcp.helpers import call, mcp_session
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config
from tests.services.smtp_sink import SmtpSink

ROUTING = """
[people.alice]
name = "Alice"
slack = "U0ALICE"
email = "alice@example.org"

[teams.ops]
members = ["alice"]
slack_channel = "C1"
"""


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as slack:
        yield slack


async def test_request_approval_approved_in_slack_while_the_call_waits(
    tmp_path: Path, fake: FakeSlack
) -> None:
    settings = test_settings(
        f"sqlite+aiosqlite:///{tmp_path}/slack.db",
        config=write_config(tmp_path / "r.toml", ROUTING),
    )
    async with (
        running_gateway(settings, channels={"slack": slack_channel(fake)}) as gateway,
        mcp_session(gateway) as session,
    ):
        waiting = asyncio.create_task(
            call(
                session,
                "request_approval",
                action="restart_service",
                arguments={"service": "billing", "region": "eu-west-1"},
                reason="billing is stuck on a bad cache",
                team="ops",
                wait_seconds=20,
            )
        )
        [posted] = await fake.wait_for("chat.postMessage", 1)
        assert posted.params["channel"] == "C1"
        buttons = [
            e for b in posted.params["blocks"] for e in b.get("elements", []) if "value" in e
        ]
        approve = await send(gateway, click(fake, button_rid(buttons[0]), "gw_approve"))
        assert approve.status_code == 200
        decision = await waiting  # the same tool call, still open, returns the decision

    assert decision["status"] == "approved"
    assert decision["decided_in"] == "slack"
    assert decision["decided_by"] == "User U0ALICE"  # the fake's users.info profile
    assert decision["comment"] is None


async def test_a_ticket_then_get_decision_after_an_email_reply(
    tmp_path: Path, smtp_sink: SmtpSink
) -> None:
    routing = write_config(tmp_path / "r.toml", ROUTING)
    async with (
        email_gateway(tmp_path, email_settings(smtp_sink), config=routing) as gateway,
        mcp_session(gateway) as session,
    ):
        ticket = await call(
            session,
            "request_approval",
            action="drop_table",
            arguments={"name": "sessions"},
            person="alice",
            wait_seconds=0.3,  # nobody replies that fast: the wait times out
        )
        assert ticket["status"] == "pending", ticket
        call_id = ticket["call_id"]
        await eventually(lambda: outbox_idle(gateway))
        [sunk] = sent_for(smtp_sink, call_id)
        assert [str(to) for to in sunk.message.get_all("To", [])] == ["alice@example.org"]

        waiting = asyncio.create_task(
            call(session, "get_decision", call_id=call_id, wait_seconds=20)
        )
        posted = await _post_reply(gateway, reply(sunk.message, "reject: not during the sale"))
        assert posted == "decided"
        decision = await waiting

    assert decision.pop("receipt").count(".") == 2  # a compact JWS: tests/receipts verify it
    assert decision == {
        "status": "rejected",
        "call_id": call_id,
        "comment": "not during the sale",
        "decided_by": "Alice",
        "decided_in": "email",
    }


async def _post_reply(gateway: RunningGateway, raw: bytes) -> str:
    """POST /email/inbound, as an MTA pipe or an inbound-mail webhook does."""
    headers = {"Content-Type": "message/rfc822", "Authorization": "Bearer inbound-secret"}
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as client:
        response = await client.post("/email/inbound", content=raw, headers=headers)
    assert response.status_code == 200, response.text
    result: str = response.json()["result"]
    return result


async def test_the_keys_default_target_routes_mcp_requests(tmp_path: Path, fake: FakeSlack) -> None:
    settings = test_settings(
        f"sqlite+aiosqlite:///{tmp_path}/slack.db",
        config=write_config(tmp_path / "r.toml", ROUTING),
    )
    async with running_gateway(settings, channels={"slack": slack_channel(fake)}) as gateway:
        key = await gateway.new_key("default", name="ops-agent", target="team:ops")
        async with mcp_session(gateway, key) as session:
            ticket = await call(
                session, "request_approval", action="deploy", arguments={}, wait_seconds=0
            )
        async with gateway.client(key) as api:
            stored = (await api.get(f"/function_calls/{ticket['call_id']}")).json()
        [posted] = await fake.wait_for("chat.postMessage", 1)

    assert [(t["channel"], t["via"]) for t in stored["route"]] == [("slack", "api key")]
    assert posted.params["channel"] == "C1"
