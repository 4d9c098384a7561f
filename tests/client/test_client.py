"""The client against a live gateway, both the blocking and the asyncio one: a request made,
waited on across a person's decision (one long-poll, no 3-second polling), answered with an
Idempotency-Key that survives a lost answer, a busy gateway retried, refusals raised with
the gateway's own words and never retried."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gateway.seam import Answered, Verb
from hitl_client import ApiError, AsyncClient, Client, FunctionCall, Unavailable, _wire
from hitl_client.receipts import kwargs_hash
from tests.client.helpers import FAST_RETRY, AnyClient, close, make_client, responder_key, run
from tests.client.proxy import BUSY, DROP, FORGE, FlakyProxy
from tests.factories import rid_of
from tests.grants.helpers import ALICE, SLACK
from tests.helpers import events, eventually
from tests.services.inprocess import RunningGateway

pytestmark = pytest.mark.parametrize("flavor", ["sync", "async"])


@pytest.fixture
async def proxy(gateway: RunningGateway) -> AsyncIterator[FlakyProxy]:
    async with FlakyProxy(upstream=gateway.base_url) as running:
        yield running


async def agent(gateway: RunningGateway, flavor: str, base: str | None = None) -> AnyClient:
    key = await gateway.new_key("default", name="agent")
    return make_client(flavor, (base or gateway.base_url) + "/humanlayer/v1", key, run_id="r1")


async def test_wait_returns_the_decision_from_one_long_poll(
    gateway: RunningGateway, proxy: FlakyProxy, flavor: str
) -> None:
    client = await agent(gateway, flavor, proxy.base_url)
    person = make_client(flavor, gateway.api_base, await responder_key(gateway))
    try:
        made = await run(client, "create_function_call", "deploy", {"env": "prod"}, call_id="w1")
        assert isinstance(made, FunctionCall) and made.gateway_status == "pending"
        waiting = asyncio.create_task(run(client, "wait", made, timeout=30))
        await eventually(lambda: _polling(proxy, "/humanlayer/v1/function_calls/w1"))
        started = time.monotonic()
        await run(person, "respond_function_call", "w1", approved=True, comment="ship it")
        decided = await waiting
        assert time.monotonic() - started < 2  # the held GET answered, no poll interval
        assert decided.approved and decided.status is not None
        assert decided.status.comment == "ship it"
        assert decided.arguments == {"env": "prod"}
        polls = proxy.of("GET", "/humanlayer/v1/function_calls/w1")
        assert len(polls) == 1  # one long-poll held across the decision
    finally:
        await close(client)
        await close(person)


async def _polling(proxy: FlakyProxy, path: str) -> bool:
    return bool(proxy.of("GET", path))


async def test_a_respond_whose_answer_is_lost_is_sent_again_and_counts_once(
    gateway: RunningGateway, proxy: FlakyProxy, flavor: str
) -> None:
    client = await agent(gateway, flavor)
    key = await responder_key(gateway)
    person = make_client(flavor, proxy.base_url + "/humanlayer/v1", key, retry=FAST_RETRY)
    respond_path = "/humanlayer/v1/agent/function_calls/d1/respond"
    proxy.fail("POST", respond_path, DROP)
    try:
        await run(client, "create_function_call", "deploy", {}, call_id="d1")
        decided = await run(person, "respond_function_call", "d1", approved=False, comment="no")
        assert decided.gateway_status == "rejected" and decided.reason == "no"
        first, second = proxy.of("POST", respond_path)
        assert first.outcome == DROP and second.outcome == "forwarded"
        assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]
        trail = (await events(gateway, "d1"))["events"]
        assert [e["type"] for e in trail].count("decided") == 1
    finally:
        await close(client)
        await close(person)


async def test_a_busy_gateway_is_retried_after_its_retry_after(
    gateway: RunningGateway, proxy: FlakyProxy, flavor: str
) -> None:
    client = await agent(gateway, flavor, proxy.base_url)
    proxy.fail("POST", "/humanlayer/v1/function_calls", BUSY)
    try:
        started = time.monotonic()
        made = await run(client, "create_function_call", "deploy", {}, call_id="b1")
        assert made.call_id == "b1"
        assert time.monotonic() - started >= 1  # Retry-After: 1 was honoured
        outcomes = [s.outcome for s in proxy.of("POST", "/humanlayer/v1/function_calls")]
        assert outcomes == [BUSY, "forwarded"]
    finally:
        await close(client)


async def test_a_refusal_is_raised_with_the_gateways_message_and_not_retried(
    gateway: RunningGateway, proxy: FlakyProxy, flavor: str
) -> None:
    client = await agent(gateway, flavor, proxy.base_url)
    try:
        await run(client, "create_function_call", "deploy", {"env": "a"}, call_id="c1")
        with pytest.raises(ApiError) as taken:
            await run(client, "create_function_call", "deploy", {"env": "b"}, call_id="c1")
        assert taken.value.status_code == 409
        assert "c1" in taken.value.message and "already" in taken.value.message
        with pytest.raises(ApiError) as invalid:
            await run(client, "create_function_call", "de\u202eploy", {}, call_id="c2")
        assert invalid.value.status_code == 422
        assert "spec.fn" in invalid.value.message and "U+202E" in invalid.value.message
        assert len(proxy.of("POST", "/humanlayer/v1/function_calls")) == 3  # none retried
    finally:
        await close(client)


async def test_the_agents_own_key_cannot_decide(gateway: RunningGateway, flavor: str) -> None:
    client = await agent(gateway, flavor)
    try:
        await run(client, "create_function_call", "deploy", {}, call_id="self")
        with pytest.raises(ApiError) as refused:
            await run(client, "respond_function_call", "self", approved=True)
        assert refused.value.status_code == 403
        still = await run(client, "get_function_call", "self")
        assert still.gateway_status == "pending"
    finally:
        await close(client)


async def test_an_unreachable_gateway_raises_unavailable_after_the_retries(
    gateway: RunningGateway, flavor: str
) -> None:
    async with FlakyProxy(upstream=gateway.base_url) as gone:
        base = gone.base_url
    client = make_client(flavor, base + "/humanlayer/v1", "hl-any", retry=FAST_RETRY)
    try:
        with pytest.raises(Unavailable, match="ConnectError"):
            await run(client, "get_function_call", "x")
    finally:
        await close(client)


async def test_require_approval_runs_the_approvers_arguments_or_returns_why_not(
    gateway: RunningGateway, flavor: str
) -> None:
    client = await agent(gateway, flavor)
    ran: list[dict[str, object]] = []

    def send(to: str, amount: int = 10) -> str:
        ran.append({"to": to, "amount": amount})
        return f"sent {amount} to {to}"

    async def asend(to: str, amount: int = 10) -> str:
        return send(to, amount)

    guard = client.require_approval(channel=SLACK, timeout=30)
    guarded = guard(asend if isinstance(client, AsyncClient) else send)  # type: ignore[arg-type]
    try:
        edited = asyncio.create_task(_call(guarded, client, "mallory"))
        rid = await _pending_rid(gateway)
        answered = await gateway.context("slack").answers.answer(
            rid, Verb.EDIT, ALICE, edited={"to": "alice", "amount": 10}
        )
        assert isinstance(answered, Answered)
        assert await edited == "sent 10 to alice"
        assert ran == [{"to": "alice", "amount": 10}]  # never the agent's own arguments

        refused = asyncio.create_task(_call(guarded, client, "bob", amount=99))
        rid = await _pending_rid(gateway)
        await gateway.context("slack").answers.answer(rid, Verb.REJECT, ALICE, text="too much")
        name = "asend" if isinstance(client, AsyncClient) else "send"
        assert await refused == f"User denied {name} with message: too much"
        assert len(ran) == 1
    finally:
        await close(client)


def sender(client: AnyClient) -> tuple[list[str], Callable[[str], Any]]:
    """Whom a function sent to, and the function, blocking or a coroutine like `client`."""
    ran: list[str] = []

    def send(to: str) -> str:
        ran.append(to)
        return f"sent to {to}"

    async def asend(to: str) -> str:
        return send(to)

    return ran, asend if isinstance(client, AsyncClient) else send


async def test_verify_receipt_refuses_a_forged_approval_that_would_otherwise_run(
    gateway: RunningGateway, proxy: FlakyProxy, flavor: str
) -> None:
    """The attack: whoever sits between agent and gateway (or edits its store) answers
    "approved". With `verify_receipt` the function runs only on a receipt the gateway's
    JWKS proves, for this call and these arguments."""
    client = await agent(gateway, flavor, proxy.base_url)
    ran, func = sender(client)
    checked = client.require_approval(channel=SLACK, timeout=30, verify_receipt=True)(func)
    unchecked = client.require_approval(channel=SLACK, timeout=30)(func)
    try:
        genuine = asyncio.create_task(_call(checked, client, "alice"))
        rid = await _pending_rid(gateway)
        await gateway.context("slack").answers.answer(rid, Verb.APPROVE, ALICE)
        assert await genuine == "sent to alice"
        assert proxy.of("GET", "/.well-known/jwks.json")  # the keys, from the gateway's origin
        [approved] = (await run(client, "list_function_calls", status="approved")).items
        assert approved.receipt and approved.receipt.count(".") == 2  # a compact JWS

        forged = {"gateway_status": "approved", "status": {"approved": True}}
        proxy.forged = forged
        proxy.fail("POST", "/humanlayer/v1/function_calls", FORGE, FORGE)
        refused = await _call(checked, client, "mallory")
        assert refused == (
            f"Not running {func.__name__}: its approval does not verify "
            "(unsigned: the decision carries no receipt)"
        )
        proxy.forged = {**forged, "receipt": approved.receipt}  # a real one, of another call
        refused = await _call(checked, client, "mallory")
        assert isinstance(refused, str) and "(call_id differs: signed " in refused
        assert ran == ["alice"]

        proxy.fail("POST", "/humanlayer/v1/function_calls", FORGE)
        assert await _call(unchecked, client, "mallory") == "sent to mallory"  # the attack
    finally:
        await close(client)


async def test_verify_receipt_refuses_another_projects_genuine_approval(
    gateway: RunningGateway, proxy: FlakyProxy, flavor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every project's receipts share one key: a real receipt for the same call_id, fn and
    kwargs, approved in another project (where a rule or a lenient person approves), must
    not pass for this project's approval."""
    monkeypatch.setattr(_wire, "new_call_id", lambda: "same-call")  # the attacker knows it
    elsewhere = make_client(flavor, gateway.api_base, await gateway.new_key("lenient"))
    lenient = make_client(flavor, gateway.api_base, await responder_key(gateway, "lenient"))
    client = await agent(gateway, flavor, proxy.base_url)
    ran, func = sender(client)
    checked = client.require_approval(channel=SLACK, timeout=30, verify_receipt=True)(func)
    try:
        await run(elsewhere, "create_function_call", func.__name__, {"to": "mallory"})
        other = await run(lenient, "respond_function_call", "same-call", approved=True)
        assert other.receipt
        proxy.forged = {"gateway_status": "approved", "status": {"approved": True}}
        proxy.forged["receipt"] = other.receipt
        proxy.fail("POST", "/humanlayer/v1/function_calls", FORGE, FORGE)
        for _ in range(2):
            refused = await _call(checked, client, "mallory")
            assert isinstance(refused, str)
            assert "(project differs: signed 'lenient', expected 'default')" in refused
        assert ran == []
        assert len(proxy.of("GET", "/humanlayer/v1/project")) == 1  # asked once, then kept
    finally:
        for each in (elsewhere, lenient, client):
            await close(each)


def attackers_receipt(call_id: str, fn: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A receipt an attacker signs with a key of their own for this call, and the JWKS
    that holds that key."""
    key = Ed25519PrivateKey.generate()
    public = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(key.public_key())) | {"kid": "evil"}
    claims = {
        "v": 1,
        "call_id": call_id,
        "project": "default",
        "fn": fn,
        "kwargs_sha256": kwargs_hash(kwargs),
        "decision": "approved",
    }
    receipt = jwt.encode(claims, key, algorithm="EdDSA", headers={"kid": "evil"})
    return receipt, {"keys": [public]}


async def test_pinned_keys_refuse_an_approval_whose_forger_also_serves_the_keys(
    gateway: RunningGateway, proxy: FlakyProxy, flavor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: the man in the middle forges the approval, signs a receipt with a key of
    their own and serves that key as the gateway's JWKS. Keys fetched through him prove
    nothing; keys pinned from a trusted place (here, straight from the gateway) refuse it."""
    monkeypatch.setattr(_wire, "new_call_id", lambda: "mitm-call")  # the forger sees it pass
    trusted = make_client(flavor, gateway.api_base, await gateway.new_key("default"))
    keys = await run(trusted, "jwks")
    fetched = await agent(gateway, flavor, proxy.base_url)
    key = await gateway.new_key("default", name="pinned agent")
    pinned = make_client(
        flavor, proxy.base_url + "/humanlayer/v1", key, run_id="r1", jwks=keys, project="default"
    )
    ran, func = sender(fetched)
    receipt, evil_keys = attackers_receipt("mitm-call", func.__name__, {"to": "mallory"})
    forged = {"gateway_status": "approved", "status": {"approved": True}, "receipt": receipt}
    proxy.forged_at = {"POST /humanlayer/v1/function_calls": forged}
    proxy.forged_at["GET /.well-known/jwks.json"] = evil_keys
    try:
        proxy.fail("POST", "/humanlayer/v1/function_calls", FORGE)
        proxy.fail("GET", "/.well-known/jwks.json", FORGE)
        fooled = fetched.require_approval(channel=SLACK, timeout=30, verify_receipt=True)(func)
        assert await _call(fooled, fetched, "mallory") == "sent to mallory"  # what pinning stops
        assert not proxy.of("GET", "/.well-known/jwks.json")[0].headers.get("Authorization")

        asked = len(proxy.seen)
        proxy.fail("POST", "/humanlayer/v1/function_calls", FORGE)
        checked = pinned.require_approval(channel=SLACK, timeout=30, verify_receipt=True)(func)
        refused = await _call(checked, pinned, "mallory")
        assert isinstance(refused, str) and "signed by key 'evil'" in refused
        assert ran == ["mallory"]  # only the unpinned client ran it
        paths = [seen.path for seen in proxy.seen[asked:]]
        assert paths == ["/humanlayer/v1/function_calls"]  # pinned: no keys or project asked
    finally:
        for each in (trusted, fetched, pinned):
            await close(each)


async def _call(guarded: object, client: AnyClient, *args: object, **kwargs: object) -> object:
    if isinstance(client, AsyncClient):
        return await guarded(*args, **kwargs)  # type: ignore[operator]
    return await asyncio.to_thread(guarded, *args, **kwargs)  # type: ignore[arg-type]


async def _pending_rid(gateway: RunningGateway) -> str:
    async with gateway.client() as admin:
        pending: list[str] = []

        async def listed() -> bool:
            items = (await admin.get("/agent/function_calls/pending")).json()["items"]
            pending[:] = [item["call_id"] for item in items]
            return bool(pending)

        await eventually(listed)
    return await rid_of(gateway, pending[0])


async def test_ask_human_returns_the_answer(gateway: RunningGateway, flavor: str) -> None:
    client = await agent(gateway, flavor)
    person = make_client(flavor, gateway.api_base, await responder_key(gateway))
    try:
        asking = asyncio.create_task(run(client, "ask_human", "Which region?", timeout=30))
        async with gateway.client() as admin:
            found: list[str] = []

            async def asked() -> bool:
                items = (await admin.get("/agent/human_contacts/pending")).json()["items"]
                found[:] = [item["call_id"] for item in items]
                return bool(found)

            await eventually(asked)
        await run(person, "respond_human_contact", found[0], response="eu-west-1")
        assert await asking == "eu-west-1"
    finally:
        await close(client)
        await close(person)


def test_it_reads_the_humanlayer_environment_and_never_shows_the_key(
    monkeypatch: pytest.MonkeyPatch, flavor: str
) -> None:
    monkeypatch.setenv("HUMANLAYER_API_BASE", "http://127.0.0.1:9/humanlayer/v1/")
    monkeypatch.setenv("HUMANLAYER_API_KEY", "hl-secret-value")
    client = Client() if flavor == "sync" else AsyncClient()
    assert client.settings.base_url == "http://127.0.0.1:9/humanlayer/v1"
    assert client.settings.api_key == "hl-secret-value"
    assert "hl-secret-value" not in repr(client)
    monkeypatch.delenv("HUMANLAYER_API_KEY")
    with pytest.raises(ValueError, match="HUMANLAYER_API_KEY"):
        Client() if flavor == "sync" else AsyncClient()
