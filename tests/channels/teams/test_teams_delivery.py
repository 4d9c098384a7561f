"""Teams deliveries run at least once and show once: a retried send leaves one message, a
retried update one edit, a retried reminder or note one reply. Teams down at start holds up
nothing, the channel says why, and what waited goes out once Teams answers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from channels.teams.channel import TeamsChannel
from channels.teams.connector import as_delivery_error
from gateway.seam import RequestView, Target
from tests.channels.teams.helpers import (
    ALICE,
    BOB,
    OPS,
    TO_OPS,
    gateway_settings,
    installed,
    invoke,
    only_post,
    post,
    status,
    teams_channel,
)
from tests.factories import RequestFactory
from tests.fakes.teams import TENANT, FakeTeams
from tests.helpers import events, eventually, jobs, outbox_idle
from tests.services.door import Door
from tests.services.inprocess import RunningGateway, running_gateway

OPS_TARGET = Target(channel="teams", address={"conversation_id": OPS}, via="team:ops")


def channel_of(gateway: RunningGateway) -> TeamsChannel:
    channel = gateway.core.channels["teams"]
    assert isinstance(channel, TeamsChannel)
    return channel


async def view(gateway: RunningGateway, rid: str) -> RequestView:
    found = await gateway.context("teams").answers.view(rid)
    assert found is not None
    return found


async def test_a_send_repeated_after_it_posted_posts_once(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    # The outbox runs a send again when the process died before recording it as sent.
    made = await request_factory(gateway, "once", channel=TO_OPS, settle=True)
    [delivery] = (await events(gateway, "once"))["deliveries"]
    again = await channel_of(gateway).send(await view(gateway, made.rid), OPS_TARGET)
    assert again.ref["activity_id"] == only_post(fake).activity_id
    assert len(fake.calls_to("POST", r"/activities$")) == 1
    assert delivery["status"] == "sent"


async def test_a_send_that_failed_is_retried_and_posts_one_message(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    fake.fail_next("POST", r"/activities$", 503)
    await request_factory(gateway, "retried", channel=TO_OPS, settle=True)
    assert len(fake.calls_to("POST", r"/activities$")) == 2
    assert len(fake.posts_in(OPS)) == 1
    [delivery] = (await events(gateway, "retried"))["deliveries"]
    assert delivery["status"] == "sent"


async def test_a_retried_update_edits_once(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    made = await request_factory(gateway, "upd", channel=TO_OPS, settle=True)
    card = only_post(fake)
    fake.fail_next("PUT", r"/activities/", 500)
    async with gateway.client() as client:
        body = {"approved": False, "comment": "not on a Friday"}
        assert (await client.post("/agent/function_calls/upd/respond", json=body)).is_success
    await eventually(lambda: outbox_idle(gateway))
    [update_job] = [job for job in await jobs(gateway) if job["kind"] == "update"]
    assert update_job["status"] == "done" and update_job["attempts"] == 2
    assert len(card.edits) == 1  # the failed attempt changed nothing
    # Run again after it was made (a crash before the outbox recorded it): no second edit.
    ref = {"service_url": fake.service_url, "conversation_id": OPS, "activity_id": card.activity_id}
    await channel_of(gateway).update(await view(gateway, made.rid), OPS_TARGET, ref)
    assert len(fake.calls_to("PUT")) == 2 and len(card.edits) == 1


async def test_a_retried_reminder_or_note_replies_once_and_pings_only_people(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    made = await request_factory(gateway, "nudge", channel=TO_OPS, settle=True)
    card = only_post(fake)
    await post(gateway, fake, installed(fake, ALICE))  # Teams told the gateway her name
    ref = {"service_url": fake.service_url, "conversation_id": OPS, "activity_id": card.activity_id}
    channel, request = channel_of(gateway), await view(gateway, made.rid)
    everyone = [ALICE, BOB, OPS, "everyone"]  # a channel id and a word never become mentions
    for number in (1, 1, 2):
        await channel.remind(request, OPS_TARGET, ref, everyone, number=number)
    await channel.note(request, OPS_TARGET, ref, "<at>General</at> used the grant", key="g1 1")
    await channel.note(request, OPS_TARGET, ref, "<at>General</at> used the grant", key="g1 1")
    first, second, note = fake.replies_to(card.activity_id)
    assert len(fake.replies_to(card.activity_id)) == 3
    reminder = first.card
    mentioned = [e["mentioned"]["id"] for e in reminder["msteams"]["entities"]]
    assert mentioned == [ALICE, BOB]
    assert reminder["body"][0]["text"] == "<at>Alice</at> <at>approver</at>"
    assert second.card == reminder
    assert "msteams" not in note.card and "entities" not in note.activity


async def test_teams_down_at_start_holds_up_nothing_and_what_waited_goes_out(
    tmp_path: Path, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    door = Door()
    await door.hang()  # Teams' login and connector accept connections and never answer
    settings = gateway_settings(tmp_path).model_copy(
        update={"channel_connect_timeout_seconds": 1.0, "channel_retry_cap_seconds": 1.0}
    )
    factory = teams_channel(
        fake,
        token_url=door.url("http", f"/login/{TENANT}/oauth2/v2.0/token"),
        service_url=door.url("http", "/teams/"),
        allowed_service_urls=door.url("http", "/teams/"),
        openid_metadata_url=door.url("http", "/botframework/v1/.well-known/openidconfiguration"),
    )
    started = time.monotonic()
    try:
        async with running_gateway(settings, channels={"teams": factory}) as gateway:
            await request_factory(gateway, "waits", channel=TO_OPS)
            assert time.monotonic() - started < 2.0, "the API answered late"
            await eventually(lambda: _state_is(gateway, "retrying: ", "no answer within 1 s"))
            [delivery] = (await events(gateway, "waits"))["deliveries"]
            assert delivery["status"] in ("queued", "retrying")
            assert fake.messages == []

            await door.open(fake.port)  # Teams is back, on the same address
            await eventually(lambda: _state_is(gateway, "connected"))
            await eventually(lambda: outbox_idle(gateway))
            [delivery] = (await events(gateway, "waits"))["deliveries"]
            assert delivery["status"] == "sent"
            assert len(fake.messages) == 1
    finally:
        await door.close()


async def _state_is(gateway: RunningGateway, state: str, why: str = "") -> bool:
    """The Teams channel's state on the Channels page: `state`, because of `why`."""
    async with gateway.client() as client:
        response = await client.get(f"{gateway.base_url}/gateway/v1/channels")
    [teams] = [c for c in response.json()["channels"] if c["name"] == "teams"]
    said = str(teams["connection"])
    return said.startswith(state) and why in said


async def test_a_click_through_the_invoke_answers_before_the_outbox_edits(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    """The clicker's card changes in the invoke's answer; everyone's, once, through the
    connector: the outbox's update of the same card is not made twice."""
    await request_factory(gateway, "both", channel=TO_OPS, settle=True)
    card = only_post(fake)
    answered = await post(gateway, fake, invoke(fake, card, "Approve"))
    await eventually(lambda: outbox_idle(gateway))
    assert card.edits == [card.activity] and len(card.edits) == 1
    assert answered.json()["value"] == card.card
    assert (await status(gateway, "both"))["gateway_status"] == "approved"


def test_a_429_is_retried_after_its_retry_after_and_a_403_is_not_retried() -> None:
    def refused(status: int, headers: dict[str, str]) -> Any:
        info = aiohttp.RequestInfo(URL("https://x/"), "POST", CIMultiDictProxy(CIMultiDict()))
        proxy = CIMultiDictProxy(CIMultiDict(headers))
        return aiohttp.ClientResponseError(info, (), status=status, headers=proxy)

    limited = as_delivery_error(refused(429, {"Retry-After": "7"}))
    assert limited.retryable and limited.retry_after == 7.0
    assert not as_delivery_error(refused(403, {})).retryable
    assert as_delivery_error(httpx.ConnectError("refused")).retryable
