"""Bad input through real HTTP: every rejection is a 4xx whose JSON `detail` says what is
wrong and leaves nothing half-written; whatever is accepted is stored exactly as sent.

Cheap variants of one case are looped inside a test (each assertion names its variant):
every test starts a gateway on its database, which costs far more than a request."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway

FC = "/function_calls"
HC = "/contact_requests"
PENDING = {FC: "/agent/function_calls/pending", HC: "/agent/human_contacts/pending"}
RESPOND = {FC: "/agent/function_calls/{}/respond", HC: "/agent/human_contacts/{}/respond"}
JSON_HEADERS = {"Content-Type": "application/json"}
BOTH = pytest.mark.parametrize("path", [FC, HC], ids=["function_call", "human_contact"])


def fc_body(call_id: str, **spec: Any) -> dict[str, Any]:
    base = {"fn": "deploy", "kwargs": {"env": "prod"}}
    return {"run_id": "run-1", "call_id": call_id, "spec": base | spec}


def hc_body(call_id: str, **spec: Any) -> dict[str, Any]:
    return {"run_id": "run-1", "call_id": call_id, "spec": {"msg": "May I?"} | spec}


BODY: dict[str, Callable[..., dict[str, Any]]] = {FC: fc_body, HC: hc_body}


def with_hole(path: str, call_id: str, replacement: str, **spec: Any) -> bytes:
    """Raw JSON text of a body whose "HOLE" markers are replaced by `replacement` verbatim."""
    return json.dumps(BODY[path](call_id, **spec)).replace("HOLE", replacement).encode()


def with_literal(path: str, call_id: str, literal: str, **spec: Any) -> bytes:
    """Raw JSON text of a body whose "HOLE" string values become the bare `literal`."""
    return json.dumps(BODY[path](call_id, **spec)).replace('"HOLE"', literal).encode()


def error_text(response: httpx.Response, status: int, case: str = "") -> str:
    """The response must be `status` (a 4xx) with a JSON `detail`; returns its messages."""
    assert 400 <= status < 500
    assert response.status_code == status, (case, response.status_code, response.text[:2000])
    content_type = response.headers["content-type"]
    assert content_type.startswith("application/json"), (case, content_type)
    detail = response.json()["detail"]
    if isinstance(detail, str):
        return detail
    assert isinstance(detail, list) and detail, (case, detail)
    parts: list[str] = []
    for item in detail:
        parts.append(str(item["msg"]))
        parts.append(".".join(str(part) for part in item.get("loc", [])))
        parts.extend(str(value) for value in (item.get("ctx") or {}).values())
    return " | ".join(parts)


def assert_error(response: httpx.Response, status: int, *fragments: str, case: str = "") -> None:
    text = error_text(response, status, case)
    for fragment in fragments:
        assert fragment in text, f"{case}: {fragment!r} not in {text!r}"


async def pending_total(client: httpx.AsyncClient, path: str) -> int:
    response = await client.get(PENDING[path])
    assert response.status_code == 200, response.text
    total: int = response.json()["total"]
    return total


async def assert_not_created(
    client: httpx.AsyncClient, path: str, call_id: str, pending_before: int, case: str = ""
) -> None:
    got = await client.get(f"{path}/{call_id}")
    assert got.status_code == 404, (case, got.text[:2000])
    assert await pending_total(client, path) == pending_before, case


def gateway_base(client: httpx.AsyncClient) -> str:
    return str(client.base_url).removesuffix("/").removesuffix("/humanlayer/v1")


async def assert_undecided(
    client: httpx.AsyncClient, path: str, call_id: str, case: str = ""
) -> None:
    got = await client.get(f"{path}/{call_id}")
    assert got.status_code == 200, (case, got.text)
    record = got.json()
    assert record["gateway_status"] == "pending", case
    assert record["status"]["responded_at"] is None, case
    assert record["status"]["user_info"] is None, case
    if path == FC:
        assert record["status"]["approved"] is None, case
        assert record["status"]["comment"] is None, case
    else:
        assert record["status"]["response"] is None, case
    events = await client.get(f"{gateway_base(client)}/gateway/v1/calls/{call_id}/events")
    assert events.status_code == 200, (case, events.text)
    assert "decided" not in [event["type"] for event in events.json()["events"]], case


@pytest.fixture
async def client(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client() as http:
        yield http


# --- malformed JSON -----------------------------------------------------------------------


@BOTH
async def test_malformed_json_is_422(client: httpx.AsyncClient, path: str) -> None:
    valid = json.dumps(BODY[path]("bad")).encode()
    cases = {
        "truncated": (valid[: len(valid) // 2], "JSON decode error"),
        "not-json": (b"this is not JSON at all", "JSON decode error"),
        "trailing-garbage": (valid + b" }", "JSON decode error"),
        "invalid-utf8": (valid.replace(b"run-1", b"run-\xff\xfe"), "not UTF-8"),
        "empty": (b"", "Field required"),
        "json-array": (b"[]", "valid dictionary"),
    }
    before = await pending_total(client, path)
    for case, (raw, message) in cases.items():
        response = await client.post(path, content=raw, headers=JSON_HEADERS)
        assert_error(response, 422, message, case=case)
        await assert_not_created(client, path, "bad", before, case)


# --- wrong types --------------------------------------------------------------------------


WRONG_TYPES: dict[str, list[tuple[str, Any, str]]] = {
    # (dotted field, value or None to delete it, expected message)
    FC: [
        ("spec.kwargs", ["a", "b"], "valid dictionary"),
        ("run_id", 42, "valid string"),
        ("call_id", 7, "valid string"),
        ("spec", None, "Field required"),
        ("spec.fn", None, "Field required"),
        ("spec.state", [1], "valid dictionary"),
        ("spec.reject_options", {"name": "x"}, "valid list"),
    ],
    HC: [
        ("run_id", 42, "valid string"),
        ("call_id", 7, "valid string"),
        ("spec", None, "Field required"),
        ("spec.msg", ["x"], "valid string"),
        ("spec.msg", "", "at least 1 character"),
        ("spec.state", "s", "valid dictionary"),
        ("spec.response_options", "yes", "valid list"),
    ],
}


@BOTH
async def test_wrong_type_is_422_naming_the_field(client: httpx.AsyncClient, path: str) -> None:
    before = await pending_total(client, path)
    for field, value, message in WRONG_TYPES[path]:
        body = BODY[path]("bad")
        *parents, last = field.split(".")
        holder = body
        for parent in parents:
            holder = holder[parent]
        if value is None:
            del holder[last]
        else:
            holder[last] = value
        response = await client.post(path, json=body)
        assert_error(response, 422, f"body.{field}", message, case=f"{field}={value!r}")
        await assert_not_created(client, path, "bad", before, field)


async def test_respond_approved_of_wrong_type_is_422(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "fc-1")
    for approved in ["maybe", "", ["true"], {"approved": True}, 2]:
        response = await client.post(RESPOND[FC].format("fc-1"), json={"approved": approved})
        assert_error(response, 422, "body.approved", "valid boolean", case=repr(approved))
        await assert_undecided(client, FC, "fc-1", repr(approved))


async def test_respond_approved_null_or_missing_is_422(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "fc-1")
    for body in [{"approved": None}, {"comment": "looks fine"}, {}]:
        response = await client.post(RESPOND[FC].format("fc-1"), json=body)
        assert_error(response, 422, "approved must be true or false", case=repr(body))
        await assert_undecided(client, FC, "fc-1", repr(body))


# --- body size ----------------------------------------------------------------------------


@BOTH
async def test_ten_megabyte_body_is_413_before_parsing(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str
) -> None:
    limit = gateway.core.settings.max_body_bytes
    before = await pending_total(client, path)
    # Not JSON: had the gateway parsed it, the answer would be a 422.
    raw = b"{" + b"x" * (10 * 1024 * 1024)
    response = await client.post(path, content=raw, headers=JSON_HEADERS)
    assert response.request.headers["content-length"] == str(len(raw))
    assert_error(response, 413, f"larger than {limit} bytes")
    await assert_not_created(client, path, "bad", before)


def padded_body(path: str, call_id: str, size: int) -> bytes:
    """A valid JSON body of exactly `size` bytes."""
    body = BODY[path](call_id, state={"pad": ""})
    empty = len(json.dumps(body).encode())
    body["spec"]["state"]["pad"] = "p" * (size - empty)
    raw = json.dumps(body).encode()
    assert len(raw) == size
    return raw


async def chunked(raw: bytes, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
    for start in range(0, len(raw), chunk):
        yield raw[start : start + chunk]


@BOTH
async def test_chunked_body_just_over_the_limit_is_413(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str
) -> None:
    limit = gateway.core.settings.max_body_bytes
    before = await pending_total(client, path)
    response = await client.post(
        path, content=chunked(padded_body(path, "big", limit + 1)), headers=JSON_HEADERS
    )
    assert "content-length" not in response.request.headers
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert_error(response, 413, f"larger than {limit} bytes")
    await assert_not_created(client, path, "big", before)


@BOTH
async def test_chunked_body_exactly_at_the_limit_is_accepted(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str
) -> None:
    limit = gateway.core.settings.max_body_bytes
    raw = padded_body(path, "fits", limit)
    response = await client.post(path, content=chunked(raw), headers=JSON_HEADERS)
    assert "content-length" not in response.request.headers
    assert response.status_code == 200, response.text[:500]
    got = await client.get(f"{path}/fits")
    assert got.json()["spec"]["state"] == json.loads(raw)["spec"]["state"]


# --- routing references -------------------------------------------------------------------


@BOTH
async def test_unknown_team_or_person_is_422_naming_it(
    client: httpx.AsyncClient, path: str
) -> None:
    cases = [
        ({"team": "nope"}, "unknown team 'nope'"),
        ({"person": "nobody"}, "unknown person 'nobody'"),
        ({"team": "nope", "person": "nobody"}, "unknown team 'nope'"),
    ]
    before = await pending_total(client, path)
    for channel, message in cases:
        response = await client.post(path, json=BODY[path]("bad", channel=channel))
        assert_error(response, 422, message, case=repr(channel))
        await assert_not_created(client, path, "bad", before, repr(channel))


# --- ids ----------------------------------------------------------------------------------


@BOTH
async def test_300_character_id_is_422_mentioning_the_length(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    before = await pending_total(client, path)
    for field in ("call_id", "run_id"):
        body = BODY[path]("bad") | {field: "x" * 300}
        response = await client.post(path, json=body)
        assert_error(response, 422, f"body.{field}", "at most 255 characters", case=field)
        await assert_not_created(client, path, "bad", before, field)
        await assert_not_created(client, path, "x" * 300, before, field)
    # The limit itself is fine.
    await request_factory(gateway, "x" * 255, contact=path == HC)
    got = await client.get(f"{path}/{'x' * 255}")
    assert got.status_code == 200, got.text
    assert got.json()["call_id"] == "x" * 255


@BOTH
async def test_call_id_with_control_characters_or_empty_is_422(
    client: httpx.AsyncClient, path: str
) -> None:
    before = await pending_total(client, path)
    for call_id in ["a\u0000b", "a\nb", "a\u007fb", "\u001f", ""]:
        response = await client.post(path, json=BODY[path](call_id))
        assert_error(response, 422, "body.call_id", case=repr(call_id))
        assert await pending_total(client, path) == before, repr(call_id)


# --- JSON that Python accepts but JSON does not -------------------------------------------


@BOTH
async def test_nan_and_infinity_in_state_are_422(client: httpx.AsyncClient, path: str) -> None:
    before = await pending_total(client, path)
    for token in ("NaN", "Infinity", "-Infinity"):
        raw = with_literal(path, "bad", token, state={"score": "HOLE"})
        assert f'"score": {token}}}'.encode() in raw
        response = await client.post(path, content=raw, headers=JSON_HEADERS)
        assert_error(response, 422, f"{token} is not valid JSON", case=token)
        await assert_not_created(client, path, "bad", before, token)


async def test_number_too_large_for_a_float_is_422(client: httpx.AsyncClient) -> None:
    # Python parses 1e400 as inf, which JSON cannot hold: refuse it like Infinity, rather
    # than store something other than what was sent.
    raw = with_literal(FC, "num", "1e400", kwargs={"n": "HOLE"})
    before = await pending_total(client, FC)
    response = await client.post(FC, content=raw, headers=JSON_HEADERS)
    text = error_text(response, 422)
    assert "valid JSON" in text or "1e400" in text, text
    await assert_not_created(client, FC, "num", before)


async def test_extreme_numbers_in_kwargs_round_trip(client: httpx.AsyncClient) -> None:
    cases: list[tuple[str, Any]] = [
        ("12345678901234567890123456789", 12345678901234567890123456789),
        ("-0.0", -0.0),
        ("1.5e-300", 1.5e-300),
        ("1.7976931348623157e308", 1.7976931348623157e308),
    ]
    for index, (text, value) in enumerate(cases):
        call_id = f"num-{index}"
        raw = with_literal(FC, call_id, text, kwargs={"n": "HOLE"})
        response = await client.post(FC, content=raw, headers=JSON_HEADERS)
        assert response.status_code == 200, (text, response.text)
        got = (await client.get(f"{FC}/{call_id}")).json()["spec"]["kwargs"]["n"]
        assert got == value and type(got) is type(value), (text, got)


@BOTH
async def test_lone_surrogate_is_422(client: httpx.AsyncClient, path: str) -> None:
    free_text = {"kwargs": {"note": "HOLE"}} if path == FC else {"msg": "HOLE"}
    cases: dict[str, dict[str, Any]] = {
        "state-value": {"state": {"note": "HOLE"}},
        "state-key": {"state": {"HOLE": 1}},
        "nested": {"state": {"a": [{"b": "HOLE"}]}},
        "free-text": free_text,
    }
    before = await pending_total(client, path)
    for case, spec in cases.items():
        for surrogate in ("\\ud800", "\\udfff", "\\uDC00"):
            raw = with_hole(path, "bad", f"a{surrogate}b", **spec)
            response = await client.post(path, content=raw, headers=JSON_HEADERS)
            label = f"{case} {surrogate}"
            assert_error(response, 422, "lone UTF-16 surrogate", case=label)
            await assert_not_created(client, path, "bad", before, label)


# --- stored faithfully --------------------------------------------------------------------


@BOTH
async def test_nul_in_free_json_is_stored_faithfully(client: httpx.AsyncClient, path: str) -> None:
    free_text = {"kwargs": {"cmd": "HOLE", "HOLE": "v"}} if path == FC else {"msg": "HOLE"}
    cases: dict[str, dict[str, Any]] = {
        "state": {"state": {"k": "HOLE", "HOLE": ["HOLE", {"deep": "HOLE"}]}},
        "free-text": free_text,
    }
    for case, spec in cases.items():
        call_id = f"nul-{case}"
        raw = with_hole(path, call_id, "a\\u0000b", **spec)
        assert b"\\u0000" in raw and b"\x00" not in raw
        sent = json.loads(raw)["spec"]
        created = await client.post(path, content=raw, headers=JSON_HEADERS)
        assert created.status_code == 200, (case, created.text)
        got = await client.get(f"{path}/{call_id}")
        assert got.status_code == 200, (case, got.text)
        for record in (created.json(), got.json()):
            for key, value in sent.items():
                assert record["spec"][key] == value, (case, key)
        # The same text again is the same request, NUL and all.
        again = await client.post(path, content=raw, headers=JSON_HEADERS)
        assert again.status_code == 200, (case, again.text)
        assert again.json() == got.json(), case


@BOTH
async def test_unusual_text_in_state_is_stored_faithfully(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    cases = {
        "astral-and-bmp": "\U0001f600 \u00e9\u4e2d",
        "escaped-backslash-u": "back\\ud800slash",
        "separators-bom": "\u2028\u2029\ufeff\ufffd",
        "control": "\t\n\r\u001f\u007f",
        "long": "z" * 200_000,
    }
    for case, text in cases.items():
        await request_factory(
            gateway, case, contact=path == HC, state={"text": text, text[:100]: text}
        )
        got = await client.get(f"{path}/{case}")
        assert got.json()["spec"]["state"] == {"text": text, text[:100]: text}, case
    # A surrogate pair escape is one character, not a lone surrogate.
    raw = with_hole(path, "pair", "\\ud83d\\ude00", state={"s": "HOLE"})
    created = await client.post(path, content=raw, headers=JSON_HEADERS)
    assert created.status_code == 200, created.text
    got = await client.get(f"{path}/pair")
    assert got.json()["spec"]["state"] == {"s": "\U0001f600"}


# --- decisions ----------------------------------------------------------------------------


@BOTH
async def test_nul_in_a_decision_text_is_422(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "dec", contact=path == HC)
    bodies = (
        [{"approved": False, "comment": "a\u0000b"}, {"approved": True, "comment": "\u0000"}]
        if path == FC
        else [{"response": "a\u0000b"}, {"response": "\u0000"}]
    )
    for body in bodies:
        raw = json.dumps(body).encode()
        assert b"\\u0000" in raw
        url = RESPOND[path].format("dec")
        response = await client.post(url, content=raw, headers=JSON_HEADERS)
        assert_error(response, 422, "must not contain NUL", case=repr(body))
        await assert_undecided(client, path, "dec", repr(body))


REJECT_OPTIONS = [
    {"name": "too_risky", "title": "Too risky"},
    {"name": "wrong_env", "title": "Wrong environment"},
]


async def test_unknown_reject_option_name_is_422_naming_it(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "opt", reject_options=REJECT_OPTIONS)
    await request_factory(gateway, "noopt")
    response = await client.post(
        RESPOND[FC].format("opt"), json={"approved": False, "reject_option_name": "bogus"}
    )
    assert_error(response, 422, "unknown option 'bogus'", "too_risky", "wrong_env")
    await assert_undecided(client, FC, "opt")
    response = await client.post(
        RESPOND[FC].format("noopt"), json={"approved": False, "reject_option_name": "bogus"}
    )
    assert_error(response, 422, "unknown option 'bogus'")
    await assert_undecided(client, FC, "noopt")
    response = await client.post(
        RESPOND[FC].format("opt"), json={"approved": True, "reject_option_name": "too_risky"}
    )
    assert_error(response, 422, "only allowed with approved=false")
    await assert_undecided(client, FC, "opt")


async def test_unknown_response_option_name_is_422_naming_it(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    await request_factory(
        gateway, "opt", contact=True, response_options=[{"name": "yes"}, {"name": "no"}]
    )
    response = await client.post(RESPOND[HC].format("opt"), json={"response_option_name": "maybe"})
    assert_error(response, 422, "unknown option 'maybe'", "yes")
    await assert_undecided(client, HC, "opt")


async def test_human_contact_respond_without_an_answer_is_422(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "hc", contact=True)
    for body in [{}, {"response": None, "response_option_name": None}]:
        response = await client.post(RESPOND[HC].format("hc"), json=body)
        assert_error(response, 422, "give a response, or a response_option_name", case=repr(body))
        await assert_undecided(client, HC, "hc", repr(body))


@BOTH
async def test_duplicate_option_names_are_422(client: httpx.AsyncClient, path: str) -> None:
    field = "reject_options" if path == FC else "response_options"
    options = [{"name": "same", "title": "A"}, {"name": "same", "title": "B"}]
    before = await pending_total(client, path)
    response = await client.post(path, json=BODY[path]("dup", **{field: options}))
    assert_error(response, 422, f"body.spec.{field}", "option names must be unique")
    await assert_not_created(client, path, "dup", before)


# --- idempotency and conflicts ------------------------------------------------------------


@BOTH
async def test_same_call_id_same_body_is_idempotent(client: httpx.AsyncClient, path: str) -> None:
    before = await pending_total(client, path)
    body = BODY[path]("idem", state={"n": 1})
    first = await client.post(path, json=body)
    assert first.status_code == 200, first.text
    second = await client.post(path, json=body)
    assert second.status_code == 200, second.text
    assert second.json() == first.json()
    assert await pending_total(client, path) == before + 1
    listed = await client.get(path, params={"run_id": "run-1"})
    assert [item["call_id"] for item in listed.json()["items"]] == ["idem"]


@BOTH
async def test_same_call_id_different_body_is_409(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    # Created from the very body BODY[path] makes: the run-2 copy below differs in run_id only.
    sent = BODY[path]("idem", state={"n": 1})
    created = await request_factory(
        gateway, "idem", contact=path == HC, run_id=sent["run_id"], **sent["spec"]
    )
    original = created.wire
    before = await pending_total(client, path)
    response = await client.post(path, json=BODY[path]("idem", state={"n": 2}))
    assert_error(response, 409, "call_id 'idem' already exists with a different body")
    other_run = BODY[path]("idem", state={"n": 1}) | {"run_id": "run-2"}
    response = await client.post(path, json=other_run)
    assert_error(response, 409, "call_id 'idem' already exists")
    got = await client.get(f"{path}/idem")
    assert got.json() == original
    assert await pending_total(client, path) == before


@pytest.mark.parametrize(
    ("first", "second", "noun"),
    [(FC, HC, "function call"), (HC, FC, "human contact")],
    ids=["fc-then-hc", "hc-then-fc"],
)
async def test_call_id_shared_across_kinds_is_409(
    gateway: RunningGateway,
    client: httpx.AsyncClient,
    first: str,
    second: str,
    noun: str,
    request_factory: RequestFactory,
) -> None:
    original = (await request_factory(gateway, "shared", contact=first == HC)).wire
    before = await pending_total(client, second)
    response = await client.post(second, json=BODY[second]("shared"))
    assert_error(response, 409, f"call_id 'shared' is already used by a {noun}")
    await assert_not_created(client, second, "shared", before)
    assert (await client.get(f"{first}/shared")).json() == original


# --- authentication -----------------------------------------------------------------------


@BOTH
async def test_bad_credentials_are_401(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "mine", contact=path == HC)
    before = await pending_total(client, path)
    cases: list[tuple[dict[str, str], str]] = [
        ({}, "missing Authorization header"),
        ({"Authorization": "Bearer hl_wrong_key"}, "invalid or revoked API key"),
        ({"Authorization": f"Bearer {gateway.api_key}x"}, "invalid or revoked API key"),
        ({"Authorization": "Bearer"}, "must be 'Bearer <api key>'"),
        ({"Authorization": "Basic dXNlcjpwdw=="}, "must be 'Bearer <api key>'"),
    ]
    for headers, message in cases:
        async with httpx.AsyncClient(base_url=gateway.api_base, headers=headers) as anonymous:
            for response in (
                await anonymous.post(path, json=BODY[path]("theirs")),
                await anonymous.get(f"{path}/mine"),
                await anonymous.get(PENDING[path]),
                await anonymous.post(RESPOND[path].format("mine"), json={"approved": True}),
            ):
                case = f"{headers} {response.request.method} {response.request.url.path}"
                assert_error(response, 401, message, case=case)
                assert response.headers["www-authenticate"] == "Bearer", case
                assert "mine" not in response.text, case
    await assert_not_created(client, path, "theirs", before)
    await assert_undecided(client, path, "mine")


# --- query parameters ---------------------------------------------------------------------


@BOTH
async def test_bad_wait_is_422(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "w", contact=path == HC)
    cases = {
        "wait=61": ["query.wait", "less than or equal to 60"],
        "wait=1e9": ["query.wait", "less than or equal to 60"],
        "wait=0": ["query.wait", "greater than 0"],
        "wait=-1": ["query.wait", "greater than 0"],
        "wait=soon": ["query.wait", "valid number"],
    }
    for query, fragments in cases.items():
        response = await client.get(f"{path}/w?{query}")
        assert_error(response, 422, *fragments, case=query)


@BOTH
async def test_bad_list_parameters_are_422(client: httpx.AsyncClient, path: str) -> None:
    cases = {
        "limit=0": ["query.limit", "greater than or equal to 1"],
        "limit=1001": ["query.limit", "less than or equal to 1000"],
        "limit=ten": ["query.limit", "valid integer"],
        "offset=-1": ["query.offset", "greater than or equal to 0"],
        "status=maybe": ["query.status", "pending"],
    }
    for query, fragments in cases.items():
        for url in (f"{path}?{query}", f"{PENDING[path]}?{query}"):
            if url.startswith(PENDING[path]) and query.startswith("status"):
                continue
            response = await client.get(url)
            assert_error(response, 422, *fragments, case=url)


# --- bad input in the URL -----------------------------------------------------------------


@BOTH
async def test_nul_in_a_path_call_id_is_4xx(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    # No stored call_id can hold NUL (see above), so the answer is "no such request".
    await request_factory(gateway, "real", contact=path == HC)
    urls = [
        f"{path}/a%00b",
        f"{path}/a%00b?wait=1",
        RESPOND[path].format("a%00b"),
        f"{gateway_base(client)}/gateway/v1/calls/a%00b/events",
    ]
    decision = {"approved": True} if path == FC else {"response": "ok"}
    for url in urls:
        method = "POST" if url.endswith("/respond") else "GET"
        response = await client.request(method, url, json=decision if method == "POST" else None)
        assert response.status_code in (404, 422), (url, response.status_code, response.text)
        assert "call_id" in error_text(response, response.status_code, url), url
    await assert_undecided(client, path, "real")


@BOTH
async def test_nul_in_a_run_id_filter_is_not_a_5xx(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "real", contact=path == HC)
    response = await client.get(f"{path}?run_id=a%00b")
    if response.status_code == 200:
        assert response.json()["total"] == 0
        assert response.json()["items"] == []
    else:
        assert_error(response, 422, "run_id")


@BOTH
async def test_call_id_with_a_slash_is_refused_or_reachable(
    client: httpx.AsyncClient, path: str
) -> None:
    # A call_id that is accepted must be readable back: GET of its encoded form returns it.
    before = await pending_total(client, path)
    response = await client.post(path, json=BODY[path]("a/b"))
    if response.status_code != 200:
        assert_error(response, 422, "body.call_id")
        assert await pending_total(client, path) == before
        return
    got = await client.get(f"{path}/a%2Fb")
    assert got.status_code == 200, got.text
    assert got.json() == response.json()


# --- more decision bodies -----------------------------------------------------------------


async def test_respond_approved_as_a_boolean_string_is_422(
    gateway: RunningGateway, client: httpx.AsyncClient, request_factory: RequestFactory
) -> None:
    # An approval is a JSON boolean: "true", "yes" or "0" are strings, not decisions.
    await request_factory(gateway, "fc-1")
    for approved in ["true", "false", "yes", "no", "1", "0", "on", "off"]:
        response = await client.post(RESPOND[FC].format("fc-1"), json={"approved": approved})
        assert_error(response, 422, "body.approved", "valid boolean", case=repr(approved))
        await assert_undecided(client, FC, "fc-1", repr(approved))


@BOTH
async def test_number_too_large_for_a_float_in_user_info_is_422(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "dec", contact=path == HC)
    answer = '"approved": true' if path == FC else '"response": "ok"'
    for number in ("1e400", "-1e400"):
        raw = f'{{{answer}, "user_info": {{"name": "n", "score": {number}}}}}'.encode()
        url = RESPOND[path].format("dec")
        response = await client.post(url, content=raw, headers=JSON_HEADERS)
        text = error_text(response, 422, number)
        assert "valid JSON" in text or number in text, (number, text)
        await assert_undecided(client, path, "dec", number)


@BOTH
async def test_nul_in_user_info_is_refused_and_decides_nothing(
    gateway: RunningGateway, client: httpx.AsyncClient, path: str, request_factory: RequestFactory
) -> None:
    """PostgreSQL's JSON functions refuse a whole document holding a NUL (metrics and the
    insights page read user_info that way), so a NUL in a value or a name is a 422."""
    await request_factory(gateway, "dec", contact=path == HC)
    answer = {"approved": False, "comment": "no"} if path == FC else {"response": "ok"}
    url = RESPOND[path].format("dec")
    for info in ({"name": "HOLE"}, {"HOLE": "x"}):
        raw = json.dumps(answer | {"user_info": info}).replace("HOLE", "a\\u0000b")
        response = await client.post(url, content=raw.encode(), headers=JSON_HEADERS)
        assert "NUL" in error_text(response, 422, "user_info")
    await assert_undecided(client, path, "dec", "NUL")
