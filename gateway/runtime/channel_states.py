"""What the console, `gateway check` and the API say about each channel."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.seam.channel import Channel, Connected
from gateway.seam.connections import ChannelState, Connection, State


def connection_of(channel: Channel | None) -> Connection | None:
    """The channel's supervised platform connection, if it keeps one."""
    return channel.connection if isinstance(channel, Connected) else None


def connected(channel: Channel | None) -> bool:
    """Whether a channel's supervised connection is up (a channel without one: False)."""
    connection = connection_of(channel)
    return connection is not None and connection.health.state is State.CONNECTED


def channel_state(name: str, channel: Channel) -> ChannelState:
    supervisor = connection_of(channel)
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


def describe(supervisor: Connection) -> str:
    """The connection's state; with several replicas, which of them owns it."""
    health = supervisor.health
    if supervisor.replica is None or not supervisor.owned or health.state is State.STANDBY:
        return health.describe()
    return f"{health.describe()} (owned by this replica, {supervisor.replica})"


def channel_states(channels: Mapping[str, Channel]) -> list[ChannelState]:
    return [channel_state(name, channel) for name, channel in channels.items()]
