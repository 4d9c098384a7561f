"""A respond retried after its answer was lost: with the same Idempotency-Key and the same
body it gets the first answer again; every other repeat still gets HumanLayer's 409."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from gateway.vocabulary import KeyScope
from tests.api.helpers import FC, HC, RESPOND, detail_text
from tests.factories import RequestFactory
from tests.helpers import events
from tests.services.inprocess import RunningGateway

BOTH = pytest.mark.parametrize("path", [FC, HC], ids=["function_call", "human_contact"])
ANSWER: dict[str, dict[str, Any]] = {
    FC: {"approved": False, "comment": "not today"},
    HC: {"response": "eu-west-1"},
}
OTHER_ANSWER = {FC: {"approved": True}, HC: {"response": "us-east-1"}}


async def decided_events(gateway: RunningGateway, call_id: str) -> list[dict[str, object]]:
    trail = await events(gateway, call_id)
    return [event for event in trail["events"] if event["type"] == "decided"]


@BOTH
async def test_same_key_same_body_returns_the_first_answer(
    gateway: RunningGateway,
    client: httpx.AsyncClient,
    request_factory: RequestFactory,
    path: str,
) -> None:
    created = await request_factory(gateway, "idem", contact=path == HC)
    url = RESPOND[path].format(created.call_id)
    headers = {"Idempotency-Key": "retry-7f3a"}
    first = await client.post(url, json=ANSWER[path], headers=headers)
    assert first.status_code == 200, first.text
    second = await client.post(url, json=ANSWER[path], headers=headers)
    assert second.status_code == 200, second.text
    assert second.json() == first.json()
    assert first.json()["status"]["responded_at"] is not None
    assert len(await decided_events(gateway, "idem")) == 1
    # The same body written differently (key order, spacing) is still the same body.
    reordered = dict(reversed(list(ANSWER[path].items())))
    third = await client.post(url, json=reordered, headers=headers)
    assert third.status_code == 200, third.text
    assert third.json() == first.json()


@BOTH
async def test_every_other_repeat_is_still_409(
    gateway: RunningGateway,
    client: httpx.AsyncClient,
    request_factory: RequestFactory,
    path: str,
) -> None:
    created = await request_factory(gateway, "idem", contact=path == HC)
    url = RESPOND[path].format(created.call_id)
    first = await client.post(url, json=ANSWER[path], headers={"Idempotency-Key": "k1"})
    assert first.status_code == 200, first.text
    repeats = {
        "no key": (ANSWER[path], {}),
        "another key": (ANSWER[path], {"Idempotency-Key": "k2"}),
        "same key, another body": (OTHER_ANSWER[path], {"Idempotency-Key": "k1"}),
    }
    for case, (body, headers) in repeats.items():
        response = await client.post(url, json=body, headers=headers)
        assert "was already" in detail_text(response, 409), case
    assert len(await decided_events(gateway, "idem")) == 1
    assert (await client.get(f"{path}/idem")).json() == first.json()


async def test_without_a_key_a_repeat_is_409_as_before(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    created = await request_factory(gateway, "plain")
    url = RESPOND[FC].format(created.call_id)
    assert (await client.post(url, json={"approved": True})).status_code == 200
    again = await client.post(url, json={"approved": True})
    assert "function call 'plain' was already approved" in detail_text(again, 409)


async def test_a_key_from_another_api_key_is_not_a_retry(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    created = await request_factory(gateway, "two-keys")
    url = RESPOND[FC].format(created.call_id)
    headers = {"Idempotency-Key": "shared"}
    assert (await client.post(url, json={"approved": True}, headers=headers)).status_code == 200
    other = await gateway.new_key("default", name="other", scope=KeyScope.RESPONDER)
    async with gateway.client(other) as second_client:
        response = await second_client.post(url, json={"approved": True}, headers=headers)
    assert "was already approved" in detail_text(response, 409)


async def test_a_malformed_key_is_422_and_decides_nothing(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    created = await request_factory(gateway, "bad-key")
    url = RESPOND[FC].format(created.call_id)
    for key, message in [("k" * 256, "at most 255 characters"), ("", "at least 1 character")]:
        response = await client.post(url, json={"approved": True}, headers={"Idempotency-Key": key})
        text = detail_text(response, 422)
        assert "header.Idempotency-Key" in text and message in text, (len(key), text)
    response = await client.post(
        url, json={"approved": True}, headers={"Idempotency-Key": "k" * 255}
    )
    assert response.status_code == 200, response.text
    assert len(await decided_events(gateway, "bad-key")) == 1


@BOTH
async def test_concurrent_retries_with_one_key_all_get_the_first_answer(
    gateway: RunningGateway,
    client: httpx.AsyncClient,
    request_factory: RequestFactory,
    path: str,
) -> None:
    created = await request_factory(gateway, "race", contact=path == HC)
    url = RESPOND[path].format(created.call_id)
    headers = {"Idempotency-Key": "race-1"}
    answers = await asyncio.gather(
        *(client.post(url, json=ANSWER[path], headers=headers) for _ in range(6))
    )
    assert [answer.status_code for answer in answers] == [200] * 6, [a.text for a in answers]
    assert len({answer.text for answer in answers}) == 1
    assert len(await decided_events(gateway, "race")) == 1
