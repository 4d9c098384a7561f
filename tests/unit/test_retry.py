"""Retry delays: Svix schedule, capped exponential backoff, jitter and Retry-After."""

from __future__ import annotations

import pytest

from gateway.runtime.retry import RetryPolicy
from gateway.settings import DEFAULT_WEBHOOK_SCHEDULE

# Svix: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
SVIX = (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)


def no_jitter() -> float:
    return 0.5  # 2 * 0.5 - 1 == 0


def test_default_webhook_schedule_is_svix() -> None:
    assert tuple(float(part) for part in DEFAULT_WEBHOOK_SCHEDULE.split(",")) == SVIX


@pytest.mark.parametrize(("attempts", "expected"), list(enumerate(SVIX)))
def test_schedule_delay_by_attempt(attempts: int, expected: float) -> None:
    policy = RetryPolicy(schedule=SVIX, rand=no_jitter)
    assert policy.delay(attempts) == expected


@pytest.mark.parametrize("attempts", [8, 9, 50, 10_000])
def test_schedule_last_delay_repeats(attempts: int) -> None:
    policy = RetryPolicy(schedule=(1.0, 2.0, 7.0), rand=no_jitter)
    assert policy.delay(attempts) == 7.0
    assert RetryPolicy(schedule=SVIX, rand=no_jitter).delay(attempts) == 36000.0


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [(0, 2.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (5, 32.0), (8, 256.0), (9, 300.0)],
)
def test_exponential_growth(attempts: int, expected: float) -> None:
    policy = RetryPolicy(base=2.0, cap=300.0, rand=no_jitter)
    assert policy.delay(attempts) == expected


@pytest.mark.parametrize("attempts", [9, 10, 64, 1000, 1025, 10_000])
def test_exponential_capped(attempts: int) -> None:
    policy = RetryPolicy(base=2.0, cap=300.0, rand=no_jitter)
    assert policy.delay(attempts) == 300.0


def test_exponential_is_non_decreasing() -> None:
    policy = RetryPolicy(base=0.5, cap=60.0, rand=no_jitter)
    delays = [policy.delay(n) for n in range(1, 40)]
    assert delays == sorted(delays)
    assert delays[0] == 0.5
    assert delays[-1] == 60.0


@pytest.mark.parametrize(
    ("schedule", "attempts", "nominal"),
    [
        (SVIX, 2, 300.0),
        (SVIX, 7, 36000.0),
        ((), 3, 8.0),  # exponential, default base 2 and cap 300
        ((), 20, 300.0),
    ],
)
@pytest.mark.parametrize("jitter", [0.1, 0.25])
def test_jitter_bounds(
    schedule: tuple[float, ...], attempts: int, nominal: float, jitter: float
) -> None:
    low = RetryPolicy(schedule=schedule, jitter=jitter, rand=lambda: 0.0)
    high = RetryPolicy(schedule=schedule, jitter=jitter, rand=lambda: 0.999999)
    assert low.delay(attempts) == pytest.approx(nominal * (1 - jitter))
    upper = high.delay(attempts)
    assert nominal < upper < nominal * (1 + jitter)
    assert upper == pytest.approx(nominal * (1 + jitter), rel=1e-5)


def test_jitter_zero_is_exact() -> None:
    policy = RetryPolicy(schedule=SVIX, jitter=0.0, rand=lambda: 0.0)
    assert policy.delay(1) == 5.0


def test_zero_delay_stays_zero_under_jitter() -> None:
    policy = RetryPolicy(schedule=SVIX, jitter=0.5, rand=lambda: 0.999999)
    assert policy.delay(0) == 0.0


@pytest.mark.parametrize("rand", [0.0, 0.5, 0.999999])
@pytest.mark.parametrize("retry_after", [0.0, 4.0, 5.0, 6.0, 3600.0])
def test_retry_after_is_never_shortened(rand: float, retry_after: float) -> None:
    policy = RetryPolicy(schedule=SVIX, jitter=0.1, rand=lambda: rand)
    plain = policy.delay(1)
    with_header = policy.delay(1, retry_after=retry_after)
    assert with_header >= retry_after
    assert with_header == max(plain, retry_after)


def test_retry_after_longer_than_schedule_wins() -> None:
    policy = RetryPolicy(schedule=SVIX, rand=no_jitter)
    assert policy.delay(0, retry_after=120.0) == 120.0
    assert policy.delay(2, retry_after=120.0) == 300.0


def test_retry_after_applies_to_exponential_too() -> None:
    policy = RetryPolicy(base=1.0, cap=10.0, rand=lambda: 0.0)
    assert policy.delay(1, retry_after=30.0) == 30.0
    assert policy.delay(1, retry_after=None) == pytest.approx(0.9)
