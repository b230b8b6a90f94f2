"""``kube.durations``: Go durations read and written as Go does, and the flag form that also takes plain
seconds and refuses negative, infinite and NaN values."""

from __future__ import annotations

import pytest

from flotilla.kube.durations import go_duration, parse_duration, parse_go_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h2m3.5s", 3723.5), ("0", 0.0), ("0.5", 0.5),
    ("30", 30.0), ("1e1", 10.0), ("300µs", 0.0003), ("100ns", 1e-7), ("+5s", 5.0), (".5s", 0.5), (" 2s ", 2.0),
    ("-0", 0.0),
])
def test_flag_durations_take_go_durations_and_plain_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty duration"),
    ("   ", "empty duration"),
    ("+", "invalid duration '+'"),
    ("10x", "invalid duration '10x' (examples: 10s, 1m30s, 500ms, 2h, or seconds: 0.5)"),
    ("1m30", "invalid duration '1m30' (examples: 10s, 1m30s, 500ms, 2h, or seconds: 0.5)"),
    ("nan", "invalid duration 'nan' (examples: 10s, 1m30s, 500ms, 2h, or seconds: 0.5)"),
    ("1e999", "invalid duration '1e999'"),
    ("1e999h", "invalid duration '1e999h' (examples: 10s, 1m30s, 500ms, 2h, or seconds: 0.5)"),
    ("9" * 400 + "h", f"invalid duration '{'9' * 400}h'"),
    ("-1s", "duration must not be negative: '-1s'"),
    ("-3", "duration must not be negative: '-3'"),
])
def test_flag_durations_refuse_with_these_messages(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(("text", "seconds"), [("15s", 15.0), ("-1.5ms", -0.0015), ("0", 0.0), ("+0", 0.0),
                                              ("2h45m", 9900.0)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1m30", "-", "s", None, 5, "9" * 400 + "h"])
def test_go_durations_refuse_anything_else(text: object) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


@pytest.mark.parametrize("seconds", [0.0, 0.5, 90.0, 3723.5, 1e-7, -0.0015])
def test_written_durations_read_back(seconds: float) -> None:
    assert parse_go_duration(go_duration(seconds)) == pytest.approx(seconds)
