"""The Applied hand-off: under load, a Work's ``Applied`` condition rides on its first status report.

Karmada writes a Work's status twice right after it is applied: the execution controller its ``Applied`` (and
``Dispatching``) condition, the work-status controller moments later the copy's first ``manifestStatuses``. While
the forward controllers have keys waiting (:mod:`.forward_first`), the execution controller of Flotilla leaves a
*successful* apply's conditions here instead of writing them, and the work-status controller writes them in the
same status patch as the first report of that Work's copies (or alone, when no copy is in its cache yet). One
Work write fewer per apply in a burst; the conditions and their ``lastTransitionTime`` (the moment of the apply)
are the ones the execution controller would have written.

An idle system, a failed apply, a suspended Work and a controller-manager without the work-status controller
write the conditions at once, as before. A hand-off is dropped when the execution controller writes the Work's
conditions itself or the Work goes; one lost with a restart is harmless: the restarted execution controller finds
the Work without ``Applied`` and applies it again (a no-op in the member) and writes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["APPLIED_HANDOFF", "AppliedHandoff", "LeftConditions", "applied_handoff"]

#: the key of the shared hand-off in a controller-manager's ``ctx.extras``
APPLIED_HANDOFF: Final = "applied-handoff"


@dataclass(frozen=True)
class LeftConditions:
    """Conditions the execution controller left for the Work with this uid, stamped ``now`` (the apply)."""

    uid: str
    conditions: tuple[Mapping[str, Any], ...]
    now: str
    #: when they were left (``time.monotonic()``)
    at: float = 0.0


def _uid(work: Mapping[str, Any]) -> str:
    return str((work.get("metadata") or {}).get("uid") or "")


class AppliedHandoff:
    """Work key (``namespace/name``) -> the conditions left for it; the taker is told of each one left."""

    def __init__(self) -> None:
        self._left: dict[str, LeftConditions] = {}
        self._on_left: Callable[[str], None] | None = None

    def take_from_now_on(self, on_left: Callable[[str], None]) -> None:
        """The work-status controller: call ``on_left(work_key)`` for every hand-off from now on."""
        self._on_left = on_left

    def stop_taking(self, on_left: Callable[[str], None]) -> None:
        """That taker stops: the execution controller writes the conditions itself from now on."""
        if self._on_left == on_left:
            self._on_left = None

    def accepting(self) -> bool:
        """Whether a taker is there (else the execution controller writes the conditions itself)."""
        return self._on_left is not None

    def leave(self, key: str, work: Mapping[str, Any], conditions: list[Mapping[str, Any]], now: str) -> None:
        self._left[key] = LeftConditions(_uid(work), tuple(conditions), now, time.monotonic())
        if self._on_left is not None:
            self._on_left(key)

    def left_for(self, key: str, work: Mapping[str, Any]) -> LeftConditions | None:
        """What was left for this Work (the same object: its uid). A newer generation's apply replaces or drops it,
        so one left for an older generation is what the execution controller would have written by now."""
        left = self._left.get(key)
        return left if left is not None and left.uid == _uid(work) else None

    def written(self, key: str, left: LeftConditions) -> None:
        """``left`` went out with a report: forget it (unless a newer hand-off replaced it meanwhile)."""
        if self._left.get(key) is left:
            del self._left[key]

    def drop(self, key: str) -> None:
        self._left.pop(key, None)

    def __len__(self) -> int:
        return len(self._left)


def applied_handoff(extras: dict[str, Any]) -> AppliedHandoff:
    """The controller-manager's shared hand-off (created on first use)."""
    handoff: AppliedHandoff = extras.setdefault(APPLIED_HANDOFF, AppliedHandoff())
    return handoff
