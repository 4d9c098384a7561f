"""The access log of a full console run contains no token.

Every console flow whose URL carries a secret is walked with real HTTP (httpx) and in headless
Chromium: sign-in links (`/console/link/<token>`, GET and POST), request links
(`/r/<rid>?t=…`, GET, the decision POST and the redirect after it), and Slack's OAuth
redirect (`?code=…&state=…`). uvicorn's access lines are captured as `gateway serve` writes
them; each path must be there, each token must not.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from channels.web.auth import COOKIE, create_sign_in_link
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

ALICE = "alice@example.org"
# Emailed links are made for the recipients of an email target: a request to Alice.
TO_ALICE = {"email": {"address": ALICE}}
CSRF = 'name="csrf" value="'


@dataclass
class Logged:
    gateway: RunningGateway
    lines: list[str] = field(default_factory=list)


@pytest.fixture
async def logged(tmp_path: Path) -> AsyncIterator[Logged]:
    lines: list[str] = []
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db")
    async with running_gateway(settings, access_log=lines) as gateway:
        # The port is chosen at start: links and the console's origin are this server's.
        gateway.core.settings = settings.model_copy(update={"public_url": gateway.base_url})
        yield Logged(gateway, lines)


def token_in(link: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["t"][0]


def csrf_of(html: str) -> str:
    start = html.index(CSRF) + len(CSRF)
    return html[start : html.index('"', start)]


async def sign_in_link_by_http(gateway: RunningGateway) -> str:
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    headers = {"Origin": gateway.base_url}
    async with httpx.AsyncClient(headers=headers, follow_redirects=True) as browser:
        assert (await browser.get(link)).status_code == 200
        signed_in = await browser.post(link)  # 303, then GET /console
        assert signed_in.status_code == 200 and browser.cookies.get(COOKIE)
    return link.rsplit("/", 1)[1]


async def sign_in_link_in_chromium(gateway: RunningGateway, page: Page) -> str:
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    await page.goto(link)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Waiting for a person")).to_be_visible()
    return link.rsplit("/", 1)[1]


async def request_link_by_http(gateway: RunningGateway, rid: str) -> str:
    link = gateway.core.link(rid, ALICE)
    assert link is not None
    token = token_in(link)
    headers = {"Origin": gateway.base_url}
    async with httpx.AsyncClient(headers=headers, follow_redirects=True) as holder:
        shown = await holder.get(link)
        assert shown.status_code == 200
        data = {"t": token, "csrf": csrf_of(shown.text), "action": "reject", "reason": "no"}
        decided = await holder.post(f"{gateway.base_url}/r/{rid}", data=data)
        assert decided.status_code == 200 and "Recorded: rejected" in decided.text
        assert decided.history[0].status_code == 303  # the redirect back to the link's page
    return token


async def request_link_in_chromium(gateway: RunningGateway, page: Page, rid: str) -> str:
    link = gateway.core.link(rid, ALICE)
    assert link is not None
    await page.goto(link)
    await page.get_by_role("button", name="Approve").click()
    await expect(page.locator(".notice")).to_have_text(f"Recorded: approved by {ALICE}.")
    return token_in(link)


async def test_the_access_log_of_a_console_run_contains_no_token(
    logged: Logged, page: Page, request_factory: RequestFactory
) -> None:
    gateway = logged.gateway
    by_http = (await request_factory(gateway, "by-http", channel=TO_ALICE)).rid
    in_chromium = (await request_factory(gateway, "in-chromium", channel=TO_ALICE)).rid

    tokens = [
        await sign_in_link_by_http(gateway),
        await request_link_by_http(gateway, by_http),
        await request_link_in_chromium(gateway, page, in_chromium),  # before signing in there
        await sign_in_link_in_chromium(gateway, page),
    ]
    oauth = {"code": "slack-oauth-code-5c1e", "state": "slack-oauth-state-9d2a"}
    async with httpx.AsyncClient(base_url=gateway.base_url) as slack_redirect:
        await slack_redirect.get("/slack/oauth_redirect", params=oauth)  # 404 here, logged
    tokens += oauth.values()

    lines = logged.lines
    leaks = [(token, line) for token in tokens for line in lines if token in line]
    assert not leaks, leaks
    # The flows were logged (so the test fails if access logging is off), tokens redacted.
    for wanted, count in (
        ('"GET /console/link/[redacted] HTTP/1.1" 200', 2),
        ('"POST /console/link/[redacted] HTTP/1.1" 303', 2),
        (f'"GET /r/{by_http}?t=[redacted] HTTP/1.1" 200', 1),
        (f'"POST /r/{by_http} HTTP/1.1" 303', 1),
        (f'"GET /r/{by_http}?t=[redacted]&n=', 1),  # the redirect after the decision
        (f'"GET /r/{in_chromium}?t=[redacted] HTTP/1.1" 200', 1),
        (f'"POST /r/{in_chromium} HTTP/1.1" 303', 1),
        (f'"GET /r/{in_chromium}?t=[redacted]&n=', 1),
        ('"GET /slack/oauth_redirect?code=[redacted]&state=[redacted] HTTP/1.1" 404', 1),
    ):
        found = [line for line in lines if wanted in line]
        assert len(found) == count, (wanted, lines)
