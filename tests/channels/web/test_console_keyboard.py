"""Keyboard shortcuts in Chromium: `?` shows and hides the list of them; on a request's page
`a` approves and `r` puts the cursor in the reason; on the queue `j`/`k` move the selection
and `a` approves the selected request through the bulk answer. Nothing fires while typing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from channels.web.auth import hash_password
from tests.channels.web.helpers import people, record, sign_in_page
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    text = people(hash_password("correct horse battery staple"), "alice")
    config = write_config(tmp_path / "routing.toml", text)
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db", config=config)
    async with running_gateway(settings) as running:
        yield running


async def test_question_mark_toggles_the_list_of_shortcuts(
    gateway: RunningGateway, page: Page
) -> None:
    await sign_in_page(page, gateway, "alice")
    overlay = page.get_by_role("dialog", name="Keyboard shortcuts")
    await expect(overlay).to_be_hidden()
    await page.keyboard.press("?")
    await expect(overlay).to_be_visible()
    await expect(overlay).to_contain_text("Approve this request, or the selected ones")
    await page.keyboard.press("?")
    await expect(overlay).to_be_hidden()
    await page.keyboard.press("?")
    await page.keyboard.press("Escape")
    await expect(overlay).to_be_hidden()


async def test_a_approves_on_a_request_page_but_not_while_typing(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    made = await request_factory(gateway, "key-1", fn="read_file")
    await sign_in_page(page, gateway, "alice")
    await page.goto(f"{gateway.base_url}/console/requests/{made.rid}")

    await page.keyboard.press("r")
    reason = page.get_by_label("Reason")
    await expect(reason).to_be_focused()
    await page.keyboard.type("a reason")  # its "a" types, and approves nothing
    await expect(reason).to_have_value("a reason")
    assert (await record(gateway, "key-1"))["gateway_status"] == "pending"

    await reason.blur()
    await page.keyboard.press("a")
    await expect(page.locator(".notice")).to_have_text("Recorded: approved by Alice.")
    assert (await record(gateway, "key-1"))["status"]["approved"] is True


async def test_j_k_and_a_on_the_queue(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    for call_id in ("q-1", "q-2", "q-3"):  # newest first: q-3, q-2, q-1
        await request_factory(gateway, call_id, fn="read_file")
    await sign_in_page(page, gateway, "alice")
    rows = page.locator("tr[data-call-id]")
    await expect(rows).to_have_count(3)

    for key in ("j", "j", "j", "k"):  # the last row stops a j
        await page.keyboard.press(key)
    selected = page.locator("tr.selected")
    await expect(selected).to_have_attribute("data-call-id", "q-2")
    await page.keyboard.press("a")

    await expect(page.locator("[data-summary]")).to_have_text("Decided 1, voted on 0, refused 0.")
    assert (await record(gateway, "q-2"))["status"]["approved"] is True
    for untouched in ("q-1", "q-3"):
        assert (await record(gateway, untouched))["gateway_status"] == "pending"


async def test_j_on_a_request_page_opens_the_next_in_the_queue(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    older = await request_factory(gateway, "n-1", fn="read_file")
    newer = await request_factory(gateway, "n-2", fn="read_file")
    await sign_in_page(page, gateway, "alice")
    await page.goto(f"{gateway.base_url}/console/requests/{newer.rid}")
    await page.keyboard.press("j")
    await expect(page).to_have_url(f"{gateway.base_url}/console/requests/{older.rid}")
    await page.keyboard.press("k")
    await expect(page).to_have_url(f"{gateway.base_url}/console/requests/{newer.rid}")
