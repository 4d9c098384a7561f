""" "Approve and allow…" and "Edit and approve" in Slack, end to end: the select and the button
on the posted message, Slack's signed block_actions and view_submission payloads through the
real Bolt app, the real humanlayer SDK for the agent, and the audit trail of what happened."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from humanlayer import ContactChannel, FunctionCallSpec, HumanLayer, SlackContactChannel

from gateway.policies import grants
from gateway.seam.grants import GrantView
from gateway.store import requests as request_store
from gateway.store import tables
from gateway.store.values import utcnow
from tests.channels.slack.helpers import (
    TO_C1,
    click,
    decided,
    edit_submit,
    pick,
    send,
    slack_channel,
    status,
)
from tests.factories import RequestFactory, rid_of
from tests.fakes.slack import Call, FakeSlack
from tests.helpers import add_webhook, events, eventually, jobs, make_due, outbox_idle
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config
from tests.services.receiver import WebhookReceiver

IN_THIS_RUN = "This function in this run"


def posts_about(fake: FakeSlack, call_id: str) -> list[Call]:
    """The requests' posts (not thread notes) Slack received for the call `call_id`."""
    return [
        call
        for call in fake.calls_to("chat.postMessage", include_failed=False)
        if f"call `{call_id}`" in json.dumps(call.params.get("blocks") or [])
    ]


async def posted(fake: FakeSlack, call_id: str) -> bool:
    return bool(posts_about(fake, call_id))


def elements(post: Call) -> list[dict[str, Any]]:
    """What may be clicked or chosen on a post."""
    return [e for b in post.params["blocks"] if b["type"] == "actions" for e in b["elements"]]


def grant_option(post: Call, group: str, text: str) -> dict[str, Any]:
    """The option `text` of the group `group` in the post's "Approve and allow…" select."""
    [select] = [e for e in elements(post) if e["type"] == "static_select"]
    assert select["placeholder"]["text"] == "Approve and allow…"
    [options] = [g["options"] for g in select["option_groups"] if g["label"]["text"] == group]
    [option] = [o for o in options if o["text"]["text"] == text]
    return dict(option)


def sdk(gateway: RunningGateway, key: str, run_id: str) -> HumanLayer:
    """The agent: the published SDK with its key, posting to C1, call ids sdk-<run>-<n>."""
    numbers = itertools.count(1)
    return HumanLayer(
        api_key=key,
        api_base_url=gateway.api_base,
        run_id=run_id,
        contact_channel=ContactChannel(slack=SlackContactChannel(channel_or_user_id="C1")),
        sleep=lambda _seconds: None,  # a call a grant covers is decided in the create's answer
        genid=lambda prefix: f"sdk-{run_id}-{next(numbers)}",
    )


def read_file_tool(hl: HumanLayer, ran: list[str]) -> Callable[..., Any]:
    @hl.require_approval()
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        return f"contents of {path}"

    return read_file


async def sdk_create(hl: HumanLayer, call_id: str, path: str) -> None:
    """The agent asks, without waiting for the answer (the SDK's create_function_call)."""
    spec = FunctionCallSpec(fn="read_file", kwargs={"path": path}, channel=hl.contact_channel)
    await asyncio.to_thread(hl.create_function_call, spec, call_id)


async def goes_to_people(gateway: RunningGateway, fake: FakeSlack, call_id: str) -> None:
    """The request is posted to Slack and waits for a person."""
    await eventually(lambda: posted(fake, call_id))
    assert (await status(gateway, call_id))["gateway_status"] == "pending"


async def grant_from_slack(
    gateway: RunningGateway, fake: FakeSlack, call_id: str, duration: str
) -> GrantView:
    """Alice chooses "this function in this run, <duration>" on the post of `call_id`."""
    await eventually(lambda: posted(fake, call_id))
    [post] = posts_about(fake, call_id)
    option = grant_option(post, IN_THIS_RUN, duration)
    rid = await rid_of(gateway, call_id)
    assert (await send(gateway, pick(fake, rid, option["value"]))).status_code == 200
    assert (await decided(gateway, call_id))["status"]["approved"] is True
    [grant] = await grants.listing(gateway.core, live_only=True)
    return grant


async def trail(gateway: RunningGateway, call_id: str) -> dict[str, list[dict[str, Any]]]:
    """A request's audit events by type: the details of each."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event in (await events(gateway, call_id))["events"]:
        found.setdefault(event["type"], []).append(event["detail"])
    return found


async def test_approve_and_allow_in_this_run_lets_the_next_call_through_at_once(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    agent = await gateway.new_key("default", name="agent")
    made = await request_factory(
        gateway, "first", channel=TO_C1, run_id="run-1", key=agent, fn="read_file",
        kwargs={"path": "/a"}, settle=True,
    )  # fmt: skip
    [post] = posts_about(fake, "first")
    option = grant_option(post, IN_THIS_RUN, "for 1 hour")
    assert option["value"] == "run:3600"
    assert (await send(gateway, pick(fake, made.rid, option["value"]))).status_code == 200

    approved = await decided(gateway, "first")
    assert approved["status"]["approved"] is True
    assert approved["status"]["user_info"]["user_id"] == "U0ALICE"
    [update] = await fake.wait_for("chat.update", 1)
    assert "Approved by <@U0ALICE>" in update.params["text"]
    assert update.params["text"].endswith("and allowed read_file in this run, for 1 hour")
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"]
    [grant] = await grants.listing(gateway.core)
    assert (grant.fn, grant.run_id, grant.granted_by["user_id"]) == (
        "read_file",
        "run-1",
        "U0ALICE",
    )

    # The agent calls it again in that run: the SDK runs the function, nobody is asked.
    ran: list[str] = []
    read_file = read_file_tool(sdk(gateway, agent, "run-1"), ran)
    assert await asyncio.to_thread(read_file, path="/b") == "contents of /b"
    assert ran == ["/b"]
    await eventually(lambda: outbox_idle(gateway, but="note"))
    assert posts_about(fake, "sdk-run-1-1") == []
    audit = await trail(gateway, "sdk-run-1-1")
    assert [e["grant"] for e in audit["auto_approved"]] == [grant.id]
    assert "delivered" not in audit

    # The same function in another run goes to people.
    await sdk_create(sdk(gateway, agent, "run-2"), "other-run", "/b")
    await goes_to_people(gateway, fake, "other-run")


async def test_the_grant_tells_its_thread_what_it_approved_in_one_note_a_minute(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    agent = await gateway.new_key("default", name="agent")
    made = await request_factory(
        gateway, "first", channel=TO_C1, run_id="run-1", key=agent, fn="read_file",
        kwargs={"path": "/a"}, settle=True,
    )  # fmt: skip
    [post] = posts_about(fake, "first")
    option = grant_option(post, IN_THIS_RUN, "for 1 hour")
    assert (await send(gateway, pick(fake, made.rid, option["value"]))).status_code == 200
    await decided(gateway, "first")
    [delivery] = await gateway.core.db.read(request_store.list_deliveries, [made.rid])
    ref = json.loads(delivery.ref_json or "{}")

    def notes() -> list[str]:
        thread = fake.thread(ref["channel"], ref["ts"])
        return [m["text"] for m in thread if m["metadata"]["event_type"] == "gateway_note"]

    async def covered(calls: int) -> None:
        """`calls` more calls the grant approves, then its note comes due."""
        for _ in range(calls):
            call = await request_factory(
                gateway, channel=TO_C1, run_id="run-1", key=agent, fn="read_file",
                kwargs={"path": "/b"},
            )  # fmt: skip
            assert call.wire["status"]["approved"] is True
        waiting = [
            j for j in await jobs(gateway) if j["kind"] == "note" and j["status"] == "pending"
        ]
        assert len(waiting) == 1  # one note for them all, due a minute after the first
        await make_due(gateway, waiting[0]["id"])

    await covered(3)

    async def noted(count: int) -> bool:
        return len(notes()) == count

    await eventually(lambda: noted(1))
    assert "standing grant approved 3 more calls of read_file in this run (run-1)" in notes()[0]
    await covered(1)
    await eventually(lambda: noted(2))
    assert "approved 1 more call of read_file" in notes()[1]
    assert posts_about(fake, "first") == [post]  # notes only, in its thread


async def test_a_revoked_or_expired_grant_lets_nothing_through(
    gateway: RunningGateway, fake: FakeSlack
) -> None:
    agent = await gateway.new_key("default", name="agent")
    hl = sdk(gateway, agent, "run-1")
    await sdk_create(hl, "first", "/a")
    grant = await grant_from_slack(gateway, fake, "first", "for 1 hour")
    assert [g.id for g in await grants.revoke_ids(gateway.core, [grant.id], "test")] == [grant.id]
    await sdk_create(hl, "after-revoke", "/a")
    await goes_to_people(gateway, fake, "after-revoke")

    await grant_from_slack(gateway, fake, "after-revoke", "for 15 minutes")
    table = tables.StandingGrant.__table__  # type: ignore[attr-defined]
    past = utcnow() - timedelta(seconds=1)

    def expire(tx: Any) -> None:  # as if the 15 minutes went by
        tx.execute(sa.update(table).where(table.c.revoked_at.is_(None)).values(expires_at=past))

    await gateway.core.db.write(expire)
    await sdk_create(hl, "after-expiry", "/a")
    await goes_to_people(gateway, fake, "after-expiry")
    assert [g.uses for g in await grants.listing(gateway.core)] == [0, 0]


@pytest.mark.parametrize("value", ["key:forever", "run:999999", "run:3600x", ""])
async def test_a_grant_the_select_does_not_offer_is_refused_and_decides_nothing(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory, value: str
) -> None:
    made = await request_factory(gateway, "crafted", channel=TO_C1, settle=True)
    offered = [o["value"] for g in _select(fake)["option_groups"] for o in g["options"]]
    assert value not in offered
    await send(gateway, pick(fake, made.rid, value, respond_id="alice"))
    [told] = await fake.wait_for_response("alice")
    assert told["response_type"] == "ephemeral"
    assert "is not a grant this gateway offers" in told["text"]
    assert (await status(gateway, "crafted"))["gateway_status"] == "pending"
    assert await grants.listing(gateway.core) == []
    assert "decided" not in await trail(gateway, "crafted")


def _select(fake: FakeSlack) -> dict[str, Any]:
    [post] = fake.calls_to("chat.postMessage")
    [select] = [e for e in elements(post) if e["type"] == "static_select"]
    return select


QUORUM = """
[people.alice]
slack = "U0ALICE"
[people.bob]
slack = "U0BOB"
[teams.pair]
members = ["alice", "bob"]
slack_channel = "C1"
approvals_required = 2

[[rules]]
fn = "read_file"
target = "team:pair"
"""


@pytest.fixture
async def quorum(tmp_path: Path, fake: FakeSlack) -> AsyncIterator[RunningGateway]:
    """Read requests go to a pair of people in C1, both of whom must approve."""
    config = write_config(tmp_path / "routing.toml", QUORUM)
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/quorum.db", config=config)
    async with running_gateway(settings, channels={"slack": slack_channel(fake)}) as running:
        yield running


async def test_under_a_quorum_nothing_is_granted_or_edited_not_even_by_a_crafted_payload(
    quorum: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    made = await request_factory(quorum, "q", fn="read_file", kwargs={"path": "/a"}, settle=True)
    [post] = posts_about(fake, "q")
    assert [e["action_id"].split(":")[1] for e in elements(post)] == ["approve", "reject"]

    await send(quorum, pick(fake, made.rid, "run:900", respond_id="grant"))
    [told] = await fake.wait_for_response("grant")
    assert told["response_type"] == "ephemeral"
    assert "a standing grant is not offered on this request" in told["text"]

    await send(quorum, click(fake, made.rid, "gw_edit", respond_id="edit"))
    [told] = await fake.wait_for_response("edit")
    assert told["text"] == "Editing the arguments is not offered on this request."
    assert fake.calls_to("views.open") == []
    answered = await send(quorum, edit_submit(made.rid, {"gw_arg_0": "/etc/passwd"}))
    assert answered.status_code == 200
    [dm] = await direct_messages(fake, "U0ALICE")  # a modal has no response_url
    assert "editing the arguments is not offered" in dm.params["text"]

    assert (await status(quorum, "q"))["gateway_status"] == "pending"
    assert await grants.listing(quorum.core) == []
    audit = await trail(quorum, "q")
    assert not {"voted", "decided", "edited", "granted"} & audit.keys()  # not even a vote


async def direct_messages(fake: FakeSlack, user: str) -> list[Call]:
    """The messages the app sent to `user` directly (waiting for the first)."""

    async def sent() -> bool:
        return bool([c for c in fake.calls_to("chat.postMessage") if c.params["channel"] == user])

    await eventually(sent)
    return [c for c in fake.calls_to("chat.postMessage") if c.params["channel"] == user]


async def waiting(gateway: RunningGateway) -> bool:
    """Whether a long-poll is waiting on a request of this gateway."""
    return len(gateway.core.waiters) > 0


async def test_edit_and_approve_through_the_modal(
    gateway: RunningGateway,
    fake: FakeSlack,
    request_factory: RequestFactory,
    receiver: WebhookReceiver,
) -> None:
    await add_webhook(gateway, receiver.url)
    kwargs = {"path": "/etc/passwd", "lines": 10, "opts": {"follow": False}}
    made = await request_factory(
        gateway, "edit-me", channel=TO_C1, fn="read_file", kwargs=kwargs, settle=True
    )
    [post] = posts_about(fake, "edit-me")
    [button] = [e for e in elements(post) if e.get("text", {}).get("text") == "Edit and approve"]
    assert button["action_id"] == f"gw:edit:{made.rid}"

    assert (await send(gateway, click(fake, made.rid, "gw_edit"))).status_code == 200
    [opened] = await fake.wait_for("views.open", 1)
    assert opened.params["trigger_id"] == "trigger-U0ALICE"
    view = opened.params["view"]
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    assert [(b["label"]["text"], b["element"].get("initial_value")) for b in inputs] == [
        ("path", "/etc/passwd"),
        ("lines", "10"),
        ("opts", '{\n  "follow": false\n}'),
        ("Comment for the agent", None),
    ]
    assert inputs[2]["element"]["multiline"] is True and inputs[2]["hint"]["text"] == "JSON"
    metadata = view["private_metadata"]

    # Invalid JSON in the JSON field: the modal says so under that field; nothing is decided.
    typed = {"gw_arg_0": "/tmp/safe", "gw_arg_1": "10", "gw_arg_2": "{follow: no"}
    bad = await send(gateway, edit_submit(made.rid, typed, private_metadata=metadata))
    assert bad.json()["response_action"] == "errors"
    assert list(bad.json()["errors"]) == [inputs[2]["block_id"]]
    assert "not valid JSON" in bad.json()["errors"][inputs[2]["block_id"]]
    assert (await status(gateway, "edit-me"))["gateway_status"] == "pending"
    assert not {"decided", "edited"} & (await trail(gateway, "edit-me")).keys()

    # The agent is long-polling when the person submits the edited arguments.
    typed |= {"gw_arg_2": '{"follow": false}', "gw_comment": "read the copy instead"}
    async with gateway.client() as api:
        poll = asyncio.create_task(api.get("/function_calls/edit-me", params={"wait": 20}))
        await eventually(lambda: waiting(gateway))
        ok = await send(gateway, edit_submit(made.rid, typed, private_metadata=metadata))
        assert ok.status_code == 200 and not ok.content  # acked, the modal closes
        answer = (await poll).json()
    edited = {"path": "/tmp/safe", "lines": 10, "opts": {"follow": False}}
    assert answer["status"]["approved"] is True
    assert answer["status"]["updated_kwargs"] == edited
    assert answer["status"]["comment"] == "read the copy instead"

    [delivery] = await receiver.wait_for(1)
    payload = json.loads(delivery.body)
    assert payload["type"] == "function_call.completed"
    assert payload["event"]["status"]["updated_kwargs"] == edited
    [event] = (await trail(gateway, "edit-me"))["edited"]
    assert event == {"original": kwargs, "updated": edited, "changed": ["path"]}
    [update] = await fake.wait_for("chat.update", 1)
    assert "with edited arguments (path)" in update.params["text"]
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"]


async def test_arguments_are_read_from_the_request_not_from_the_modal(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    """A submission whose metadata claims other arguments, or names fields the call does not
    have, approves only the request's own arguments as typed."""
    made = await request_factory(
        gateway, "own-args", channel=TO_C1, fn="read_file", kwargs={"path": "/a"}, settle=True
    )
    metadata = json.dumps({"rid": made.rid, "kwargs": {"path": "/x", "sudo": True}})
    typed = {"gw_arg_0": "/b", "gw_arg_1": "true", "gw_arg_9": "evil"}
    await send(gateway, edit_submit(made.rid, typed, private_metadata=metadata))
    answer = await decided(gateway, "own-args")
    assert answer["status"]["updated_kwargs"] == {"path": "/b"}
