"""RFC 3339 timestamps as Kubernetes writes them: ``metav1.Time`` (UTC, whole seconds) and ``metav1.MicroTime``
(UTC, microseconds), and reading them back leniently.

What is written follows apimachinery exactly (:func:`format_time`, :func:`format_micro_time`); what is read comes
from objects that users, members and older versions wrote, so :func:`parse_time` takes any RFC 3339 / ISO 8601
text and reads anything else as "no time" instead of failing.

Controllers stamp many objects within the same second; formatting with ``strftime`` costs about 1.5 us, while
telling whether a time falls in the second formatted last costs a sixth of that: :func:`utc_seconds` remembers
the latest second's text.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["as_utc", "format_micro_time", "format_time", "human_age", "human_duration", "parse_time", "utc_seconds"]

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
#: (whole seconds since the epoch, their text); one tuple, replaced whole
_last: tuple[int, str] = (0, "1970-01-01T00:00:00Z")


def utc_seconds(t: datetime) -> str:
    """``t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")``, exactly (a naive ``t`` included)."""
    global _last
    if type(t) is not datetime:  # a subclass may format differently: not remembered
        return t.astimezone(UTC).strftime(_FORMAT)
    try:
        key = (t - _EPOCH) // _SECOND  # exact: the instant's whole seconds, whatever t's time zone
    except TypeError:  # naive: astimezone takes it as local time
        return t.astimezone(UTC).strftime(_FORMAT)
    last = _last
    if last[0] == key:
        return last[1]
    text = t.astimezone(UTC).strftime(_FORMAT)
    _last = (key, text)
    return text


def format_time(t: datetime, digits: int = 0) -> str:
    """``t`` in RFC 3339, in UTC, with ``digits`` digits of the second's fraction (0 to 6; none with 0, as
    ``metav1.Time`` is written: ``2024-05-06T07:08:09Z``, fractions dropped). A naive ``t`` is taken as UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    if digits <= 0:
        return utc_seconds(t)
    t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}"[:digits] + "Z"


def format_micro_time(t: datetime) -> str:
    """A ``metav1.MicroTime``: RFC 3339 in UTC with microseconds, e.g. ``2026-11-30T12:00:00.123456Z``."""
    return format_time(t, 6)


def as_utc(t: datetime) -> datetime:
    """``t`` in UTC; a naive ``t`` is taken as UTC (an aware one already in UTC is returned as it is)."""
    return t.astimezone(UTC) if t.tzinfo is not None else t.replace(tzinfo=UTC)


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (``2024-05-01T10:00:00Z``; fractions and offsets allowed, surrounding blanks
    ignored) as an aware UTC datetime (a time without offset is taken as UTC); a datetime is taken as it is,
    in UTC. Anything unreadable, empty or not text is ``None``."""
    if isinstance(value, datetime):
        return as_utc(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return as_utc(parsed)


# ----------------------------------------------------------------------------------- ages, as kubectl prints them

_MINUTE, _HOUR, _DAY, _YEAR = 60, 3600, 86400, 365 * 86400
#: (unit, its seconds, the next smaller unit, its seconds, shown as both below, shown alone below) in seconds
_AGE_STEPS = (
    ("m", _MINUTE, "s", 1, 10 * _MINUTE, 3 * _HOUR),
    ("h", _HOUR, "m", _MINUTE, 8 * _HOUR, 2 * _DAY),
    ("d", _DAY, "h", _HOUR, 8 * _DAY, 2 * _YEAR),
    ("y", _YEAR, "d", _DAY, 8 * _YEAR, math.inf),
)


def human_duration(delta: timedelta) -> str:
    """A short duration with 2-3 significant figures: 45s, 119s, 4m30s, 15m, 3h20m, 9h, 2d5h, 30d, 2y100d."""
    micros = delta // timedelta(microseconds=1)
    seconds = -((-micros) // 1_000_000) if micros < 0 else micros // 1_000_000  # truncate towards zero
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 2 * _MINUTE:
        return f"{seconds}s"
    for unit, length, small_unit, small_length, both_below, alone_below in _AGE_STEPS:
        whole, rest = divmod(seconds, length)
        if seconds < both_below and rest >= small_length:
            return f"{whole}{unit}{rest // small_length}{small_unit}"
        if seconds < alone_below:
            return f"{whole}{unit}"
    raise AssertionError("the last step takes every duration")


def human_age(timestamp: Any, now: datetime | None = None) -> str:
    """Age of ``timestamp`` (RFC 3339 string or datetime) at ``now``, formatted like kubectl ("<unknown>" if unset)."""
    then = parse_time(timestamp)
    if then is None:
        return "<unknown>"
    return human_duration((now or datetime.now(UTC)) - then)
