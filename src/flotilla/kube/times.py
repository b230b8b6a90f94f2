"""``metav1.Time`` as objects carry it: RFC 3339 text in UTC with whole seconds, read back leniently.

What is written follows apimachinery exactly (:func:`format_time`); what is read comes from objects that users,
members and older versions wrote, so :func:`parse_time` takes any RFC 3339 / ISO 8601 text and reads anything
else as "no time" instead of failing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flotilla.kube.timestamps import utc_seconds

__all__ = ["format_time", "parse_time"]


def format_time(t: datetime) -> str:
    """``t`` as ``metav1.Time`` writes it (``2024-05-06T07:08:09Z``, fractions dropped); a naive ``t`` is UTC."""
    return utc_seconds(t if t.tzinfo is not None else t.replace(tzinfo=UTC))


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime (a time without offset is taken as UTC); a datetime is
    taken as it is. Anything unreadable, empty or not text is ``None``."""
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
