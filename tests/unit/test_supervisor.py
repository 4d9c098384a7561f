"""The supervisor of platform connections: states, timeouts, backoff, restarts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from gateway.errors import DeliveryError
from gateway.runtime.retry import RetryPolicy
from gateway.runtime.supervisor import Supervisor
from gateway.seam.connections import Link, Session, State

FAST = RetryPolicy(base=0.01, cap=0.02, jitter=0)


@asynccontextmanager
async def supervised(
    session: Session, *, connect_timeout: float = 5, on_connected: bool = False
) -> AsyncIterator[tuple[Supervisor, list[str], asyncio.Event]]:
    calls: list[str] = []
    called = asyncio.Event()

    async def connected() -> None:
        calls.append("connected")
        called.set()

    supervisor = Supervisor(
        "test",
        session,
        connect_timeout=connect_timeout,
        policy=FAST,
        on_connected=connected if on_connected else None,
    )
    supervisor.start()
    try:
        yield supervisor, calls, called
    finally:
        await supervisor.aclose()


async def test_a_session_that_comes_up_is_connected_and_wakes_its_listener() -> None:
    ended = asyncio.Event()

    async def session(link: Link) -> None:
        link.up()
        try:
            await asyncio.Event().wait()  # runs until cancelled
        finally:
            ended.set()

    async with supervised(session, on_connected=True) as (supervisor, calls, called):
        health = await supervisor.wait_for(State.CONNECTED)
        assert health.describe() == "connected"
        await asyncio.wait_for(called.wait(), timeout=5)  # on_connected runs as its own task
        assert calls == ["connected"]
    assert ended.is_set(), "aclose must end the running session"


async def test_a_session_that_never_answers_times_out_and_is_tried_again() -> None:
    attempts = 0
    cancelled = 0

    async def session(_link: Link) -> None:
        nonlocal attempts, cancelled
        attempts += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled += 1
            raise

    async with supervised(session, connect_timeout=0.05) as (supervisor, _calls, _called):
        health = await supervisor.wait_for(State.RETRYING)
        assert "no answer within 0.05 s" in (health.reason or "")
        async with asyncio.timeout(5):
            while attempts < 3:
                await supervisor.wait_for(State.CONNECTING)
                await supervisor.wait_for(State.RETRYING)
    assert attempts >= 3 and cancelled >= 2


async def test_a_session_that_raises_is_retried_with_the_reason_shown() -> None:
    attempts = 0

    async def session(link: Link) -> None:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionRefusedError(111, "Connect call failed")
        link.up()
        await asyncio.Event().wait()

    async with supervised(session) as (supervisor, _calls, _called):
        retrying = await supervisor.wait_for(State.RETRYING)
        assert retrying.reason is not None
        assert retrying.reason.startswith("ConnectionRefusedError: [Errno 111] Connect call failed")
        assert "next try in" in retrying.reason
        await supervisor.wait_for(State.CONNECTED)
    assert attempts == 3


async def test_any_exception_is_survived_not_just_connection_errors() -> None:
    attempts = 0

    async def session(link: Link) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise KeyError("a bug in a platform client")
        link.up()
        await asyncio.Event().wait()

    async with supervised(session) as (supervisor, _calls, _called):
        await supervisor.wait_for(State.CONNECTED)
    assert attempts == 2


async def test_a_refused_credential_fails_for_good() -> None:
    attempts = 0

    async def session(_link: Link) -> None:
        nonlocal attempts
        attempts += 1
        raise DeliveryError("discord refused the bot token: Improper token", retryable=False)

    async with supervised(session) as (supervisor, _calls, _called):
        health = await supervisor.wait_for(State.FAILED)
        assert health.describe() == "failed: discord refused the bot token: Improper token"
        task = supervisor._task
        assert task is not None
        await asyncio.wait_for(asyncio.shield(task), timeout=5)  # the loop ended by itself
    assert attempts == 1


async def test_a_closed_connection_and_a_drop_are_reported() -> None:
    drops = 0

    async def session(link: Link) -> None:
        nonlocal drops
        link.up()
        drops += 1
        if drops == 1:
            link.down("the websocket dropped; reconnecting")
            await asyncio.Event().wait()
        # a second session just ends: the connection closed

    async with supervised(session) as (supervisor, _calls, _called):
        health = await supervisor.wait_for(State.RETRYING)
        assert health.reason == "the websocket dropped; reconnecting"


@pytest.mark.parametrize("failures", [1, 5, 60])
def test_backoff_grows_and_stays_under_the_cap(failures: int) -> None:
    policy = RetryPolicy(base=0.5, cap=60, jitter=0.2, rand=lambda: 1.0)
    assert policy.delay(failures) <= 60 * 1.2
    assert policy.delay(failures + 1) >= policy.delay(failures) or policy.delay(failures) >= 60
