""" "Edit and approve" in the web console: one field per argument, prefilled; the approval
carries the edited arguments to the agent's long-poll and the webhook, and the page shows
what changed. What does not read as its type shows on the form again, with the person's
text kept, and decides nothing. The arguments come from the request, never from the form."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from channels.web.auth import hash_password
from tests.channels.web.helpers import csrf, people, record, sign_in_page, signed_in, trail
from tests.factories import Created, RequestFactory
from tests.helpers import add_webhook
from tests.services.inprocess import RunningGateway, write_config
from tests.services.receiver import WebhookReceiver

KWARGS = {"path": "/etc/passwd", "lines": 10, "follow": False, "opts": {"mode": "r"}}
NOT_EDITABLE = """
[[rules]]
fn = "rm_*"
target = "person:alice"
editable = false
"""


@pytest.fixture(scope="module")
def routing_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = people(hash_password("correct horse battery staple"), "alice") + NOT_EDITABLE
    return write_config(tmp_path_factory.mktemp("edit") / "routing.toml", text)


async def read_file(factory: RequestFactory, gateway: RunningGateway, call_id: str) -> Created:
    return await factory(gateway, call_id, fn="read_file", kwargs=KWARGS)


async def long_poll(gateway: RunningGateway, call_id: str) -> dict[str, Any]:
    """What the agent's long-poll gets back once the request is decided."""
    async with gateway.client() as client:
        got = await client.get(f"/function_calls/{call_id}", params={"wait": 30})
    assert got.status_code == 200, got.text
    status: dict[str, Any] = got.json()["status"]
    return status


async def test_edit_and_approve_in_chromium_reaches_the_agent_and_the_webhook(
    sqlite_console: RunningGateway,
    page: Page,
    request_factory: RequestFactory,
    receiver: WebhookReceiver,
) -> None:
    gateway = sqlite_console
    await add_webhook(gateway, receiver.url)
    made = await read_file(request_factory, gateway, "e1")
    waiting = asyncio.create_task(long_poll(gateway, "e1"))
    await sign_in_page(page, gateway, "alice")
    await page.goto(f"{gateway.base_url}/console/requests/{made.rid}")

    await page.get_by_text("Edit and approve", exact=True).first.click()  # the summary
    fields = page.locator("form.edit [name^='kw.']")
    assert await fields.evaluate_all("fs => fs.map(f => [f.name, f.value])") == [
        ["kw.path", "/etc/passwd"],
        ["kw.lines", "10"],
        ["kw.follow", "false"],
        ["kw.opts", '{\n  "mode": "r"\n}'],
    ]
    await page.locator("[name='kw.path']").fill("/tmp/safe")
    await page.get_by_role("button", name="Edit and approve", exact=True).click()
    await expect(page.locator(".notice")).to_have_text(
        "Recorded: approved by Alice, with your edited arguments."
    )

    edited = KWARGS | {"path": "/tmp/safe"}
    status = await asyncio.wait_for(waiting, 30)
    assert status["approved"] is True and status["updated_kwargs"] == edited
    [hook] = await receiver.wait_for(1)
    event = json.loads(hook.body)
    assert event["type"] == "function_call.completed"
    assert event["event"]["status"]["updated_kwargs"] == edited
    assert event["event"]["spec"]["kwargs"] == KWARGS  # the agent's own, kept

    await expect(page.locator("[data-outcome]")).to_contain_text("with edited arguments (path)")
    changed = page.locator("[data-edits] tr[data-changed]")
    await expect(changed).to_have_count(1)
    await expect(changed.locator("td")).to_have_text(["path", '"/etc/passwd"', '"/tmp/safe"'])
    await expect(page.locator('[data-edits] tr[data-arg="lines"] td')).to_have_text(
        ["lines", "10", "10"]
    )
    await expect(page.locator("[data-actions]")).to_have_count(0)


async def test_invalid_json_shows_on_the_form_and_decides_nothing(
    sqlite_console: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    gateway = sqlite_console
    made = await read_file(request_factory, gateway, "bad-1")
    await sign_in_page(page, gateway, "alice")
    await page.goto(f"{gateway.base_url}/console/requests/{made.rid}")
    await page.get_by_text("Edit and approve", exact=True).first.click()
    await page.locator("[name='kw.path']").fill("/tmp/typed")
    await page.locator("[name='kw.opts']").fill('{"mode": ')

    async with page.expect_response(lambda r: r.request.method == "POST") as posted:
        await page.get_by_role("button", name="Edit and approve", exact=True).click()

    assert (await posted.value).status == 422
    problem = page.locator('[data-field-error="opts"]')
    await expect(problem).to_contain_text("not valid JSON")
    await expect(page.locator("[name='kw.opts']")).to_have_value('{"mode": ')  # kept
    await expect(page.locator("[name='kw.path']")).to_have_value("/tmp/typed")
    assert (await record(gateway, "bad-1"))["gateway_status"] == "pending"
    assert "decided" not in await trail(gateway, "bad-1")


@pytest.mark.parametrize(
    ("field", "typed", "message"),
    [("follow", "yes", "type true or false"), ("lines", "ten", "type a number (int)")],
)
async def test_a_field_that_does_not_read_as_its_type_is_named(
    gateway: RunningGateway, request_factory: RequestFactory, field: str, typed: str, message: str
) -> None:
    made = await read_file(request_factory, gateway, "typed-1")
    async with signed_in(gateway, "alice") as alice:
        path = f"/console/requests/{made.rid}"
        data = {"csrf": await csrf(alice, path), "action": "edit", f"kw.{field}": typed}
        answer = await alice.post(path, data=data)
    assert answer.status_code == 422, answer.text
    assert f'data-field-error="{field}">{message}</p>' in answer.text
    assert (await record(gateway, "typed-1"))["gateway_status"] == "pending"


async def test_the_arguments_come_from_the_request_not_the_form(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await read_file(request_factory, gateway, "forged-1")
    async with signed_in(gateway, "alice") as alice:
        path = f"/console/requests/{made.rid}"
        data = {
            "csrf": await csrf(alice, path),
            "action": "edit",
            "kw.lines": "3",
            "kw.sudo": "true",  # an argument the agent never asked for
            "kwargs": json.dumps({"path": "/", "sudo": True}),
        }
        answer = await alice.post(path, data=data)
    assert answer.status_code == 303, answer.text
    status = (await record(gateway, "forged-1"))["status"]
    assert status["updated_kwargs"] == KWARGS | {"lines": 3}


async def test_no_edit_where_the_rule_says_so_and_a_crafted_one_is_refused(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(gateway, "rm-1", fn="rm_tree", kwargs={"path": "/srv"})
    async with signed_in(gateway, "alice") as alice:
        path = f"/console/requests/{made.rid}"
        shown = await alice.get(path)
        assert "Edit and approve" not in shown.text and "Approve and allow" in shown.text
        data = {"csrf": await csrf(alice, path), "action": "edit", "kw.path": "/tmp"}
        answer = await alice.post(path, data=data)
    assert answer.status_code == 403, answer.text
    assert "Nothing changed: editing the arguments is not offered on this request" in answer.text
    assert (await record(gateway, "rm-1"))["gateway_status"] == "pending"
    assert "decided" not in await trail(gateway, "rm-1")
