"""Routing through the real HTTP API: the `route` a request gets, and the deliveries it makes.

The config file names people, a team, two rules and a project default; each test sends a
request and reads back where it went (`route`) and what the gateway did about each target
(GET /gateway/v1/calls/{call_id}/events).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.vocabulary import KeyScope
from tests.factories import Created, RequestFactory, create_path
from tests.helpers import eventually
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

CONFIG = """
[people.alice]
slack = "U1"
discord = "111"
email = "alice@example.com"

[people.bob]
slack = "U2"

[teams.sre]
members = ["alice", "bob"]
slack_channel = "C9"
email = "sre@example.com"

[[rules]]
fn = "drop_*"
target = "team:sre"

[[rules]]
kind = "human_contact"
run_id = "support-*"
target = "person:alice"

[projects.default]
default_target = "person:bob"
"""


SLACK_MISSING = "slack is not configured: set SLACK_BOT_TOKEN"
EMAIL_MISSING = "email is not configured: set SMTP_HOST, EMAIL_FROM"


def target(
    channel: str, address: dict[str, Any], responders: list[str] | None, via: str
) -> dict[str, Any]:
    return {"channel": channel, "address": address, "responders": responders, "via": via}


def sre(via: str) -> list[dict[str, Any]]:
    return [
        target("slack", {"channel": "C9"}, ["U1", "U2"], via),
        # The list answers too, as one voter (its members reply to the list's copy).
        target(
            "email", {"address": "sre@example.com"}, ["sre@example.com", "alice@example.com"], via
        ),
    ]


def alice(via: str) -> list[dict[str, Any]]:
    return [
        target("slack", {"channel": "U1"}, ["U1"], via),
        target("discord", {"user_id": "111"}, ["111"], via),
        target("email", {"address": "alice@example.com"}, ["alice@example.com"], via),
    ]


def bob(via: str) -> list[dict[str, Any]]:
    return [target("slack", {"channel": "U2"}, ["U2"], via)]


@pytest.fixture
async def routed(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


def function_call(
    call_id: str, fn: str = "read_table", run_id: str = "run-1", channel: Any = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"fn": fn, "kwargs": {"table": "users"}}
    if channel is not None:
        spec["channel"] = channel
    return {"run_id": run_id, "call_id": call_id, "spec": spec}


def human_contact(call_id: str, run_id: str = "run-1", channel: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"msg": "which region?"}
    if channel is not None:
        spec["channel"] = channel
    return {"run_id": run_id, "call_id": call_id, "spec": spec}


async def route_of(
    gateway: RunningGateway, made: Created, *, contact: bool = False, key: str | None = None
) -> list[dict[str, Any]]:
    """The route from the create answer, after checking GET returns the same one."""
    async with gateway.client(key) as client:
        got = await client.get(f"{create_path(contact)}/{made.call_id}")
        assert got.status_code == 200, got.text
    route: list[dict[str, Any]] = made.wire["route"]
    assert got.json()["route"] == route
    return route


async def audit(gateway: RunningGateway, call_id: str, key: str | None = None) -> dict[str, Any]:
    async with gateway.client(key) as client:
        response = await client.get(f"{gateway.base_url}/gateway/v1/calls/{call_id}/events")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_rules_match_fn_and_kind_with_run_id(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(routed, "fc-1", fn="drop_table")
    assert await route_of(routed, made) == sre("rule 1")

    made = await request_factory(routed, "hc-1", contact=True, run_id="support-42")
    assert await route_of(routed, made, contact=True) == alice("rule 2")

    # Rule 2 is for human contacts only: a function call in a support run falls through.
    made = await request_factory(routed, "fc-2", fn="read_table", run_id="support-42")
    assert await route_of(routed, made) == bob("project")


async def test_no_rule_and_no_channel_uses_the_project_default(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(routed, "fc-plain", fn="read_table")
    assert await route_of(routed, made) == bob("project")
    made = await request_factory(routed, "hc-plain", contact=True)
    assert await route_of(routed, made, contact=True) == bob("project")


async def test_spec_channel_team_and_person_add_to_a_matching_rule(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(
        routed, "hc-team", contact=True, run_id="support-1", channel={"team": "sre"}
    )
    assert await route_of(routed, made, contact=True) == sre("spec.channel") + alice("rule 2")
    assert made.wire["policy"]["mode"] == "all_of"  # the rule's people, and the agent's

    made = await request_factory(routed, "fc-person", fn="drop_table", channel={"person": "alice"})
    assert await route_of(routed, made) == alice("spec.channel") + sre("rule 1")


async def test_humanlayer_channel_forms(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    slack = {"slack": {"channel_or_user_id": "C5", "allowed_responder_ids": ["U7"]}}
    made = await request_factory(routed, "fc-slack", fn="read_table", channel=slack)
    route = await route_of(routed, made)
    address = {"channel": "C5", "thread_ts": None, "team_id": None}
    assert route == [target("slack", address, ["U7"], "spec.channel")]

    email = {
        "email": {
            "address": "ops@example.com",
            "additional_recipients": [
                {"address": "cc@example.com", "field": "cc"},
                {"address": "boss@example.com"},
            ],
        }
    }
    made = await request_factory(routed, "hc-email", contact=True, channel=email)
    route = await route_of(routed, made, contact=True)
    responders = ["ops@example.com", "cc@example.com", "boss@example.com"]
    expected = target("email", {"address": "ops@example.com"}, responders, "spec.channel")
    assert route == [expected]

    discord: dict[str, Any] = {"discord": {"channel_id": "123"}}
    made = await request_factory(routed, "fc-dc", fn="read_table", channel=discord)
    route = await route_of(routed, made)
    # No allowed_responder_ids: anyone in the channel may answer (responders unset).
    address = {"channel_id": "123"}
    assert route == [target("discord", address, None, "spec.channel")]

    discord = {"discord": {"user_id": "222", "allowed_responder_ids": ["333"]}}
    made = await request_factory(routed, "fc-du", fn="read_table", channel=discord)
    route = await route_of(routed, made)
    address = {"user_id": "222"}
    assert route == [target("discord", address, ["333"], "spec.channel")]


async def test_api_key_target_beats_the_project_default_not_rules(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    key = await routed.new_key("default", target="team:sre")
    made = await request_factory(routed, "fc-key", fn="read_table", key=key)
    assert await route_of(routed, made, key=key) == sre("api key")

    made = await request_factory(routed, "hc-key", contact=True, run_id="support-9", key=key)
    assert await route_of(routed, made, contact=True, key=key) == alice("rule 2")

    made = await request_factory(
        routed, "fc-key-person", fn="read_table", channel={"person": "bob"}, key=key
    )
    assert await route_of(routed, made, key=key) == bob("spec.channel")


async def test_unknown_team_or_person_in_spec_channel_is_422(routed: RunningGateway) -> None:
    async with routed.client() as client:
        response = await client.post(
            "/function_calls", json=function_call("fc-ghost", channel={"team": "ghost"})
        )
        assert response.status_code == 422, response.text
        assert "ghost" in response.text
        assert "sre" in response.text  # the error lists the teams that do exist

        response = await client.post(
            "/human_contacts", json=human_contact("hc-nobody", channel={"person": "nobody"})
        )
        assert response.status_code == 422, response.text
        assert "nobody" in response.text

        # Nothing was stored for the refused requests.
        missing = await client.get("/function_calls/fc-ghost")
        assert missing.status_code == 404, missing.text


async def test_unconfigured_channels_record_why_and_stay_answerable(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    route = await route_of(routed, await request_factory(routed, "fc-sre", fn="drop_db"))
    assert route == sre("rule 1")

    trail = await audit(routed, "fc-sre")
    deliveries = trail["deliveries"]
    assert [(d["channel"], d["status"], d["error"]) for d in deliveries] == [
        ("slack", "unconfigured", SLACK_MISSING),
        ("email", "unconfigured", EMAIL_MISSING),
    ]
    assert [d["target"] for d in deliveries] == route
    failed = [e["detail"] for e in trail["events"] if e["type"] == "delivery_failed"]
    assert [(f["channel"], f["error"]) for f in failed] == [
        ("slack", SLACK_MISSING),
        ("email", EMAIL_MISSING),
    ]
    assert {f["delivery_id"] for f in failed} == {d["id"] for d in deliveries}
    types = [e["type"] for e in trail["events"]]
    assert types[:2] == ["created", "routed"]
    assert trail["events"][1]["detail"] == {"targets": 2, "rule": "rule 1"}  # the one matched

    async with routed.client() as client:
        got = await client.get("/function_calls/fc-sre")
        assert got.json()["gateway_status"] == "pending"
        pending = await client.get("/agent/function_calls/pending")
        assert "fc-sre" in [item["call_id"] for item in pending.json()["items"]]
        # An unconfigured channel has nothing to send: no delivery job was queued for it.
        jobs = await client.get(f"{routed.base_url}/gateway/v1/jobs")
        assert [job for job in jobs.json()["items"] if job["kind"] == "deliver"] == []

        answered = await client.post(
            "/agent/function_calls/fc-sre/respond", json={"approved": True, "comment": "go"}
        )
        assert answered.status_code == 200, answered.text
        assert answered.json()["status"]["approved"] is True
        got = await client.get("/function_calls/fc-sre")
        assert got.json()["status"]["approved"] is True
        assert got.json()["status"]["comment"] == "go"


async def test_person_route_reports_every_missing_platform(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(routed, "hc-alice", contact=True, run_id="support-7")
    assert await route_of(routed, made, contact=True) == alice("rule 2")
    deliveries = (await audit(routed, "hc-alice"))["deliveries"]
    assert [(d["channel"], d["status"], d["error"]) for d in deliveries] == [
        ("slack", "unconfigured", SLACK_MISSING),
        ("discord", "unconfigured", "discord is not configured: set DISCORD_BOT_TOKEN"),
        ("email", "unconfigured", EMAIL_MISSING),
    ]
    async with routed.client() as client:
        answered = await client.post(
            "/agent/human_contacts/hc-alice/respond", json={"response": "eu-west-1"}
        )
        assert answered.status_code == 200, answered.text
        got = await client.get("/human_contacts/hc-alice")
    assert got.json()["status"]["response"] == "eu-west-1"


async def test_web_only_route_is_sent_by_the_outbox(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    # A project with no default in the config: nothing matches, so only the web console.
    key = await routed.new_key("elsewhere", scope=KeyScope.ADMIN)  # it reads the audit trail
    made = await request_factory(routed, "fc-web", fn="read_table", key=key)
    route = await route_of(routed, made, key=key)
    assert route == [target("web", {}, None, "default")]

    async def sent() -> bool:
        deliveries = (await audit(routed, "fc-web", key))["deliveries"]
        return [d["status"] for d in deliveries] == ["sent"]

    await eventually(sent)
    trail = await audit(routed, "fc-web", key)
    assert trail["deliveries"][0]["error"] is None
    types = [e["type"] for e in trail["events"]]
    assert "delivered" in types
    assert "delivery_failed" not in types


async def test_sms_has_no_channel_in_this_gateway(
    routed: RunningGateway, request_factory: RequestFactory
) -> None:
    sms = {"sms": {"phone_number": "+1555"}}
    made = await request_factory(routed, "fc-sms", fn="read_table", channel=sms)
    route = await route_of(routed, made)
    assert route == [target("sms", {"phone_number": "+1555"}, None, "spec.channel")]

    trail = await audit(routed, "fc-sms")
    assert [(d["channel"], d["status"], d["error"]) for d in trail["deliveries"]] == [
        ("sms", "unconfigured", "this gateway has no sms channel")
    ]
    failed = [e["detail"] for e in trail["events"] if e["type"] == "delivery_failed"]
    assert [f["error"] for f in failed] == ["this gateway has no sms channel"]
    async with routed.client() as client:
        answered = await client.post(
            "/agent/function_calls/fc-sms/respond", json={"approved": False, "comment": "no"}
        )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"]["approved"] is False
