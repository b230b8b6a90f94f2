"""``utc_seconds`` writes exactly what ``t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")`` writes, although
it remembers the text of the second it formatted last."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from flotilla.kube.timestamps import utc_seconds


def _expected(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_times_in_the_same_and_in_other_seconds_and_zones_match_strftime() -> None:
    rnd = random.Random(7)
    base = datetime(2026, 11, 30, 23, 59, 58, 999_999, tzinfo=UTC)
    zones = [UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30)),
             timezone(timedelta(seconds=1, microseconds=500_000))]
    for _ in range(2000):
        t = (base + timedelta(microseconds=rnd.randrange(-3_000_000, 3_000_000))).astimezone(rnd.choice(zones))
        assert utc_seconds(t) == _expected(t), t


def test_second_boundaries_and_times_before_the_epoch() -> None:
    for t in (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC) - timedelta(microseconds=1),
              datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC), datetime(1970, 1, 1, tzinfo=UTC),
              datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)):
        assert utc_seconds(t) == _expected(t)
        assert utc_seconds(t) == _expected(t)  # remembered


def test_a_naive_time_is_taken_as_local_time_as_astimezone_does() -> None:
    naive = datetime(2026, 6, 1, 12, 0, 0)
    assert utc_seconds(naive) == _expected(naive)
