"""One way for tests to create requests through the real API (the `request_factory` fixture)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from gateway.security.crypto import hash_api_key
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow
from gateway.store.values import dumps, utcnow
from tests.helpers import eventually, outbox_idle
from tests.services.inprocess import RunningGateway

FUNCTION_CALL_SPEC: dict[str, Any] = {"fn": "drop_table", "kwargs": {"name": "users"}}
HUMAN_CONTACT_SPEC: dict[str, Any] = {"msg": "Which region?"}


@dataclass(frozen=True)
class Created:
    """A request the API accepted: its ids and the wire answer of the create."""

    call_id: str
    rid: str
    wire: dict[str, Any]


def request_body(
    call_id: str,
    *,
    contact: bool = False,
    channel: dict[str, Any] | None = None,
    run_id: str = "r",
    **spec: Any,
) -> dict[str, Any]:
    """A create body: a `drop_table` call (or a question with `contact`), `spec` merged in."""
    base = HUMAN_CONTACT_SPEC if contact else FUNCTION_CALL_SPEC
    merged = base | spec | ({"channel": channel} if channel is not None else {})
    return {"run_id": run_id, "call_id": call_id, "spec": merged}


def create_path(contact: bool) -> str:
    return "/contact_requests" if contact else "/function_calls"


class RequestFactory:
    """Creates requests through `POST /function_calls` or `/contact_requests`."""

    def __init__(self) -> None:
        self._numbers = itertools.count(1)

    async def __call__(
        self,
        gateway: RunningGateway,
        call_id: str | None = None,
        *,
        contact: bool = False,
        channel: dict[str, Any] | None = None,
        run_id: str = "r",
        key: str | None = None,
        settle: bool = False,
        **spec: Any,
    ) -> Created:
        """Create one request (asserting a 200) and return its ids; with `settle`, also wait
        until the outbox has nothing left to run (its deliveries went out or failed; a
        grant's note, due a minute on, is not the request's)."""
        call_id = call_id or f"call-{next(self._numbers)}"
        body = request_body(call_id, contact=contact, channel=channel, run_id=run_id, **spec)
        async with gateway.client(key) as client:
            response = await client.post(create_path(contact), json=body)
        assert response.status_code == 200, response.text
        if settle:
            await eventually(lambda: outbox_idle(gateway, but="note"))
        return Created(call_id, await rid_of(gateway, call_id, key=key), response.json())


async def rid_of(gateway: RunningGateway, call_id: str, *, key: str | None = None) -> str:
    """The internal id of the request `call_id` in the project of `key` (the test key)."""
    found = await gateway.core.db.read(project_store.find_key, hash_api_key(key or gateway.api_key))
    assert found is not None, "unknown API key"
    project = found[1]
    assert project.id is not None
    row = await gateway.core.db.read(request_store.get_by_call_id, project.id, call_id)
    assert row is not None, f"no request {call_id!r}"
    return row.rid


def request_row(project_id: int, call_id: str) -> RequestRow:
    """A pending request as the store keeps it, for tests that write rows directly."""
    return RequestRow(
        rid=f"rid-{call_id}",
        project_id=project_id,
        kind="function_call",
        call_id=call_id,
        run_id="r",
        fn="f",
        spec_json=dumps({"fn": "f", "kwargs": {}}),
        body_hash="h",
        route_json="[]",
        status="pending",
        requested_at=utcnow(),
    )
