"""``utc_seconds`` writes exactly what ``t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")`` writes, although
it remembers the text of the second it formatted last; ``format_time`` and ``parse_time`` write and read the RFC
3339 text of ``metav1.Time`` and ``metav1.MicroTime``."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from flotilla.kube.times import format_micro_time, format_time, parse_time, utc_seconds


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


def test_format_time_writes_utc_with_the_fraction_digits_asked_for() -> None:
    t = datetime(2026, 11, 30, 14, 0, 5, 123_456, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(t) == "2026-11-30T12:00:05Z"
    assert format_time(t, 3) == "2026-11-30T12:00:05.123Z"
    assert format_time(t, 6) == format_micro_time(t) == "2026-11-30T12:00:05.123456Z"
    assert format_time(datetime(2026, 11, 30, 12, 0, 5, 7)) == "2026-11-30T12:00:05Z"  # naive: UTC
    assert format_micro_time(datetime(2026, 11, 30, 12, 0, 5, 7)) == "2026-11-30T12:00:05.000007Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T12:00:05Z", datetime(2026, 11, 30, 12, 0, 5, tzinfo=UTC)),
        (" 2026-11-30T12:00:05.25z ", datetime(2026, 11, 30, 12, 0, 5, 250_000, tzinfo=UTC)),
        ("2026-11-30T14:00:05+02:00", datetime(2026, 11, 30, 12, 0, 5, tzinfo=UTC)),
        ("2026-11-30T12:00:05", datetime(2026, 11, 30, 12, 0, 5, tzinfo=UTC)),  # no offset: UTC
        ("", None),
        ("yesterday", None),
        ("2026-13-01T00:00:00Z", None),
        (None, None),
        (1764504005, None),
        ([], None),
    ],
)
def test_parse_time_reads_rfc3339_and_refuses_anything_else(text: object, expected: datetime | None) -> None:
    assert parse_time(text) == expected


def test_parse_time_passes_datetimes_through_and_reads_what_format_time_writes() -> None:
    aware = datetime(2026, 11, 30, 12, 0, 5, 123_456, tzinfo=UTC)
    assert parse_time(aware) is aware
    assert parse_time(datetime(2026, 11, 30, 12, 0, 5)) == datetime(2026, 11, 30, 12, 0, 5, tzinfo=UTC)
    assert parse_time(format_micro_time(aware)) == aware
    assert parse_time(format_time(aware)) == aware.replace(microsecond=0)
