"""The create routes' plain-ASGI path (`gateway.api.fast_path`) answers byte for byte what
FastAPI's routes answer: the same created record, the same refusals. A content type FastAPI
takes as JSON but the fast path does not (`application/vnd.test+json`) sends the same body
through FastAPI, for comparison."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.api.fast_path import FastPath
from tests.api.test_limits import gateway_with, wide_channel
from tests.factories import request_body

FAST = {"content-type": "application/json"}
VIA_FASTAPI = {"content-type": "application/vnd.test+json"}
PATHS = pytest.mark.parametrize(
    ("path", "contact"),
    [("/function_calls", False), ("/human_contacts", True), ("/contact_requests", True)],
)


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The creates the fast path made."""
    made: list[str] = []
    original = FastPath._create

    async def create(self: FastPath, token: str, parsed: Any, *args: Any) -> Any:
        made.append(parsed["call_id"])
        return await original(self, token, parsed, *args)

    monkeypatch.setattr(FastPath, "_create", create)
    return made


async def both(
    client: httpx.AsyncClient, path: str, bodies: tuple[dict[str, Any], dict[str, Any]]
) -> tuple[httpx.Response, httpx.Response]:
    fast = await client.post(path, json=bodies[0], headers=FAST)
    slow = await client.post(path, json=bodies[1], headers=VIA_FASTAPI)
    return fast, slow


@PATHS
async def test_a_create_answers_as_fastapi_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, contact: bool
) -> None:
    made = counting(monkeypatch)
    spec: dict[str, Any] = {"kwargs": {"amount": 1e21, "note": "naïve ☃ \u0001", "n": [1, 2.5]}}
    if contact:
        spec = {"msg": "which région? ☃", "state": {"x": 1e-7}}
    bodies = (
        request_body("fast", contact=contact, **spec),
        request_body("slow", contact=contact, **spec),
    )
    async with gateway_with(tmp_path) as gateway, gateway.client() as client:
        fast, slow = await both(client, path, bodies)
    assert made == ["fast"]  # the other went through FastAPI
    assert (fast.status_code, slow.status_code) == (200, 200)
    same_time = slow.content.replace(slow.json()["status"]["requested_at"].encode(), b"T")
    assert fast.content.replace(fast.json()["status"]["requested_at"].encode(), b"T") == (
        same_time.replace(b'"slow"', b'"fast"')
    )
    drop = {"date", "x-request-id"}
    assert {k: v for k, v in fast.headers.items() if k not in drop} == {
        k: v for k, v in slow.headers.items() if k not in drop
    }
    assert fast.headers["x-request-id"]


async def test_refusals_are_fastapis_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = counting(monkeypatch)
    async with gateway_with(tmp_path, max_targets=3, max_policy_nodes=4) as gateway:
        async with gateway.client() as client:
            cases = {
                "too many targets": (request_body("t", channel=wide_channel(4)),) * 2,
                "too many nodes": (request_body("n", channel={"any_of": [{"web": {}}] * 6}),) * 2,
                "invalid": ({"run_id": "r", "call_id": "v", "spec": {}},) * 2,
            }
            for case, bodies in cases.items():
                fast, slow = await both(client, "/function_calls", bodies)
                assert fast.status_code == slow.status_code >= 400, case
                assert fast.json() == slow.json(), case
        async with gateway.client(key="not-a-key") as stranger:
            fast, slow = await both(stranger, "/function_calls", (request_body("k"),) * 2)
            assert fast.status_code == slow.status_code == 401
            assert fast.json() == slow.json()
            assert fast.headers["www-authenticate"] == slow.headers["www-authenticate"]
        async with gateway.client() as client:
            for call_id in ("t", "n", "v", "k"):
                assert (await client.get(f"/function_calls/{call_id}")).status_code == 404
    assert set(made) <= {"t", "n", "k"}  # the invalid body never reached it


async def test_reads_and_long_polls_answer_as_fastapi_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[str] = []
    original = FastPath._read

    async def read(self: FastPath, token: str, kind: Any, call_id: str, wait: Any) -> Any:
        served.append(call_id)
        return await original(self, token, kind, call_id, wait)

    monkeypatch.setattr(FastPath, "_read", read)
    async with gateway_with(tmp_path) as gateway, gateway.client() as client:
        assert (await client.post("/function_calls", json=request_body("r"))).status_code == 200
        # An extra query parameter, which FastAPI ignores, sends a read through FastAPI.
        for path in ("/function_calls/r", "/function_calls/nope", "/human_contacts/r"):
            fast, slow = await client.get(path), await client.get(path, params={"x": "1"})
            assert (fast.status_code, fast.content) == (slow.status_code, slow.content), path
        waiting = client.get("/function_calls/r", params={"wait": "30"})
        decided = client.post("/agent/function_calls/r/respond", json={"approved": True})
        answered, _ = await asyncio.gather(waiting, decided)
        assert answered.json()["status"]["approved"] is True
        for odd in ("0", "61", "x", "1e1"):  # FastAPI's refusals, or its reading
            fast = await client.get("/function_calls/r", params={"wait": odd})
            assert fast.status_code in (200, 422), (odd, fast.text)
        async with gateway.client(key="not-a-key") as stranger:
            fast, slow = (
                await stranger.get("/function_calls/r"),
                await stranger.get("/function_calls/r", params={"x": "1"}),
            )
            assert (fast.status_code, fast.json()) == (slow.status_code, slow.json())
    assert served == ["r", "nope", "r", "r", "r"]
