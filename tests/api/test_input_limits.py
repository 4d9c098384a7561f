"""Bad input is refused at the door, over real HTTP on both databases: too deep or too big
JSON, duplicate keys, oversized user_info, spoofing characters, huge list offsets. Each
refusal is a 422 that names the limit, and leaves nothing stored."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.api.routes import MAX_OFFSET
from gateway.wire.models import MAX_JSON_DEPTH, MAX_JSON_ITEMS, MAX_OBJECT_KEYS
from tests.api.helpers import FC, HC, JSON, PENDING, RESPOND, assert_not_stored, detail_text
from tests.factories import RequestFactory, request_body
from tests.helpers import events
from tests.services.inprocess import RunningGateway

BOTH = pytest.mark.parametrize("path", [FC, HC], ids=["function_call", "human_contact"])
# A kwargs or state value sits 3 levels into the body: {"spec": {"kwargs": {"x": ...}}}.
DEEPEST_VALUE = MAX_JSON_DEPTH - 3


def deep_body(path: str, call_id: str, field: str, depth: int) -> bytes:
    """A create body whose spec.`field` holds an array nested `depth` levels, as raw text."""
    spec: dict[str, Any] = {field: {"x": "HOLE"}}
    body = request_body(call_id, contact=path == HC, **spec)
    return json.dumps(body).replace('"HOLE"', "[" * depth + "]" * depth).encode()


# --- nesting ------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [100, 250, 254, 256, 300, 1_000])
async def test_deeply_nested_kwargs_or_state_never_poison_the_project(
    gateway: RunningGateway, client: httpx.AsyncClient, depth: int
) -> None:
    """Once a 254-deep kwargs was stored (after a 500) and every listing of the project
    answered 500. Whatever happens now, nothing answers 5xx and the listings stay healthy."""
    cases = [(FC, "kwargs"), (FC, "state"), (HC, "state")]
    for path, field in cases:
        case = f"{path} {field} {depth}"
        call_id = f"deep-{field}-{depth}"
        before = await client.get(path)
        assert before.status_code == 200, case
        pending_before = before.json()["total"]
        created = await client.post(
            path, content=deep_body(path, call_id, field, depth), headers=JSON
        )
        if created.status_code == 200:  # stored: then it must read, list and decide
            await assert_usable(client, path, call_id, case)
        else:
            text = detail_text(created, 422)
            assert f"nested more than {MAX_JSON_DEPTH} levels deep" in text, (case, text)
            await assert_not_stored(client, path, call_id, pending_before)
        for listing in (path, PENDING[path]):
            response = await client.get(listing)
            assert response.status_code == 200, (case, listing, response.text[:300])


async def assert_usable(client: httpx.AsyncClient, path: str, call_id: str, case: str) -> None:
    got = await client.get(f"{path}/{call_id}")
    assert got.status_code == 200, (case, got.text[:300])
    for listing in (path, PENDING[path]):
        assert (await client.get(listing)).status_code == 200, case
    answer = {"approved": True} if path == FC else {"response": "ok"}
    decided = await client.post(RESPOND[path].format(call_id), json=answer)
    assert decided.status_code == 200, (case, decided.text[:300])


@BOTH
async def test_nesting_at_the_limit_round_trips_and_one_more_is_refused(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str
) -> None:
    raw = deep_body(path, "at-limit", "state", DEEPEST_VALUE)
    created = await client.post(path, content=raw, headers=JSON)
    assert created.status_code == 200, created.text[:300]
    sent = json.loads(raw)["spec"]["state"]
    assert (await client.get(f"{path}/at-limit")).json()["spec"]["state"] == sent
    listed = (await client.get(path)).json()["items"]
    assert [item["spec"]["state"] for item in listed] == [sent]
    await assert_usable(client, path, "at-limit", "at the limit")
    assert "decided" in [event["type"] for event in (await events(gateway, "at-limit"))["events"]]

    before = (await client.get(PENDING[path])).json()["total"]
    raw = deep_body(path, "past-limit", "state", DEEPEST_VALUE + 1)
    refused = await client.post(path, content=raw, headers=JSON)
    text = detail_text(refused, 422)
    assert f"nested more than {MAX_JSON_DEPTH} levels deep at spec.state.x" in text, text
    assert refused.json()["detail"][0]["loc"][:4] == ["body", "spec", "state", "x"]
    await assert_not_stored(client, path, "past-limit", before)


async def test_key_and_item_counts_are_limited(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    # HumanLayer's own "large context" example puts 100,000 integers in state.
    large = await request_factory(gateway, "large", state={"numbers": list(range(100_000))})
    assert len(large.wire["spec"]["state"]["numbers"]) == 100_000
    before = (await client.get(PENDING[FC])).json()["total"]
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "keys": (
            {"kwargs": {f"k{i}": 0 for i in range(MAX_OBJECT_KEYS + 1)}},
            f"has {MAX_OBJECT_KEYS + 1} keys; at most {MAX_OBJECT_KEYS} are allowed",
        ),
        "items": ({"state": {"a": [0] * (MAX_JSON_ITEMS + 1)}}, f"more than {MAX_JSON_ITEMS}"),
    }
    for case, (spec, message) in cases.items():
        response = await client.post(FC, json=request_body(case, **spec))
        assert message in detail_text(response, 422), case
        await assert_not_stored(client, FC, case, before)


# --- what the TypeScript SDK sends --------------------------------------------------------


async def test_function_call_without_kwargs_is_stored_with_empty_kwargs(
    client: httpx.AsyncClient,
) -> None:
    # humanlayer 0.7.5 (npm) wraps a zero-argument function as {fn, kwargs: undefined,
    # channel: undefined}: JSON.stringify leaves both out.
    body = {"run_id": "ts-run", "call_id": "ts-1", "spec": {"fn": "restart_server"}}
    created = await client.post(FC, json=body)
    assert created.status_code == 200, created.text
    assert created.json()["spec"]["kwargs"] == {}
    got = await client.get(f"{FC}/ts-1")
    assert got.json()["spec"]["kwargs"] == {}
    # The same call with kwargs spelled out is the same request, not a conflict.
    again = await client.post(FC, json=body | {"spec": {"fn": "restart_server", "kwargs": {}}})
    assert again.status_code == 200, again.text
    assert again.json() == got.json()


# --- duplicate keys -----------------------------------------------------------------------


@BOTH
async def test_duplicate_keys_in_a_respond_are_refused(
    gateway: RunningGateway,
    client: httpx.AsyncClient,
    request_factory: RequestFactory,
    path: str,
) -> None:
    created = await request_factory(gateway, "dup", contact=path == HC)
    bodies = (
        [b'{"approved": false, "approved": true}', b'{"approved": true, "approved": true}']
        if path == FC
        else [b'{"response": "no", "response": "yes"}']
    ) + [b'{"approved": true, "response": "ok", "user_info": {"name": "a", "name": "b"}}']
    for raw in bodies:
        url = RESPOND[path].format(created.call_id)
        response = await client.post(url, content=raw, headers=JSON)
        text = detail_text(response, 422)
        assert "duplicate key" in text and "each key may appear once" in text, (raw, text)
    got = (await client.get(f"{path}/dup")).json()
    assert got["gateway_status"] == "pending"
    assert "decided" not in [e["type"] for e in (await events(gateway, "dup"))["events"]]


async def test_duplicate_keys_in_a_create_are_refused(client: httpx.AsyncClient) -> None:
    before = (await client.get(PENDING[FC])).json()["total"]
    raw = b'{"run_id": "r", "call_id": "dupc", "spec": {"fn": "f", "fn": "g", "kwargs": {}}}'
    response = await client.post(FC, content=raw, headers=JSON)
    assert "duplicate key 'fn'" in detail_text(response, 422)
    await assert_not_stored(client, FC, "dupc", before)


# --- user_info ----------------------------------------------------------------------------


@BOTH
async def test_user_info_is_bounded(
    gateway: RunningGateway,
    client: httpx.AsyncClient,
    request_factory: RequestFactory,
    path: str,
) -> None:
    created = await request_factory(gateway, "ui", contact=path == HC)
    answer: dict[str, Any] = {"approved": True} if path == FC else {"response": "ok"}
    url = RESPOND[path].format(created.call_id)
    cases = {
        "a megabyte": ({"name": "x" * 1_000_000}, "user_info.name has 1000000 characters"),
        "21 fields": ({f"f{i}": "v" for i in range(21)}, "user_info has 21 fields"),
        "nested": ({"org": {"id": 1}}, "user_info.org is an object"),
    }
    for case, (info, message) in cases.items():
        response = await client.post(url, json=answer | {"user_info": info})
        text = detail_text(response, 422)
        assert message in text and "body.user_info" in text, (case, text)
        assert (await client.get(f"{path}/ui")).json()["gateway_status"] == "pending", case
    fits = {f"f{i}": "v" * 1_000 for i in range(19)} | {"name": "Alice"}
    response = await client.post(url, json=answer | {"user_info": fits})
    assert response.status_code == 200, response.text[:300]
    stored = response.json()["status"]["user_info"]
    assert stored["name"] == "Alice" and stored["f3"] == "v" * 1_000


# --- characters that spoof what a person reads --------------------------------------------


async def test_run_id_with_a_right_to_left_override_is_refused(client: httpx.AsyncClient) -> None:
    before = (await client.get(PENDING[FC])).json()["total"]
    body = request_body("spoof", run_id="agent-\u202egnp.exe")
    response = await client.post(FC, json=body)
    text = detail_text(response, 422)
    assert "run_id contains U+202E (RIGHT-TO-LEFT OVERRIDE) at position 6" in text, text
    assert "body.run_id" in text
    await assert_not_stored(client, FC, "spoof", before)
    listed = await client.get(FC, params={"run_id": "agent-\u202egnp.exe"})
    assert listed.json()["total"] == 0


@BOTH
async def test_spoofing_characters_in_labels_are_refused(
    client: httpx.AsyncClient, path: str
) -> None:
    options = "reject_options" if path == FC else "response_options"
    fields: list[tuple[str, dict[str, Any], str]] = [
        ("run_id", {"run_id": "r\u2066un"}, "U+2066"),
        (f"{options}.0.name", {options: [{"name": "no\u200f"}]}, "U+200F"),
        (f"{options}.0.title", {options: [{"name": "no", "title": "N\u0085o"}]}, "U+0085"),
        (f"{options}.0.title", {options: [{"name": "no", "title": "\u061cNo"}]}, "U+061C"),
    ]
    if path == FC:
        fields.append(("fn", {"fn": "drop\u202atable"}, "U+202A"))
    before = (await client.get(PENDING[path])).json()["total"]
    for field, change, char in fields:
        run_id = change.pop("run_id", "r")
        body = request_body("spoof", contact=path == HC, run_id=run_id, **change)
        text = detail_text(await client.post(path, json=body), 422)
        name = field.rsplit(".", 1)[-1]
        assert f"{name} contains {char}" in text, (field, text)
        await assert_not_stored(client, path, "spoof", before)


# --- list parameters ----------------------------------------------------------------------

LIST_ROUTES = [
    FC,
    HC,
    "/human_contacts",
    PENDING[FC],
    PENDING[HC],
]


async def test_huge_offset_or_limit_is_422_on_every_list_route(
    gateway: RunningGateway, client: httpx.AsyncClient
) -> None:
    cases = {
        "offset=9223372036854775808": ("query.offset", f"less than or equal to {MAX_OFFSET}"),
        f"offset={10**40}": ("query.offset", "less than or equal to"),
        f"offset={MAX_OFFSET + 1}": ("query.offset", "less than or equal to"),
        "limit=9223372036854775808": ("query.limit", "less than or equal to 1000"),
        "limit=-9223372036854775809": ("query.limit", "greater than or equal to 1"),
    }
    jobs = f"{gateway.base_url}/gateway/v1/jobs"
    for route in [*LIST_ROUTES, jobs]:
        for query, (loc, message) in cases.items():
            if route == jobs and query.startswith("offset"):
                continue  # the jobs list takes no offset
            text = detail_text(await client.get(f"{route}?{query}"), 422)
            assert loc in text and message in text, (route, query, text)
    for route in LIST_ROUTES:
        at_limit = await client.get(route, params={"offset": MAX_OFFSET, "limit": 1000})
        assert at_limit.status_code == 200, (route, at_limit.text)
        assert at_limit.json()["items"] == []
