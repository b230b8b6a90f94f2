"""Taints and tolerations: which toleration tolerates which taint, as Kubernetes' ``ToleratesTaint`` with the
comparison operators disabled (as Karmada matches cluster taints everywhere: the scheduler's filter and the taint
manager).

1. a toleration with a non-empty ``effect`` different from the taint's does not tolerate it;
2. a toleration with a non-empty ``key`` different from the taint's does not tolerate it;
3. operator ``""`` or ``Equal`` tolerates iff the values are equal; ``Exists`` tolerates; any other operator
   (``Lt``, ``Gt``, typos) does not.

``tolerationSeconds`` plays no part in matching. The functions read taints and tolerations through two small
protocols, so the scheduler's model values and any other shape with the same attributes can be matched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

NO_EXECUTE = "NoExecute"
OPERATOR_EQUAL = "Equal"
OPERATOR_EXISTS = "Exists"
#: Binding annotation holding the JSON of the placement the scheduler last scheduled with.


class TaintLike(Protocol):
    """What matching reads of a taint (:class:`flotilla.scheduler.model.Taint` is one)."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...
    @property
    def time_added(self) -> datetime | None: ...


class TolerationLike(Protocol):
    """What matching reads of a toleration (:class:`flotilla.scheduler.model.Toleration` is one)."""

    @property
    def key(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...
    @property
    def toleration_seconds(self) -> int | None: ...


T = TypeVar("T", bound=TaintLike)
U = TypeVar("U", bound=TolerationLike)


def tolerates(toleration: TolerationLike, taint: TaintLike) -> bool:
    """``ToleratesTaint`` with the comparison operators (``Lt``, ``Gt``) disabled, as in Karmada."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", OPERATOR_EQUAL):
        return toleration.value == taint.value
    return toleration.operator == OPERATOR_EXISTS


def no_execute_taints(taints: Iterable[T]) -> list[T]:
    """The ``NoExecute`` taints, in order (``GetNoExecuteTaints``)."""
    return [t for t in taints if t.effect == NO_EXECUTE]


def matching_tolerations(taints: Sequence[TaintLike], tolerations: Sequence[U]) -> tuple[bool, list[U]]:
    """``GetMatchingTolerations``: (all tolerated, the first tolerating toleration of each taint).

    No taints: ``(True, [])``. A taint no toleration tolerates: ``(False, [])``. The list has one
    entry per taint, in taint order, and may repeat a toleration.
    """
    if not taints:
        return True, []
    used: list[U] = []
    for taint in taints:
        first = next((tol for tol in tolerations if tolerates(tol, taint)), None)
        if first is None:
            return False, []
        used.append(first)
    return True, used


def first_untolerated_taint(taints: Iterable[T], tolerations: Sequence[TolerationLike]) -> T | None:
    """The first taint that no toleration tolerates, or ``None``."""
    for taint in taints:
        if not any(tolerates(tol, taint) for tol in tolerations):
            return taint
    return None
