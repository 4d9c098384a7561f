"""The console decides only what was sent to you: a signed-in person decides requests that
target them (as a person or a team member); admins and the operator decide anything;
everyone else of the project reads. Through the console's own HTTP forms."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from channels.web.auth import hash_password
from gateway.vocabulary import KeyScope
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

PASSWORD = "correct horse battery staple"
HASH = hash_password(PASSWORD)
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
CONFIG = f"""
[people.alice]
email = "alice@example.com"
password_hash = '{HASH}'

[people.mallory]
email = "mallory@example.com"
password_hash = '{HASH}'

[people.root]
email = "root@example.com"
password_hash = '{HASH}'
admin = true

[teams.dba]
members = ["alice"]

[[rules]]
fn = "drop_*"
target = "team:dba"
"""


@pytest.fixture
async def console(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


async def press_approve(gw: RunningGateway, email: str, rid: str) -> tuple[int, str]:
    """Sign in, open the request's page, press Approve: the form's status and the page."""
    headers = {"Origin": gw.base_url}
    async with httpx.AsyncClient(base_url=gw.base_url, headers=headers, timeout=30) as browser:
        signed_in = await browser.post(
            "/console/login", data={"email": email, "password": PASSWORD}
        )
        assert signed_in.status_code == 303, signed_in.text
        page = await browser.get(f"/console/requests/{rid}")
        assert page.status_code == 200, page.text  # everyone of the project reads it
        found = CSRF.search(page.text)
        assert found is not None
        pressed = await browser.post(
            f"/console/requests/{rid}", data={"action": "approve", "csrf": found.group(1)}
        )
    return pressed.status_code, pressed.text


async def status_of(gw: RunningGateway, call_id: str) -> str:
    async with gw.client() as client:
        return str((await client.get(f"/function_calls/{call_id}")).json()["gateway_status"])


async def test_a_console_user_who_is_not_a_target_cannot_decide(
    console: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(console, fn="drop_users")
    code, text = await press_approve(console, "mallory@example.com", made.rid)
    assert code == 403, text
    assert await status_of(console, made.call_id) == "pending"


@pytest.mark.parametrize("who", ["alice@example.com", "root@example.com"])
async def test_a_team_member_or_an_admin_decides_in_the_console(
    console: RunningGateway, request_factory: RequestFactory, who: str
) -> None:
    made = await request_factory(console, fn="drop_users")
    code, text = await press_approve(console, who, made.rid)
    assert code in (200, 303), text
    assert await status_of(console, made.call_id) == "approved"


async def test_a_request_sent_to_the_console_alone_is_anyones_to_decide(
    console: RunningGateway, request_factory: RequestFactory
) -> None:
    made = await request_factory(console, fn="read_users")  # no rule: the console, nobody named
    code, text = await press_approve(console, "mallory@example.com", made.rid)
    assert code in (200, 303), text
    assert await status_of(console, made.call_id) == "approved"


async def test_the_console_lists_each_keys_scope_and_person(console: RunningGateway) -> None:
    await console.new_key("default", name="the agent")
    await console.new_key("default", name="alices", scope=KeyScope.RESPONDER, person="alice")
    headers = {"Origin": console.base_url}
    async with httpx.AsyncClient(base_url=console.base_url, headers=headers) as browser:
        await browser.post(
            "/console/login", data={"email": "root@example.com", "password": PASSWORD}
        )
        page = await browser.get("/console/keys")
    assert page.status_code == 200, page.text
    rows = re.findall(
        r"<td>([^<]*)</td>\s*<td data-scope=\"(\w+)\">\w+</td><td>([^<]*)</td>", page.text
    )
    assert set(rows) == {
        ("test", "admin", ""),
        ("the agent", "agent", ""),
        ("alices", "responder", "alice"),
    }


async def test_an_agent_key_does_not_open_the_console_keys_page(console: RunningGateway) -> None:
    """The console takes sign-ins, not API keys: an agent's bearer key is sent to sign in."""
    agent = await console.new_key("default", name="the agent")
    headers = {"Authorization": f"Bearer {agent}"}
    async with httpx.AsyncClient(base_url=console.base_url, headers=headers) as client:
        page = await client.get("/console/keys")
    assert page.status_code == 303, page.text
    assert page.headers["location"].startswith("/console/login")
    assert agent[:12] not in page.text and "data-scope" not in page.text
