"""The discord.py client: no privileged intents, no pings, one dynamic button class."""

from __future__ import annotations

import logging
import re
from typing import Any

import discord
import yarl

from channels.discord.interactions import Interactions
from channels.discord.settings import DiscordSettings
from gateway.callback_ids import BUTTON_PATTERN, CallbackId, Verb, encode
from gateway.supervisor import Link

# discord.py warns about these at every login; the gateway uses no voice and no guild cache.
_EXPECTED_WARNINGS = ("voice will NOT be supported", "Guilds intent seems to be disabled")


def _unexpected(record: logging.LogRecord) -> bool:
    return not any(text in record.getMessage() for text in _EXPECTED_WARNINGS)


for _name in ("discord.client", "discord.state"):
    logging.getLogger(_name).addFilter(_unexpected)

# Past this, a 429 is handed to the outbox (which honours Retry-After) instead of waited out.
MAX_RATELIMIT_WAIT_SECONDS = 30.0


class RequestButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=BUTTON_PATTERN):
    """Any of the gateway's buttons, rebuilt from its custom id on every click."""

    def __init__(self, click: CallbackId) -> None:
        super().__init__(discord.ui.Button(custom_id=encode(click.verb, click.rid, click.index)))
        self.click = click

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> RequestButton:
        index = match["index"]
        return cls(CallbackId(Verb(match["verb"]), match["rid"], int(index) if index else None))

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        client = interaction.client
        if isinstance(client, GatewayBot) and client.interactions is not None:
            await client.interactions.clicked(interaction, self.click)


class GatewayBot(discord.Client):
    def __init__(self, interactions: Interactions | None, link: Link | None) -> None:
        super().__init__(
            intents=discord.Intents.none(),  # interactions arrive without any intent
            allowed_mentions=discord.AllowedMentions.none(),
            max_ratelimit_timeout=MAX_RATELIMIT_WAIT_SECONDS,
        )
        self.interactions = interactions
        self.link = link

    # The supervisor's view of the websocket, which discord.py re-opens by itself.
    async def on_connect(self) -> None:  # READY received; on_ready waits 2 s more for guilds
        if self.link is not None:
            self.link.up()

    async def on_resumed(self) -> None:
        if self.link is not None:
            self.link.up()

    async def on_disconnect(self) -> None:
        if self.link is not None and not self.is_closed():
            self.link.down("the websocket dropped; discord.py is reconnecting")

    async def setup_hook(self) -> None:
        self.add_dynamic_items(RequestButton)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        if interaction.type is discord.InteractionType.modal_submit and self.interactions:
            await self.interactions.modal_submitted(interaction)


def point_at(settings: DiscordSettings) -> None:
    """discord.py reads both addresses from class attributes: one bot per process."""
    discord.http.Route.BASE = settings.api_url
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.gateway_url)
