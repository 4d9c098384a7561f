"""What the console, `gateway check` and the API say about each channel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.seam import Channel, Connected
from gateway.store import as_utc


@dataclass(frozen=True)
class ChannelState:
    name: str
    missing: list[str]  # settings to set before it can deliver; empty when configured
    connection: str | None  # `connected`, `retrying: <why>`...; None without a connection
    since: datetime | None

    @property
    def configured(self) -> bool:
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "configured": self.configured,
            "missing": self.missing,
            "connection": self.connection,
            "since": as_utc(self.since).isoformat() if self.since else None,
        }


def channel_state(name: str, channel: Channel) -> ChannelState:
    supervisor = channel.connection if isinstance(channel, Connected) else None
    health = supervisor.health if supervisor is not None else None
    return ChannelState(
        name=name,
        missing=channel.missing_settings(),
        connection=health.describe() if health else None,
        since=health.since if health else None,
    )


def channel_states(channels: Mapping[str, Channel]) -> list[ChannelState]:
    return [channel_state(name, channel) for name, channel in channels.items()]
