"""A standing grant is given only by a person's "Approve and allow…" in a channel or the
console. These tests try every other way in, with an agent, a responder and an admin key:
grant-ish fields on an API respond, a POST/PUT/PATCH to any grants path, the MCP tools; and
reading or revoking another project's grants. After each try no grant exists (or the one
there is unchanged), and the next call like it goes to people."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.mcp import tools
from gateway.policies import grants
from gateway.seam.sentences import describe
from gateway.vocabulary import KeyScope
from tests.factories import RequestFactory
from tests.grants.helpers import FN, auto_approved, create, give_grant
from tests.mcp.helpers import mcp_session, text_of
from tests.services.inprocess import RunningGateway

# Respond bodies that approve and carry what would give a grant or an edit if anything read it.
GRANTISH: dict[str, dict[str, Any]] = {
    "grant": {"grant": "run:3600"},
    "scope": {"scope": "key", "duration": "forever", "grant_choice": "key:forever"},
    "user_info": {
        "user_info": {
            "channel": "grant",
            "grant": "key:forever",
            "granted_by": "Alice",
            "allowed": "read_file for this agent, until revoked",
        }
    },
    "updated_kwargs": {"updated_kwargs": {"path": "/etc/shadow"}, "edited": {"path": "/x"}},
}


async def key_of(gateway: RunningGateway, scope: KeyScope) -> str:
    if scope == KeyScope.ADMIN:
        return gateway.api_key
    return await gateway.new_key("default", name=f"a {scope.value}", scope=scope)


def gateway_api(gateway: RunningGateway, key: str) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.AsyncClient(base_url=gateway.base_url, headers=headers, timeout=30)


# "user_info" carries "allowed", "grant" and "granted_by": kept as display text, a
# respond's user_info would make every copy say "…, and allowed read_file …" with no grant.
EXTRAS = GRANTISH


@pytest.mark.parametrize("extra", EXTRAS)
@pytest.mark.parametrize("scope", [KeyScope.RESPONDER, KeyScope.ADMIN])
async def test_an_api_respond_with_grant_fields_approves_once_and_grants_nothing(
    gateway: RunningGateway, request_factory: RequestFactory, scope: KeyScope, extra: str
) -> None:
    bot = await gateway.new_key("default", name="bot")
    made = await create(gateway, request_factory, "asked", key=bot, path="/a")
    async with gateway.client(await key_of(gateway, scope)) as api:
        body = {"approved": True} | GRANTISH[extra]
        response = await api.post("/agent/function_calls/asked/respond", json=body)
    assert response.status_code == 200, response.text  # approved, extra fields ignored

    status = response.json()["status"]
    assert status["approved"] is True and "updated_kwargs" not in status
    assert status["user_info"]["channel"] == "api"
    assert not {"allowed", "grant", "granted_by"} & status["user_info"].keys()
    assert await grants.listing(gateway.core) == []
    assert not await auto_approved(gateway, request_factory, "next", key=bot)
    view = await gateway.context("slack").answers.view(made.rid)
    assert view is not None and view.updated_kwargs is None
    assert "allowed" not in describe(view)  # no channel says a grant was given


async def test_an_agent_key_cannot_respond_list_or_revoke(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    bot = await gateway.new_key("default", name="bot")
    grant = await give_grant(gateway, request_factory, "given", key=bot)
    await create(gateway, request_factory, "pending", key=bot, run_id="run-2", path="/b")
    responder = await key_of(gateway, KeyScope.RESPONDER)

    async with gateway.client(bot) as api:
        body = {"approved": True, "grant": "key:forever"}
        respond = await api.post("/agent/function_calls/pending/respond", json=body)
        assert respond.status_code == 403, respond.text
        assert (await api.get("/function_calls/pending")).json()["gateway_status"] == "pending"
    for key in (bot, responder):
        async with gateway_api(gateway, key) as api:
            tries = [
                await api.get("/gateway/v1/grants"),
                await api.delete(f"/gateway/v1/grants/{grant.id}"),
                await api.delete("/gateway/v1/grants", params={"key": "bot"}),
            ]
        for answer in tries:
            assert answer.status_code == 403, answer.text
            assert "needs a 'admin' key" in answer.json()["detail"]
    [still] = await grants.listing(gateway.core, live_only=True)
    assert still.id == grant.id and still.revoked_at is None


GRANT_PATHS = [
    "/gateway/v1/grants",
    "/gateway/v1/grants/{id}",
    "/gateway/v1/grants/{id}/revoke",
    "/gateway/v1/keys/bot/grants",
    "/humanlayer/v1/grants",
    "/humanlayer/v1/function_calls/given/grant",
    "/humanlayer/v1/agent/function_calls/given/grant",
]
GRANT_BODY = {
    "key": "bot",
    "fn": FN,
    "scope": "key",
    "grant": "key:forever",
    "run_id": "run-9",
    "seconds": 86400,
    "expires_at": None,
}


@pytest.mark.parametrize("scope", list(KeyScope))
async def test_no_route_takes_a_grant(
    gateway: RunningGateway, request_factory: RequestFactory, scope: KeyScope
) -> None:
    bot = await gateway.new_key("default", name="bot")
    grant = await give_grant(gateway, request_factory, "given", key=bot)
    before = await grants.listing(gateway.core)
    key = bot if scope == KeyScope.AGENT else await key_of(gateway, scope)

    async with gateway_api(gateway, key) as api:
        for path in GRANT_PATHS:
            for method in ("POST", "PUT", "PATCH"):
                url = path.replace("{id}", grant.id)
                answer = await api.request(method, url, json=GRANT_BODY)
                assert answer.status_code in (403, 404, 405), (method, url, answer.text)

    assert await grants.listing(gateway.core) == before
    assert not await auto_approved(gateway, request_factory, "other-run", key=bot, run_id="run-9")


def _property_names(schema: Any, schemas: dict[str, Any], seen: set[str]) -> set[str]:
    """Every property name a request body's schema may carry, through its $refs."""
    if isinstance(schema, list):
        return set().union(*(_property_names(s, schemas, seen) for s in schema))
    if not isinstance(schema, dict):
        return set()
    names: set[str] = set()
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        seen.add(ref)
        names |= _property_names(schemas[ref.rsplit("/", 1)[-1]], schemas, seen)
    names |= set(schema.get("properties", {}))
    return names | set().union(*(_property_names(v, schemas, seen) for v in schema.values()))


async def test_no_request_body_in_the_openapi_document_has_a_grant_field(
    sqlite_gateway: RunningGateway,
) -> None:
    async with httpx.AsyncClient(base_url=sqlite_gateway.base_url) as anonymous:
        document = (await anonymous.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    bodies = [  # of the API: the console's forms are where a person gives a grant
        operation["requestBody"]
        for path, operations in document["paths"].items()
        if path.startswith(("/humanlayer/v1/", "/gateway/v1/"))
        for operation in operations.values()
        if isinstance(operation, dict) and "requestBody" in operation
    ]
    assert bodies  # creates, responds, escalations
    names = _property_names(bodies, schemas, set())
    assert "approved" in names  # the walk reaches the respond body
    assert not [n for n in names if "grant" in n or n in ("updated_kwargs", "edited", "scope")]


async def test_another_projects_admin_key_cannot_see_or_revoke_a_grant(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    bot = await gateway.new_key("default", name="bot")
    grant = await give_grant(gateway, request_factory, "given", key=bot)
    await gateway.new_key("other", name="bot")  # the same key name, in the other project
    other_admin = await gateway.new_key("other", name="admin", scope=KeyScope.ADMIN)

    async with gateway_api(gateway, other_admin) as api:
        listed = await api.get("/gateway/v1/grants", params={"live": "false"})
        by_id = await api.delete(f"/gateway/v1/grants/{grant.id}")
        by_key = await api.delete("/gateway/v1/grants", params={"key": "bot"})
    assert listed.status_code == 200 and listed.json() == {"items": []}
    assert by_id.status_code == 404, by_id.text
    assert by_id.json() == {"detail": f"no grant with id {grant.id!r} in this project"}
    assert by_key.status_code == 200 and by_key.json() == {"items": []}
    [still] = await grants.listing(gateway.core, live_only=True)
    assert still.id == grant.id and still.revoked_at is None
    assert await auto_approved(gateway, request_factory, "covered", key=bot)


# Tool arguments that would give a grant or approve an edit if a tool listened to them.
MCP_GRANTISH: dict[str, Any] = {
    "grant": "key:forever",
    "grants": ["key:forever"],
    "scope": "key",
    "duration": "forever",
    "allow_similar": True,
    "approved": True,
    "updated_kwargs": {"path": "/etc/shadow"},
    "updatedInput": {"path": "/etc/shadow"},
    "user_info": {"channel": "grant", "allowed": "read_file for this agent, until revoked"},
    "wait_seconds": 0,
}


@pytest.mark.parametrize("scope", [KeyScope.AGENT, KeyScope.ADMIN])
async def test_no_mcp_tool_gives_a_grant(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch, scope: KeyScope
) -> None:
    monkeypatch.setattr(tools, "PERMISSION_WAIT_SECONDS", 0)
    key = await gateway.new_key("default", name="mcp agent", scope=scope)
    calls: dict[str, dict[str, Any]] = {
        "request_approval": {"action": FN, "arguments": {"path": "/a"}},
        "permission_prompt": {
            "tool_name": FN,
            "input": {"path": "/a", "grant": "key:forever"},
            "tool_use_id": "toolu_grant",
        },
        "get_decision": {"call_id": "mcp-toolu_grant"},
    }
    async with mcp_session(gateway, key) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert not [n for n in names if any(w in n for w in ("grant", "respond", "allow"))]
        for tool, arguments in calls.items():
            result = await session.call_tool(tool, arguments | MCP_GRANTISH)
            text = text_of(result)
            if tool == "permission_prompt":
                assert json.loads(text)["behavior"] == "deny", text
            elif not result.is_error:
                assert json.loads(text)["status"] == "pending", text
        again = await session.call_tool(
            "request_approval", {"action": FN, "arguments": {"path": "/a"}, "wait_seconds": 0}
        )
    assert json.loads(text_of(again))["status"] == "pending"  # nothing approves it
    assert await grants.listing(gateway.core) == []
    async with gateway.client() as api:
        items = (await api.get("/function_calls")).json()["items"]
    assert items and {item["gateway_status"] for item in items} == {"pending"}
