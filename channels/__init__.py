"""Channels: one package per platform, and the registry the composition root reads."""

from __future__ import annotations

from collections.abc import Callable

from channels.base import Channel
from channels.placeholder import NotYetAvailable
from channels.web import WebChannel

REGISTRY: dict[str, Callable[[], Channel]] = {
    "web": WebChannel,
    "slack": lambda: NotYetAvailable("slack", ["SLACK_BOT_TOKEN"]),
    "discord": lambda: NotYetAvailable("discord", ["DISCORD_BOT_TOKEN"]),
    "email": lambda: NotYetAvailable("email", ["SMTP_HOST", "EMAIL_FROM"]),
}

__all__ = ["REGISTRY", "Channel"]
