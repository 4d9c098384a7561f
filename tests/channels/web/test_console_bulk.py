"""The queue answered in bulk: each selected request (or every pending one matching the
filter, beyond the page) goes through the one answer path, once, by the signed-in person
with their own rules: a quorum request records one vote and stays pending. Every decided
request sends exactly one webhook and has exactly one `decided` event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from channels.web.auth import hash_password
from tests.channels.web.helpers import (
    csrf,
    people,
    record,
    sign_in_page,
    signed_in,
    signed_in_operator,
    trail,
)
from tests.factories import RequestFactory
from tests.helpers import add_webhook, eventually, outbox_idle
from tests.services.inprocess import RunningGateway, write_config
from tests.services.receiver import WebhookReceiver

QUORUM = """
[teams.pair]
members = ["alice", "bob"]
email = "pair@example.org"
approvals_required = 2

[[rules]]
fn = "drop_*"
target = "team:pair"
"""
PLAIN = 19


@pytest.fixture(scope="module")
def routing_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Alice and Bob must both approve a `drop_*`; Carol sees only `default`."""
    hashed = hash_password("correct horse battery staple")
    text = people(hashed, "alice", "bob", "carol", carol="default")
    text += QUORUM
    return write_config(tmp_path_factory.mktemp("bulk") / "routing.toml", text)


async def test_select_all_and_approve_in_chromium(
    sqlite_console: RunningGateway,
    page: Page,
    request_factory: RequestFactory,
    receiver: WebhookReceiver,
) -> None:
    gateway = sqlite_console
    await add_webhook(gateway, receiver.url)
    plain = [f"read-{n}" for n in range(PLAIN)]
    for call_id in plain:
        await request_factory(gateway, call_id, fn="read_file", kwargs={"path": f"/{call_id}"})
    await request_factory(gateway, "quorum", fn="drop_table")

    await sign_in_page(page, gateway, "alice")
    await expect(page.locator("tr[data-call-id]")).to_have_count(PLAIN + 1)
    await page.get_by_label("Select all pending requests matching this filter").check()
    await expect(page.locator("#live input[name=rid]:checked")).to_have_count(PLAIN + 1)
    await page.get_by_role("button", name="Approve selected").click()

    await expect(page.locator("[data-summary]")).to_have_text("Decided 19, voted on 1, refused 0.")
    await expect(page.locator("[data-voted] li")).to_have_text(["quorum"])

    hooks = await receiver.wait_for(PLAIN)
    await eventually(lambda: outbox_idle(gateway))
    assert len(receiver.received) == PLAIN, "one webhook per decided request, no more"
    delivered = [json.loads(hook.body) for hook in hooks]
    assert {d["type"] for d in delivered} == {"function_call.completed"}
    assert sorted(d["event"]["call_id"] for d in delivered) == sorted(plain)
    for call_id in plain:
        assert (await record(gateway, call_id))["status"]["approved"] is True
        events = await trail(gateway, call_id)
        assert (events.count("decided"), events.count("voted")) == (1, 0), call_id
    still = await record(gateway, "quorum")
    assert still["gateway_status"] == "pending"
    assert still["policy_progress"]["approvals"] == 1
    events = await trail(gateway, "quorum")
    assert (events.count("decided"), events.count("voted")) == (0, 1)


async def test_select_all_matching_decides_beyond_the_page_and_only_what_matches(
    sqlite_gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    """The queue lists 200 requests; "all matching" answers each of the 201 that match."""
    gateway = sqlite_gateway
    for n in range(201):
        await request_factory(gateway, f"many-{n}", fn="read_file", kwargs={"n": n})
    await request_factory(gateway, "other-fn", fn="send_email")
    async with signed_in_operator(gateway) as operator:
        listed = await operator.get("/console", params={"fn": "read_file"})
        assert listed.text.count("<tr data-call-id=") == 200
        assert '<input type="hidden" name="fn" value="read_file">' in listed.text
        token = await csrf(operator)
        data = {"csrf": token, "all": "1", "fn": "read_file", "action": "reject", "reason": "no"}
        answer = await operator.post("/console/bulk", data=data)
    assert answer.status_code == 200, answer.text
    assert "Decided 201, voted on 0, refused 0." in answer.text
    assert (await record(gateway, "many-0"))["status"]["comment"] == "no"
    assert (await record(gateway, "other-fn"))["gateway_status"] == "pending"


async def test_checked_requests_only_and_the_refusals_say_why(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    elsewhere = await gateway.new_key("other", name="agent")
    foreign = await request_factory(gateway, "foreign", key=elsewhere, fn="read_file")
    first = await request_factory(gateway, "one", fn="read_file")
    untouched = await request_factory(gateway, "two", fn="read_file")
    question = await request_factory(gateway, "ask", contact=True)

    async with signed_in(gateway, "carol") as carol:  # she sees `default` only
        token = await csrf(carol)
        rids = [first.rid, question.rid, foreign.rid, first.rid]
        data = {"csrf": token, "action": "approve", "rid": rids}
        answer = await carol.post("/console/bulk", data=data)
    assert answer.status_code == 200, answer.text
    assert "Decided 1, voted on 0, refused 2." in answer.text
    assert "a human contact cannot be answered with approve" in answer.text
    assert f'<code>{foreign.rid}</code>: <span class="why">there is no such request here' in (
        answer.text
    )
    assert (await record(gateway, "one"))["status"]["approved"] is True
    assert (await record(gateway, "two"))["gateway_status"] == "pending"
    assert untouched.call_id not in answer.text
    assert (await record(gateway, "foreign", key=elsewhere))["gateway_status"] == "pending"


@pytest.mark.parametrize(
    ("data", "status", "said"),
    [
        ({"action": "reject", "all": "1"}, 422, "Give one reason to reject them"),
        ({"action": "approve"}, 422, "Select requests first"),
        ({"action": "delete", "all": "1"}, 422, "Choose Approve or Reject"),
        ({"action": "approve", "all": "1", "csrf": "forged"}, 403, "CSRF"),
    ],
)
async def test_a_bulk_answer_that_cannot_be_made_changes_nothing(
    gateway: RunningGateway,
    request_factory: RequestFactory,
    data: dict[str, str],
    status: int,
    said: str,
) -> None:
    await request_factory(gateway, "kept", fn="read_file")
    async with signed_in(gateway, "alice") as alice:
        answer = await alice.post("/console/bulk", data={"csrf": await csrf(alice)} | data)
    assert answer.status_code == status, answer.text
    assert said in answer.text
    assert (await record(gateway, "kept"))["gateway_status"] == "pending"
