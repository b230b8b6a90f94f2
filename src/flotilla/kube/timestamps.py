"""``metav1.Time`` text (RFC 3339, UTC, whole seconds), with the latest second's text remembered.

Controllers stamp many objects within the same second; formatting with ``strftime`` costs about 1.5 us, while
telling whether a time falls in the second formatted last costs a sixth of that.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["utc_seconds"]

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
