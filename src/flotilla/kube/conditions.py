"""Status conditions (``metav1.Condition``) held in plain JSON lists: finding one and setting one the way
apimachinery's ``meta.SetStatusCondition`` does.

Every function here works on a copy: the list given (often a cached object's own) is never changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.times import utc_seconds

__all__ = ["find_condition", "set_condition", "set_conditions"]

_TRANSITION = "lastTransitionTime"


def find_condition(conditions: Any, type_: str) -> Mapping[str, Any] | None:
    """The first condition of ``type_`` in ``conditions`` (items that are not objects are passed over), or None."""
    for c in conditions if isinstance(conditions, (list, tuple)) else ():
        if (type(c) is dict or isinstance(c, Mapping)) and c.get("type") == type_:
            return c
    return None


def _stamp(now: str | datetime) -> str:
    if isinstance(now, str):
        return now
    return utc_seconds(now if now.tzinfo is not None else now.replace(tzinfo=UTC))


def set_condition(conditions: Iterable[Any] | None, new: Mapping[str, Any],
                  now: str | datetime) -> list[dict[str, Any]]:
    """``conditions`` with ``new`` set, as ``meta.SetStatusCondition``: the first condition of ``new``'s type takes
    ``new``'s status, reason, message and observedGeneration (one that ``new`` lacks is dropped), in place; its
    ``lastTransitionTime`` stays while the status holds and otherwise becomes ``new``'s, or ``now`` when ``new``
    has none. A type not yet there is appended, stamped the same way. Other conditions are kept as they are;
    items that are not objects are dropped. ``now`` is a ``metav1.Time`` text or a datetime (naive means UTC)."""
    out: list[dict[str, Any]] = [json_copy(dict(c)) for c in conditions or () if isinstance(c, Mapping)]
    fields = {k: v for k, v in new.items() if k != _TRANSITION}
    for i, old in enumerate(out):
        if old.get("type") != new.get("type"):
            continue
        if old.get("status") == new.get("status") and old.get(_TRANSITION):
            fields[_TRANSITION] = old[_TRANSITION]
        else:
            fields[_TRANSITION] = new.get(_TRANSITION) or _stamp(now)
        out[i] = fields
        return out
    fields[_TRANSITION] = new.get(_TRANSITION) or _stamp(now)
    out.append(fields)
    return out


def set_conditions(conditions: Iterable[Any] | None, new: Iterable[Mapping[str, Any]],
                   now: str | datetime) -> tuple[list[dict[str, Any]], bool]:
    """:func:`set_condition` for each of ``new`` in turn: the new list, and whether any condition changed."""
    before: list[dict[str, Any]] = [dict(c) for c in conditions or () if isinstance(c, Mapping)]
    out = before
    for condition in new:
        out = set_condition(out, condition, now)
    return out, out != before
