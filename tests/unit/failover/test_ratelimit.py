"""D10: evictions paced by a token bucket, slowed when many clusters are unhealthy, halted when all are."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.failover.ratelimit import (
    DEFAULT_RESOURCE_EVICTION_RATE,
    DEFAULT_SECONDARY_RESOURCE_EVICTION_RATE,
    DEFAULT_UNHEALTHY_CLUSTER_THRESHOLD,
    EvictionMode,
    EvictionRateLimiter,
    NoEvictionToken,
    eviction_mode,
    validate_eviction_rate_options,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def drain(limiter: EvictionRateLimiter, clock: FakeClock, count: int, unhealthy: int, total: int) -> float:
    """Evict ``count`` bindings as a worker would (wait what decide says); returns the time it took."""
    start = clock.now
    for _ in range(count):
        while True:
            wait = limiter.decide(clock.now, unhealthy, total)
            assert wait is not None
            if wait == 0:
                limiter.take(clock.now)
                break
            clock.advance(wait)
    return clock.now - start


def test_d10_defaults() -> None:
    assert DEFAULT_RESOURCE_EVICTION_RATE == 100.0
    assert DEFAULT_SECONDARY_RESOURCE_EVICTION_RATE == 1.0
    assert DEFAULT_UNHEALTHY_CLUSTER_THRESHOLD == 0.55
    limiter = EvictionRateLimiter()
    assert (limiter.primary_rate, limiter.secondary_rate, limiter.unhealthy_threshold, limiter.burst) == (
        100.0, 1.0, 0.55, 1)


def test_d10_thousand_evictions_take_ten_seconds_at_the_primary_rate() -> None:
    clock = FakeClock()
    elapsed = drain(EvictionRateLimiter(), clock, 1000, unhealthy=1, total=10)
    assert elapsed == pytest.approx(9.99, abs=1e-6)  # the first token is there at once; Karmada: 33 minutes


def test_d10_secondary_rate_above_the_threshold() -> None:
    clock = FakeClock()
    elapsed = drain(EvictionRateLimiter(), clock, 10, unhealthy=6, total=10)
    assert elapsed == pytest.approx(9.0, abs=1e-6)


@pytest.mark.parametrize(
    ("unhealthy", "total", "mode"),
    [
        (0, 0, EvictionMode.PRIMARY),
        (0, 10, EvictionMode.PRIMARY),
        (5, 10, EvictionMode.PRIMARY),
        (11, 20, EvictionMode.PRIMARY),  # exactly 0.55 is not "more than"
        (12, 20, EvictionMode.SECONDARY),
        (1, 2, EvictionMode.PRIMARY),
        (2, 3, EvictionMode.SECONDARY),
        (9, 10, EvictionMode.SECONDARY),
        (10, 10, EvictionMode.HALTED),
        (1, 1, EvictionMode.HALTED),
        (12, 10, EvictionMode.HALTED),
    ],
)
def test_d10_mode_switches_at_the_threshold_and_halts_at_100_percent(unhealthy: int, total: int,
                                                                     mode: EvictionMode) -> None:
    assert eviction_mode(unhealthy, total, 0.55) is mode


def test_d10_halted_when_every_cluster_is_unhealthy() -> None:
    clock = FakeClock()
    limiter = EvictionRateLimiter()
    assert limiter.decide(clock.now, 3, 3) is None
    assert limiter.mode is EvictionMode.HALTED
    assert "every cluster (3/3) is unhealthy" in limiter.message(3, 3)
    with pytest.raises(NoEvictionToken):
        limiter.take(clock.now)
    clock.advance(3600)  # a long halt earns no burst
    assert limiter.decide(clock.now, 2, 3) == 0.0
    limiter.take(clock.now)
    assert limiter.decide(clock.now, 2, 3) == pytest.approx(1.0)


def test_d10_zero_rate_halts() -> None:
    limiter = EvictionRateLimiter(primary_rate=0.0)
    assert limiter.decide(0.0, 0, 3) is None
    assert limiter.message(0, 3) == "evictions halted: the eviction rate is 0"
    assert EvictionRateLimiter(secondary_rate=0.0).decide(0.0, 2, 3) is None


def test_d10_switching_to_the_secondary_rate_lets_no_burst_through() -> None:
    clock = FakeClock()
    limiter = EvictionRateLimiter(burst=5)
    clock.advance(10)
    assert limiter.tokens(clock.now) == 5
    for _ in range(5):
        assert limiter.try_take(clock.now, 6, 10) == 0.0
    assert limiter.decide(clock.now, 6, 10) == pytest.approx(1.0)
    assert limiter.mode is EvictionMode.SECONDARY


def test_d10_take_without_a_token_is_a_programming_error() -> None:
    limiter = EvictionRateLimiter()
    limiter.take(0.0)
    with pytest.raises(NoEvictionToken):
        limiter.take(0.0)
    assert limiter.decide(0.0, 1, 1) is None  # the only cluster is unhealthy: halted
    assert limiter.decide(0.001, 0, 2) == pytest.approx(0.01)  # nothing was earned while halted


def test_d10_options_are_validated() -> None:
    assert validate_eviction_rate_options(100, 1, 0.55) == []
    errors = validate_eviction_rate_options(-1, -2, 1.5, burst=0)
    assert len(errors) == 4
    assert errors[0] == "ClusterFailoverOptions.ResourceEvictionRate: Invalid value: -1: must be non-negative"
    with pytest.raises(ValueError, match="must be non-negative"):
        EvictionRateLimiter(primary_rate=-1)


# ------------------------------------------------------------------------------------------- properties

events = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=2.0, allow_nan=False),  # time since the previous attempt
        st.integers(min_value=0, max_value=10),  # unhealthy clusters (of 10)
    ),
    min_size=1,
    max_size=200,
)


@settings(max_examples=200, deadline=None)
@given(events=events, primary=st.sampled_from([0.5, 1.0, 5.0, 100.0]), secondary=st.sampled_from([0.0, 0.1, 1.0]),
       burst=st.integers(min_value=1, max_value=5))
def test_d10_never_exceeds_the_rate_over_any_window(events: list[tuple[float, int]], primary: float,
                                                    secondary: float, burst: int) -> None:
    """Over any window, the evictions made are at most ``burst`` + what the rates in force allowed."""
    limiter = EvictionRateLimiter(primary, secondary, 0.55, burst)
    now = 0.0
    rate_changes: list[tuple[float, float]] = []  # (time, rate in force from then on)
    takes: list[float] = []
    for delta, unhealthy in events:
        now += delta
        wait = limiter.decide(now, unhealthy, 10)
        mode = eviction_mode(unhealthy, 10, 0.55)
        expected_rate = {EvictionMode.PRIMARY: primary, EvictionMode.SECONDARY: secondary}.get(mode, 0.0)
        if mode is EvictionMode.HALTED or expected_rate == 0:
            assert wait is None
        else:
            assert wait is not None and wait >= 0
        rate_changes.append((now, limiter.rate))
        if wait == 0:
            limiter.take(now)
            takes.append(now)

    def allowed(start: float, end: float) -> float:
        """Tokens earned in [start, end]: the rate set at each decide applies until the next one."""
        total = 0.0
        for index, (at, rate) in enumerate(rate_changes):
            until = rate_changes[index + 1][0] if index + 1 < len(rate_changes) else end
            lo, hi = max(at, start), min(until, end)
            if hi > lo:
                total += (hi - lo) * rate
        return total

    for i in range(len(takes)):
        for j in range(i, len(takes)):
            assert j - i + 1 <= burst + allowed(takes[i], takes[j]) + 1e-6


@settings(max_examples=100, deadline=None)
@given(unhealthy=st.integers(0, 50), total=st.integers(1, 50), waits=st.integers(1, 30))
def test_d10_waiting_the_answer_is_enough(unhealthy: int, total: int, waits: int) -> None:
    limiter = EvictionRateLimiter(10.0, 1.0, 0.55)
    now = 0.0
    for _ in range(waits):
        wait = limiter.decide(now, unhealthy, total)
        if wait is None:
            assert eviction_mode(unhealthy, total) is EvictionMode.HALTED
            return
        now += wait
        assert limiter.decide(now, unhealthy, total) == 0.0
        limiter.take(now)
