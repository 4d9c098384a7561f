"""Standing grants in the web console: "Approve and allow…" on a request's page gives one (the
next call it covers is approved at create, in the giver's name), the grants page lists what
the person's projects hold and revokes them, and a revoke counts from the next create. Who
may revoke: the operator, an admin, or the person who gave the grant; an unknown grant or
another project's is a 404, and nothing changes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from channels.web.auth import hash_password
from gateway.policies import grants
from gateway.seam import Answered, AnsweredIn, Responder, Verb
from gateway.seam.grants import GrantView
from tests.channels.web.helpers import csrf, email_of, people, sign_in_page, signed_in
from tests.factories import Created, RequestFactory
from tests.services.inprocess import RunningGateway, write_config


@pytest.fixture(scope="module")
def routing_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Alice sees every project; Bob and Carol only `default`; Root is an admin there."""
    text = people(
        hash_password("correct horse battery staple"),
        "alice",
        "bob",
        "carol",
        "root",
        admins=("root",),
        bob="default",
        carol="default",
        root="default",
    )
    return write_config(tmp_path_factory.mktemp("grants") / "routing.toml", text)


def as_person(name: str) -> Responder:
    """Who a signed-in person answers as in the console."""
    return Responder(AnsweredIn.WEB, email_of(name), name.title(), email=email_of(name))


async def read_file(
    factory: RequestFactory,
    gateway: RunningGateway,
    call_id: str,
    *,
    run_id: str = "run-1",
    key: str | None = None,
) -> Created:
    return await factory(
        gateway, call_id, run_id=run_id, key=key, fn="read_file", kwargs={"path": f"/{call_id}"}
    )


async def granted(
    gateway: RunningGateway, made: Created, by: str, value: str = "run:3600"
) -> GrantView:
    """A grant `by` gave while approving `made` (the one answer path, as the console does)."""
    done = await gateway.context().answers.answer(made.rid, Verb.GRANT, as_person(by), grant=value)
    assert isinstance(done, Answered), done
    listed = await grants.listing(gateway.core)
    return next(grant for grant in listed if grant.source_rid == made.rid)


async def live(gateway: RunningGateway, grant_id: str) -> bool:
    listed = await grants.listing(gateway.core)
    return next(grant for grant in listed if grant.id == grant_id).live


async def test_approve_and_allow_in_chromium_then_revoke_on_the_grants_page(
    sqlite_console: RunningGateway, page: Page, request_factory: RequestFactory
) -> None:
    gateway = sqlite_console
    first = await read_file(request_factory, gateway, "g1")
    await sign_in_page(page, gateway, "alice")
    await page.goto(f"{gateway.base_url}/console/requests/{first.rid}")

    await page.get_by_text("Approve and allow…").click()  # opens the form
    choice = page.get_by_label("Also allow")
    groups = await choice.locator("optgroup").evaluate_all("gs => gs.map(g => g.label)")
    assert groups == [
        "these exact arguments",
        "this function in this run",
        "this function for this agent",
    ]
    await choice.select_option("run:3600")
    await expect(choice.locator("option:checked")).to_have_text(
        "this function in this run, for 1 hour"
    )
    await page.get_by_role("button", name="Approve and allow", exact=True).click()
    await expect(page.locator(".notice")).to_have_text(
        "Recorded: approved by Alice, allowing read_file in this run, for 1 hour."
    )

    second = await read_file(request_factory, gateway, "g2")
    assert second.wire["status"]["approved"] is True  # in the create's own answer
    other_run = await read_file(request_factory, gateway, "g2b", run_id="run-2")
    assert other_run.wire["status"]["approved"] is None

    await page.goto(f"{gateway.base_url}/console/requests/{second.rid}")
    outcome = page.locator("[data-outcome]")
    await expect(outcome).to_contain_text("Approved by Alice's standing grant at ")
    await page.locator("[data-grant-link]").click()
    row = page.locator("tr[data-grant]")
    await expect(row).to_have_count(1)
    await expect(row).to_have_attribute("data-state", "live")
    await expect(row).to_contain_text("read_file in this run (run-1)")
    await expect(row).to_contain_text("Alice (the web console)")
    await expect(row.locator("[data-uses]")).to_have_text("1")
    await expect(row.get_by_role("link", name="given on this request")).to_have_attribute(
        "href", f"/console/requests/{first.rid}"
    )

    await row.get_by_role("button", name="Revoke", exact=True).click()
    await expect(page.locator(".notice")).to_have_text("Revoked: read_file in this run (run-1).")
    await expect(row).to_have_attribute("data-state", "revoked")
    await expect(row).to_contain_text(f"by Alice <{email_of('alice')}>")
    await expect(row.get_by_role("button")).to_have_count(0)

    third = await read_file(request_factory, gateway, "g3")
    assert third.wire["status"]["approved"] is None  # to people again
    [grant] = await grants.listing(gateway.core)
    assert grant.revoked_by == f"Alice <{email_of('alice')}>"


async def test_an_unknown_or_another_projects_grant_is_not_found_and_stays(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    elsewhere = await gateway.new_key("other", name="agent")
    foreign = await granted(
        gateway, await read_file(request_factory, gateway, "o1", key=elsewhere), "alice"
    )

    async with signed_in(gateway, "bob") as bob:  # Bob sees `default` only
        token = await csrf(bob, "/console/grants")
        listed = await bob.get("/console/grants")
        assert foreign.id not in listed.text
        for grant_id in ("no-such-grant", foreign.id):
            for action in ("revoke", "revoke-agent"):
                answer = await bob.post(
                    f"/console/grants/{grant_id}/{action}", data={"csrf": token}
                )
                assert answer.status_code == 404, answer.text
                assert "There is no such grant here." in answer.text
    assert await live(gateway, foreign.id)


async def test_only_the_giver_an_admin_or_the_operator_revokes(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    bobs = await granted(gateway, await read_file(request_factory, gateway, "b1"), "bob")

    async with signed_in(gateway, "carol") as carol:
        token = await csrf(carol, "/console/grants")
        page = await carol.get("/console/grants")
        assert f'data-grant="{bobs.id}"' in page.text
        assert f"/console/grants/{bobs.id}/revoke" not in page.text  # no button for her
        for action in ("revoke", "revoke-agent"):
            answer = await carol.post(f"/console/grants/{bobs.id}/{action}", data={"csrf": token})
            assert answer.status_code == 403, answer.text
    assert await live(gateway, bobs.id)

    async with signed_in(gateway, "bob") as bob:
        no_token = await bob.post(f"/console/grants/{bobs.id}/revoke", data={})
        assert no_token.status_code == 403 and "CSRF" in no_token.text
        assert await live(gateway, bobs.id)
        token = await csrf(bob, "/console/grants")
        answer = await bob.post(f"/console/grants/{bobs.id}/revoke", data={"csrf": token})
        assert answer.status_code == 303, answer.text
    assert not await live(gateway, bobs.id)
    [revoked] = await grants.listing(gateway.core)
    assert revoked.revoked_by == f"Bob <{email_of('bob')}>"


async def test_revoke_all_of_an_agent_revokes_that_keys_grants_only(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    other_agent = await gateway.new_key("default", name="other agent")
    first = await granted(gateway, await read_file(request_factory, gateway, "k1"), "bob")
    second = await granted(
        gateway, await read_file(request_factory, gateway, "k2", run_id="run-2"), "carol"
    )
    kept = await granted(
        gateway, await read_file(request_factory, gateway, "k3", key=other_agent), "bob"
    )

    async with signed_in(gateway, "bob") as bob:  # not an admin: the grants he gave
        token = await csrf(bob, "/console/grants")
        answer = await bob.post(f"/console/grants/{first.id}/revoke-agent", data={"csrf": token})
        assert answer.status_code == 303, answer.text
    assert [await live(gateway, g.id) for g in (first, second, kept)] == [False, True, True]

    async with signed_in(gateway, "root") as root:  # an admin: every grant of that key
        token = await csrf(root, "/console/grants")
        answer = await root.post(f"/console/grants/{second.id}/revoke-agent", data={"csrf": token})
        assert answer.status_code == 303, answer.text
        shown = await root.get(answer.headers["location"])
    assert "Revoked: read_file in this run (run-2)." in shown.text
    assert [await live(gateway, g.id) for g in (first, second, kept)] == [False, False, True]


async def test_a_grant_is_offered_only_where_one_answer_decides(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    question = await request_factory(gateway, "q1", contact=True)
    plain = await read_file(request_factory, gateway, "p1")
    async with signed_in(gateway, "alice") as alice:
        asked = (await alice.get(f"/console/requests/{question.rid}")).text
        call = (await alice.get(f"/console/requests/{plain.rid}")).text
    assert "Approve and allow" not in asked
    assert re.search(r'<option value="key:28800">[^<]*for 8 hours</option>', call)
    assert 'value="key:forever"' not in call  # until revoked only where the config says so
