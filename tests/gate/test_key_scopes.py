"""Key scopes: an agent's key creates, reads and waits, and can neither decide, escalate nor
read the management routes. Each test is the attack, made with an agent key."""

from __future__ import annotations

import pytest

from gateway.cli import bootstrap
from gateway.errors import InvalidInput
from gateway.vocabulary import KeyScope
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway

RESPOND = {
    "fc": ("/agent/function_calls/{}/respond", {"approved": True, "comment": "fine by me"}),
    "hc": ("/agent/human_contacts/{}/respond", {"response": "yes"}),
}
ESCALATE = {
    "fc": "/agent/function_calls/{}/escalate_email",
    "hc": "/agent/human_contacts/{}/escalate_email",
}
ESCALATION = {"escalation_msg": "please", "channel": {"email": {"address": "me@agent.example"}}}


@pytest.mark.parametrize("kind", ["fc", "hc"])
async def test_an_agent_key_cannot_respond_to_its_own_request(
    gateway: RunningGateway, request_factory: RequestFactory, kind: str
) -> None:
    agent = await gateway.new_key("default", name="agent")
    made = await request_factory(gateway, contact=kind == "hc", key=agent)
    path, body = RESPOND[kind]
    async with gateway.client(agent) as client:
        refused = await client.post(path.format(made.call_id), json=body)
        assert refused.status_code == 403, refused.text
        assert "'agent' scope" in refused.json()["detail"]
        assert "'responder'" in refused.json()["detail"]
        read = "/function_calls/" if kind == "fc" else "/human_contacts/"
        after = await client.get(read + made.call_id)
    assert after.json()["gateway_status"] == "pending"
    assert after.json()["status"].get("user_info") is None


@pytest.mark.parametrize("scope", [KeyScope.AGENT, KeyScope.RESPONDER])
@pytest.mark.parametrize("kind", ["fc", "hc"])
async def test_only_an_admin_key_escalates(
    gateway: RunningGateway, request_factory: RequestFactory, kind: str, scope: KeyScope
) -> None:
    key = await gateway.new_key("default", name=str(scope), scope=scope)
    made = await request_factory(gateway, contact=kind == "hc", key=key)
    async with gateway.client(key) as client:
        refused = await client.post(ESCALATE[kind].format(made.call_id), json=ESCALATION)
        assert refused.status_code == 403, refused.text
        assert "'admin'" in refused.json()["detail"]
    async with gateway.client() as admin:
        events = await admin.get(gateway.base_url + f"/gateway/v1/calls/{made.call_id}/events")
    assert "escalated" not in [event["type"] for event in events.json()["events"]]
    assert len(events.json()["deliveries"]) == 1  # the route as made; nobody was added


@pytest.mark.parametrize("path", ["/gateway/v1/jobs", "/gateway/v1/keys", "/gateway/v1/channels"])
@pytest.mark.parametrize("scope", [KeyScope.AGENT, KeyScope.RESPONDER])
async def test_the_management_routes_are_for_admin_keys(
    gateway: RunningGateway, path: str, scope: KeyScope
) -> None:
    key = await gateway.new_key("default", scope=scope)
    async with gateway.client(key) as client:
        refused = await client.get(gateway.base_url + path)
    assert refused.status_code == 403, refused.text
    assert "'admin'" in refused.json()["detail"]
    async with gateway.client() as admin:
        assert (await admin.get(gateway.base_url + path)).status_code == 200


async def test_an_agent_key_still_creates_reads_lists_and_waits(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    agent = await gateway.new_key("default", name="agent")
    made = await request_factory(gateway, key=agent)
    async with gateway.client(agent) as client:
        assert (await client.get(f"/function_calls/{made.call_id}")).status_code == 200
        assert (await client.get("/function_calls", params={"limit": 5})).status_code == 200
        assert (await client.get("/agent/function_calls/pending")).status_code == 200
        waited = await client.get(f"/function_calls/{made.call_id}", params={"wait": 0.2})
        assert waited.status_code == 200
        assert (await client.get("/project")).status_code == 200


async def test_a_responder_key_answers_and_the_keys_list_shows_each_scope(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    agent = await gateway.new_key("default", name="the agent")
    responder = await gateway.new_key("default", name="front end", scope=KeyScope.RESPONDER)
    made = await request_factory(gateway, key=agent)
    async with gateway.client(responder) as client:
        answered = await client.post(
            f"/agent/function_calls/{made.call_id}/respond", json={"approved": True}
        )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"]["approved"] is True
    async with gateway.client() as admin:
        listed = (await admin.get(gateway.base_url + "/gateway/v1/keys")).json()["items"]
    scopes = {item["name"]: item["scope"] for item in listed}
    assert scopes == {"test": "admin", "the agent": "agent", "front end": "responder"}
    assert agent not in str(listed) and responder not in str(listed)


async def test_a_key_binds_only_a_configured_person_and_only_if_it_may_respond(
    gateway: RunningGateway,
) -> None:
    with pytest.raises(InvalidInput, match="unknown person 'mallory'"):
        await bootstrap.create_key(
            gateway.core, scope=KeyScope.RESPONDER, person="mallory", name="x"
        )
    with pytest.raises(InvalidInput, match="--scope responder"):
        await bootstrap.create_key(gateway.core, scope=KeyScope.AGENT, person="mallory")
