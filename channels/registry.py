"""The registry: a plain dict from channel name to a factory; only the composition root reads it."""

from __future__ import annotations

from collections.abc import Callable

from channels.base import Channel
from channels.discord.channel import DiscordChannel
from channels.email.channel import EmailChannel
from channels.slack.channel import SlackChannel
from channels.web import WebChannel

REGISTRY: dict[str, Callable[[], Channel]] = {
    "web": WebChannel,
    "slack": SlackChannel,
    "discord": DiscordChannel,
    "email": EmailChannel,
}

__all__ = ["REGISTRY"]
