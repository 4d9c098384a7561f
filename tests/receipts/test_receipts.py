"""Signed decision receipts: the webhook's and GET's receipt verify offline against the
served JWKS, survive a key rotation, and an altered or mismatching receipt is refused; the
decisions nobody clicked (an expiry, a rule, a grant), an edit and a quorum are signed too."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.seam import Answered, Verb
from gateway.store import receipts as receipt_store
from gateway.store import requests as request_store
from gateway.store.canonical import sha256_hex
from gateway.store.rows import RequestRow
from gateway.store.tables import OutboxJob, Request
from gateway.vocabulary import JobKind
from hitl_client import FunctionCall
from hitl_client.receipts import ReceiptError, verify
from tests.factories import RequestFactory
from tests.grants.helpers import ALICE, give_grant
from tests.grants.helpers import create as create_call
from tests.helpers import add_webhook, eventually, make_due
from tests.mcp.helpers import call, mcp_session
from tests.rules.helpers import RM_ROOT_COMMENT, create, rules_gateway
from tests.services.cli import Cli
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for
from tests.services.receiver import WebhookReceiver
from tests.test_policies_api import CONFIG as POLICIES
from tests.test_policies_api import person_keys, respond

KWARGS = {"to": "ops@example.com", "amount": 12.5, "lines": [1, "två", None]}


async def jwks(gateway: RunningGateway) -> dict[str, Any]:
    """The served key set, fetched anonymously as an auditor would."""
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=10) as anonymous:
        response = await anonymous.get("/.well-known/jwks.json")
    assert response.status_code == 200, response.text
    keys: dict[str, Any] = response.json()
    return keys


async def approve(gateway: RunningGateway, call_id: str, **kwargs: Any) -> dict[str, Any]:
    """Create a function call and approve it through the API; returns GET's answer."""
    async with gateway.client() as api:
        spec = {"fn": "send_invoice", "kwargs": kwargs or KWARGS}
        body = {"run_id": "r", "call_id": call_id, "spec": spec}
        assert (await api.post("/function_calls", json=body)).status_code == 200
        answer = {"approved": True, "comment": "ok, once"}
        reply = await api.post(f"/agent/function_calls/{call_id}/respond", json=answer)
        assert reply.status_code == 200, reply.text
        got = await api.get(f"/function_calls/{call_id}")
    wire: dict[str, Any] = got.json()
    return wire


async def decided_digest(gateway: RunningGateway, call_id: str) -> str | None:
    """The digest of the request's `decided` audit event, as the chain stored it."""
    row: RequestRow | None = await gateway.core.db.read(request_store.get_by_call_id, 1, call_id)
    assert row is not None
    trail = await gateway.core.db.read(request_store.list_events, row.rid)
    return next(event.digest for event in trail if event.type == "decided")


def kid_of(receipt: str) -> str:
    header = receipt.split(".")[0]
    kid: str = json.loads(base64.urlsafe_b64decode(header + "==="))["kid"]
    return kid


async def test_the_webhook_and_get_receipts_verify_against_the_served_jwks(
    gateway: RunningGateway, receiver: WebhookReceiver
) -> None:
    await add_webhook(gateway, receiver.url)
    got = await approve(gateway, "rc-1")
    [delivery] = await receiver.wait_for(1)
    sent = json.loads(delivery.body)["event"]
    keys = await jwks(gateway)

    call = FunctionCall.model_validate(got)
    from_get = verify(got["receipt"], keys, expected=call, decision="approved")
    from_webhook = verify(sent["receipt"], keys, expected=KWARGS, decision="approved")
    assert from_get == from_webhook  # one receipt, signed as the decision was written
    digest = await decided_digest(gateway, "rc-1")
    assert from_get["event_sha256"] == digest and digest
    assert from_get["call_id"] == "rc-1" and from_get["project"] == "default"
    assert from_get["fn"] == "send_invoice" and from_get["comment_sha256"] == sha256_hex("ok, once")
    assert from_get["by"] == got["status"]["user_info"] and from_get["channel"] == "api"


async def test_after_a_rotation_old_receipts_verify_and_new_ones_use_the_new_key(
    gateway: RunningGateway, cli: Cli
) -> None:
    old = (await approve(gateway, "rot-1"))["receipt"]
    rotated = await cli(
        "receipts", "rotate", GATEWAY_DATABASE_URL=gateway.core.settings.database_url
    )
    assert rotated.returncode == 0, rotated.stderr
    new = (await approve(gateway, "rot-2"))["receipt"]
    keys = await jwks(gateway)

    assert kid_of(new) != kid_of(old) and kid_of(new) in rotated.stdout
    assert {kid_of(old), kid_of(new)} <= {key["kid"] for key in keys["keys"]}
    assert verify(old, keys, expected=KWARGS)["call_id"] == "rot-1"
    assert verify(new, keys, expected=KWARGS)["call_id"] == "rot-2"


async def test_changed_kwargs_altered_payloads_and_signatures_fail_with_a_reason(
    sqlite_gateway: RunningGateway,
) -> None:
    receipt = (await approve(sqlite_gateway, "bad-1"))["receipt"]
    keys = await jwks(sqlite_gateway)
    header, payload, signature = receipt.split(".")

    with pytest.raises(ReceiptError, match="kwargs differ"):
        verify(receipt, keys, expected=KWARGS | {"amount": 1250})
    claims = json.loads(base64.urlsafe_b64decode(payload + "==="))
    claims["kwargs_sha256"] = sha256_hex(KWARGS | {"amount": 1250})  # re-pointed at new kwargs
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(ReceiptError, match="bad signature"):
        verify(f"{header}.{forged}.{signature}", keys)
    flipped = ("A" if signature[5] != "A" else "B").join((signature[:5], signature[6:]))
    with pytest.raises(ReceiptError, match="bad signature"):
        verify(f"{header}.{payload}.{flipped}", keys)
    with pytest.raises(ReceiptError, match="unsigned"):
        verify(None, keys)
    with pytest.raises(ReceiptError, match="does not hold"):
        verify(receipt, {"keys": []})
    with pytest.raises(ReceiptError, match="'rejected'"):
        verify(receipt, keys, decision="rejected")


def _pending_call_id(conn: Connection) -> str | None:
    table = Request.__table__  # type: ignore[attr-defined]
    found = conn.execute(sa.select(table.c.call_id).where(table.c.status == "pending")).first()
    return None if found is None else str(found.call_id)


async def test_mcp_request_approval_returns_a_receipt(sqlite_gateway: RunningGateway) -> None:
    async with mcp_session(sqlite_gateway) as session:
        waiting = asyncio.create_task(
            call(
                session,
                "request_approval",
                action="drop_table",
                arguments={"name": "users"},
                wait_seconds=20,
            )
        )
        found: list[str] = []

        async def created() -> bool:
            call_id = await sqlite_gateway.core.db.read(_pending_call_id)
            found.extend([call_id] if call_id else [])
            return bool(found)

        await eventually(created)
        async with sqlite_gateway.client() as api:
            url = f"/agent/function_calls/{found[0]}/respond"
            assert (await api.post(url, json={"approved": True})).status_code == 200
        decision = await waiting

    assert decision["status"] == "approved" and decision["receipt"]
    claims = verify(decision["receipt"], await jwks(sqlite_gateway), expected={"name": "users"})
    assert claims["fn"] == "drop_table" and claims["call_id"] == found[0]


async def test_the_jwks_is_public_only_and_no_agent_key_can_rotate(
    sqlite_gateway: RunningGateway,
) -> None:
    await approve(sqlite_gateway, "pub-1")
    keys = await jwks(sqlite_gateway)
    assert [set(key) for key in keys["keys"]] == [{"kty", "crv", "x", "kid", "use", "alg"}]
    [key] = await sqlite_gateway.core.db.read(receipt_store.list_keys)
    assert "PRIVATE" not in key.sealed_private  # sealed with the gateway's secret key
    async with sqlite_gateway.client() as api:  # the agent key: no route changes keys
        for method in ("POST", "PUT", "DELETE"):
            response = await api.request(method, f"{sqlite_gateway.base_url}/.well-known/jwks.json")
            assert response.status_code == 405
    assert await jwks(sqlite_gateway) == keys


async def test_a_rule_that_decides_at_create_signs_its_decision(tmp_path: Path) -> None:
    """Decisions nobody clicked carry receipts too: here a rule's, at create."""
    async with rules_gateway(f"sqlite+aiosqlite:///{tmp_path}/gw.db", tmp_path) as ruled:
        made = await create(ruled, "rule-1", "run", {"cmd": "rm -rf /"})
        keys = await jwks(ruled)
        digest = await decided_digest(ruled, "rule-1")

    claims = verify(made["receipt"], keys, expected={"cmd": "rm -rf /"}, decision="rejected")
    assert claims["by"]["rule"] == "no-rm-root" and claims["channel"] == "gateway"
    assert claims["comment_sha256"] == sha256_hex(RM_ROOT_COMMENT)
    assert claims["event_sha256"] == digest and digest


async def test_a_standing_grants_approval_at_create_is_signed(
    sqlite_gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    bot = await sqlite_gateway.new_key("default", name="bot")
    given = await give_grant(sqlite_gateway, request_factory, "g1", key=bot)
    made = await create_call(sqlite_gateway, request_factory, "g2", key=bot, path="/a")
    keys = await jwks(sqlite_gateway)
    rid = made.rid
    trail = await sqlite_gateway.core.db.read(request_store.list_events, rid)

    claims = verify(made.wire["receipt"], keys, expected={"path": "/a"}, decision="approved")
    assert claims["by"]["grant"] == given.id and claims["channel"] == "grant"
    assert claims["event_sha256"] == next(e.digest for e in trail if e.type == "auto_approved")


@pytest.fixture
async def quorum(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """drop_* calls go to a team that needs two approvals, and expire after an hour."""
    config = write_config(tmp_path / "routing.toml", POLICIES)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


def _timers(conn: Connection, rid: str) -> list[int]:
    job = OutboxJob.__table__  # type: ignore[attr-defined]
    found = sa.select(job.c.id).where(job.c.rid == rid, job.c.kind == JobKind.TIMER)
    return [int(row.id) for row in conn.execute(found)]


async def test_an_expired_calls_receipt_verifies_and_says_what_the_wire_says(
    quorum: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(quorum, "exp-1", fn="drop_table", kwargs=KWARGS)
    [deadline] = await quorum.core.db.read(_timers, made.rid)
    async with quorum.client() as api:
        waiting = asyncio.create_task(api.get("/function_calls/exp-1", params={"wait": 20}))
        await make_due(quorum, deadline)  # as if the hour had passed
        got = (await waiting).json()

    assert got["status"]["approved"] is False and "expired" in got["status"]["comment"]
    call = FunctionCall.model_validate(got)
    claims = verify(got["receipt"], await jwks(quorum), expected=call, project="default")
    assert claims["decision"] == call.gateway_status == "rejected"
    assert claims["comment_sha256"] == sha256_hex(got["status"]["comment"])
    assert claims["by"] == got["status"]["user_info"] and claims["channel"] == "gateway"
    assert claims["decided_at"] == got["status"]["responded_at"]
    assert claims["event_sha256"] == await decided_digest(quorum, "exp-1")


async def test_a_quorums_decision_is_signed_once_at_the_deciding_vote(
    quorum: RunningGateway, request_factory: RequestFactory
) -> None:
    await request_factory(quorum, "q-1", fn="drop_table", kwargs=KWARGS)
    alice, bob = await person_keys(quorum, "alice", "bob")
    first = (await respond(quorum, "q-1", alice, approved=True, comment="ok")).json()
    assert first["status"]["approved"] is None and first.get("receipt") is None  # a vote
    last = (await respond(quorum, "q-1", bob, approved=True, comment="go")).json()

    keys = await jwks(quorum)
    call = FunctionCall.model_validate(last)
    claims = verify(last["receipt"], keys, expected=call, decision="approved", project="default")
    assert claims["by"] == last["status"]["user_info"] and "bob" in json.dumps(claims["by"])
    assert claims["comment_sha256"] == sha256_hex("go")
    assert claims["event_sha256"] == await decided_digest(quorum, "q-1")
    async with quorum.client() as api:
        assert (await api.get("/function_calls/q-1")).json()["receipt"] == last["receipt"]


async def test_an_edited_approval_signs_the_approvers_arguments(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await create_call(gateway, request_factory, "ed-1", path="/etc/passwd")
    edited = {"path": "/tmp/safe"}
    answered = await gateway.context("slack").answers.answer(
        made.rid, Verb.EDIT, ALICE, edited=edited
    )
    assert isinstance(answered, Answered), answered
    async with gateway.client() as api:
        got = (await api.get("/function_calls/ed-1")).json()

    keys = await jwks(gateway)
    call = FunctionCall.model_validate(got)
    assert call.arguments == edited
    claims = verify(got["receipt"], keys, expected=call, decision="approved", fn="read_file")
    assert claims["kwargs_sha256"] == sha256_hex(edited)
    with pytest.raises(ReceiptError, match="kwargs differ"):
        verify(got["receipt"], keys, expected={"path": "/etc/passwd"})  # the agent's own
