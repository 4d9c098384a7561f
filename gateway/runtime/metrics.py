"""Prometheus metrics for `GET /metrics` (off unless GATEWAY_METRICS_ENABLED).

Request, outbox and delivery figures are counted from the database at scrape time, in one
reader hop: intake and decisions pay nothing, a restart loses nothing, and every replica
reports the same deployment-wide figures (aggregate them with `max`, not `sum`). Rows are
never deleted and a decision never reverts, so the totals only grow: Prometheus counters.
What only this replica knows (the singleton connections it owns) comes from channel state.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gateway.core import Core
from gateway.lifecycle import Kind, Status
from gateway.runtime.channel_states import channel_states
from gateway.store.metrics import LATENCY_BUCKETS, PENDING_AGES, Snapshot
from gateway.vocabulary import AnsweredIn, JobStatus

UNKNOWN = "unknown"
CONTENT_TYPE = CONTENT_TYPE_LATEST

# --- the metric families


def request_families(snap: Snapshot) -> Iterator[Metric]:
    created = CounterMetricFamily(
        "gateway_requests_created",
        "Requests created, by kind and each channel they were routed to",
        labels=["kind", "channel"],
    )
    expired = CounterMetricFamily(
        "gateway_requests_expired",
        "Requests whose deadline passed undecided, by kind and routed channel",
        labels=["kind", "channel"],
    )
    for kind, channel, count, expired_count in snap.routed:
        created.add_metric([kind, channel], float(count))
        expired.add_metric([kind, channel], float(expired_count))
    yield created
    yield expired
    yield from _decision_families(snap)


def _decision_families(snap: Snapshot) -> Iterator[Metric]:
    decided = CounterMetricFamily(
        "gateway_requests_decided",
        "Requests decided by a person, by kind, the channel they answered in and outcome",
        labels=["kind", "channel", "outcome"],
    )
    latency = HistogramMetricFamily(
        "gateway_decision_latency_seconds",
        "Seconds from a request's creation to a person's decision",
        labels=["kind", "channel"],
    )
    pending = GaugeMetricFamily(
        "gateway_requests_pending",
        "Requests waiting for a decision, older than `older_than` seconds",
        labels=["kind", "older_than"],
    )
    # Every kind, zeros included: an alert on `older_than="1800"` needs a series to compare.
    pending_by_kind = {kind.value: [0.0] * len(PENDING_AGES) for kind in Kind}
    outcomes: dict[tuple[str, str, str], float] = {}
    per_bucket: dict[tuple[str, str], list[float]] = {}  # count per latency bucket, then +Inf
    seconds_by: dict[tuple[str, str], float] = {}
    for kind, status, answered_in, slot, count, seconds in snap.requests:
        if status == Status.PENDING:
            pending_by_kind.setdefault(kind, [0.0] * len(PENDING_AGES))[slot] += count
        elif answered_in != AnsweredIn.GATEWAY:
            channel = answered_in or UNKNOWN
            outcomes[(kind, channel, status)] = outcomes.get((kind, channel, status), 0.0) + count
            counts = per_bucket.setdefault((kind, channel), [0.0] * (len(LATENCY_BUCKETS) + 1))
            counts[slot] += count
            seconds_by[(kind, channel)] = seconds_by.get((kind, channel), 0.0) + float(seconds)
    for labels, count in sorted(outcomes.items()):
        decided.add_metric(list(labels), count)
    for (kind, channel), counts in sorted(per_bucket.items()):
        cumulative = list(itertools.accumulate(counts))
        edges = [(f"{bound:g}", cumulative[i]) for i, bound in enumerate(LATENCY_BUCKETS)]
        buckets = [*edges, ("+Inf", cumulative[-1])]
        latency.add_metric([kind, channel], buckets, seconds_by[(kind, channel)])
    for kind, slots in sorted(pending_by_kind.items()):
        older_than = reversed(list(itertools.accumulate(reversed(slots))))
        for age, value in zip(PENDING_AGES, older_than, strict=True):
            pending.add_metric([kind, str(age)], value)
    yield decided
    yield latency
    yield pending


def outbox_families(snap: Snapshot) -> Iterator[Metric]:
    jobs = GaugeMetricFamily(
        "gateway_outbox_jobs",
        "Outbox jobs by kind and status (pending includes timers not yet due; dead gave up)",
        labels=["kind", "status"],
    )
    due = GaugeMetricFamily(
        "gateway_outbox_due_jobs", "Outbox jobs due now and not yet taken", labels=["kind"]
    )
    attempts = CounterMetricFamily(
        "gateway_outbox_attempts",
        "Outbox job attempts (channel deliveries, webhooks, updates, timers) by outcome",
        labels=["kind", "outcome"],
    )
    outcomes: dict[str, list[float]] = {}
    due_by_kind: dict[str, float] = {}
    oldest: datetime | None = None
    for kind, status, *figures, first_due in snap.jobs:
        count, tries, due_count = (float(value) for value in figures)
        if status != JobStatus.DONE:
            jobs.add_metric([kind, status], count)
        due_by_kind[kind] = due_by_kind.get(kind, 0.0) + due_count
        if first_due is not None and (oldest is None or first_due < oldest):
            oldest = first_due
        # done: its last attempt worked; running: its last attempt is under way.
        worked = count if status == JobStatus.DONE else 0.0
        open_ = count if status == JobStatus.RUNNING else 0.0
        succeeded, failed = outcomes.get(kind, [0.0, 0.0])
        outcomes[kind] = [succeeded + worked, failed + tries - worked - open_]
    for kind, (succeeded, failed) in sorted(outcomes.items()):
        attempts.add_metric([kind, "succeeded"], succeeded)
        attempts.add_metric([kind, "failed"], failed)
    for kind, count in sorted(due_by_kind.items()):
        due.add_metric([kind], count)
    age = 0.0 if oldest is None else max(0.0, (snap.now - oldest).total_seconds())
    yield jobs
    yield due
    yield GaugeMetricFamily(
        "gateway_outbox_oldest_due_seconds",
        "How long the oldest due outbox job has waited (0 when none is due)",
        value=age,
    )
    yield attempts


def delivery_families(snap: Snapshot) -> Iterator[Metric]:
    deliveries = GaugeMetricFamily(
        "gateway_deliveries",
        "Deliveries (one per routed target of a request) by channel and status",
        labels=["channel", "status"],
    )
    for channel, status, count in snap.deliveries:
        deliveries.add_metric([channel, status], float(count))
    yield deliveries


def owns(state: Mapping[str, Any]) -> bool:
    """Whether this replica runs a singleton connection (channel state's `to_dict()`): with
    several replicas, whether it is the owner; alone (SQLite), whether the connection runs."""
    if state.get("replica") is not None:
        return bool(state.get("owner") == state["replica"])
    return state.get("connection") is not None


def singleton_family(states: Iterable[Mapping[str, Any]]) -> Metric:
    family = GaugeMetricFamily(
        "gateway_singleton_owned",
        "1 if this replica owns the singleton connection (Discord, Slack Socket Mode, IMAP)",
        labels=["singleton"],
    )
    for state in states:
        if state.get("connection") is not None:  # a platform connection: a singleton
            family.add_metric([state["name"]], 1.0 if owns(state) else 0.0)
    return family


# --- the scrape


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def exposition(core: Core, snap: Snapshot | None, *, took: float) -> bytes:
    """The Prometheus text for one scrape; without a snapshot (the database did not answer)
    only this replica's own figures, and `gateway_database_up` 0."""
    families: list[Metric] = [singleton_family(s.to_dict() for s in channel_states(core.channels))]
    if snap is not None:
        for build in (request_families, outbox_families, delivery_families):
            families.extend(build(snap))
    families.append(
        GaugeMetricFamily(
            "gateway_database_up",
            "1 if the database answered this scrape's queries",
            value=0.0 if snap is None else 1.0,
        )
    )
    families.append(
        GaugeMetricFamily(
            "gateway_metrics_query_seconds",
            "How long this scrape's database queries took",
            value=took,
        )
    )
    return generate_latest(_Families(families))
