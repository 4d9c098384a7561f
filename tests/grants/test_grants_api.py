"""`/gateway/v1/grants` with the project's admin key, through real HTTP: list (live or all),
revoke one by id, revoke every live grant of an agent key; a revoke counts from the next
create, and the OpenAPI document describes the routes (and `status.updated_kwargs`)."""

from __future__ import annotations

from typing import Any

import httpx

from gateway.policies import grants
from tests.factories import RequestFactory
from tests.grants.helpers import FN, auto_approved, give_grant
from tests.helpers import events
from tests.services.inprocess import RunningGateway

API_PREFIXES = ("/humanlayer/v1/", "/gateway/v1/")  # the console's forms are a person's


def admin(gateway: RunningGateway) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{gateway.base_url}/gateway/v1",
        headers={"Authorization": f"Bearer {gateway.api_key}"},
        timeout=30,
    )


async def listed(gateway: RunningGateway, **params: Any) -> list[dict[str, Any]]:
    async with admin(gateway) as api:
        response = await api.get("/grants", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_lists_the_live_grants_and_with_live_false_every_grant(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    bot = await gateway.new_key("default", name="bot")
    first = await give_grant(gateway, request_factory, "l1", key=bot)
    second = await give_grant(
        gateway, request_factory, "l2", key=bot, grant="key:900", run_id="run-2"
    )
    assert await auto_approved(gateway, request_factory, "l3", key=bot, run_id="run-3")
    await grants.revoke_ids(gateway.core, [first.id], "test")

    [live] = await listed(gateway)
    assert live["id"] == second.id and live["live"] is True
    assert live["project"] == "default" and live["key"] == "bot" and live["fn"] == FN
    assert live["scope"] == "key" and live["run_id"] is None
    assert live["granted_by"]["name"] == "Alice" and live["granted_by"]["channel"] == "slack"
    assert live["expires_at"] is not None and live["revoked_at"] is None
    assert live["uses"] == 1 and live["last_used_at"] is not None  # l3 was its approval
    every = await listed(gateway, live="false")
    assert [g["id"] for g in every] == [second.id, first.id]  # newest first
    assert every[1]["live"] is False and every[1]["revoked_by"] == "test"


async def test_revoking_a_grant_by_id_sends_the_next_call_to_people(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    grant = await give_grant(gateway, request_factory, "r1")
    assert await auto_approved(gateway, request_factory, "r2")

    async with admin(gateway) as api:
        response = await api.delete(f"/grants/{grant.id}")
        assert response.status_code == 200, response.text
        again = await api.delete(f"/grants/{grant.id}")  # a second revoke changes nothing
    revoked = response.json()
    assert revoked["id"] == grant.id and revoked["live"] is False
    assert revoked["revoked_by"] == f"key:{gateway.api_key[:12]}"
    assert again.status_code == 200 and again.json()["revoked_at"] == revoked["revoked_at"]
    assert not await auto_approved(gateway, request_factory, "r3")
    [event] = [e for e in (await events(gateway, "r1"))["events"] if e["type"] == "grant_revoked"]
    assert event["detail"] == {"grant": grant.id, "by": f"key:{gateway.api_key[:12]}"}
    assert await listed(gateway) == []


async def test_an_unknown_grant_is_404_and_nothing_changes(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    grant = await give_grant(gateway, request_factory, "u1")
    async with admin(gateway) as api:
        response = await api.delete("/grants/no-such-grant")
    assert response.status_code == 404, response.text
    assert response.json() == {"detail": "no grant with id 'no-such-grant' in this project"}
    assert [g["id"] for g in await listed(gateway)] == [grant.id]
    assert await auto_approved(gateway, request_factory, "u2")


async def test_revoking_by_key_name_revokes_that_keys_live_grants_only(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    bot = await gateway.new_key("default", name="bot")
    other = await gateway.new_key("default", name="other")
    ran = await give_grant(gateway, request_factory, "k1", key=bot)
    any_run = await give_grant(
        gateway, request_factory, "k2", key=bot, grant="key:3600", run_id="run-2"
    )
    kept = await give_grant(gateway, request_factory, "k3", key=other)

    async with admin(gateway) as api:
        response = await api.delete("/grants", params={"key": "bot"})
        assert response.status_code == 200, response.text
        unknown = await api.delete("/grants", params={"key": "nobody"})
        missing = await api.delete("/grants")
    revoked = response.json()["items"]
    assert sorted(g["id"] for g in revoked) == sorted([ran.id, any_run.id])
    assert all(g["live"] is False for g in revoked)
    assert unknown.status_code == 404, unknown.text
    assert unknown.json() == {"detail": "no API key named 'nobody' in this project"}
    assert missing.status_code == 422, missing.text
    assert [g["id"] for g in await listed(gateway)] == [kept.id]
    assert not await auto_approved(gateway, request_factory, "k4", key=bot, run_id="run-2")
    assert await auto_approved(gateway, request_factory, "k5", key=other)


async def test_the_openapi_document_describes_the_routes_and_updated_kwargs(
    sqlite_gateway: RunningGateway,
) -> None:
    async with httpx.AsyncClient(base_url=sqlite_gateway.base_url) as anonymous:
        document = (await anonymous.get("/openapi.json")).json()
    paths = document["paths"]
    expected = {
        ("/gateway/v1/grants", "get"): {200, 401, 403, 422, 503},
        ("/gateway/v1/grants", "delete"): {200, 401, 403, 404, 413, 422, 503},
        ("/gateway/v1/grants/{grant_id}", "delete"): {200, 401, 403, 404, 413, 422, 503},
    }
    for (path, method), codes in expected.items():
        operation = paths[path][method]
        assert operation["tags"] == ["grants"], (path, method)
        assert {int(code) for code in operation["responses"]} == codes, (path, method)
        assert operation["security"] == [{"api_key": []}]
    api = {path: ops for path, ops in paths.items() if path.startswith(API_PREFIXES)}
    grant_paths = {path: set(ops) for path, ops in api.items() if "grant" in path}
    assert grant_paths == {
        "/gateway/v1/grants": {"get", "delete"},
        "/gateway/v1/grants/{grant_id}": {"delete"},
    }

    schemas = document["components"]["schemas"]
    updated = schemas["FunctionCallStatus"]["properties"]["updated_kwargs"]
    assert updated["type"] == "object"
    assert "instead of the agent's" in updated["description"]
    assert "SDK ignores it" in updated["description"]
    assert "updated_kwargs" not in schemas["FunctionCallStatus"].get("required", [])
    read = paths["/humanlayer/v1/function_calls/{call_id}"]["get"]["responses"]["200"]
    assert read["content"]["application/json"]["schema"]["$ref"].endswith("/FunctionCall")
