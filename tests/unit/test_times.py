"""flotilla.kube.times: metav1.Time written exactly and read leniently."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from flotilla.kube.times import format_time, parse_time

AT = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)


def test_format_time_drops_fractions_and_takes_a_naive_time_as_utc() -> None:
    assert format_time(AT + timedelta(microseconds=999_999)) == "2024-05-06T07:08:09Z"
    assert format_time(datetime(2024, 5, 6, 7, 8, 9)) == "2024-05-06T07:08:09Z"
    assert format_time(AT.astimezone(timezone(timedelta(hours=2)))) == "2024-05-06T07:08:09Z"


@pytest.mark.parametrize("text", ["2024-05-06T07:08:09Z", "2024-05-06T07:08:09z", " 2024-05-06T07:08:09Z ",
                                  "2024-05-06T07:08:09", "2024-05-06T09:08:09+02:00"])
def test_parse_time_reads_rfc3339_into_utc(text: str) -> None:
    parsed = parse_time(text)
    assert parsed == AT and parsed is not None and parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", [None, "", "   ", "yesterday", "2024-13-01T00:00:00Z", 1714979289, ["x"]])
def test_parse_time_reads_anything_else_as_no_time(value: object) -> None:
    assert parse_time(value) is None


def test_parse_time_takes_a_datetime_as_it_is() -> None:
    assert parse_time(datetime(2024, 5, 6, 7, 8, 9)) == AT
    assert parse_time(AT.astimezone(timezone(timedelta(hours=-5)))) == AT
    assert parse_time(format_time(AT)) == AT
