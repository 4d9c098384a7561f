"""Discord's "Approve and allow…" select and "Edit and approve" modal, end to end: the
gateway's real discord.py bot against the fake Discord, choices and submissions pushed as
INTERACTION_CREATE, answers read from the recorded callbacks and the HumanLayer API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gateway.policies import grants
from tests.channels.discord.helpers import (
    ALICE,
    BOB,
    CHANNEL,
    CHANNEL_MESSAGE,
    EPHEMERAL,
    MALLORY,
    MODAL,
    TEAM_CHANNEL,
    TO_CHANNEL,
    UPDATE_MESSAGE,
    custom_ids,
    gateway_with_bot,
    get,
    outcome_field,
    posted_message,
)
from tests.factories import Created, RequestFactory
from tests.fakes.discord import Call, FakeDiscord
from tests.helpers import events, eventually, outbox_idle
from tests.services.inprocess import RunningGateway, test_settings, write_config

SELECT = 3  # a string select's component type


def grant_select(message: dict[str, Any]) -> dict[str, Any]:
    """The message's "Approve and allow…" select."""
    components = [c for row in message["components"] for c in row["components"]]
    [select] = [c for c in components if c["type"] == SELECT]
    found: dict[str, Any] = select
    return found


def value_of(select: dict[str, Any], label: str) -> str:
    """The value of the option a person reads as `label`."""
    return str(next(o["value"] for o in select["options"] if o["label"] == label))


def posts(fake: FakeDiscord) -> list[Call]:
    """Every message the bot posted through REST."""
    return [c for c in fake.calls if c.method == "POST" and c.path.endswith("/messages")]


async def event_details(gateway: RunningGateway, call_id: str) -> dict[str, list[Any]]:
    """A request's audit events by type: the details of each."""
    found: dict[str, list[Any]] = {}
    for event in (await events(gateway, call_id))["events"]:
        found.setdefault(event["type"], []).append(event["detail"])
    return found


async def read_file(
    gateway: RunningGateway, factory: RequestFactory, call_id: str, run_id: str, path: str
) -> Created:
    """A `read_file` call posted to the Discord channel, once its deliveries ran."""
    return await factory(
        gateway,
        call_id,
        channel=TO_CHANNEL,
        run_id=run_id,
        fn="read_file",
        kwargs={"path": path},
        settle=True,
    )


async def test_approve_and_allow_approves_the_next_call_in_the_run_without_a_post(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    rid = (await read_file(gateway, request_factory, "g1", "run-1", "/a")).rid
    message = posted_message(fake, "g1")
    select = grant_select(message)
    assert select["custom_id"] == f"gw:grant:{rid}"
    assert select["placeholder"] == "Approve and allow…"
    chosen = value_of(select, "this function in this run, for 1 hour")
    clicked = await fake.click(
        select["custom_id"],
        message_id=message["id"],
        user_id=ALICE,
        component_type=SELECT,
        values=[chosen],
    )
    callback = await fake.wait_for_callback(clicked)
    assert callback["type"] == UPDATE_MESSAGE and callback["data"]["components"] == []
    assert "allowed read\\_file in this run, for 1 hour" in outcome_field(callback["data"])
    assert (await get(gateway, "g1"))["status"]["approved"] is True
    await eventually(lambda: outbox_idle(gateway))
    assert fake.messages[message["id"]]["components"] == []  # no select, no edit button left
    [grant] = await grants.listing(gateway.core)

    posted_before = len(posts(fake))
    again = await read_file(gateway, request_factory, "g2", "run-1", "/b")
    assert again.wire["status"]["approved"] is True  # in the create's own answer
    assert len(posts(fake)) == posted_before  # nobody was asked
    [auto] = (await event_details(gateway, "g2"))["auto_approved"]
    assert auto["grant"] == grant.id and auto["granted_by"]["user_id"] == ALICE

    other = await read_file(gateway, request_factory, "g3", "run-2", "/a")
    assert other.wire["status"]["approved"] is None
    assert grant_select(posted_message(fake, "g3"))  # another run goes to people


QUORUM = f"""
[people.alice]
discord = "{ALICE}"
[people.bob]
discord = "{BOB}"
[teams.pair]
members = ["alice", "bob"]
discord_channel = "{TEAM_CHANNEL}"
approvals_required = 2

[[rules]]
fn = "read_file"
run_id = "quorum"
target = "team:pair"
"""


async def test_under_a_quorum_nothing_is_offered_and_crafted_clicks_change_nothing(
    tmp_path: Path, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    config = write_config(tmp_path / "routing.toml", QUORUM)
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/quorum.db", config=config)
    async with gateway_with_bot(settings, fake) as gateway:
        made = await request_factory(
            gateway, "q1", run_id="quorum", fn="read_file", kwargs={"path": "/a"}, settle=True
        )
        rid, message = made.rid, posted_message(fake, "q1")
        assert message["channel_id"] == TEAM_CHANNEL
        assert custom_ids(message) == [f"gw:approve:{rid}", f"gw:reject:{rid}"]
        # Alice may vote here, but one answer does not decide: no grant, no edit.
        crafted = [
            fake.click(
                f"gw:grant:{rid}",
                message_id=message["id"],
                user_id=ALICE,
                component_type=SELECT,
                values=["run:900"],
            ),
            fake.click(f"gw:edit:{rid}", message_id=message["id"], user_id=ALICE),
            fake.submit_modal(
                f"gw:modal:edit:{rid}", {"0": "/x"}, user_id=ALICE, message_id=message["id"]
            ),
        ]
        for interaction in crafted:
            callback = await fake.wait_for_callback(await interaction)
            assert callback["type"] == CHANNEL_MESSAGE  # no modal, no update
            assert callback["data"]["flags"] == EPHEMERAL
            assert "not offered" in callback["data"]["content"]
        assert await grants.listing(gateway.core) == []
        trail = await event_details(gateway, "q1")
        assert "voted" not in trail and "decided" not in trail
        assert (await get(gateway, "q1"))["status"]["approved"] is None
        assert custom_ids(fake.messages[message["id"]]) == [f"gw:approve:{rid}", f"gw:reject:{rid}"]


async def waiting(gateway: RunningGateway) -> bool:
    return len(gateway.core.waiters) >= 1


async def test_edit_and_approve_hands_the_agent_the_edited_arguments(
    gateway: RunningGateway, fake: FakeDiscord, request_factory: RequestFactory
) -> None:
    kwargs = {"path": "/etc/passwd", "lines": 10, "opts": {"follow": True}}
    route = {"discord": {"channel_id": CHANNEL, "allowed_responder_ids": [ALICE]}}
    rid = (await request_factory(gateway, "e1", channel=route, kwargs=kwargs, settle=True)).rid
    message = posted_message(fake, "e1")
    assert f"gw:edit:{rid}" in custom_ids(message)
    async with gateway.client() as agent:
        long_poll = asyncio.create_task(agent.get("/function_calls/e1", params={"wait": 30}))
        await eventually(lambda: waiting(gateway))

        async def opened(user_id: str) -> dict[str, Any]:
            clicked = await fake.click(f"gw:edit:{rid}", message_id=message["id"], user_id=user_id)
            return await fake.wait_for_callback(clicked)

        async def submitted(values: dict[str, str], user_id: str = ALICE) -> dict[str, Any]:
            modal_id = f"gw:modal:edit:{rid}"
            sent = await fake.submit_modal(
                modal_id, values, user_id=user_id, message_id=message["id"]
            )
            return await fake.wait_for_callback(sent)

        # Someone else may neither open the form nor submit a crafted one.
        refused = await opened(MALLORY)
        assert refused["type"] == CHANNEL_MESSAGE and "not allowed" in refused["data"]["content"]
        crafted = await submitted({"0": "/", "1": "1", "2": "{}"}, user_id=MALLORY)
        assert crafted["data"]["flags"] == EPHEMERAL and "not allowed" in crafted["data"]["content"]

        modal = await opened(ALICE)
        assert modal["type"] == MODAL and modal["data"]["custom_id"] == f"gw:modal:edit:{rid}"
        inputs = [row["components"][0] for row in modal["data"]["components"]]
        assert [(i["label"], i["value"]) for i in inputs] == [
            ("path", "/etc/passwd"),
            ("lines", "10"),
            ("opts", '{\n  "follow": true\n}'),
        ]

        bad = await submitted({"0": "/tmp/safe", "1": "10", "2": "{not json"})
        assert bad["type"] == CHANNEL_MESSAGE and bad["data"]["flags"] == EPHEMERAL
        assert bad["data"]["content"].startswith("opts: not valid JSON")
        assert (await get(gateway, "e1"))["gateway_status"] == "pending"
        assert not long_poll.done()

        await opened(ALICE)
        # An input the form never had is not an argument: the stored call says what exists.
        done = await submitted({"0": "/tmp/safe", "1": "5", "2": '{"follow": false}', "9": "x"})
        assert done["type"] == UPDATE_MESSAGE and done["data"]["components"] == []
        assert "with edited arguments (lines, opts, path)" in outcome_field(done["data"])
        answer = (await long_poll).json()
    assert answer["status"]["approved"] is True
    assert answer["status"]["updated_kwargs"] == {
        "path": "/tmp/safe",
        "lines": 5,
        "opts": {"follow": False},
    }
