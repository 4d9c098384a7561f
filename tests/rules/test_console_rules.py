"""The console lists the config's rules in the order they are tried, and each request's page
names the rule it matched (also for a request the rule decided by itself)."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from channels.web.auth import hash_password
from tests.factories import rid_of
from tests.rules.helpers import DECIDING_RULES, create
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

PASSWORD = "correct horse battery staple"
MATCHED = 'Matched <a href="/console/rules" data-rule>rule {}</a>'
CONFIG = (
    f"""
[people.ann]
email = "ann@example.org"
password_hash = '{hash_password(PASSWORD)}'

[teams.finance]
members = ["ann"]
approvals_required = 1

"""
    + DECIDING_RULES
    + """
[[rules]]
name = "big-wires"
when = 'fn == "wire_money" && kwargs.amount > 10000'
target = "team:finance"
"""
)


@pytest.fixture
async def console(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    settings = settings_for(f"sqlite:///{tmp_path / 'console.db'}", config=config)
    async with running_gateway(settings) as running:
        yield running


async def page(gw: RunningGateway, path: str) -> str:
    """A console page as Ann sees it, signed in."""
    headers = {"Origin": gw.base_url}
    async with httpx.AsyncClient(base_url=gw.base_url, headers=headers, timeout=30) as browser:
        signed_in = await browser.post(
            "/console/login", data={"email": "ann@example.org", "password": PASSWORD}
        )
        assert signed_in.status_code == 303, signed_in.text
        response = await browser.get(path)
    assert response.status_code == 200, response.text
    return html.unescape(response.text)


async def test_the_rules_page_lists_each_rule_in_order_with_what_it_does(
    console: RunningGateway,
) -> None:
    text = await page(console, "/console/rules")
    rows = [text.index(f'data-rule="rule {name}"') for name in ("public-reads", "no-rm-root")]
    assert rows == sorted(rows) and text.index('data-rule="rule big-wires"') > rows[-1]
    assert 'kwargs.path.startsWith("/srv/public/")' in text
    assert 'reject: "never rm -rf /"' in text and "team:finance" in text


async def test_a_request_page_names_the_rule_it_matched(console: RunningGateway) -> None:
    await create(console, "big-1", "wire_money", {"amount": 12000})
    text = await page(console, f"/console/requests/{await rid_of(console, 'big-1')}")
    assert MATCHED.format("big-wires") in text
    assert "Your answer" in text  # still pending: finance decides

    await create(console, "small-1", "wire_money", {"amount": 50})
    text = await page(console, f"/console/requests/{await rid_of(console, 'small-1')}")
    assert "Matched" not in text  # no rule: the console alone

    await create(console, "rm-1", "run", {"cmd": "rm -rf /"})
    text = await page(console, f"/console/requests/{await rid_of(console, 'rm-1')}")
    assert MATCHED.format("no-rm-root") in text
    assert "never rm -rf /" in text and "Your answer" not in text


async def test_an_agent_key_does_not_open_the_rules_page(console: RunningGateway) -> None:
    """What the rules let through is the operator's to know: an agent's bearer key is sent
    to sign in, and sees no rule."""
    agent = await console.new_key("default", name="the agent")
    headers = {"Authorization": f"Bearer {agent}"}
    async with httpx.AsyncClient(base_url=console.base_url, headers=headers) as client:
        page = await client.get("/console/rules")
    assert page.status_code == 303, page.text
    assert page.headers["location"].startswith("/console/login")
    assert "public-reads" not in page.text and "startsWith" not in page.text
