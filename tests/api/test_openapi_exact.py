"""The OpenAPI document states the rules the gateway enforces on a request body (issue 26: a
schemathesis run found 10 places where they disagreed). For each body here, the document's
verdict (JSON Schema 2020-12 with formats checked, over /openapi.json as served) and the
gateway's answer agree: valid is accepted (200), invalid is refused (422) with a message
naming the rule. Rules no schema can check (the clock, the request's own options) are stated
in the document's descriptions, and tested as such."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jsonschema_rs
import pytest

from gateway.wire.models import MAX_JSON_DEPTH, MAX_USER_INFO_KEY
from tests.api.helpers import FC, HC, RESPOND, detail_text
from tests.factories import RequestFactory, request_body
from tests.services.inprocess import RunningGateway

API = "/humanlayer/v1"
OPTIONS = [{"name": "later"}, {"name": "never"}]
EMAIL = {"email": {"address": "a@a.test"}}


@dataclass
class Api:
    """The document and a client (paths relative to /humanlayer/v1): `check` asks both."""

    document: dict[str, Any]
    client: httpx.AsyncClient
    numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def schema(self, path: str) -> dict[str, Any]:
        """The request body schema of POST `path`, found by its path template."""
        for template, operations in self.document["paths"].items():
            pattern = re.sub(r"\{[^}]+\}", "[^/]+", template)
            if re.fullmatch(pattern, API + path) and "post" in operations:
                body = operations["post"]["requestBody"]["content"]["application/json"]
                schema: dict[str, Any] = body["schema"]
                return schema
        raise AssertionError(f"no POST {path} in the document")

    def component(self, name: str) -> dict[str, Any]:
        schema: dict[str, Any] = self.document["components"]["schemas"][name]
        return schema

    def valid(self, path: str, body: Any) -> bool:
        schema = {**self.schema(path), "components": self.document["components"]}
        return jsonschema_rs.Draft202012Validator(schema, validate_formats=True).is_valid(body)

    async def check(self, path: str, body: Any, *, valid: bool, says: str = "") -> None:
        """The document calls `body` valid or not, and the gateway accepts it (200) or refuses
        it (422, saying `says`) alike."""
        case = json.dumps(body)[:300]
        assert self.valid(path, body) is valid, f"the document: {case}"
        response = await self.client.post(path, json=body)
        if valid:
            assert response.status_code == 200, (case, response.text[:500])
        else:
            text = detail_text(response, 422)
            assert says in text, (case, text)

    def create(self, contact: bool = False, **spec: Any) -> dict[str, Any]:
        return request_body(f"exact-{next(self.numbers)}", contact=contact, **spec)


@pytest.fixture
async def api(gateway: RunningGateway) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(base_url=gateway.base_url) as anonymous:
        document = (await anonymous.get("/openapi.json")).json()
    async with gateway.client() as client:
        yield Api(document, client)


def respond_path(path: str, call_id: str) -> str:
    return RESPOND[path].format(call_id)


async def test_a_channel_takes_any_of_or_all_of_but_not_both(api: Api) -> None:
    both = {"any_of": [EMAIL], "all_of": [EMAIL]}
    await api.check(FC, api.create(channel=both), valid=False, says="not both")
    await api.check(FC, api.create(channel={"any_of": [EMAIL], "all_of": None}), valid=True)
    await api.check(HC, api.create(contact=True, channel={"all_of": [EMAIL]}), valid=True)


async def test_approved_is_true_or_false_never_null_or_missing(
    gateway: RunningGateway, api: Api, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "fc-null", reject_options=OPTIONS)
    path = respond_path(FC, "fc-null")
    for body in [{"approved": None, "comment": "ok"}, {"comment": "ok"}, {}]:
        await api.check(path, body, valid=False, says="approved must be true or false")
    refusal = {"approved": True, "reject_option_name": "later"}
    await api.check(path, refusal, valid=False, says="only allowed with approved=false")
    await api.check(path, {"approved": False, "reject_option_name": "later"}, valid=True)
    # The SDK's shape: every unset field an explicit null.
    await request_factory(gateway, "fc-sdk")
    sdk = {"approved": True, "comment": None, "reject_option_name": None, "user_info": None}
    await api.check(respond_path(FC, "fc-sdk"), sdk, valid=True)


async def test_a_question_is_answered_with_a_response_or_an_option(
    gateway: RunningGateway, api: Api, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "hc-1", contact=True, response_options=OPTIONS)
    path = respond_path(HC, "hc-1")
    blank = " \t\n\u3000\x1c"  # all blank to Python, which the pattern spells out
    for body in [{}, {"response": None, "response_option_name": None}, {"response": blank}]:
        await api.check(path, body, valid=False, says="give a response, or a response_option_name")
    await api.check(path, {"response": blank, "response_option_name": "later"}, valid=True)
    await request_factory(gateway, "hc-2", contact=True)
    answer = {"response": "eu-west-1", "response_option_name": None, "user_info": None}
    await api.check(respond_path(HC, "hc-2"), answer, valid=True)


async def test_expires_at_is_a_date_time_string_in_the_future(api: Api) -> None:
    field = api.component("FunctionCallSpec")["properties"]["expires_at"]
    types = {branch["type"]: branch for branch in field["anyOf"]}
    assert types.keys() == {"string", "null"} and types["string"]["format"] == "date-time"
    assert "in the future" in field["description"]
    not_date_times = [0, 1_700_000_000, "1700000000", "2030-01-01", "2030-01-01T00:00Z"]
    for value in not_date_times:
        body = api.create(expires_at=value)
        await api.check(FC, body, valid=False, says="a date-time string with a time zone")
    # The document cannot check the clock, so its description says it; the gateway refuses.
    a_minute_ago = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    for past in ["1970-01-01T00:00:00Z", a_minute_ago]:
        body = api.create(contact=True, expires_at=past)
        assert api.valid(HC, body)
        response = await api.client.post(HC, json=body)
        assert "is in the past" in detail_text(response, 422), past
    # Nor can it say that Python's datetimes end with the year 9999, in UTC.
    assert "at most 9999-12-31T23:59:59Z" in field["description"]
    body = api.create(expires_at="9999-12-31T23:59:59-01:00")
    assert api.valid(FC, body)
    response = await api.client.post(FC, json=body)
    assert "is after 9999-12-31T23:59:59Z" in detail_text(response, 422)
    in_an_hour = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    made = await api.client.post(FC, json=api.create(expires_at=in_an_hour))
    assert made.status_code == 200, made.text
    assert datetime.fromisoformat(made.json()["spec"]["expires_at"]) > datetime.now(UTC)


async def test_body_and_nesting_limits_are_stated(
    gateway: RunningGateway, api: Api, request_factory: RequestFactory
) -> None:
    kwargs = api.component("FunctionCallSpec")["properties"]["kwargs"]
    assert kwargs["maxProperties"] == 10_000
    assert f"nested at most {MAX_JSON_DEPTH} levels deep" in kwargs["description"]
    operation = api.document["paths"][API + FC]["post"]
    assert "GATEWAY_MAX_BODY_BYTES" in operation["requestBody"]["description"]
    assert "413" in operation["responses"]
    deep: Any = "leaf"
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    response = await api.client.post(FC, json=api.create(kwargs={"x": deep}))
    assert f"nested more than {MAX_JSON_DEPTH} levels deep" in detail_text(response, 422)
    # user_info's field names are short: the document's propertyNames says how short.
    await request_factory(gateway, "fc-info")
    path = respond_path(FC, "fc-info")
    long_name = {"approved": True, "user_info": {"k" * (MAX_USER_INFO_KEY + 1): "v"}}
    await api.check(path, long_name, valid=False, says="field names may be")
    short_name = {"approved": True, "user_info": {"k" * MAX_USER_INFO_KEY: "v"}}
    await api.check(path, short_name, valid=True)


async def test_a_discord_channel_has_exactly_one_target(api: Api) -> None:
    for discord in [{"channel_id": "1", "user_id": "2"}, {"channel_id": None, "user_id": None}]:
        body = api.create(channel={"discord": discord})
        await api.check(FC, body, valid=False, says="exactly one of channel_id or user_id")
    await api.check(FC, api.create(channel={"discord": {"user_id": "2"}}), valid=True)


async def test_a_call_id_is_never_dot_or_dot_dot(api: Api) -> None:
    for call_id in [".", ".."]:
        body = {**api.create(), "call_id": call_id}
        await api.check(FC, body, valid=False, says="not '.' or '..'")
    await api.check(FC, {**api.create(), "call_id": "..."}, valid=True)


async def test_free_text_holds_no_nul(
    gateway: RunningGateway, api: Api, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "fc-nul")
    path = respond_path(FC, "fc-nul")
    await api.check(path, {"approved": False, "comment": "a\x00b"}, valid=False, says="NUL")
    await api.check(path, {"approved": False, "comment": "a b"}, valid=True)


async def test_option_names_are_unique(api: Api) -> None:
    twins = api.create(reject_options=[{"name": "x"}, {"name": "x"}])
    await api.check(FC, twins, valid=False, says="option names must be unique")
    # Same name, other title: JSON Schema cannot say it, the description does.
    field = api.component("FunctionCallSpec")["properties"]["reject_options"]["anyOf"][0]
    assert field["uniqueItems"] is True and "name is unique" in field["description"]
    titled = api.create(reject_options=[{"name": "x"}, {"name": "x", "title": "X"}])
    response = await api.client.post(FC, json=titled)
    assert "option names must be unique" in detail_text(response, 422)


async def test_a_bot_token_is_taken_in_the_top_level_channel_only(api: Api) -> None:
    slack = {"slack": {"channel_or_user_id": "C1", "bot_token": "xoxb-1"}}
    says = "only accepted in the top-level channel.slack"
    await api.check(FC, api.create(channel={"any_of": [slack]}), valid=False, says=says)
    delayed = {"any_of": [EMAIL, {"timeout": 60, "channel": slack}]}
    await api.check(FC, api.create(channel=delayed), valid=False, says=says)
    nested = {"all_of": [EMAIL, {"any_of": [slack]}]}
    await api.check(FC, api.create(channel=nested), valid=False, says=says)
    await api.check(FC, api.create(channel={**slack, "any_of": [EMAIL]}), valid=True)
