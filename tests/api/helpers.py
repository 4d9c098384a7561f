"""Assertions shared by the API tests."""

from __future__ import annotations

import httpx

FC = "/function_calls"
HC = "/contact_requests"
PENDING = {FC: "/agent/function_calls/pending", HC: "/agent/human_contacts/pending"}
RESPOND = {FC: "/agent/function_calls/{}/respond", HC: "/agent/human_contacts/{}/respond"}
JSON = {"Content-Type": "application/json"}


def detail_text(response: httpx.Response, status: int) -> str:
    """The response is `status` with a JSON `detail`; its messages and locations, joined."""
    assert response.status_code == status, (response.status_code, response.text[:2000])
    assert response.headers["content-type"].startswith("application/json")
    detail = response.json()["detail"]
    if isinstance(detail, str):
        return detail
    parts: list[str] = []
    for item in detail:
        parts.append(str(item["msg"]))
        parts.append(".".join(str(step) for step in item.get("loc", [])))
        parts.extend(str(value) for value in (item.get("ctx") or {}).values())
    return " | ".join(parts)


async def pending_total(client: httpx.AsyncClient, path: str) -> int:
    response = await client.get(PENDING[path])
    assert response.status_code == 200, response.text
    total: int = response.json()["total"]
    return total


async def assert_not_stored(
    client: httpx.AsyncClient, path: str, call_id: str, pending_before: int
) -> None:
    got = await client.get(f"{path}/{call_id}")
    assert got.status_code == 404, got.text[:500]
    assert await pending_total(client, path) == pending_before
