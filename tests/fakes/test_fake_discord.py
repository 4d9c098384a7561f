"""FakeDiscord driven by the real discord.py client (REST and gateway)."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest
import yarl

from tests.fakes.discord import Call, FakeDiscord

USER_ID = "4242"


class Approve(discord.ui.DynamicItem[discord.ui.Button[Any]], template=r"gw:approve:(?P<rid>\w+)"):
    def __init__(self, rid: str) -> None:
        button: discord.ui.Button[Any] = discord.ui.Button(
            label="Approve", style=discord.ButtonStyle.success, custom_id=f"gw:approve:{rid}"
        )
        super().__init__(button)
        self.rid = rid

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> Approve:
        return cls(match["rid"])

    async def callback(self, interaction: discord.Interaction) -> None:
        assert isinstance(interaction.client, Bot)
        interaction.client.clicks.put_nowait((self.rid, interaction))
        await interaction.response.edit_message(view=None, embed=discord.Embed(title="Approved"))


class DenyModal(discord.ui.Modal, title="Deny request"):
    reason: discord.ui.TextInput[DenyModal] = discord.ui.TextInput(
        label="Reason", custom_id="reason", style=discord.TextStyle.paragraph
    )

    def __init__(self, rid: str) -> None:
        super().__init__(custom_id=f"gw:deny-modal:{rid}")
        self.rid = rid

    async def on_submit(self, interaction: discord.Interaction) -> None:
        assert isinstance(interaction.client, Bot)
        interaction.client.denials.put_nowait((self.rid, self.reason.value))
        await interaction.response.edit_message(view=None, embed=discord.Embed(title="Denied"))


class Deny(discord.ui.DynamicItem[discord.ui.Button[Any]], template=r"gw:deny:(?P<rid>\w+)"):
    def __init__(self, rid: str) -> None:
        button: discord.ui.Button[Any] = discord.ui.Button(
            label="Deny", style=discord.ButtonStyle.danger, custom_id=f"gw:deny:{rid}"
        )
        super().__init__(button)
        self.rid = rid

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> Deny:
        return cls(match["rid"])

    async def callback(self, interaction: discord.Interaction) -> None:
        await interaction.response.send_modal(DenyModal(self.rid))


class Bot(discord.Client):
    """A client that reports what it received through queues."""

    def __init__(self) -> None:
        super().__init__(intents=discord.Intents.none())
        # READY has no guilds; without this on_ready waits 2 s for them.
        self._connection.guild_ready_timeout = 0.1
        self.clicks: asyncio.Queue[tuple[str, discord.Interaction]] = asyncio.Queue()
        self.denials: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.interactions: asyncio.Queue[discord.Interaction] = asyncio.Queue()
        self.add_dynamic_items(Approve, Deny)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        self.interactions.put_nowait(interaction)


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    server = await FakeDiscord().start()
    monkeypatch.setattr(discord.http.Route, "BASE", server.api_url)
    gateway = yarl.URL(server.gateway_url)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", gateway)
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def bot(fake: FakeDiscord) -> AsyncIterator[Bot]:
    client = Bot()
    await client.login(FakeDiscord.TOKEN)
    connecting = asyncio.create_task(client.connect())
    try:
        async with asyncio.timeout(10):
            await client.wait_until_ready()
        yield client
    finally:
        await client.close()
        async with asyncio.timeout(10):
            await connecting  # re-raises whatever ended the gateway loop


def channel(client: discord.Client) -> discord.PartialMessageable:
    return client.get_partial_messageable(int(FakeDiscord.CHANNEL_ID))


async def send_request(client: discord.Client, rid: str) -> discord.Message:
    view = discord.ui.View(timeout=None)
    view.add_item(Approve(rid))
    view.add_item(Deny(rid))
    embed = discord.Embed(title=f"Request {rid}", description="Deploy v2 to prod?")
    return await channel(client).send(embed=embed, view=view)


def is_message_post(call: Call) -> bool:
    return call.method == "POST" and re.fullmatch(r"/channels/\d+/messages", call.path) is not None


async def test_login_and_ready(fake: FakeDiscord, bot: Bot) -> None:
    assert bot.user is not None
    assert bot.user.id == int(FakeDiscord.BOT_USER_ID)
    assert bot.application_id == int(FakeDiscord.APPLICATION_ID)
    assert fake.identify_count == 1
    assert [(c.method, c.path, c.status, c.authorized) for c in fake.calls] == [
        ("GET", "/users/@me", 200, True),
        ("GET", "/oauth2/applications/@me", 200, True),
    ]


async def test_wrong_token_fails_login(fake: FakeDiscord) -> None:
    client = discord.Client(intents=discord.Intents.none())
    try:
        with pytest.raises(discord.LoginFailure):
            await client.login("not-the-token")
    finally:
        await client.close()
    [call] = fake.calls
    assert (call.path, call.status, call.authorized) == ("/users/@me", 401, False)


async def test_message_with_embed_and_buttons_is_stored(fake: FakeDiscord, bot: Bot) -> None:
    message = await send_request(bot, "r1")

    [stored] = fake.messages_in(FakeDiscord.CHANNEL_ID)
    assert stored["id"] == str(message.id)
    assert stored["embeds"][0]["title"] == "Request r1"
    [row] = stored["components"]
    assert row["type"] == 1
    assert [(b["type"], b["custom_id"]) for b in row["components"]] == [
        (2, "gw:approve:r1"),
        (2, "gw:deny:r1"),
    ]
    # discord.py parsed the echoed message back.
    assert message.author.id == int(FakeDiscord.BOT_USER_ID)
    assert message.embeds[0].title == "Request r1"
    assert isinstance(message.components[0], discord.ActionRow)
    call = await fake.wait_for_call(is_message_post)
    assert call.authorized
    assert call.json_body["components"] == stored["components"]


async def test_click_reaches_dynamic_item_and_updates_message(fake: FakeDiscord, bot: Bot) -> None:
    message = await send_request(bot, "r1")

    interaction_id = await fake.click("gw:approve:r1", message_id=str(message.id), user_id=USER_ID)

    async with asyncio.timeout(10):
        rid, interaction = await bot.clicks.get()
    assert rid == "r1"
    assert isinstance(interaction.user, discord.Member)
    assert (interaction.user.id, interaction.guild_id) == (int(USER_ID), int(fake.GUILD_ID))
    callback = await fake.wait_for_callback(interaction_id)
    assert callback["type"] == 7
    assert callback["data"]["components"] == []
    assert callback["data"]["embeds"][0]["title"] == "Approved"
    stored = fake.messages[str(message.id)]
    assert stored["components"] == []
    assert stored["embeds"][0]["title"] == "Approved"
    assert fake.edits_of(str(message.id)) == [callback["data"]]


async def test_click_in_a_dm(fake: FakeDiscord, bot: Bot) -> None:
    user = await bot.fetch_user(int(USER_ID))
    assert user.name == f"user{USER_ID}"
    view = discord.ui.View(timeout=None)
    view.add_item(Approve("r2"))
    message = await user.send("Deploy?", view=view)
    dm_id = fake.dm_channels[USER_ID]["id"]
    assert [m["id"] for m in fake.messages_in(dm_id)] == [str(message.id)]

    await fake.click("gw:approve:r2", message_id=str(message.id), user_id=USER_ID, guild=False)

    async with asyncio.timeout(10):
        _, interaction = await bot.clicks.get()
    assert isinstance(interaction.user, discord.User)
    assert interaction.guild_id is None
    assert isinstance(interaction.channel, discord.DMChannel)


async def test_deny_opens_modal_and_submit_reaches_it(fake: FakeDiscord, bot: Bot) -> None:
    message = await send_request(bot, "r1")
    click_id = await fake.click("gw:deny:r1", message_id=str(message.id), user_id=USER_ID)
    modal = await fake.wait_for_callback(click_id)
    assert modal["type"] == 9
    assert modal["data"]["custom_id"] == "gw:deny-modal:r1"

    submit_id = await fake.submit_modal(
        "gw:deny-modal:r1", {"reason": "too risky"}, user_id=USER_ID, message_id=str(message.id)
    )

    async with asyncio.timeout(10):
        assert await bot.denials.get() == ("r1", "too risky")
        seen = [await bot.interactions.get(), await bot.interactions.get()]
    assert [i.type for i in seen] == [
        discord.InteractionType.component,
        discord.InteractionType.modal_submit,
    ]
    assert seen[1].data is not None
    assert seen[1].data["components"][0]["components"][0]["value"] == "too risky"  # type: ignore[typeddict-item]
    callback = await fake.wait_for_callback(submit_id)
    assert callback["type"] == 7
    assert fake.messages[str(message.id)]["embeds"][0]["title"] == "Denied"


async def test_file_upload_becomes_an_attachment(fake: FakeDiscord, bot: Bot) -> None:
    upload = discord.File(io.BytesIO(b"hello"), filename="plan.txt")

    message = await channel(bot).send("see attached", file=upload)

    [attachment] = message.attachments
    assert (attachment.filename, attachment.size) == ("plan.txt", 5)
    stored = fake.messages[str(message.id)]
    assert (stored["content"], stored["attachments"][0]["id"]) == (
        "see attached",
        str(attachment.id),
    )
    call = await fake.wait_for_call(is_message_post)
    assert call.json_body["attachments"] == [{"id": 0, "filename": "plan.txt"}]


async def test_dm_to_blocked_user_is_forbidden(fake: FakeDiscord, bot: Bot) -> None:
    fake.dm_blocked.add(USER_ID)
    user = await bot.fetch_user(int(USER_ID))

    with pytest.raises(discord.Forbidden) as raised:
        await user.send("Deploy?")

    assert raised.value.code == 50007
    opened = await fake.wait_for_call(lambda c: c.path == "/users/@me/channels")
    assert (opened.status, opened.json_body) == (200, {"recipient_id": int(USER_ID)})
    post = await fake.wait_for_call(is_message_post)
    assert post.status == 403
    assert fake.messages == {}


async def test_rate_limit_is_waited_out(fake: FakeDiscord, bot: Bot) -> None:
    fake.fail_next("POST", r"/channels/\d+/messages", status=429, retry_after=0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()

    message = await channel(bot).send("hello")

    # asyncio may wake up to one clock tick early.
    assert loop.time() - started >= 0.19
    assert [c.status for c in fake.calls if is_message_post(c)] == [429, 200]
    assert [m["id"] for m in fake.messages_in(fake.CHANNEL_ID)] == [str(message.id)]


async def test_server_error_is_retried(fake: FakeDiscord, bot: Bot) -> None:
    message = await channel(bot).send("hello")
    fake.fail_next("PATCH", r"/channels/\d+/messages/\d+", status=502)

    await message.edit(content="edited")

    assert [c.status for c in fake.calls if c.method == "PATCH"] == [502, 200]
    assert fake.messages[str(message.id)]["content"] == "edited"
    [edit] = fake.edits_of(str(message.id))
    assert edit["content"] == "edited"


async def test_drop_connection_resumes_the_session(fake: FakeDiscord, bot: Bot) -> None:
    message = await send_request(bot, "r1")
    resumed = asyncio.ensure_future(bot.wait_for("resumed", timeout=10))

    await fake.drop_connection()
    await resumed

    assert (fake.identify_count, fake.resume_count) == (1, 1)
    await fake.wait_ready()
    interaction_id = await fake.click("gw:approve:r1", message_id=str(message.id), user_id=USER_ID)
    assert (await fake.wait_for_callback(interaction_id))["type"] == 7


async def test_click_while_disconnected_is_replayed_on_resume(fake: FakeDiscord, bot: Bot) -> None:
    message = await send_request(bot, "r1")

    async with fake.disconnected():
        interaction_id = await fake.click(
            "gw:approve:r1", message_id=str(message.id), user_id=USER_ID
        )
        assert bot.clicks.empty()

    async with asyncio.timeout(10):
        rid, _ = await bot.clicks.get()
    assert rid == "r1"
    assert (await fake.wait_for_callback(interaction_id))["type"] == 7
    assert (fake.identify_count, fake.resume_count) == (1, 1)
    assert fake.dropped_dispatches == []


async def test_unknown_route_is_404_json_and_recorded(fake: FakeDiscord) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{fake.api_url}/guilds/1/roles") as response,
    ):
        assert response.status == 404
        # Exactly this: discord.py does not parse `application/json; charset=utf-8`.
        assert response.headers["Content-Type"] == "application/json"
        assert await response.json() == {"code": 0, "message": "404: Not Found"}
    [call] = fake.calls
    assert (call.method, call.path, call.status, call.authorized) == (
        "GET",
        "/guilds/1/roles",
        404,
        False,
    )


async def test_defer_then_edit_original_and_followup(fake: FakeDiscord, bot: Bot) -> None:
    message = await send_request(bot, "r1")
    # No item handles this custom_id: the test answers through on_interaction.
    interaction_id = await fake.click("gw:slow:r1", message_id=str(message.id), user_id=USER_ID)
    async with asyncio.timeout(10):
        interaction = await bot.interactions.get()

    await interaction.response.defer()  # DEFERRED_UPDATE_MESSAGE: no visible change yet
    edited = await interaction.edit_original_response(content="done", view=None)
    note = await interaction.followup.send("only you see this", ephemeral=True, wait=True)

    assert (await fake.wait_for_callback(interaction_id))["type"] == 6
    assert edited.id == message.id
    stored = fake.messages[str(message.id)]
    assert (stored["content"], stored["components"]) == ("done", [])
    assert fake.messages[str(note.id)]["flags"] & discord.MessageFlags.ephemeral.flag
    assert fake.messages[str(note.id)]["channel_id"] == fake.CHANNEL_ID


async def test_ephemeral_reply(fake: FakeDiscord, bot: Bot) -> None:
    message = await send_request(bot, "r1")
    interaction_id = await fake.click("gw:other", message_id=str(message.id), user_id=USER_ID)
    async with asyncio.timeout(10):
        interaction = await bot.interactions.get()

    response = await interaction.response.send_message("not yours", ephemeral=True)

    callback = await fake.wait_for_callback(interaction_id)
    assert (callback["type"], callback["data"]["content"]) == (4, "not yours")
    assert isinstance(response.resource, discord.InteractionMessage)
    assert response.resource.flags.ephemeral
    assert fake.messages[str(response.resource.id)]["content"] == "not yours"
    assert fake.messages[str(message.id)]["components"] != []  # the request is untouched


async def test_gateway_protocol(fake: FakeDiscord) -> None:
    """The handshake, resume and re-identify rules, with a bare WebSocket client."""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(fake.gateway_url + "?v=10&encoding=json") as ws:
            assert await ws.receive_json() == {"op": 10, "d": {"heartbeat_interval": 41250}}
            await ws.send_json({"op": 1, "d": None})
            assert (await ws.receive_json())["op"] == 11
            await ws.send_json({"op": 6, "d": {"token": fake.TOKEN, "session_id": "x", "seq": 0}})
            assert await ws.receive_json() == {"op": 9, "d": False}
            await ws.send_json({"op": 2, "d": {"token": fake.TOKEN}})
            ready = await ws.receive_json()
            assert (ready["t"], ready["s"]) == ("READY", 1)
            assert ready["d"]["resume_gateway_url"] == fake.gateway_url
            await fake.wait_ready()
            assert await fake.dispatch("TEST_EVENT", {"n": 1}) == 2
            assert (await ws.receive_json())["s"] == 2

            await fake.drop_connection()
            await fake.dispatch("TEST_EVENT", {"n": 2})  # queued for the old session

        async with session.ws_connect(fake.gateway_url) as ws:
            await ws.receive_json()  # HELLO
            await ws.send_json({"op": 2, "d": {"token": fake.TOKEN}})
            ready = await ws.receive_json()
            assert (ready["t"], ready["s"]) == ("READY", 1)
        assert [frame["d"] for frame in fake.dropped_dispatches] == [{"n": 2}]
        assert (fake.identify_count, fake.resume_count) == (2, 0)
