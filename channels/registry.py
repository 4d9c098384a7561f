"""The registry: a plain dict from channel name to its factory, which takes the channel's
`ChannelContext`; only the composition root (`gateway.app`, `gateway.cli`) reads it."""

from __future__ import annotations

from collections.abc import Callable

from channels.discord.channel import DiscordChannel
from channels.email.channel import EmailChannel
from channels.slack.channel import SlackChannel
from channels.teams.channel import TeamsChannel
from channels.telegram.channel import TelegramChannel
from channels.web import WebChannel
from gateway.seam import Channel, ChannelContext, ChannelName

ChannelFactory = Callable[[ChannelContext], Channel]

REGISTRY: dict[str, ChannelFactory] = {
    ChannelName.WEB: WebChannel,
    ChannelName.SLACK: SlackChannel,
    ChannelName.DISCORD: DiscordChannel,
    ChannelName.EMAIL: EmailChannel,
    ChannelName.TEAMS: TeamsChannel,
    ChannelName.TELEGRAM: TelegramChannel,
}

__all__ = ["REGISTRY", "ChannelFactory"]
