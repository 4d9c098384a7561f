"""What the console tests of standing grants, edits and bulk answers share: people who sign
in with a password, a signed-in HTTP client or Chromium page, and readers of what the API
and the audit trail say."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from playwright.async_api import Page, expect

from channels.web.auth import create_sign_in_link
from tests.helpers import events
from tests.services.inprocess import RunningGateway

PASSWORD = "correct horse battery staple"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def email_of(name: str) -> str:
    return f"{name}@example.org"


def people(hashed: str, *names: str, admins: tuple[str, ...] = (), **projects: str) -> str:
    """Routing config for people who sign in with PASSWORD (`hashed`): every project, or
    the one `projects` names for them; `admins` may decide and revoke anything."""
    return "".join(
        f'[people.{name}]\nname = "{name.title()}"\nemail = "{email_of(name)}"\n'
        f"password_hash = '{hashed}'\nadmin = {'true' if name in admins else 'false'}\n"
        f'projects = ["{projects.get(name, "*")}"]\n\n'
        for name in names
    )


@asynccontextmanager
async def signed_in(gateway: RunningGateway, name: str) -> AsyncIterator[httpx.AsyncClient]:
    """A browser-like HTTP client of the console, signed in as `name` (cookies kept)."""
    headers = {"Origin": gateway.base_url}
    async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers, timeout=30) as client:
        answer = await client.post(
            "/console/login", data={"email": email_of(name), "password": PASSWORD}
        )
        assert answer.status_code == 303, answer.text
        yield client


@asynccontextmanager
async def signed_in_operator(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    """A console client signed in as the operator, through a one-time link."""
    link = await create_sign_in_link(gateway.context(), base_url=gateway.base_url)
    headers = {"Origin": gateway.base_url}
    async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers, timeout=30) as client:
        answer = await client.post(urllib.parse.urlsplit(link).path)
        assert answer.status_code == 303, answer.text
        yield client


async def csrf(client: httpx.AsyncClient, path: str = "/console") -> str:
    """The session's CSRF token, read from a console page as a browser would."""
    page = await client.get(path)
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found is not None, "no csrf field on the page"
    return found.group(1)


async def sign_in_page(page: Page, gateway: RunningGateway, name: str) -> None:
    """Sign `page` in with a password as `name`; ends on the queue."""
    await page.goto(f"{gateway.base_url}/console/login")
    await page.get_by_label("Email").fill(email_of(name))
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Waiting for a person")).to_be_visible()


async def record(gateway: RunningGateway, call_id: str, key: str | None = None) -> dict[str, Any]:
    """The function call as the HumanLayer API answers it."""
    async with gateway.client(key) as client:
        got = await client.get(f"/function_calls/{call_id}")
    assert got.status_code == 200, got.text
    found: dict[str, Any] = got.json()
    return found


async def trail(gateway: RunningGateway, call_id: str) -> list[str]:
    """The types of a request's audit events, in order."""
    return [event["type"] for event in (await events(gateway, call_id))["events"]]
