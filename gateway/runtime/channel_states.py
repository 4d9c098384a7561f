"""What the console, `gateway check` and the API say about each channel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.runtime.supervisor import State, Supervisor
from gateway.seam.channel import Channel, Connected
from gateway.store import as_utc


@dataclass(frozen=True)
class ChannelState:
    name: str
    missing: list[str]  # settings to set before it can deliver; empty when configured
    # `connected`, `retrying: <why>`...; None without a connection. With several replicas,
    # `standby (owned by <replica>)`, or on the owner `connected (owned by this replica, <id>)`.
    connection: str | None
    since: datetime | None
    owner: str | None = None  # the replica that owns the connection (several replicas only)
    replica: str | None = None  # the replica answering (several replicas only)

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
            "owner": self.owner,
            "replica": self.replica,
        }


def channel_state(name: str, channel: Channel) -> ChannelState:
    supervisor = channel.connection if isinstance(channel, Connected) else None
    if supervisor is None:
        return ChannelState(name, channel.missing_settings(), connection=None, since=None)
    health = supervisor.health
    return ChannelState(
        name=name,
        missing=channel.missing_settings(),
        connection=describe(supervisor),
        since=health.since,
        owner=supervisor.owner,
        replica=supervisor.replica,
    )


def describe(supervisor: Supervisor) -> str:
    """The connection's state; with several replicas, which of them owns it."""
    health = supervisor.health
    if supervisor.replica is None or not supervisor.owned or health.state is State.STANDBY:
        return health.describe()
    return f"{health.describe()} (owned by this replica, {supervisor.replica})"


def channel_states(channels: Mapping[str, Channel]) -> list[ChannelState]:
    return [channel_state(name, channel) for name, channel in channels.items()]
