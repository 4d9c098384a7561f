"""Projects are isolated: a key of project A can neither see nor touch project B's requests.

Every route that takes a call_id is listed in ROUTES; test_routes_table_is_complete fails
when the app gains such a route that the table lacks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from gateway.app import create_app
from gateway.vocabulary import KeyScope
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

API = "/humanlayer/v1"
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}

# Values that only project B ever sends: none may appear in anything A is answered.
B_SECRETS = ("b-secret-kwarg-7f3a91", "b-secret-state-c04d2e", "b-secret-msg-5be816")
B_RUN = "b-run-1"


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # from the server root, with {call_id}
    body: dict[str, Any] | None = None
    serves: tuple[str, ...] = ("fc", "hc")  # kinds of request the route answers for

    def url(self, call_id: str) -> str:
        return self.path.format(call_id=call_id)


RESPOND_FC = {"approved": True, "comment": "approved by A"}
RESPOND_HC = {"response": "answered by A"}
ESCALATE = {
    "escalation_msg": "A escalates",
    "additional_recipients": [{"address": "a@a.test"}],
    "channel": {"email": {"address": "lead@a.test"}},
}

FC: tuple[str, ...] = ("fc",)
HC: tuple[str, ...] = ("hc",)

ROUTES = [
    Route("GET", f"{API}/function_calls/{{call_id}}", serves=FC),
    Route("GET", f"{API}/contact_requests/{{call_id}}", serves=HC),
    Route("GET", f"{API}/human_contacts/{{call_id}}", serves=HC),
    Route("POST", f"{API}/agent/function_calls/{{call_id}}/respond", RESPOND_FC, FC),
    Route("POST", f"{API}/agent/human_contacts/{{call_id}}/respond", RESPOND_HC, HC),
    Route("POST", f"{API}/agent/function_calls/{{call_id}}/escalate_email", ESCALATE, FC),
    Route("POST", f"{API}/agent/human_contacts/{{call_id}}/escalate_email", ESCALATE, HC),
    Route("GET", "/gateway/v1/calls/{call_id}/events"),
]


def route_id(route: Route) -> str:
    return f"{route.method} {route.path}"


@dataclass
class Projects:
    gateway: RunningGateway
    a: httpx.AsyncClient  # project "default": gateway.api_key
    b: httpx.AsyncClient  # project "project-b"
    b_ids: dict[str, str]  # kind -> B's call_id
    b_records: dict[str, Any]  # kind -> B's record as created


def fc_body(call_id: str, run_id: str, secret: str, state: str) -> dict[str, Any]:
    spec = {"fn": "transfer", "kwargs": {"to": secret}, "state": {"note": state}}
    return {"run_id": run_id, "call_id": call_id, "spec": spec}


def hc_body(call_id: str, run_id: str, secret: str, state: str) -> dict[str, Any]:
    spec = {"msg": secret, "state": {"note": state}}
    return {"run_id": run_id, "call_id": call_id, "spec": spec}


def b_body(kind: str, call_id: str) -> dict[str, Any]:
    if kind == "fc":
        return fc_body(call_id, B_RUN, B_SECRETS[0], B_SECRETS[1])
    return hc_body(call_id, B_RUN, B_SECRETS[2], B_SECRETS[1])


def a_body(kind: str, call_id: str) -> dict[str, Any]:
    make = fc_body if kind == "fc" else hc_body
    return make(call_id, "a-run", "a-value", "a-state")


CREATE = {"fc": f"{API}/function_calls", "hc": f"{API}/contact_requests"}


async def post_ok(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Any:
    response = await client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
async def gateway(db_url: str) -> AsyncIterator[RunningGateway]:
    """The plain gateway, letting escalate_email mail the escalation's a.test addresses."""
    async with running_gateway(test_settings(db_url, email_allowed_domains="a.test")) as running:
        yield running


@pytest.fixture
async def projects(gateway: RunningGateway) -> AsyncIterator[Projects]:
    b_key = await gateway.new_key("project-b", scope=KeyScope.ADMIN)
    assert b_key != gateway.api_key
    root = gateway.base_url
    a_headers = {"Authorization": f"Bearer {gateway.api_key}"}
    b_headers = {"Authorization": f"Bearer {b_key}"}
    async with (
        httpx.AsyncClient(base_url=root, headers=a_headers, timeout=30) as a,
        httpx.AsyncClient(base_url=root, headers=b_headers, timeout=30) as b,
    ):
        b_ids = {"fc": "b-fc-1", "hc": "b-hc-1"}
        b_records = {
            kind: await post_ok(b, CREATE[kind], b_body(kind, call_id))
            for kind, call_id in b_ids.items()
        }
        yield Projects(gateway, a, b, b_ids, b_records)


async def assert_b_untouched(projects: Projects) -> None:
    """B's requests are still pending, unchanged, and A left no event on them."""
    b = projects.b
    for kind, path in (("fc", "function_calls"), ("hc", "contact_requests")):
        call_id = projects.b_ids[kind]
        got = await b.get(f"{API}/{path}/{call_id}")
        assert got.status_code == 200, got.text
        assert got.json() == projects.b_records[kind]
        assert got.json()["gateway_status"] == "pending"
        events = await b.get(f"/gateway/v1/calls/{call_id}/events")
        assert events.status_code == 200, events.text
        types = [event["type"] for event in events.json()["events"]]
        assert "decided" not in types and "escalated" not in types, types
    for pending in ("function_calls", "human_contacts"):
        listed = await b.get(f"{API}/agent/{pending}/pending")
        assert listed.json()["total"] == 1, listed.text


def assert_no_leak(response: httpx.Response) -> None:
    for secret in (*B_SECRETS, B_RUN):
        assert secret not in response.text, (secret, response.text)


async def send(client: httpx.AsyncClient, route: Route, call_id: str) -> httpx.Response:
    return await client.request(route.method, route.url(call_id), json=route.body)


async def test_routes_table_is_complete(gateway: RunningGateway) -> None:
    paths = create_app(gateway.core).openapi()["paths"]
    served = {
        (method.upper(), path)
        for path, operations in paths.items()
        if "{call_id}" in path
        for method in operations
        if method in HTTP_METHODS
    }
    assert len(served) >= len(ROUTES)
    assert served == {(route.method, route.path) for route in ROUTES}


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
async def test_other_projects_call_id_is_404_on_every_route(
    projects: Projects, route: Route
) -> None:
    a = projects.a
    for kind, call_id in projects.b_ids.items():
        response = await send(a, route, call_id)
        case = (kind, route_id(route))
        assert response.status_code == 404, (case, response.status_code, response.text)
        detail = response.json()["detail"]
        assert isinstance(detail, str) and "in this project" in detail, (case, detail)
        assert_no_leak(response)
        # Indistinguishable from a call_id that exists nowhere: no existence oracle.
        nowhere = call_id.replace("b-", "z-")
        missing = await send(a, route, nowhere)
        assert missing.status_code == 404, (case, missing.text)
        assert missing.json()["detail"].replace(nowhere, call_id) == detail, case
    await assert_b_untouched(projects)


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
async def test_owner_reaches_every_route(projects: Projects, route: Route) -> None:
    """The 404s above come from isolation, not from a broken route: B gets through."""
    for kind in route.serves:
        response = await send(projects.b, route, projects.b_ids[kind])
        assert response.status_code == 200, (kind, route_id(route), response.text)
        assert response.json()["call_id"] == projects.b_ids[kind]


async def test_lists_show_only_own_project(projects: Projects) -> None:
    a = projects.a
    mine = {kind: await post_ok(a, CREATE[kind], a_body(kind, f"a-{kind}-1")) for kind in CREATE}
    # B gets a second one of each, so that a leaking total would differ from A's.
    for kind in CREATE:
        await post_ok(projects.b, CREATE[kind], b_body(kind, f"b-{kind}-2"))
    lists = {
        f"{API}/function_calls": "fc",
        f"{API}/function_calls?status=pending": "fc",
        f"{API}/agent/function_calls/pending": "fc",
        f"{API}/contact_requests": "hc",
        f"{API}/contact_requests?status=pending": "hc",
        f"{API}/human_contacts": "hc",
        f"{API}/agent/human_contacts/pending": "hc",
    }
    for url, kind in lists.items():
        response = await a.get(url)
        assert response.status_code == 200, (url, response.text)
        page = response.json()
        assert page["total"] == 1, (url, page["total"])
        assert page["has_more"] is False, url
        assert page["items"] == [mine[kind]], url
        assert_no_leak(response)
    for url in (f"{API}/function_calls", f"{API}/human_contacts"):
        response = await a.get(url, params={"run_id": B_RUN})
        assert response.status_code == 200, (url, response.text)
        assert response.json()["total"] == 0 and response.json()["items"] == [], url
    b_page = (await projects.b.get(f"{API}/agent/function_calls/pending")).json()
    assert b_page["total"] == 2
    assert {item["call_id"] for item in b_page["items"]} == {"b-fc-1", "b-fc-2"}


async def test_same_call_id_in_two_projects_are_two_requests(projects: Projects) -> None:
    a = projects.a
    for kind, call_id in projects.b_ids.items():
        # Not 409: a conflict would tell A that B uses this call_id.
        created = await post_ok(a, CREATE[kind], a_body(kind, call_id))
        assert created["run_id"] == "a-run"
        got = await a.get(f"{CREATE[kind]}/{call_id}")
        assert got.json() == created
        assert_no_leak(got)
    decided = await a.post(
        f"{API}/agent/function_calls/{projects.b_ids['fc']}/respond", json=RESPOND_FC
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["status"]["approved"] is True
    answered = await a.post(
        f"{API}/agent/human_contacts/{projects.b_ids['hc']}/respond", json=RESPOND_HC
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"]["response"] == RESPOND_HC["response"]
    # A decided its own requests; B's, with the same call_ids, are untouched.
    await assert_b_untouched(projects)
