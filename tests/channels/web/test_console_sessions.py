"""Console sessions end server-side, forms must come from the console's own site, notices come
from the server, and a GATEWAY_SECRET_KEY rotation ends sessions but keeps webhook secrets.

Real HTTP against an in-process gateway, on SQLite and PostgreSQL; one test clicks the "Sign out
everywhere" button in headless Chromium.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, expect
from standardwebhooks.webhooks import Webhook

from channels.web.auth import COOKIE, create_sign_in_link, hash_password
from tests.factories import RequestFactory
from tests.helpers import add_webhook
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config
from tests.services.receiver import WebhookReceiver

ALICE = "alice@example.org"
# Emailed links are made for the recipients of an email target: a request to Alice.
TO_ALICE = {"email": {"address": ALICE}}
PASSWORD = "correct horse battery staple"
EVIL = "https://evil.example"
FAKE_NOTICE = "Recorded: approved by Security Team"
CSRF = re.compile(r'name="csrf" value="([^"]*)"')


@pytest.fixture(scope="module")
def routing_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Alice signs in with a password and sees every project (argon2: once per module)."""
    folder = tmp_path_factory.mktemp("sessions")
    return write_config(
        folder / "routing.toml",
        f'[people.alice]\nname = "Alice"\nemail = "{ALICE}"\n'
        f"password_hash = '{hash_password(PASSWORD)}'\nprojects = [\"*\"]\n",
    )


@pytest.fixture
async def gateway(db_url: str, routing_config: Path) -> AsyncIterator[RunningGateway]:
    """No public URL: the console's origin is the server's own scheme and host."""
    async with running_gateway(test_settings(db_url, config=routing_config)) as running:
        yield running


def client(gateway: RunningGateway, origin: str | None = None) -> httpx.AsyncClient:
    """A browser on the console's site (its Origin on every request); redirects not followed."""
    headers = {"Origin": origin or gateway.base_url}
    return httpx.AsyncClient(base_url=gateway.base_url, headers=headers, timeout=30)


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found and found.group(1), "no csrf field on the page"
    return found.group(1)


async def sign_in_alice(browser: httpx.AsyncClient) -> None:
    response = await browser.post("/console/login", data={"email": ALICE, "password": PASSWORD})
    assert response.status_code == 303, response.text
    assert browser.cookies.get(COOKIE)


async def sign_in_operator(browser: httpx.AsyncClient, gateway: RunningGateway) -> None:
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    response = await browser.post(urllib.parse.urlsplit(link).path)
    assert response.status_code == 303, response.text


async def signed_in(browser: httpx.AsyncClient) -> bool:
    """GET /console: 200 signed in, or the redirect to sign-in (anything else fails)."""
    response = await browser.get("/console")
    if response.status_code == 303:
        assert response.headers["location"].startswith("/console/login"), response.headers
        return False
    assert response.status_code == 200, response.text
    return True


async def gateway_status(gateway: RunningGateway, call_id: str) -> str:
    async with gateway.client() as api:
        got = await api.get(f"/function_calls/{call_id}")
    assert got.status_code == 200, got.text
    status: str = got.json()["gateway_status"]
    return status


# --- sign-out ends the session server-side


async def test_a_signed_out_cookie_is_refused(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "after-logout")).rid
    async with client(gateway) as alice, client(gateway) as thief:
        await sign_in_alice(alice)
        page = await alice.get(f"/console/requests/{rid}")
        csrf = csrf_of(page.text)
        thief.cookies.set(COOKIE, alice.cookies[COOKIE])  # a copy of the cookie, stolen
        assert await signed_in(thief)

        out = await alice.post("/console/logout", data={"csrf": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"

        # The copy ends with the session: pages, the event stream and decisions.
        assert not await signed_in(thief)
        assert (await thief.get("/console/events")).status_code == 401
        decided = await thief.post(
            f"/console/requests/{rid}", data={"action": "approve", "csrf": csrf}
        )
        assert decided.status_code == 401, decided.text
    assert await gateway_status(gateway, "after-logout") == "pending"


async def test_sign_out_everywhere_ends_that_persons_sessions_only(
    gateway: RunningGateway,
) -> None:
    async with (
        client(gateway) as laptop,
        client(gateway) as phone,
        client(gateway) as operator,
        client(gateway) as operator_elsewhere,
    ):
        await sign_in_alice(laptop)
        await sign_in_alice(phone)
        await sign_in_operator(operator, gateway)
        await sign_in_operator(operator_elsewhere, gateway)

        queue = await laptop.get("/console")
        assert 'action="/console/logout/everywhere"' in queue.text  # the button is there
        refused = await laptop.post("/console/logout/everywhere", data={"csrf": "guess"})
        assert refused.status_code == 403 and "CSRF" in refused.text
        assert await signed_in(phone)

        out = await laptop.post("/console/logout/everywhere", data={"csrf": csrf_of(queue.text)})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        assert not await signed_in(phone)
        assert not await signed_in(laptop)
        assert await signed_in(operator) and await signed_in(operator_elsewhere)

        # The operator's "everywhere" is every operator session, and no one else's.
        async with client(gateway) as alice_again:
            await sign_in_alice(alice_again)
            csrf = csrf_of((await operator.get("/console")).text)
            ended = await operator.post("/console/logout/everywhere", data={"csrf": csrf})
            assert ended.status_code == 303
            assert not await signed_in(operator_elsewhere)
            assert not await signed_in(operator)
            assert await signed_in(alice_again)


async def test_the_sign_out_everywhere_button(
    tmp_path: Path, routing_config: Path, browser: Browser
) -> None:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db", config=routing_config)
    async with running_gateway(settings) as gateway:
        contexts = [await browser.new_context() for _ in range(2)]
        try:
            laptop, phone = [await context.new_page() for context in contexts]
            for page in (laptop, phone):
                await page.goto(f"{gateway.base_url}/console/login")
                await page.get_by_label("Email").fill(ALICE)
                await page.get_by_label("Password").fill(PASSWORD)
                await page.get_by_role("button", name="Sign in").click()
                await expect(
                    page.get_by_role("heading", name="Waiting for a person")
                ).to_be_visible()

            await laptop.get_by_role("button", name="Sign out everywhere").click()
            await expect(laptop.get_by_role("heading", name="Sign in")).to_be_visible()

            await phone.reload()
            await expect(phone.get_by_role("heading", name="Sign in")).to_be_visible()
            assert urllib.parse.urlsplit(phone.url).path == "/console/login"
        finally:
            for context in contexts:
                await context.close()


# --- forms only from the console's own site


async def test_a_cross_site_login_gets_no_session(gateway: RunningGateway) -> None:
    credentials = {"email": ALICE, "password": PASSWORD}
    foreign: tuple[dict[str, str], ...] = (
        {"Origin": EVIL},
        {"Origin": "null"},  # a sandboxed frame, or a page that hides where it is
        {"Origin": EVIL, "Referer": f"{gateway.base_url}/console/login"},  # Origin decides
        {"Referer": f"{EVIL}/phish"},
        {},  # neither header
    )
    for headers in foreign:
        async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers) as visitor:
            response = await visitor.post("/console/login", data=credentials)
            assert response.status_code == 403, (headers, response.text)
            assert "another site" in response.text
            assert "set-cookie" not in response.headers, headers
            assert not await signed_in(visitor)

    same_site = (
        {"Origin": gateway.base_url},
        {"Referer": f"{gateway.base_url}/console/login?next=/console"},  # no Origin: Referer
    )
    for headers in same_site:
        async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers) as browser:
            response = await browser.post("/console/login", data=credentials)
            assert response.status_code == 303, (headers, response.text)
            assert COOKIE in response.headers["set-cookie"]
            assert await signed_in(browser)


async def test_a_cross_site_post_spends_and_decides_nothing(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "cross-site")).rid
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    path = urllib.parse.urlsplit(link).path
    async with client(gateway, EVIL) as evil:
        refused = await evil.post(path)
        assert refused.status_code == 403 and "another site" in refused.text
        assert not evil.cookies.get(COOKIE)

    async with client(gateway) as operator:
        await sign_in_operator(operator, gateway)
        csrf = csrf_of((await operator.get(f"/console/requests/{rid}")).text)
        # The genuine session and CSRF token, but sent from another site's page.
        operator.headers["Origin"] = EVIL
        for target, data in (
            (f"/console/requests/{rid}", {"action": "approve", "csrf": csrf}),
            ("/console/logout", {"csrf": csrf}),
            ("/console/logout/everywhere", {"csrf": csrf}),
        ):
            response = await operator.post(target, data=data)
            assert response.status_code == 403, (target, response.text)
        operator.headers["Origin"] = gateway.base_url
        assert await signed_in(operator)

        # The link refused above was not spent: from the console's own site it signs in.
        async with client(gateway) as owner:
            assert (await owner.post(path)).status_code == 303
    assert await gateway_status(gateway, "cross-site") == "pending"


async def test_with_a_public_url_only_its_origin_is_the_console(
    tmp_path: Path, routing_config: Path
) -> None:
    public = "https://gw.example.org"
    settings = test_settings(
        f"sqlite+aiosqlite:///{tmp_path}/gw.db", config=routing_config, public_url=public
    )
    credentials = {"email": ALICE, "password": PASSWORD}
    async with running_gateway(settings) as gateway:
        async with client(gateway, public + ":443") as browser:  # the default port is implied
            assert (await browser.post("/console/login", data=credentials)).status_code == 303
        async with client(gateway) as internal:  # the server's own address is not the console
            refused = await internal.post("/console/login", data=credentials)
            assert refused.status_code == 403 and public in refused.text


# --- notices come from the server


async def test_a_notice_in_the_url_is_never_shown(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "notice-1")).rid
    quoted = urllib.parse.quote(FAKE_NOTICE)
    async with client(gateway) as operator:
        await sign_in_operator(operator, gateway)
        for path in (f"/console/requests/{rid}", "/console/webhooks"):
            for name in ("notice", "n", "flash"):
                page = await operator.get(f"{path}?{name}={quoted}")
                assert page.status_code == 200, page.text
                assert "Security Team" not in page.text, (path, name)
                assert 'class="notice"' not in page.text, (path, name)

        # A real decision: its notice is shown once, then never again.
        csrf = csrf_of((await operator.get(f"/console/requests/{rid}")).text)
        done = await operator.post(
            f"/console/requests/{rid}", data={"action": "approve", "csrf": csrf}
        )
        assert done.status_code == 303, done.text
        assert done.headers["location"] == f"/console/requests/{rid}"
        live = await operator.get(f"/console/requests/{rid}?partial=1")  # a live refresh
        assert "Recorded:" not in live.text  # does not use up the notice
        shown = await operator.get(f"/console/requests/{rid}?notice={quoted}")
        assert '<p class="notice" role="status">Recorded: approved by operator.</p>' in shown.text
        assert "Security Team" not in shown.text
        again = await operator.get(f"/console/requests/{rid}")
        assert 'class="notice"' not in again.text
        assert 'data-status="approved"' in again.text


async def test_a_request_links_notice_is_named_by_the_server(
    tmp_path: Path, request_factory: RequestFactory
) -> None:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db")
    async with running_gateway(settings) as gateway:
        gateway.core.settings = settings.model_copy(update={"public_url": gateway.base_url})
        rid = (await request_factory(gateway, "link-notice", channel=TO_ALICE)).rid
        other = (await request_factory(gateway, "link-other", channel=TO_ALICE)).rid
        link = gateway.core.link(rid, ALICE)
        other_link = gateway.core.link(other, ALICE)
        assert link is not None and other_link is not None
        async with client(gateway) as holder:
            fake = urllib.parse.urlencode({"notice": FAKE_NOTICE, "n": "made.up"})
            forged = await holder.get(f"{link}&{fake}")
            assert forged.status_code == 200
            assert "Security Team" not in forged.text and 'class="notice"' not in forged.text

            token = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["t"][0]
            decided = await holder.post(
                f"/r/{rid}",
                data={"t": token, "csrf": csrf_of(forged.text), "action": "approve"},
            )
            assert decided.status_code == 303, decided.text
            after = decided.headers["location"]
            assert "notice" not in after and "Recorded" not in urllib.parse.unquote(after)
            shown = await holder.get(after)
            assert f'<p class="notice" role="status">Recorded: approved by {ALICE}.</p>' in (
                shown.text
            )

            # That notice names this request's decision: on another (decided) one, nothing.
            async with gateway.client() as api:
                other_done = await api.post(
                    "/agent/function_calls/link-other/respond", json={"approved": True}
                )
                assert other_done.status_code == 200, other_done.text
            name = urllib.parse.parse_qs(urllib.parse.urlsplit(after).query)["n"][0]
            elsewhere = await holder.get(f"{other_link}&n={name}")
            assert elsewhere.status_code == 200 and 'data-status="approved"' in elsewhere.text
            assert 'class="notice"' not in elsewhere.text


# --- rotating GATEWAY_SECRET_KEY


async def test_a_key_rotation_ends_sessions_and_keeps_webhook_secrets(
    db_url: str, receiver: WebhookReceiver, request_factory: RequestFactory
) -> None:
    before = test_settings(db_url, secret_key="the-old-key", public_url="http://gw.test")
    async with running_gateway(before) as old, client(old, "http://gw.test") as operator:
        secret = await add_webhook(old, receiver.url)
        await sign_in_operator(operator, old)
        assert await signed_in(operator)
        old_cookie = operator.cookies[COOKIE]
        rid = (await request_factory(old, "before-rotation")).rid
        old_link = old.core.link(rid, ALICE)
        assert old_link is not None

    after = test_settings(
        db_url,
        secret_key="the-new-key",
        previous_secret_keys="an-older-key, the-old-key",
        public_url="http://gw.test",
    )
    async with running_gateway(after) as new:
        async with client(new, "http://gw.test") as browser:
            browser.cookies.set(COOKIE, old_cookie)
            response = await browser.get("/console")
            assert response.status_code == 303
            assert response.headers["location"] == "/console/login?next=/console"
            shown = await browser.get(old_link.removeprefix("http://gw.test"))
            assert shown.status_code == 403 and "not valid" in shown.text

        # The endpoint's secret was sealed under the old key: deliveries are still signed.
        await request_factory(new, "after-rotation")
        async with new.client() as api:
            approved = await api.post(
                "/agent/function_calls/after-rotation/respond", json={"approved": True}
            )
            assert approved.status_code == 200, approved.text
        [delivery] = await receiver.wait_for(1)
    payload = Webhook(secret).verify(delivery.body, delivery.headers)
    assert payload["event"]["call_id"] == "after-rotation"
