"""The registry: a plain dict from channel name to a factory; only the composition root reads it."""

from __future__ import annotations

from collections.abc import Callable

from channels.discord.channel import DiscordChannel
from channels.email.channel import EmailChannel
from channels.slack.channel import SlackChannel
from channels.web import WebChannel
from gateway.seam.channel import Channel
from gateway.vocabulary import ChannelName

REGISTRY: dict[ChannelName, Callable[[], Channel]] = {
    ChannelName.WEB: WebChannel,
    ChannelName.SLACK: SlackChannel,
    ChannelName.DISCORD: DiscordChannel,
    ChannelName.EMAIL: EmailChannel,
}

__all__ = ["REGISTRY"]
