"""A supervisor held by an ownership, without a database: it runs only while this replica
owns the connection, and says who does."""

from __future__ import annotations

import asyncio

import pytest

from gateway.errors import ChannelDown
from gateway.runtime.channel_states import describe
from gateway.runtime.retry import RetryPolicy
from gateway.runtime.supervisor import Supervisor
from gateway.seam.connections import ChannelState, Link, State, require_up

FAST = RetryPolicy(base=0.01, cap=0.02, jitter=0)


def held(sessions: list[str]) -> Supervisor:
    async def session(link: Link) -> None:
        sessions.append("started")
        link.up()
        try:
            await asyncio.Event().wait()
        finally:
            sessions.append("ended")

    supervisor = Supervisor("discord", session, connect_timeout=5, policy=FAST)
    supervisor.hold("here:1")
    return supervisor


async def test_a_held_connection_runs_only_while_this_replica_owns_it() -> None:
    sessions: list[str] = []
    supervisor = held(sessions)
    supervisor.start()
    await asyncio.sleep(0)  # a session would have been scheduled by now
    assert sessions == [] and supervisor.health.describe() == "standby (waiting for the lock)"

    supervisor.take_over()
    await asyncio.wait_for(supervisor.wait_for(State.CONNECTED), timeout=5)
    assert supervisor.owned and describe(supervisor) == "connected (owned by this replica, here:1)"

    await supervisor.stand_by("there:2")
    assert sessions == ["started", "ended"]
    assert not supervisor.owned and describe(supervisor) == "standby (owned by there:2)"
    await supervisor.aclose()


async def test_a_connection_never_started_is_not_run_on_take_over() -> None:
    sessions: list[str] = []
    supervisor = held(sessions)
    supervisor.take_over()  # the channel did not start it (it failed to start, or closed)
    await asyncio.sleep(0)
    assert sessions == [] and not supervisor.wanted
    await supervisor.aclose()


async def test_a_standby_sends_through_the_platform_api_while_another_replica_connects() -> None:
    standby = held([])
    await standby.stand_by("there:2")
    require_up("slack", standby)  # no ChannelDown: the owner holds the socket
    alone = Supervisor("slack", lambda _link: asyncio.sleep(0), connect_timeout=5, policy=FAST)
    with pytest.raises(ChannelDown, match="slack is not connected: connecting"):
        require_up("slack", alone)  # one process, not connected yet: the send waits
    await standby.stand_by(None, "no lock connection: ConnectionRefusedError")
    assert standby.health.describe() == "standby (no lock connection: ConnectionRefusedError)"


def test_the_channel_state_names_the_owner_and_the_replica() -> None:
    state = ChannelState("discord", [], "standby (owned by there:2)", None, "there:2", "here:1")
    assert state.to_dict() | {"since": None} == {
        "name": "discord",
        "configured": True,
        "missing": [],
        "connection": "standby (owned by there:2)",
        "since": None,
        "owner": "there:2",
        "replica": "here:1",
    }
