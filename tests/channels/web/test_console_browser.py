"""The web console in a real browser: headless Chromium, driven by Playwright, against a real
gateway (uvicorn on 127.0.0.1, SQLite in tmp_path).

Requests are created and decided through the HumanLayer API, as an agent would; people sign
in through one-time links (or a password) and click. Waits are Playwright's own (`expect`,
`expect_response`): nothing sleeps.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, Response, Route, expect

from channels.web.auth import create_sign_in_link, hash_password
from tests.channels.web.browser import screenshot
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config

ALICE = "alice@example.org"
# Emailed links are made for the recipients of an email target: a request to Alice.
TO_ALICE = {"email": {"address": ALICE}}
ALICE_PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def alice_hash() -> str:
    return hash_password(ALICE_PASSWORD)  # argon2: once per module, not per test


@pytest.fixture
async def gateway(tmp_path: Path, alice_hash: str) -> AsyncIterator[RunningGateway]:
    """A gateway whose routing config has one console user with a password, Alice.

    Its public URL is its own `base_url`, as in a deployment: the console refuses POSTs whose
    Origin is not the public URL's. The port is chosen at start, so it is set just after.
    """
    config = write_config(
        tmp_path / "routing.toml",
        f'[people.alice]\nname = "Alice"\nemail = "{ALICE}"\n'
        f'password_hash = "{alice_hash}"\nprojects = ["*"]\n',
    )
    settings = test_settings(
        f"sqlite+aiosqlite:///{tmp_path}/gw.db", public_url="http://127.0.0.1", config=config
    )
    async with running_gateway(settings) as running:
        running.core.settings = settings.model_copy(update={"public_url": running.base_url})
        yield running


# --- helpers


def events_response(response: Response) -> bool:
    return urllib.parse.urlsplit(response.url).path == "/console/events"


async def sign_in(page: Page, gateway: RunningGateway) -> None:
    """Spend a fresh operator sign-in link in `page`; ends on the queue."""
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    await page.goto(link)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Waiting for a person")).to_be_visible()


async def sign_in_with_password(page: Page, gateway: RunningGateway) -> None:
    await page.goto(f"{gateway.base_url}/console/login")
    await page.get_by_label("Email").fill(ALICE)
    await page.get_by_label("Password").fill(ALICE_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Waiting for a person")).to_be_visible()


async def open_live(page: Page, url: str) -> None:
    """Open a console page and return once its event stream is connected (response headers
    received), so a change made afterwards is pushed to it."""
    async with page.expect_response(events_response) as stream:
        await page.goto(url)
    assert (await stream.value).status == 200


async def call_status(gateway: RunningGateway, call_id: str) -> dict[str, Any]:
    async with gateway.client() as client:
        got = await client.get(f"/function_calls/{call_id}")
    assert got.status_code == 200, got.text
    status: dict[str, Any] = got.json()["status"]
    return status


async def approve_by_api(gateway: RunningGateway, call_id: str) -> None:
    async with gateway.client() as client:
        done = await client.post(
            f"/agent/function_calls/{call_id}/respond", json={"approved": True}
        )
    assert done.status_code == 200, done.text


def request_url(gateway: RunningGateway, rid: str) -> str:
    return f"{gateway.base_url}/console/requests/{rid}"


def emailed_link(gateway: RunningGateway, rid: str, email: str) -> str:
    """The `/r/<rid>?t=...` link an email to `email` carries, on this gateway's real port."""
    link = gateway.core.link(rid, email)
    assert link is not None
    parts = urllib.parse.urlsplit(link)
    return f"{gateway.base_url}{parts.path}?{parts.query}"


# --- the tests


async def test_a_sign_in_link_works_once(gateway: RunningGateway, page: Page) -> None:
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)

    await page.goto(link)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Waiting for a person")).to_be_visible()
    assert urllib.parse.urlsplit(page.url).path == "/console"

    await page.goto(link)
    async with page.expect_response(lambda r: r.request.method == "POST") as spent:
        await page.get_by_role("button", name="Sign in").click()
    assert (await spent.value).status == 403
    await expect(page.get_by_role("heading", name="Sign-in link refused")).to_be_visible()
    await expect(page.locator(".why")).to_contain_text("used already")


async def test_a_new_request_appears_on_the_open_queue(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    await sign_in(page, gateway)
    await open_live(page, f"{gateway.base_url}/console")
    await expect(page.get_by_text("Nothing here.")).to_be_visible()
    await page.evaluate("window.__marker = 1")

    await request_factory(gateway, "live-1", fn="delete_branch")

    row = page.locator('tr[data-call-id="live-1"]')
    await expect(row).to_be_visible()
    await expect(row).to_contain_text("delete_branch")
    await expect(row.locator(".status")).to_have_text("pending")
    assert await page.evaluate("window.__marker") == 1, "the page reloaded"


async def test_a_request_created_while_the_stream_connects_appears(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    await sign_in(page, gateway)

    async def create_before_connecting(route: Route) -> None:
        await request_factory(gateway, "gap-1")  # after the page's HTML, before the stream
        await route.continue_()

    await page.route("**/console/events", create_before_connecting)
    await open_live(page, f"{gateway.base_url}/console")

    await expect(page.locator('tr[data-call-id="gap-1"]')).to_be_visible(timeout=2000)


async def test_reject_with_a_reason(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "rej-1")).rid
    await sign_in(page, gateway)
    await page.goto(request_url(gateway, rid))

    await page.get_by_label("Reason").fill("not on a Friday")
    await page.get_by_role("button", name="Reject").click()

    await expect(page.locator(".notice")).to_contain_text("Recorded: rejected")
    await expect(page.locator("#live [data-status]")).to_have_attribute("data-status", "rejected")
    await expect(page.locator("[data-actions]")).to_have_count(0)
    status = await call_status(gateway, "rej-1")
    assert status["approved"] is False
    assert status["comment"] == "not on a Friday"
    assert status["user_info"]["channel"] == "web"


async def test_a_decision_through_the_api_appears_on_the_open_page(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "api-1")).rid
    await sign_in(page, gateway)
    await open_live(page, request_url(gateway, rid))
    actions = page.locator("[data-actions]")
    await expect(actions).to_be_visible()
    await expect(page.locator("#live .status").first).to_have_text("pending")
    await page.evaluate("window.__marker = 1")

    await approve_by_api(gateway, "api-1")

    await expect(page.locator("#live [data-status] .status")).to_have_text("approved")
    await expect(actions).to_be_hidden()
    assert await page.evaluate("window.__marker") == 1, "the page reloaded"


async def test_an_email_links_get_does_not_decide(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "mail-1", channel=TO_ALICE)).rid
    link = emailed_link(gateway, rid, ALICE)

    for _ in range(3):  # a mail scanner, a preview, the person: none of these GETs decides
        response = await page.goto(link)
        assert response is not None and response.status == 200
        await expect(page.get_by_role("button", name="Approve")).to_be_visible()
    await expect(page.get_by_text(f"Answering as {ALICE}.")).to_be_visible()
    assert (await call_status(gateway, "mail-1"))["approved"] is None

    await page.get_by_role("button", name="Approve").click()

    await expect(page.locator(".notice")).to_contain_text("Recorded: approved")
    status = await call_status(gateway, "mail-1")
    assert status["approved"] is True
    assert status["user_info"]["email"] == ALICE
    assert status["user_info"]["channel"] == "web"


async def test_a_post_without_the_csrf_token_is_refused(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "csrf-1")).rid
    await sign_in(page, gateway)
    await page.goto(request_url(gateway, rid))
    reject = page.locator("form.reject")
    await reject.get_by_label("Reason").fill("no token")
    await page.evaluate("document.querySelector('form.reject input[name=csrf]').remove()")
    assert await reject.locator("input[name=csrf]").count() == 0

    async with page.expect_response(lambda r: r.request.method == "POST") as posted:
        await reject.get_by_role("button", name="Reject").click()

    assert (await posted.value).status == 403
    await expect(page.get_by_role("heading", name="Refused")).to_be_visible()
    await expect(page.locator(".why")).to_contain_text("CSRF")
    assert (await call_status(gateway, "csrf-1"))["approved"] is None


async def test_a_late_click_is_told_who_decided(
    gateway: RunningGateway, browser: Browser, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "race-1")).rid
    contexts: list[BrowserContext] = []
    try:
        for _ in range(2):
            contexts.append(await browser.new_context(viewport={"width": 1280, "height": 900}))
        first, second = [await context.new_page() for context in contexts]
        await sign_in_with_password(first, gateway)
        await sign_in(second, gateway)

        async def no_live_updates(route: Route) -> None:
            await route.abort()

        # The second person's page never hears of the first's decision: its buttons stay.
        await second.route("**/console/events", no_live_updates)
        await first.goto(request_url(gateway, rid))
        await second.goto(request_url(gateway, rid))
        await expect(second.get_by_role("button", name="Approve")).to_be_visible()

        await first.get_by_role("button", name="Approve").click()
        await expect(first.locator(".notice")).to_contain_text("Recorded: approved by Alice")

        await expect(second.get_by_role("button", name="Approve")).to_be_visible()
        async with second.expect_response(lambda r: r.request.method == "POST") as posted:
            await second.get_by_role("button", name="Approve").click()
        assert (await posted.value).status == 409
        await expect(second.get_by_role("heading", name="Nothing changed")).to_be_visible()
        await expect(second.locator(".why")).to_contain_text("already approved by Alice")
    finally:
        for context in contexts:
            await context.close()
    status = await call_status(gateway, "race-1")
    assert status["approved"] is True and status["user_info"]["email"] == ALICE


async def test_screenshots_of_a_varied_queue(
    gateway: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    deploy = await request_factory(
        gateway,
        "deploy-7f3a",
        fn="deploy_service",
        run_id="release-2024-06",
        kwargs={
            "service": "billing-api",
            "env": "production",
            "image": {"repo": "registry.example.org/billing-api", "tag": "v2.31.0-rc.4"},
            "replicas": 6,
            "canary": {"percent": 10, "metrics": ["error_rate", "p99_latency"]},
            "notes": "Roll out the new invoice rounding; rollback plan in RUNBOOK-112.",
        },
    )
    question = await request_factory(
        gateway,
        "ask-db1",
        contact=True,
        msg="The nightly export found 1,204 customers without a country code.\n"
        "Should I default them to the billing address country, or skip them?",
        subject="Missing country codes",
    )
    refund = await request_factory(
        gateway,
        "refund-9",
        fn="issue_refund",
        run_id="support-4411",
        kwargs={"order": "A-10023", "amount": "129.00", "currency": "EUR"},
        reject_options=[
            {"name": "too_high", "title": "Amount too high", "prompt_fill": "lower it"},
            {"name": "ask_customer", "title": "Ask the customer first"},
        ],
    )
    decided = await request_factory(gateway, "cleanup-2", fn="delete_old_snapshots")
    await approve_by_api(gateway, "cleanup-2")

    await sign_in(page, gateway)
    await expect(page.locator("tr[data-call-id]")).to_have_count(3)
    args = page.locator('tr[data-call-id="deploy-7f3a"] .args')
    await expect(args).to_contain_text("service=billing-api, env=production, image={")
    paths = [await screenshot(page, "queue")]

    await page.goto(request_url(gateway, deploy.rid))
    await expect(page.get_by_role("button", name="Approve")).to_be_visible()
    paths.append(await screenshot(page, "request"))

    await page.goto(request_url(gateway, refund.rid))
    await expect(page.get_by_role("button", name="Amount too high")).to_be_visible()
    await expect(page.get_by_text("Or reject with one of these:")).to_be_visible()
    paths.append(await screenshot(page, "request-options"))

    await page.goto(request_url(gateway, question.rid))
    await expect(page.get_by_role("button", name="Send answer")).to_be_visible()
    paths.append(await screenshot(page, "request-question"))

    await page.goto(request_url(gateway, decided.rid))
    await expect(page.locator("#live [data-status]")).to_have_attribute("data-status", "approved")
    paths.append(await screenshot(page, "request-decided"))

    for path in paths:
        assert path.is_file() and path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
