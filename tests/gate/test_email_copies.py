"""Email copies are per person: each recipient gets their own message, link and reply
token, made for their address. A Bcc the agent slipped in, a forwarded copy or a forged
From answers as whoever the copy was made for, or as nobody: never as Alice. No reply token
or Message-ID leaves the gateway through the API, a webhook or MCP."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.policies import grants
from tests.channels.email.helpers import (
    ALICE,
    BOB,
    email_gateway,
    email_settings,
    post_inbound,
    reply,
    sent_for,
)
from tests.factories import RequestFactory
from tests.helpers import add_webhook, eventually, outbox_idle
from tests.mcp.helpers import call, mcp_session
from tests.services.inprocess import RunningGateway, write_config
from tests.services.receiver import WebhookReceiver
from tests.services.smtp_sink import SmtpSink, SunkMessage

AGENT = "agent@evil.example"
CONFIG = f"""
[people.alice]
email = "{ALICE}"

[people.bob]
email = "{BOB}"

[teams.dba]
members = ["alice", "bob"]
approvals_required = 2

[teams.ops]
members = ["alice", "bob"]
email = "ops-list@example.org"
approvals_required = 2

[[rules]]
fn = "drop_*"
target = "team:dba"

[[rules]]
fn = "wipe_*"
target = "web"

[[rules]]
fn = "restart_*"
target = "team:ops"
"""
# Alice in To, the agent's own mailbox in Bcc.
WITH_AGENT_IN_BCC = {
    "email": {"address": ALICE, "additional_recipients": [{"address": AGENT, "field": "bcc"}]}
}


@pytest.fixture
async def mailed(tmp_path: Path, smtp_sink: SmtpSink) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    settings = email_settings(smtp_sink)
    async with email_gateway(tmp_path, settings, config=config, public_url="http://gw") as gw:
        yield gw


def copy_for(sink: SmtpSink, call_id: str, address: str) -> SunkMessage:
    """The first copy of the request sent to `address` alone."""
    return next(m for m in sent_for(sink, call_id) if m.rcpt_tos == [address])


def link_in(copy: SunkMessage) -> str:
    text = copy.message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    found = re.search(r"http://gw(/r/[\w-]+\?t=[\w.-]+)", text)
    assert found is not None, text
    return found.group(1)


async def decide_from_link(gw: RunningGateway, path: str, action: str) -> httpx.Response:
    """What a person holding the link does: open the page, press the button."""
    async with httpx.AsyncClient(base_url=gw.base_url) as browser:
        page = await browser.get(path)
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None, page.text
        form = {"t": path.split("?t=", 1)[1], "csrf": csrf.group(1), "action": action}
        if action == "reject":
            form["reason"] = "no"
        return await browser.post(path.split("?")[0], data=form)


async def wire(gw: RunningGateway, call_id: str) -> Any:
    async with gw.client() as client:
        return (await client.get(f"/function_calls/{call_id}")).json()


async def test_each_recipient_gets_a_link_of_their_own(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    await request_factory(mailed, "own-1", fn="read_table", channel=WITH_AGENT_IN_BCC, settle=True)
    alices, agents = (
        link_in(copy_for(smtp_sink, "own-1", ALICE)),
        link_in(copy_for(smtp_sink, "own-1", AGENT)),
    )
    assert alices != agents
    decided = await decide_from_link(mailed, agents, "approve")
    assert decided.status_code == 303, decided.text
    got = await wire(mailed, "own-1")
    # The agent's Bcc copy decided as the agent, which the agent's own channel allowed;
    # never as Alice, whose address the email was to.
    assert got["status"]["user_info"]["email"] == AGENT


async def test_the_agents_bcc_copy_or_a_forged_from_cannot_vote_as_alice_or_bob(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    await request_factory(mailed, "bcc-1", fn="drop_users", channel=WITH_AGENT_IN_BCC, settle=True)
    agents_copy = copy_for(smtp_sink, "bcc-1", AGENT)
    # Its own link votes as itself, for the copy the agent's channel sent it, no more.
    by_link = await decide_from_link(mailed, link_in(agents_copy), "approve")
    assert by_link.status_code == 303, by_link.text
    for forged in (f"Alice <{ALICE}>", f"Bob <{BOB}>"):
        outcome = await post_inbound(mailed, reply(agents_copy.message, "approve", sender=forged))
        assert outcome["result"] == "refused", outcome
        assert "not one of the people this copy was sent to" in outcome["reason"]
    standing = await wire(mailed, "bcc-1")
    assert standing["gateway_status"] == "pending"
    approvers = [a.get("email") for a in standing["policy_progress"]["approvers"]]
    assert approvers == [AGENT]  # not Alice, not Bob: the team's two are still needed
    # Alice's own copy, from her own address: her rejection is hers, and it vetoes.
    alices_copy = copy_for(smtp_sink, "bcc-1", ALICE)
    outcome = await post_inbound(mailed, reply(alices_copy.message, "reject: not users"))
    assert outcome["result"] == "decided", outcome
    assert (await wire(mailed, "bcc-1"))["gateway_status"] == "rejected"


async def test_a_forwarded_copy_never_answers_as_the_addressee(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    """Bob, in Cc, forwards his copy to Mallory: its link is Bob's, its reply token is Bob's.
    Mallory's reply answers as nobody; the link answers as Bob at most, never as Alice."""
    to_alice_cc_bob = {
        "email": {"address": ALICE, "additional_recipients": [{"address": BOB, "field": "cc"}]}
    }
    await request_factory(mailed, "fwd-1", fn="read_table", channel=to_alice_cc_bob, settle=True)
    bobs_copy = copy_for(smtp_sink, "fwd-1", BOB)
    forwarded = reply(bobs_copy.message, "approve", sender="Mallory <mallory@example.net>")
    outcome = await post_inbound(mailed, forwarded)
    assert outcome["result"] == "refused", outcome
    assert (await wire(mailed, "fwd-1"))["gateway_status"] == "pending"
    decided = await decide_from_link(mailed, link_in(bobs_copy), "approve")
    assert decided.status_code == 303, decided.text
    assert (await wire(mailed, "fwd-1"))["status"]["user_info"]["email"] == BOB


def tokens_of(sink: SmtpSink) -> set[str]:
    """What every message the gateway sent carries that answers for someone: each reply
    address's token and each Message-ID's."""
    found = set()
    for sunk in sink.messages:
        reply_to = str(sunk.message["Reply-To"] or "")
        if "+" in reply_to:
            found.add(reply_to.split("+", 1)[1].split("@", 1)[0])
        message_id = str(sunk.message["Message-ID"]).strip("<>")
        found |= {message_id, message_id.split("@", 1)[0].split(".", 1)[1]}
    return found


async def test_no_reply_token_or_message_id_leaves_through_the_api_webhooks_or_mcp(
    mailed: RunningGateway,
    smtp_sink: SmtpSink,
    receiver: WebhookReceiver,
    request_factory: RequestFactory,
) -> None:
    await add_webhook(mailed, receiver.url)
    to_alice_cc_bob = {
        "email": {"address": ALICE, "additional_recipients": [{"address": BOB, "field": "cc"}]}
    }
    await request_factory(mailed, "leak-1", fn="read_table", channel=to_alice_cc_bob, settle=True)
    escalation = {"escalation_msg": "please", "channel": {"email": {"address": ALICE}}}
    async with mailed.client() as admin:  # an admin escalates: the route now has a thread
        escalated = await admin.post("/agent/function_calls/leak-1/escalate_email", json=escalation)
        assert escalated.status_code == 200, escalated.text
    await eventually(lambda: outbox_idle(mailed))
    secrets = tokens_of(smtp_sink)
    assert len(secrets) >= 6  # three messages, two tokens each
    async with mailed.client() as client:
        seen = [
            (await client.get("/function_calls/leak-1")).text,
            (await client.get("/function_calls")).text,
            (await client.get("/agent/function_calls/pending")).text,
            (await client.get(f"{mailed.base_url}/gateway/v1/calls/leak-1/events")).text,
        ]
    async with mcp_session(mailed) as session:
        seen.append(str(await call(session, "get_decision", call_id="leak-1", wait_seconds=0)))
    alices = copy_for(smtp_sink, "leak-1", ALICE)
    await post_inbound(mailed, reply(alices.message, "approve"))
    [hook] = await receiver.wait_for(1)
    seen.append(hook.body.decode())
    leaked = {secret for secret in secrets for text in seen if secret.lower() in text.lower()}
    assert leaked == set()


async def test_an_escalation_mails_configured_people_and_allowed_domains_only(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    await request_factory(mailed, "esc-1", fn="read_table", channel={"email": {"address": ALICE}})
    outsider = {
        "escalation_msg": "see this",
        "channel": {"email": {"address": BOB}},
        "additional_recipients": [{"address": "someone@outside.example", "field": "bcc"}],
    }
    async with mailed.client() as admin:
        refused = await admin.post("/agent/function_calls/esc-1/escalate_email", json=outsider)
        assert refused.status_code == 422, refused.text
        assert "not allowed: someone@outside.example" in refused.text
        assert BOB not in refused.text  # a configured person is fine
        events = await admin.get(f"{mailed.base_url}/gateway/v1/calls/esc-1/events")
    assert "escalated" not in [e["type"] for e in events.json()["events"]]
    await eventually(lambda: outbox_idle(mailed))
    assert not [m for m in smtp_sink.messages if "someone@outside.example" in m.rcpt_tos]


async def test_the_agent_cannot_escalate_to_itself_in_bcc(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    """The attack: escalate to Alice with the agent in Bcc, open her link. An agent key may
    not escalate at all; an admin's escalation may not mail an outside address."""
    agent = await mailed.new_key("default", name="agent")
    await request_factory(mailed, "self-1", fn="drop_users", key=agent)
    to_self = {
        "escalation_msg": "urgent",
        "channel": {"email": {"address": ALICE}},
        "additional_recipients": [{"address": AGENT, "field": "bcc"}],
    }
    path = "/agent/function_calls/self-1/escalate_email"
    async with mailed.client(agent) as client:
        assert (await client.post(path, json=to_self)).status_code == 403
    async with mailed.client() as admin:
        assert (await admin.post(path, json=to_self)).status_code == 422
    await eventually(lambda: outbox_idle(mailed))
    assert not [m for m in smtp_sink.messages if AGENT in m.rcpt_tos]


async def test_an_emailed_link_never_counts_for_the_rules_console_target(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    """The rule sends wipe_* to the console; the agent adds its own mailbox. Its copy's link
    answers for its own copy only: the console's target is for people signed in."""
    own = {"email": {"address": AGENT}}
    await request_factory(mailed, "wipe-1", fn="wipe_disk", channel=own, settle=True)
    by_link = await decide_from_link(
        mailed, link_in(copy_for(smtp_sink, "wipe-1", AGENT)), "approve"
    )
    assert by_link.status_code == 303, by_link.text
    standing = await wire(mailed, "wipe-1")
    assert standing["gateway_status"] == "pending"
    assert standing["policy_progress"]["approvals"] == 1  # its own branch, not the rule's


async def test_a_reply_to_a_lists_copy_is_no_vote_toward_a_quorum(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    """Alice answers the ops list's copy: which member wrote is unproven (no DMARC), and
    Alice may also vote as herself, so the list's reply counts toward no approvals."""
    await request_factory(mailed, "list-1", fn="restart_db", settle=True)
    lists_copy = copy_for(smtp_sink, "list-1", "ops-list@example.org")
    outcome = await post_inbound(mailed, reply(lists_copy.message, "approve"))
    assert outcome["result"] == "refused", outcome
    assert "shared list" in outcome["reason"]
    standing = await wire(mailed, "list-1")
    assert standing["gateway_status"] == "pending"
    assert (standing.get("policy_progress") or {"approvals": 0})["approvals"] == 0


async def test_a_forged_token_naming_no_real_request_is_ignored_not_a_500(
    mailed: RunningGateway,
) -> None:
    """`aa` decodes to a NUL rid: it must never reach the database (PostgreSQL refuses it)."""
    raw = (
        b"From: Mallory <mallory@example.net>\r\nTo: approvals+aa.x@example.test\r\n"
        b"Subject: hi\r\nMessage-ID: <forged@example.net>\r\n\r\napprove\r\n"
    )
    outcome = await post_inbound(mailed, raw)
    assert outcome == {"result": "ignored", "reason": "no valid reply token or thread id"}


async def test_an_emailed_link_approves_one_call_and_never_gives_a_grant(
    mailed: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    """Whoever holds a copy of Alice's email (forwarded, leaked) may answer this one request
    as Alice, as the link allows; never let the agent's next calls through for hours."""
    to_alice = {"email": {"address": ALICE}}
    await request_factory(mailed, "link-grant", fn="read_table", channel=to_alice, settle=True)
    path = link_in(copy_for(smtp_sink, "link-grant", ALICE))
    async with httpx.AsyncClient(base_url=mailed.base_url) as browser:
        page = await browser.get(path)
        assert 'name="grant"' not in page.text  # not offered to a link's holder
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None, page.text
        form = {
            "t": path.split("?t=", 1)[1],
            "csrf": csrf.group(1),
            "action": "grant",
            "grant": "run:3600",
        }
        crafted = await browser.post(path.split("?")[0], data=form)
    assert crafted.status_code == 403
    assert "not through an emailed link" in crafted.text
    assert (await wire(mailed, "link-grant"))["gateway_status"] == "pending"
    assert await grants.listing(mailed.core) == []
