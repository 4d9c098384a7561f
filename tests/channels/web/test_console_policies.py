"""Approval policies in the web console, over real HTTP on an in-process gateway: the request
page shows the policy tree, the progress line, the deadline and the next timer; a console
vote counts once; the queue's "waiting on me" filter keeps what the signed-in person may
still answer. Requests without a policy render as before.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from channels.web.auth import COOKIE, hash_password
from channels.web.render import when
from gateway.store import requests as request_store
from tests.factories import Created, RequestFactory
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config

PASSWORD = "correct horse battery staple"
ALICE, BOB, CAROL, DAVE = (f"{name}@example.org" for name in ("alice", "bob", "carol", "dave"))
CSRF = re.compile(r'name="csrf" value="([^"]*)"')
CALL_ID = re.compile(r'data-call-id="([^"]+)"')
PROGRESS = re.compile(r"<p class=\"progress\" data-progress>(.*?)</p>", re.S)
DEADLINE = re.compile(r"<span data-deadline>(.*?)</span>", re.S)
NEXT_TIMER = re.compile(r'<span data-next-timer="([a-z]+)">(.*?)</span>', re.S)


@pytest.fixture(scope="module")
def routing_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Alice, Bob and Carol form the dba team (two of them must approve a `drop_*`); Dave
    is no member. Everyone signs in with one password (argon2: hashed once per module)."""
    hashed = hash_password(PASSWORD)
    people = "".join(
        f'[people.{email.split("@")[0]}]\nname = "{email.split("@")[0].title()}"\n'
        f'email = "{email}"\npassword_hash = \'{hashed}\'\nprojects = ["*"]\n\n'
        for email in (ALICE, BOB, CAROL, DAVE)
    )
    rules = """
[teams.dba]
members = ["alice", "bob", "carol"]
email = "dba@example.org"
approvals_required = 2

[[rules]]
fn = "drop_*"
target = "team:dba"

[[rules]]
fn = "wipe_*"
target = "team:dba"
expires_after = "1h"
remind_every = "10m"

[[rules]]
fn = "move_*"
policy = { all_of = ["team:dba", { timeout = "30m", target = "person:dave" }] }
"""
    return write_config(tmp_path_factory.mktemp("policies") / "routing.toml", people + rules)


@pytest.fixture
async def gateway(db_url: str, routing_config: Path) -> AsyncIterator[RunningGateway]:
    async with running_gateway(test_settings(db_url, config=routing_config)) as running:
        yield running


@pytest.fixture
async def signed_in(gateway: RunningGateway) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """A browser per person, each signed in with their password (cookies kept)."""
    browsers = {
        email: httpx.AsyncClient(
            base_url=gateway.base_url, headers={"Origin": gateway.base_url}, timeout=30
        )
        for email in (ALICE, BOB, CAROL, DAVE)
    }
    try:
        for email, browser in browsers.items():
            answer = await browser.post(
                "/console/login", data={"email": email, "password": PASSWORD}
            )
            assert answer.status_code == 303, answer.text
            assert browser.cookies.get(COOKIE)
        yield browsers
    finally:
        for browser in browsers.values():
            await browser.aclose()


async def page(browser: httpx.AsyncClient, made: Created) -> str:
    response = await browser.get(f"/console/requests/{made.rid}")
    assert response.status_code == 200, response.text
    return response.text


def text_of(found: re.Match[str] | None) -> str:
    """A matched element's text, tags dropped and whitespace collapsed."""
    assert found is not None, "no such element on the page"
    return " ".join(
        html.unescape(re.sub(r"<[^>]+>", "", found.group(found.lastindex or 0))).split()
    )


async def waiting_on(browser: httpx.AsyncClient) -> set[str]:
    """The call ids of the signed-in person's queue, filtered to "waiting on me"."""
    response = await browser.get("/console", params={"mine": "1"})
    assert response.status_code == 200, response.text
    assert 'name="mine" value="1" checked' in response.text
    return set(CALL_ID.findall(response.text))


async def queue(browser: httpx.AsyncClient) -> set[str]:
    response = await browser.get("/console")
    assert response.status_code == 200, response.text
    return set(CALL_ID.findall(response.text))


async def approve(browser: httpx.AsyncClient, made: Created) -> httpx.Response:
    found = CSRF.search(await page(browser, made))
    assert found is not None
    path = f"/console/requests/{made.rid}"
    return await browser.post(path, data={"csrf": found.group(1), "action": "approve"})


async def test_a_team_quorum_shows_its_tree_with_no_approvals_yet(
    gateway: RunningGateway,
    request_factory: RequestFactory,
    signed_in: dict[str, httpx.AsyncClient],
) -> None:
    made = await request_factory(gateway, "quorum-0", fn="drop_table")
    shown = await page(signed_in[ALICE], made)
    assert text_of(PROGRESS.search(shown)) == "0 of 2 approvals"
    tree = text_of(re.search(r'<ul class="policy-tree" data-policy>(.*)</ul>', shown, re.S))
    assert tree.startswith("Any of (2 different people) 0 of 2 approvals · active")
    assert "email dba@example.org (rule 1) 0 of 1 approvals · active" in tree
    assert "approved by" not in tree
    assert DEADLINE.search(shown) is None and NEXT_TIMER.search(shown) is None


async def test_a_console_vote_shows_and_leaves_only_the_voters_waiting_queue(
    gateway: RunningGateway,
    request_factory: RequestFactory,
    signed_in: dict[str, httpx.AsyncClient],
) -> None:
    made = await request_factory(gateway, "quorum-1", fn="drop_table")
    for member in (ALICE, BOB, CAROL):
        assert "quorum-1" in await waiting_on(signed_in[member]), member
    assert "quorum-1" not in await waiting_on(signed_in[DAVE])  # no member: not asked
    assert "quorum-1" in await queue(signed_in[DAVE])  # but he sees it in the queue

    voted = await approve(signed_in[ALICE], made)
    assert voted.status_code == 303, voted.text
    row = await gateway.core.db.read(request_store.get_by_rid, made.rid)
    assert row is not None and row.status == "pending"  # one of two: still undecided

    shown = await page(signed_in[ALICE], made)
    line = "1 of 2 approvals: Alice (the web console)"
    assert text_of(PROGRESS.search(shown)) == line
    assert f"Your vote is recorded: {line}." in shown  # the notice after the redirect
    tree = text_of(re.search(r'<ul class="policy-tree" data-policy>(.*)</ul>', shown, re.S))
    assert "email dba@example.org (rule 1) 1 of 1 approvals · active · approved by Alice" in tree

    assert "quorum-1" not in await waiting_on(signed_in[ALICE])
    assert "quorum-1" in await queue(signed_in[ALICE])  # unfiltered, it is still there
    assert "quorum-1" in await waiting_on(signed_in[BOB])

    again = await approve(signed_in[ALICE], made)  # one person counts once
    assert again.status_code == 303
    assert text_of(PROGRESS.search(await page(signed_in[BOB], made))) == line

    assert (await approve(signed_in[BOB], made)).status_code == 303
    decided = await page(signed_in[BOB], made)
    assert text_of(PROGRESS.search(decided)) == (
        "2 of 2 approvals: Alice (the web console), Bob (the web console)"
    )
    assert 'data-status="approved"' in decided
    assert "quorum-1" not in await waiting_on(signed_in[CAROL])  # decided: nobody's any more


async def test_a_deadline_shows_with_the_next_timer(
    gateway: RunningGateway,
    request_factory: RequestFactory,
    signed_in: dict[str, httpx.AsyncClient],
) -> None:
    made = await request_factory(gateway, "deadline-1", fn="wipe_disk")
    expires_at = datetime.fromisoformat(made.wire["expires_at"])
    shown = await page(signed_in[BOB], made)
    assert text_of(DEADLINE.search(shown)) == f"Deadline: {when(expires_at.isoformat())} (in 59m)"
    timer = NEXT_TIMER.search(shown)
    assert timer is not None and timer.group(1) == "remind"  # at 10m, before the deadline
    assert text_of(timer).startswith("Next timer: reminder 1 at ")
    assert text_of(PROGRESS.search(shown)) == "0 of 2 approvals"


async def test_a_delayed_branch_is_not_active_yet_and_not_waiting_on_its_person(
    gateway: RunningGateway,
    request_factory: RequestFactory,
    signed_in: dict[str, httpx.AsyncClient],
) -> None:
    made = await request_factory(gateway, "delayed-1", fn="move_data")
    shown = await page(signed_in[DAVE], made)
    assert text_of(PROGRESS.search(shown)) == "0 of 3 approvals"
    tree = text_of(re.search(r'<ul class="policy-tree" data-policy>(.*)</ul>', shown, re.S))
    assert tree.startswith("All of 0 of 3 approvals · active")
    assert re.search(
        r"email dave@example\.org \(rule 3\) 0 of 1 approvals · after 30m · not yet active "
        r"\(from \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)",
        tree,
    ), tree
    assert "delayed-1" not in await waiting_on(signed_in[DAVE])  # his vote would not count yet
    assert "delayed-1" in await waiting_on(signed_in[CAROL])


async def test_a_request_without_a_policy_renders_as_before(
    gateway: RunningGateway,
    request_factory: RequestFactory,
    signed_in: dict[str, httpx.AsyncClient],
) -> None:
    open_to_all = await request_factory(gateway, "plain-1", fn="read_table")
    carols = await request_factory(gateway, "plain-2", fn="read_table", channel={"person": "carol"})
    shown = await page(signed_in[ALICE], open_to_all)
    assert "Approval policy" not in shown and "data-progress" not in shown
    assert DEADLINE.search(shown) is None and NEXT_TIMER.search(shown) is None
    assert 'value="approve"' in shown and 'data-status="pending"' in shown
    assert '<span class="pill">web <small>(default)</small></span>' in shown

    # Without a policy the route says who is asked: the console's target asks everyone.
    assert {"plain-1", "plain-2"} <= await waiting_on(signed_in[CAROL])
    assert "plain-1" in await waiting_on(signed_in[ALICE])
    assert "plain-2" not in await waiting_on(signed_in[ALICE])

    voted = await approve(signed_in[ALICE], open_to_all)
    assert voted.status_code == 303
    decided = await page(signed_in[ALICE], open_to_all)
    assert "Recorded: approved by Alice." in decided
    assert "data-progress" not in decided
    assert carols.call_id in await waiting_on(signed_in[CAROL])
    assert "plain-1" not in await waiting_on(signed_in[CAROL])
