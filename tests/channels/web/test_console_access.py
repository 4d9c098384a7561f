"""Who may see and do what in the web console, checked over real HTTP on an in-process gateway.

Every page turns a signed-out visitor away; a person sees only their projects; every POST needs
the session's CSRF token; sign-in links work once and only by POST; request links (`/r/<rid>`)
decide only with a genuine, unexpired token for that request. Each refusal is checked to have
changed nothing, through the HumanLayer API or the outbox.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import sys
import urllib.parse
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from argon2 import PasswordHasher

from channels.discord.channel import DiscordChannel
from channels.discord.settings import DiscordSettings
from channels.email.channel import EmailChannel
from channels.email.settings import EmailSettings
from channels.registry import ChannelFactory
from channels.slack.channel import SlackChannel
from channels.slack.settings import SlackSettings
from channels.web.auth import (
    COOKIE,
    _link_hash,
    create_sign_in_link,
    csrf_token,
    hash_password,
)
from gateway.outbox.webhooks import add_endpoint
from gateway.security import signed
from gateway.store import console as console_store
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store.rows import JobRow
from tests.factories import RequestFactory
from tests.helpers import eventually
from tests.services.cli import Cli, Result
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config
from tests.services.receiver import Received, WebhookReceiver

ALICE = "alice@example.org"
# Emailed links are made for the recipients of an email target: a request to Alice.
TO_ALICE = {"email": {"address": ALICE}}
PASSWORD = "correct horse battery staple"
ALICE_HASH = hash_password(PASSWORD)  # once: argon2 is slow on purpose
PUBLIC_URL = "http://gw.test"

# Alice signs in with a password and sees project "alpha" only.
CONFIG = f"""
[people.alice]
name = "Alice"
email = "{ALICE}"
password_hash = '{ALICE_HASH}'
projects = ["alpha"]
"""

GET_PAGES = (
    "/console",
    "/console/history",
    "/console/requests/{rid}",
    "/console/webhooks",
    "/console/channels",
)
CSRF = re.compile(r'name="csrf" value="([^"]*)"')
CALL_ID = re.compile(r'data-call-id="([^"]+)"')


# --- helpers


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """SQLite, Alice in the routing config, and a public URL so request links can be made."""
    config = write_config(tmp_path / "routing.toml", CONFIG)
    settings = test_settings(
        f"sqlite+aiosqlite:///{tmp_path}/console.db", config=config, public_url=PUBLIC_URL
    )
    async with running_gateway(settings) as running:
        yield running


def browser(gateway: RunningGateway) -> httpx.AsyncClient:
    """A client that keeps cookies and sends its page's Origin, as a browser on the console's
    site does, and shows redirects instead of following."""
    origin = gateway.core.settings.public_url or gateway.base_url
    return httpx.AsyncClient(
        base_url=gateway.base_url,
        follow_redirects=False,
        timeout=30,
        headers={"Origin": origin},
    )


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found and found.group(1), "no csrf field on the page"
    return found.group(1)


def call_ids(html: str) -> set[str]:
    return set(CALL_ID.findall(html))


async def sign_in_with_password(
    client: httpx.AsyncClient, email: str = ALICE, password: str = PASSWORD
) -> None:
    response = await client.post("/console/login", data={"email": email, "password": password})
    assert response.status_code == 303, response.text
    assert client.cookies.get(COOKIE)


async def sign_in_by_link(client: httpx.AsyncClient, gateway: RunningGateway) -> None:
    """The operator (every project), through a fresh one-time link."""
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    response = await client.post(urllib.parse.urlsplit(link).path)
    assert response.status_code == 303, response.text
    assert client.cookies.get(COOKIE)


async def page_csrf(client: httpx.AsyncClient, path: str = "/console") -> str:
    response = await client.get(path)
    assert response.status_code == 200, response.text
    return csrf_of(response.text)


async def api_fc(gateway: RunningGateway, call_id: str, key: str | None = None) -> Any:
    async with gateway.client(key) as api:
        got = await api.get(f"/function_calls/{call_id}")
        assert got.status_code == 200, got.text
        return got.json()


async def api_approve(gateway: RunningGateway, call_id: str, key: str | None = None) -> None:
    async with gateway.client(key) as api:
        reply = await api.post(f"/agent/function_calls/{call_id}/respond", json={"approved": True})
        assert reply.status_code == 200, reply.text


async def assert_pending(gateway: RunningGateway, call_id: str, key: str | None = None) -> None:
    got = await api_fc(gateway, call_id, key)
    assert got["gateway_status"] == "pending", got
    assert got["status"]["user_info"] is None, got


async def webhook_jobs(gateway: RunningGateway) -> list[JobRow]:
    jobs = await gateway.core.db.read(outbox_store.list_jobs, project_id=None, status=None)
    return [job for job in jobs if job.kind == "webhook"]


async def _project_id(gateway: RunningGateway, name: str) -> int:
    project = await gateway.core.db.write(project_store.ensure_project, name)
    assert project.id is not None
    return project.id


async def decided_with_a_webhook(
    gateway: RunningGateway,
    receiver: WebhookReceiver,
    request_factory: RequestFactory,
    call_id: str,
) -> tuple[JobRow, Received]:
    """A call approved through the API in project "default", whose one webhook arrived."""
    default = await _project_id(gateway, "default")
    await add_endpoint(gateway.core, project_id=default, url=receiver.url, events=None)
    await request_factory(gateway, call_id)
    await api_approve(gateway, call_id)
    [delivered] = await receiver.wait_for(1)
    [job] = await webhook_jobs(gateway)
    return job, delivered


async def _job_done(gateway: RunningGateway, job_id: int) -> bool:
    job = await gateway.core.db.read(outbox_store.get_job, job_id)
    return job is not None and job.status == "done"


def local(public_link: str) -> str:
    """A link made for PUBLIC_URL, as a path and query on the test server."""
    assert public_link.startswith(PUBLIC_URL + "/")
    return public_link.removeprefix(PUBLIC_URL)


def token_of(link: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["t"][0]


def with_claims(token: str, **changes: Any) -> str:
    """The token with its claims edited and its MAC kept: a forgery."""
    body, _, mac = token.partition(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    edited = base64.urlsafe_b64encode(json.dumps(claims | changes).encode()).rstrip(b"=")
    return f"{edited.decode()}.{mac}"


def flip_last(text: str) -> str:
    return text[:-1] + ("A" if text[-1] != "A" else "B")


# --- signed out


async def test_signed_out_pages_send_to_sign_in(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "fc-out", fn="deploy")).rid  # must not leak below
    async with browser(gateway) as visitor:
        for template in (*GET_PAGES, "/console?kind=human_contact&partial=1"):
            path = template.format(rid=rid)
            response = await visitor.get(path)
            assert response.status_code == 303, (path, response.text)
            expected = "/console/login?next=" + urllib.parse.quote(path)
            assert response.headers["location"] == expected, path
            assert "fc-out" not in response.text and "deploy" not in response.text

        events = await visitor.get("/console/events")
        assert events.status_code == 401
        assert "event:" not in events.text

        login = await visitor.get("/console/login?next=/console/history")
        assert login.status_code == 200
        assert 'name="password"' in login.text
        assert 'name="next" value="/console/history"' in login.text


async def test_a_forged_session_cookie_is_signed_out(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "fc-forged")
    async with browser(gateway) as alice:
        await sign_in_with_password(alice)
        genuine = alice.cookies[COOKIE]
        assert (await alice.get("/console")).status_code == 200
    # Alice's own cookie, edited to name another session with the MAC kept.
    for cookie in (with_claims(genuine, s="another-session"), "not-a-token", flip_last(genuine)):
        async with browser(gateway) as forger:
            forger.cookies.set(COOKIE, cookie)
            response = await forger.get("/console")
            assert response.status_code == 303, cookie
            assert response.headers["location"].startswith("/console/login")
            assert (await forger.get("/console/events")).status_code == 401


async def test_signed_out_posts_are_refused_and_change_nothing(
    gateway: RunningGateway, receiver: WebhookReceiver, request_factory: RequestFactory
) -> None:
    job, _ = await decided_with_a_webhook(gateway, receiver, request_factory, "fc-hooked")
    rid = (await request_factory(gateway, "fc-post-out")).rid

    async with browser(gateway) as visitor:
        decided = await visitor.post(
            f"/console/requests/{rid}", data={"action": "approve", "csrf": "guess"}
        )
        assert decided.status_code == 401, decided.text
        assert "Sign in again" in decided.text
        redeliver = await visitor.post(
            f"/console/webhooks/jobs/{job.id}/redeliver", data={"csrf": "guess"}
        )
        assert redeliver.status_code == 401, redeliver.text
        assert not visitor.cookies.get(COOKIE)

    await assert_pending(gateway, "fc-post-out")
    assert [j.id for j in await webhook_jobs(gateway)] == [job.id]


# --- password sign-in and projects


async def test_a_wrong_password_is_refused_without_a_cookie(gateway: RunningGateway) -> None:
    async with browser(gateway) as client:
        for email, password in ((ALICE, "not the password"), ("bob@example.org", PASSWORD)):
            response = await client.post(
                "/console/login", data={"email": email, "password": password}
            )
            assert response.status_code == 401, response.text
            assert "Wrong email or password." in response.text
            assert "set-cookie" not in response.headers
            assert not client.cookies.get(COOKIE)
            assert (await client.get("/console")).status_code == 303

        response = await client.post(
            "/console/login",
            data={"email": ALICE.upper(), "password": PASSWORD, "next": "/console/history"},
        )
        assert response.status_code == 303, response.text
        assert response.headers["location"] == "/console/history"
        assert COOKIE in response.headers["set-cookie"]
        assert "httponly" in response.headers["set-cookie"].lower()
        history = await client.get("/console/history")
        assert history.status_code == 200 and "Alice" in history.text


async def test_sign_in_never_redirects_off_site(gateway: RunningGateway) -> None:
    async with browser(gateway) as client:
        for next_url in ("//evil.example/x", "https://evil.example/x", "evil.example"):
            response = await client.post(
                "/console/login", data={"email": ALICE, "password": PASSWORD, "next": next_url}
            )
            assert response.status_code == 303
            assert response.headers["location"] == "/console", next_url
        # Browsers read a raw "\\" as "/" and drop raw tabs: these must arrive percent-encoded.
        for next_url in ("/\\evil.example/x", "/\t/evil.example/x"):
            response = await client.post(
                "/console/login", data={"email": ALICE, "password": PASSWORD, "next": next_url}
            )
            assert response.status_code == 303
            location = response.headers["location"]
            as_browser_reads_it = location.replace("\\", "/").replace("\t", "")
            assert not as_browser_reads_it.startswith("//"), location


async def test_a_person_sees_and_decides_only_their_projects(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    alpha_key = await gateway.new_key("alpha")
    alpha_rid = (await request_factory(gateway, "alpha-1", key=alpha_key)).rid
    default_rid = (await request_factory(gateway, "default-1")).rid
    await request_factory(gateway, "default-decided")
    await api_approve(gateway, "default-decided")

    async with browser(gateway) as alice, browser(gateway) as operator:
        await sign_in_with_password(alice)
        await sign_in_by_link(operator, gateway)

        queue = await alice.get("/console")
        assert queue.status_code == 200
        assert call_ids(queue.text) == {"alpha-1"}
        assert call_ids((await alice.get("/console?project=default")).text) == set()
        assert call_ids((await alice.get("/console/history")).text) == set()
        # The operator sees both projects: the filter above is Alice's, not an empty queue.
        assert call_ids((await operator.get("/console")).text) == {"alpha-1", "default-1"}
        assert call_ids((await operator.get("/console/history")).text) == {"default-decided"}

        mine = await alice.get(f"/console/requests/{alpha_rid}")
        assert mine.status_code == 200 and "alpha-1" in mine.text and "Approve" in mine.text
        for path in (
            f"/console/requests/{default_rid}",
            f"/console/requests/{default_rid}?partial=1",
        ):
            other = await alice.get(path)
            assert other.status_code == 404, path
            assert "default-1" not in other.text

        csrf = csrf_of(queue.text)
        refused = await alice.post(
            f"/console/requests/{default_rid}", data={"action": "approve", "csrf": csrf}
        )
        assert refused.status_code == 404, refused.text
        await assert_pending(gateway, "default-1")

        approved = await alice.post(
            f"/console/requests/{alpha_rid}", data={"action": "approve", "csrf": csrf}
        )
        assert approved.status_code == 303, approved.text
    got = await api_fc(gateway, "alpha-1", alpha_key)
    assert got["status"]["approved"] is True
    assert got["status"]["user_info"] == {
        "channel": "web",
        "user_id": ALICE,
        "name": "Alice",
        "email": ALICE,
    }


# --- one-time sign-in links


async def test_a_sign_in_link_works_once_and_only_by_post(gateway: RunningGateway) -> None:
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    path = urllib.parse.urlsplit(link).path
    assert link.startswith(f"{gateway.base_url}/console/link/")

    async with browser(gateway) as scanner:
        for _ in range(3):  # a mail scanner's GETs show the button and spend nothing
            shown = await scanner.get(path)
            assert shown.status_code == 200
            assert f'action="{path}"' in shown.text and 'method="post"' in shown.text
            assert not scanner.cookies.get(COOKIE)

    async with browser(gateway) as operator:
        signed_in = await operator.post(path)
        assert signed_in.status_code == 303, signed_in.text
        assert signed_in.headers["location"] == "/console"
        assert operator.cookies.get(COOKIE)
        queue = await operator.get("/console")
        assert queue.status_code == 200 and "operator" in queue.text

    async with browser(gateway) as late:
        again = await late.post(path)
        assert again.status_code == 403
        assert "used already" in again.text
        assert not late.cookies.get(COOKIE)


async def test_a_persons_sign_in_link_keeps_their_projects(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    alpha_key = await gateway.new_key("alpha")
    await request_factory(gateway, "alpha-link", key=alpha_key)
    await request_factory(gateway, "default-link")
    link = await create_sign_in_link(gateway.context(), ALICE, base_url=gateway.base_url)
    async with browser(gateway) as alice:
        assert (await alice.post(urllib.parse.urlsplit(link).path)).status_code == 303
        queue = await alice.get("/console")
    assert "Alice" in queue.text
    assert call_ids(queue.text) == {"alpha-link"}


async def test_expired_and_made_up_sign_in_links_are_refused(gateway: RunningGateway) -> None:
    token = "expired-token-for-the-test"
    await gateway.core.db.write(
        console_store.create_login, _link_hash(token), None, timedelta(seconds=-1)
    )

    async with browser(gateway) as client:
        expired = await client.post(f"/console/link/{token}")
        assert expired.status_code == 403
        assert "expired" in expired.text
        made_up = await client.post("/console/link/no-such-token-at-all")
        assert made_up.status_code == 403
        assert "not valid" in made_up.text
        assert not client.cookies.get(COOKIE)
        assert (await client.get("/console")).status_code == 303


# --- CSRF and the decision form


async def test_a_decision_needs_this_sessions_csrf_token(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    alpha_key = await gateway.new_key("alpha")
    rid = (await request_factory(gateway, "csrf-1", key=alpha_key)).rid
    path = f"/console/requests/{rid}"

    async with browser(gateway) as alice, browser(gateway) as alice_elsewhere:
        await sign_in_with_password(alice)
        await sign_in_with_password(alice_elsewhere)
        mine = await page_csrf(alice, path)
        theirs = await page_csrf(alice_elsewhere, path)
        assert mine != theirs  # one token per session, not per person

        for data in (
            {"action": "approve"},
            {"action": "approve", "csrf": ""},
            {"action": "approve", "csrf": theirs},
            {"action": "approve", "csrf": flip_last(mine)},
        ):
            refused = await alice.post(path, data=data)
            assert refused.status_code == 403, (data, refused.text)
            assert "CSRF" in refused.text
        await assert_pending(gateway, "csrf-1", alpha_key)

        done = await alice.post(path, data={"action": "approve", "csrf": mine, "reason": "ok"})
        assert done.status_code == 303, done.text
        assert done.headers["location"] == path  # the notice waits in the session, not the URL
        shown = await alice.get(done.headers["location"])
        assert "Recorded: approved by Alice." in shown.text
        assert 'data-status="approved"' in shown.text and 'value="approve"' not in shown.text
        assert "Recorded:" not in (await alice.get(path)).text  # shown once

    got = await api_fc(gateway, "csrf-1", alpha_key)
    assert got["gateway_status"] == "approved"
    assert got["status"]["comment"] == "ok"
    assert got["status"]["user_info"] == {
        "channel": "web",
        "user_id": ALICE,
        "name": "Alice",
        "email": ALICE,
    }


async def test_sign_out_needs_the_csrf_token(gateway: RunningGateway) -> None:
    async with browser(gateway) as alice:
        await sign_in_with_password(alice)
        refused = await alice.post("/console/logout", data={})
        assert refused.status_code == 403
        assert (await alice.get("/console")).status_code == 200  # still signed in

        out = await alice.post("/console/logout", data={"csrf": await page_csrf(alice)})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        assert not alice.cookies.get(COOKIE)
        assert (await alice.get("/console")).status_code == 303


async def test_wrong_answers_are_refused_and_a_late_one_names_the_winner(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    options = [{"name": "too_risky", "title": "Too risky"}]
    rid = (await request_factory(gateway, "form-1", reject_options=options)).rid
    hc_rid = (await request_factory(gateway, "form-hc", contact=True)).rid
    path = f"/console/requests/{rid}"

    async with browser(gateway) as operator:
        await sign_in_by_link(operator, gateway)
        page = await operator.get(path)
        csrf = csrf_of(page.text)
        assert 'value="too_risky"' in page.text

        no_reason = await operator.post(path, data={"action": "reject", "csrf": csrf})
        assert no_reason.status_code == 422
        assert "give a reason to reject" in no_reason.text
        blank = await operator.post(path, data={"action": "reject", "reason": "  ", "csrf": csrf})
        assert blank.status_code == 422
        unknown = await operator.post(
            path, data={"action": "option", "option": "no_such_option", "csrf": csrf}
        )
        assert unknown.status_code == 422
        assert "unknown option" in unknown.text and "too_risky" in unknown.text
        verb = await operator.post(path, data={"action": "delete", "csrf": csrf})
        assert verb.status_code == 422 and "unknown action" in verb.text
        no_answer = await operator.post(
            f"/console/requests/{hc_rid}", data={"action": "answer", "csrf": csrf}
        )
        assert no_answer.status_code == 422 and "type an answer first" in no_answer.text
        await assert_pending(gateway, "form-1")

        await api_approve(gateway, "form-1")  # the API answers first
        late = await operator.post(path, data={"action": "reject", "reason": "no", "csrf": csrf})
        assert late.status_code == 409, late.text
        assert "already approved by test in the API" in late.text

    got = await api_fc(gateway, "form-1")
    assert got["status"]["approved"] is True
    assert got["status"]["user_info"]["channel"] == "api"


@pytest.mark.parametrize("data", [{"action": "answer"}, {"action": "option"}])
async def test_a_function_call_is_never_rejected_without_a_reason(
    gateway: RunningGateway, data: dict[str, str], request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "no-reason")).rid
    async with browser(gateway) as operator:
        await sign_in_by_link(operator, gateway)
        csrf = await page_csrf(operator, f"/console/requests/{rid}")
        response = await operator.post(f"/console/requests/{rid}", data=data | {"csrf": csrf})
    got = await api_fc(gateway, "no-reason")
    assert got["gateway_status"] == "pending", got["status"]
    assert response.status_code == 422


# --- request links (/r/<rid>?t=...)


async def test_a_request_link_shows_on_get_and_decides_on_post(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "link-1", channel=TO_ALICE)).rid
    link = gateway.core.link(rid, ALICE)
    assert link is not None
    path = local(link)

    async with browser(gateway) as scanner:
        for _ in range(3):  # GETs (a mail scanner's too) only show the request
            shown = await scanner.get(path)
            assert shown.status_code == 200, shown.text
            assert "link-1" in shown.text and f"Answering as {ALICE}" in shown.text
            assert 'value="approve"' in shown.text and 'value="reject"' in shown.text
        await assert_pending(gateway, "link-1")

        csrf = csrf_of(shown.text)
        token = token_of(link)
        decided = await scanner.post(
            f"/r/{rid}", data={"t": token, "csrf": csrf, "action": "approve"}
        )
        assert decided.status_code == 303, decided.text
        assert decided.headers["location"].startswith(f"/r/{rid}?")
        after = await scanner.get(decided.headers["location"])
        assert after.status_code == 200 and 'data-status="approved"' in after.text
        assert not scanner.cookies.get(COOKIE)  # a link is no session

        # The same link used again (a forwarded copy, a second tab) decides nothing more.
        again = await scanner.post(
            f"/r/{rid}", data={"t": token, "csrf": csrf, "action": "reject", "reason": "late"}
        )
        assert again.status_code == 409, again.text
        assert "already approved" in again.text

    got = await api_fc(gateway, "link-1")
    assert got["status"]["approved"] is True
    assert got["status"]["user_info"] == {
        "channel": "web",
        "user_id": ALICE,
        "name": ALICE,
        "email": ALICE,
        "by": "link",  # through the emailed link, not a sign-in
    }


async def test_bad_request_links_are_refused(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "link-bad")).rid
    other_rid = (await request_factory(gateway, "link-other")).rid
    good = token_of(gateway.core.link(rid, ALICE) or "")
    other = token_of(gateway.core.link(other_rid, ALICE) or "")
    expired = signed.sign(gateway.core.link_key, {"r": rid, "e": ALICE}, -10)
    bad = {
        "another request's": (other, "another request"),
        "tampered": (with_claims(good, e="mallory@example.org"), "not valid"),
        "expired": (expired, "expired"),
        "made up": ("made.up", "not valid"),
    }

    async with browser(gateway) as client:
        good_csrf = csrf_of((await client.get(f"/r/{rid}", params={"t": good})).text)
        for name, (token, why) in bad.items():
            shown = await client.get(f"/r/{rid}", params={"t": token})
            assert shown.status_code == 403, name
            assert why in shown.text, name
            assert "link-bad" not in shown.text, name
            # Refused for the token itself: even the CSRF value right for it does not help.
            for csrf in (good_csrf, csrf_token(gateway.context(), f"link:{token}")):
                posted = await client.post(
                    f"/r/{rid}", data={"t": token, "csrf": csrf, "action": "approve"}
                )
                assert posted.status_code == 403, name
        # The genuine token without its CSRF MAC, or with another link's, is refused too.
        other_csrf = csrf_of((await client.get(f"/r/{other_rid}", params={"t": other})).text)
        for csrf in ("", other_csrf):
            posted = await client.post(
                f"/r/{rid}", data={"t": good, "csrf": csrf, "action": "approve"}
            )
            assert posted.status_code == 403, csrf

    await assert_pending(gateway, "link-bad")
    await assert_pending(gateway, "link-other")


async def test_a_request_link_without_a_token(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "link-none")).rid
    async with browser(gateway) as visitor:
        response = await visitor.get(f"/r/{rid}")
        assert response.status_code == 303
        assert response.headers["location"] == f"/console/login?next=/r/{rid}"
        posted = await visitor.post(f"/r/{rid}", data={"action": "approve"})
        assert posted.status_code == 403

    async with browser(gateway) as operator:
        await sign_in_by_link(operator, gateway)
        for path in (f"/r/{rid}", local(gateway.core.link(rid, ALICE) or "")):
            response = await operator.get(path)
            assert response.status_code == 303, path
            assert response.headers["location"] == f"/console/requests/{rid}"
    await assert_pending(gateway, "link-none")


# --- webhooks and channels


async def test_webhook_log_and_redeliver(
    gateway: RunningGateway, receiver: WebhookReceiver, request_factory: RequestFactory
) -> None:
    job, first = await decided_with_a_webhook(gateway, receiver, request_factory, "hook-1")
    msg_id = json.loads(job.payload_json)["msg_id"]
    job_id = job.id
    assert job_id is not None
    await eventually(lambda: _job_done(gateway, job_id))  # redelivering a finished delivery

    async with browser(gateway) as operator, browser(gateway) as alice:
        await sign_in_by_link(operator, gateway)
        await sign_in_with_password(alice)

        log = await operator.get("/console/webhooks")
        assert log.status_code == 200
        assert receiver.url in log.text
        assert f'data-job="{job.id}"' in log.text and msg_id in log.text

        # Alice does not see project "default": neither its endpoint nor its deliveries.
        hers = await alice.get("/console/webhooks")
        assert hers.status_code == 200
        assert receiver.url not in hers.text and msg_id not in hers.text
        refused = await alice.post(
            f"/console/webhooks/jobs/{job.id}/redeliver", data={"csrf": csrf_of(hers.text)}
        )
        assert refused.status_code == 404, refused.text

        csrf = csrf_of(log.text)
        no_csrf = await operator.post(f"/console/webhooks/jobs/{job.id}/redeliver", data={})
        assert no_csrf.status_code == 403
        missing = await operator.post(
            "/console/webhooks/jobs/999999/redeliver", data={"csrf": csrf}
        )
        assert missing.status_code == 404
        assert [j.id for j in await webhook_jobs(gateway)] == [job.id]

        again = await operator.post(
            f"/console/webhooks/jobs/{job.id}/redeliver", data={"csrf": csrf}
        )
        assert again.status_code == 303, again.text
        assert again.headers["location"] == "/console/webhooks"
        queued = await operator.get("/console/webhooks")
        assert f"Delivery {job.id} queued again." in queued.text

    jobs = await webhook_jobs(gateway)
    assert len(jobs) == 2
    assert {json.loads(j.payload_json)["msg_id"] for j in jobs} == {msg_id}
    deliveries = await receiver.wait_for(2)
    assert {d.headers["webhook-id"] for d in deliveries} == {first.headers["webhook-id"]}


async def test_channels_page_shows_what_is_configured(tmp_path: Path) -> None:
    slack = SlackSettings(_env_file=None, bot_token=None, client_id=None, client_secret=None)
    discord = DiscordSettings(_env_file=None, bot_token=None)
    email = EmailSettings(
        _env_file=None, smtp_host="smtp.example.test", email_from="gw@example.test"
    )
    channels: dict[str, ChannelFactory] = {
        "slack": lambda context: SlackChannel(context, slack),
        "discord": lambda context: DiscordChannel(context, discord),
        "email": lambda context: EmailChannel(context, email),
    }
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/channels.db")
    async with (
        running_gateway(settings, channels=channels) as gateway,
        browser(gateway) as operator,
    ):
        assert (await operator.get("/console/channels")).status_code == 303
        await sign_in_by_link(operator, gateway)
        page = await operator.get("/console/channels")
    assert page.status_code == 200
    rows = dict(re.findall(r'<tr data-channel="(\w+)">(.*?)</tr>', page.text, re.S))
    assert set(rows) == {"slack", "discord", "email", "teams", "telegram"}  # not the console
    configured = {name: re.findall(r"<td>(yes|no)\b", row)[0] for name, row in rows.items()}
    assert configured == {
        **{"slack": "no", "discord": "no", "email": "yes"},
        **{"teams": "no", "telegram": "no"},
    }
    assert "SLACK_BOT_TOKEN" in rows["slack"] and "DISCORD_BOT_TOKEN" in rows["discord"]


# --- history and queue filters


async def test_history_search_and_queue_filters(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "hist-done-7q2", run_id="run-a")
    await api_approve(gateway, "hist-done-7q2")
    await request_factory(gateway, "hist-open-7q2", run_id="run-a", fn="deploy")
    await request_factory(gateway, "drop-b", run_id="run-b", fn="drop_table")
    await request_factory(gateway, "question-b", contact=True, run_id="run-b")

    async with browser(gateway) as operator:
        await sign_in_by_link(operator, gateway)

        async def listed(path: str, **params: str) -> set[str]:
            response = await operator.get(path, params=params)
            assert response.status_code == 200, response.text
            return call_ids(response.text)

        assert await listed("/console/history", q="done-7q") == {"hist-done-7q2"}
        assert await listed("/console/history", q="7q2") == {"hist-done-7q2"}  # not the pending
        assert await listed("/console/history", q="nothing-like-it") == set()
        assert await listed("/console") == {"hist-open-7q2", "drop-b", "question-b"}
        assert await listed("/console", kind="human_contact") == {"question-b"}
        assert await listed("/console", kind="function_call") == {"hist-open-7q2", "drop-b"}
        assert await listed("/console", run_id="run-b") == {"drop-b", "question-b"}
        assert await listed("/console", fn="drop_table") == {"drop-b"}
        assert await listed("/console", run_id="run-a", kind="human_contact") == set()
        assert await listed("/console", partial="1", fn="deploy") == {"hist-open-7q2"}


async def test_the_event_stream_opens_when_signed_in(gateway: RunningGateway) -> None:
    async with browser(gateway) as operator:
        await sign_in_by_link(operator, gateway)
        async with operator.stream("GET", "/console/events") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            first = await anext(stream.aiter_text())
    assert first.startswith("retry: 1000")


# --- the command line


async def test_console_link_from_the_cli_signs_in(cli: Cli) -> None:
    made = await cli("console", "link")
    assert made.returncode == 0, made
    path = urllib.parse.urlsplit(made.last_line).path
    assert path.startswith("/console/link/"), made

    async with running_gateway(test_settings(cli.database_url)) as gateway:
        async with browser(gateway) as operator:
            assert (await operator.get(path)).status_code == 200
            signed_in = await operator.post(path)
            assert signed_in.status_code == 303, signed_in.text
            assert (await operator.get("/console")).status_code == 200
        async with browser(gateway) as late:
            assert (await late.post(path)).status_code == 403


async def test_console_hash_password_from_the_cli(cli: Cli, tmp_path: Path) -> None:
    password = "a long enough password"
    made = await hash_password_cli(cli, password + "\n")
    assert made.returncode == 0, made
    hashed = made.last_line
    assert hashed.startswith("$argon2"), made
    assert password not in made.stdout + made.stderr
    assert PasswordHasher().verify(hashed, password)

    short = await hash_password_cli(cli, "short\n")
    assert short.returncode == 2 and "at least 8" in short.stderr, short

    # The printed hash is what a person's password_hash takes in the routing config.
    config = write_config(
        tmp_path / "people.toml",
        f"[people.bob]\nemail = 'bob@example.org'\npassword_hash = '{hashed}'\n",
    )
    settings = test_settings(cli.database_url, config=config)
    async with running_gateway(settings) as gateway, browser(gateway) as bob:
        await sign_in_with_password(bob, "bob@example.org", password)
        assert (await bob.get("/console")).status_code == 200


async def hash_password_cli(runner: Cli, stdin: str) -> Result:
    """`gateway console hash-password` with the password on standard input (Cli has none)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "console",
        "hash-password",
        cwd=runner.workdir,
        env=runner.env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await process.communicate(stdin.encode())
    assert process.returncode is not None
    return Result(process.returncode, stdout.decode(), stderr.decode())
