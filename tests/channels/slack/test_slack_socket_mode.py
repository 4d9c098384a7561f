"""Slack over Socket Mode: the same Bolt listeners, fed over a WebSocket the gateway dials out
(slack_sdk's real aiohttp client against the fake's /link) instead of signed HTTP callbacks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.channel import SlackChannel
from channels.slack.listeners import SlackListeners
from channels.slack.socket_mode import connect, disconnect
from gateway.seam.connections import State
from tests.channels.slack.helpers import (
    C1_ALICE_ONLY,
    SIGNING_SECRET,
    TO_C1,
    assert_posted,
    click,
    decided,
    event_callback,
    parent_ts,
    reply,
    slack_channel,
)
from tests.factories import RequestFactory
from tests.fakes.slack import FakeSlack
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

APP_TOKEN = "xapp-1-test"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as slack:
        yield slack


@pytest.fixture
async def gateway(tmp_path: Path, fake: FakeSlack) -> AsyncIterator[RunningGateway]:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/slack.db")
    channel = slack_channel(fake)
    async with running_gateway(settings, channels={"slack": channel}) as running:
        yield running


@pytest.fixture
async def handler(
    gateway: RunningGateway, fake: FakeSlack
) -> AsyncIterator[AsyncSocketModeHandler]:
    """The Bolt app the Slack channel builds, connected over Socket Mode instead of HTTP."""
    app = AsyncApp(
        signing_secret=SIGNING_SECRET,
        client=AsyncWebClient(token="xoxb-test", base_url=fake.base_url),
    )
    SlackListeners(gateway.context("slack").answers).register(app)
    connected = await connect(app, APP_TOKEN, fake.base_url)
    try:
        yield connected
    finally:
        await disconnect(connected)
    assert not fake.socket_connected


async def test_connect_opens_a_socket_with_the_app_token(
    handler: AsyncSocketModeHandler, fake: FakeSlack
) -> None:
    await fake.wait_for_socket()
    [opened] = fake.calls_to("apps.connections.open")
    assert opened.token == APP_TOKEN and not opened.failed


async def test_a_click_over_socket_mode_approves(
    handler: AsyncSocketModeHandler,
    gateway: RunningGateway,
    fake: FakeSlack,
    request_factory: RequestFactory,
) -> None:
    rid = (await request_factory(gateway, "sm-approve", channel=TO_C1, settle=True)).rid
    assert_posted(fake)
    envelope = await fake.send_envelope("interactive", click(fake, rid, "gw_approve"))
    assert await fake.wait_for_ack(envelope) == {"envelope_id": envelope}  # a bare ack()
    approved = await decided(gateway, "sm-approve")
    assert approved["status"]["approved"] is True
    assert approved["status"]["user_info"]["user_id"] == "U0ALICE"
    [update] = await fake.wait_for("chat.update", 1)
    assert "Approved by <@U0ALICE>" in update.params["text"]


async def test_a_thread_reply_over_socket_mode_answers_a_question(
    handler: AsyncSocketModeHandler,
    gateway: RunningGateway,
    fake: FakeSlack,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "sm-q", contact=True, channel=TO_C1, settle=True)
    assert_posted(fake)
    thread = await parent_ts(gateway, "sm-q", "contact_requests")
    envelope = await fake.send_envelope(
        "events_api",
        event_callback(reply(thread, "eu-west-1, please")),
        accepts_response_payload=False,
    )
    assert await fake.wait_for_ack(envelope) == {"envelope_id": envelope}
    answered = await decided(gateway, "sm-q", "contact_requests")
    assert answered["status"]["response"] == "eu-west-1, please"
    assert answered["status"]["user_info"]["user_id"] == "U0ALICE"
    [note] = [c for c in await fake.wait_for("chat.postMessage", 2) if c.params.get("thread_ts")]
    assert note.params["thread_ts"] == thread and "Answered by <@U0ALICE>" in note.params["text"]


async def test_a_refused_thread_reply_over_socket_mode_is_told_privately(
    handler: AsyncSocketModeHandler,
    gateway: RunningGateway,
    fake: FakeSlack,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "sm-guarded", channel=C1_ALICE_ONLY, settle=True)
    assert_posted(fake)
    thread = await parent_ts(gateway, "sm-guarded")
    envelope = await fake.send_envelope(
        "events_api", event_callback(reply(thread, "approve", user="U0MALLORY"))
    )
    await fake.wait_for_ack(envelope)
    [told] = await fake.wait_for("chat.postEphemeral", 1, within=3)
    assert told.params["user"] == "U0MALLORY" and "not allowed" in told.params["text"]


async def test_a_bot_token_cannot_open_a_socket(gateway: RunningGateway, fake: FakeSlack) -> None:
    app = AsyncApp(
        signing_secret=SIGNING_SECRET,
        client=AsyncWebClient(token="xoxb-test", base_url=fake.base_url),
    )
    with pytest.raises(SlackApiError) as refused:
        await connect(app, "xoxb-test", fake.base_url)
    assert refused.value.response["error"] == "not_allowed_token_type"
    assert not fake.socket_connected


async def test_an_unreachable_slack_fails_the_connect_at_once_without_retrying() -> None:
    """The channel's supervisor retries and says why; a retry inside the attempt (slack_sdk's
    default waits 0.5-1.5 s) would only make a short connect bound report "no answer"."""
    accepted: list[int] = []

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        await reader.readline()
        writer.close()  # before any answer: aiohttp's ServerDisconnectedError

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    app = AsyncApp(signing_secret=SIGNING_SECRET, client=AsyncWebClient(token="xoxb-test"))
    try:
        with pytest.raises(aiohttp.ClientError):
            await connect(app, APP_TOKEN, f"http://127.0.0.1:{port}/api/")
    finally:
        server.close()
        await server.wait_closed()
    assert len(accepted) == 1


async def test_the_fake_socket_greets_takes_acks_and_closes_on_stop() -> None:
    fake = await FakeSlack().start()
    try:
        async with aiohttp.ClientSession() as session:
            socket = await session.ws_connect(f"ws://127.0.0.1:{fake.port}/link")
            hello = await socket.receive_json(timeout=5)
            assert hello["type"] == "hello" and hello["connection_info"]["app_id"] == "A1"
            await fake.wait_for_socket()
            envelope = await fake.send_envelope("interactive", {"type": "block_actions"})
            sent = await socket.receive_json(timeout=5)
            assert sent == {
                "envelope_id": envelope,
                "type": "interactive",
                "payload": {"type": "block_actions"},
                "accepts_response_payload": True,
            }
            await socket.send_json({"envelope_id": envelope, "payload": {"text": "ok"}})
            assert (await fake.wait_for_ack(envelope))["payload"] == {"text": "ok"}
            with pytest.raises(TimeoutError):
                await fake.wait_for_ack("never-sent", within=0.1)
            await fake.stop()
            closing = await socket.receive(timeout=5)
            assert closing.type == aiohttp.WSMsgType.CLOSE
            assert not fake.socket_connected
            await socket.close()
    finally:
        await fake.stop()


async def test_the_gateway_opens_socket_mode_from_its_settings(
    tmp_path: Path, request_factory: RequestFactory
) -> None:
    """SLACK_APP_TOKEN set: the channel connects at start and closes at shutdown."""
    async with FakeSlack() as fake:
        channels = {"slack": slack_channel(fake, app_token="xapp-1-gateway")}
        settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/sm.db")
        async with running_gateway(settings, channels=channels) as gateway:
            channel = gateway.core.channels["slack"]
            assert isinstance(channel, SlackChannel) and channel.connection is not None
            await channel.connection.wait_for(State.CONNECTED)
            assert fake.socket_connected
            [opened] = fake.calls_to("apps.connections.open")
            assert opened.token == "xapp-1-gateway"
            rid = (await request_factory(gateway, "sm-own", channel=TO_C1, settle=True)).rid
            assert_posted(fake)
            envelope = await fake.send_envelope("interactive", click(fake, rid, "gw_approve"))
            await fake.wait_for_ack(envelope)
            assert (await decided(gateway, "sm-own"))["status"]["approved"] is True
        await fake.wait_for_socket_close()  # closed with the gateway
