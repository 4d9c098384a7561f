"""The limits' arithmetic on a hand-turned clock: the create-rate token bucket, the channel
count of a create body, the plan that stops at the target cap, and the MCP session ledger."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import routing
from gateway.api.limits import CreateRate, channel_nodes
from gateway.conditions import Facts
from gateway.errors import InvalidInput
from gateway.mcp.sessions import SessionLedger
from gateway.policies import plans
from gateway.routing import RoutingConfig
from gateway.wire.models import ContactChannel


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_then_its_rate() -> None:
    clock = Clock()
    rate = CreateRate(rate=2.0, burst=3, clock=clock)
    assert [rate.wait(7) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rate.wait(7) == pytest.approx(0.5)  # one token comes back every half second
    assert rate.wait(8) == 0.0  # another key: its own bucket
    clock.now += 0.5
    assert rate.wait(7) == 0.0
    assert rate.wait(7) == pytest.approx(0.5)
    clock.now += 60  # a long pause refills up to the burst, never past it
    assert [rate.wait(7) for _ in range(4)][-1] == pytest.approx(0.5)


def test_idle_keys_are_forgotten_so_the_buckets_stay_few() -> None:
    clock = Clock()
    rate = CreateRate(rate=10.0, burst=5, clock=clock)  # an empty bucket is full in 0.5 s
    for key in range(10_000):
        rate.wait(key)
        clock.now += 0.01
    assert len(rate.buckets) <= 51  # the keys of the last half second
    drained = [rate.wait(99_999) for _ in range(6)]
    assert drained[-1] > 0  # a busy key is remembered
    clock.now += 0.49
    rate.wait(1)
    assert 99_999 in rate.buckets


def nested(fanout: int, depth: int) -> dict[str, Any]:
    channel: dict[str, Any] = {"email": {"address": "a@example.com"}}
    for _ in range(depth):
        channel = {"any_of": [channel] * fanout}
    return channel


def test_the_channel_count_stops_just_past_the_limit() -> None:
    body = {"spec": {"channel": nested(20, 4)}}  # 168,421 channels
    assert channel_nodes(body, 100) == 101
    assert channel_nodes({"spec": {"channel": nested(3, 2)}}, 100) == 13
    delayed = {"any_of": [{"timeout": 5, "channel": nested(2, 1)}]}
    assert channel_nodes({"spec": {"channel": delayed}}, 100) == 4
    odd: list[Any] = [None, [], {"spec": []}, {"spec": {"channel": "x"}}, {"spec": {}}]
    for body in odd:
        assert channel_nodes(body, 100) == 0
    assert channel_nodes({"spec": {"channel": {"any_of": [1, "x", None]}}}, 100) == 1


def test_a_plan_stops_building_at_the_target_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []

    def counted(config: RoutingConfig, channel: ContactChannel) -> Any:
        made = routing.channel_targets(config, channel)
        built.append(len(made))
        return made

    monkeypatch.setattr(plans, "channel_targets", counted)
    channel = ContactChannel.model_validate(nested(20, 3))  # 8,000 targets
    facts = Facts(
        kind="function_call", fn="f", run_id="r", kwargs={}, project="default", key="k", state={}
    )
    with pytest.raises(InvalidInput, match=r"more than 50 targets.*GATEWAY_MAX_TARGETS"):
        plans.plan(
            RoutingConfig(),
            channel=channel,
            facts=facts,
            key_target=None,
            project=None,
            project_target=None,
            max_targets=50,
        )
    assert sum(built) == 51


def open_sessions(ledger: SessionLedger, key: int, *sids: str) -> None:
    """Each as the door opens it: admitted, answered with its id, the answer done."""
    for sid in sids:
        assert ledger.admit(key)
        ledger.opened(key, sid)
        ledger.settled(key, sid)


def test_a_key_at_its_session_cap_is_refused_until_one_ends() -> None:
    ledger = SessionLedger(per_key=2, idle_seconds=300, clock=Clock())
    open_sessions(ledger, 1, "s1", "s2")
    assert not ledger.admit(1)
    assert ledger.admit(2)  # another key is not held back
    ledger.forget(1, "s1")  # its client's DELETE
    assert ledger.admit(1)


def test_an_opening_request_counts_before_its_answer() -> None:
    ledger = SessionLedger(per_key=1, idle_seconds=300, clock=Clock())
    assert ledger.admit(1)
    assert not ledger.admit(1)  # the first initialize is still being answered
    ledger.settled(1, None)  # it failed: no session
    assert ledger.admit(1)


def test_an_idle_session_stops_counting_when_the_sdk_ends_it_a_busy_one_never() -> None:
    clock = Clock()
    ledger = SessionLedger(per_key=2, idle_seconds=300, clock=clock)
    open_sessions(ledger, 1, "idle", "streaming")
    with ledger.serving(1, "streaming"):  # an open GET stream, for longer than the timeout
        clock.now += 299
        assert ledger.count(1) == 2
        clock.now += 1
        assert ledger.count(1) == 1
        clock.now += 1000
        assert ledger.count(1) == 1
    assert ledger.count(1) == 1  # its idle time starts now
    clock.now += 300
    assert ledger.count(1) == 0 and ledger.held == {}
