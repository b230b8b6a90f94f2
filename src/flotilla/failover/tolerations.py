"""Cluster tolerations and the taint manager's NoExecute timers, as pure functions.

No I/O and no clock: ``now`` is always passed in. Matching and timers are Karmada's, kept exactly; the
divergences here are D10 (eviction pacing: a binding tolerating forever is never queued) and D11 (the
scheduler's "an expired toleration no longer tolerates", built on the same rules).

**Matching** (:func:`tolerates`, ``corev1.Toleration.ToleratesTaint`` with the comparison operators
disabled, as everywhere in Karmada):

1. a toleration with a non-empty ``effect`` different from the taint's does not tolerate it;
2. a toleration with a non-empty ``key`` different from the taint's does not tolerate it;
3. operator ``""`` or ``Equal`` tolerates iff the values are equal; ``Exists`` tolerates; any other
   operator (``Lt``, ``Gt``, typos) does not.

``tolerationSeconds`` plays no part in matching.

**The timer** of one binding on one cluster (:func:`no_execute_eviction`), from the binding's cluster
tolerations (the taint manager reads them from the ``policy.karmada.io/applied-placement``
annotation, :func:`applied_cluster_tolerations`, not from ``spec.placement``) and the cluster's
taints, of which only the ``NoExecute`` ones count:

* eviction disabled (``--enable-no-execute-taint-eviction=false``) or no NoExecute taint: **never**;
* for each NoExecute taint in order, the *first* toleration (in list order) that tolerates it is
  "used" (:func:`matching_tolerations`); a taint no toleration tolerates: **evict now**;
* every pair (used toleration with ``tolerationSeconds``) x (NoExecute taint with ``timeAdded``) that
  tolerates gives a deadline ``timeAdded + tolerationSeconds``; the cross product means one used
  toleration can pair with several taints, duplicates included (:func:`toleration_deadline`);
* no such pair (every used toleration lacks ``tolerationSeconds``): tolerated forever, **never**;
* otherwise ``T`` = the earliest deadline: ``T <= now`` is **evict now** (Karmada evicts when the
  remaining time is 0, so the boundary evicts), else **evict at T**.

A pair with ``tolerationSeconds <= 0`` evicts now even when its taint's ``timeAdded`` lies in the
future. Karmada reaches the same answer by arithmetic, because ``timeAdded`` is stamped by the API
server and so is never later than ``now``. Flotilla does not depend on that: a controller clock
running behind the API server's cannot postpone an eviction that the toleration says is immediate.
Kubernetes' own node taint manager also treats ``tolerationSeconds <= 0`` as "now". Deadlines past
the largest ``datetime`` are clamped to it. Go's ``time.Duration`` would overflow for such values.

**D10**: a binding that tolerates every NoExecute taint forever is never queued
(:func:`should_queue`, :func:`eviction_deadlines`). Everything else is queued now or at ``T``. The
queue keeps the earliest time for a key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar

from flotilla.kube.taints import (
    TaintLike,
    TolerationLike,
    first_untolerated_taint,
    matching_tolerations,
    no_execute_taints,
    tolerates,
)
from flotilla.scheduler.errors import ModelError
from flotilla.scheduler.model import Taint, Toleration

__all__ = [
    "APPLIED_PLACEMENT_ANNOTATION",
    "APPLIED_PLACEMENT_EMPTY_MESSAGE",
    "MAX_TIME",
    "AppliedPlacementError",
    "Eviction",
    "EvictionDecision",
    "applied_cluster_tolerations",
    "binding_eviction_decision",
    "enqueue_decision",
    "eviction_deadlines",
    "no_execute_eviction",
    "parse_taints",
    "parse_tolerations",
    "should_queue",
    "toleration_deadline",
]

APPLIED_PLACEMENT_ANNOTATION = "policy.karmada.io/applied-placement"
#: Karmada's error for a binding without an applied placement ("ResourceBining" is sic).
APPLIED_PLACEMENT_EMPTY_MESSAGE = "the applied placement for ResourceBining can not be empty"
#: Deadlines beyond what ``datetime`` can hold are clamped to this.
MAX_TIME = datetime.max.replace(tzinfo=UTC)


K = TypeVar("K")


class AppliedPlacementError(ValueError):
    """The binding's applied-placement annotation is missing, empty or not a placement."""


# ------------------------------------------------------------------------------------------------
# parsing
# ------------------------------------------------------------------------------------------------


def parse_taints(value: Any) -> tuple[Taint, ...]:
    """``spec.taints`` of a Cluster (or the Cluster itself) as typed taints; ``None`` gives ``()``.

    Raises :class:`flotilla.scheduler.errors.ModelError` (a ``ValueError``) for a malformed list.
    """

    if isinstance(value, Mapping) and ("spec" in value or "metadata" in value):
        spec = value.get("spec")
        value = spec.get("taints") if isinstance(spec, Mapping) else None
    if value is None:
        return ()
    if not isinstance(value, list | tuple):

        raise ModelError("spec.taints: must be a list")
    return tuple(Taint.from_dict(t, f"spec.taints[{i}]") for i, t in enumerate(value))


def parse_tolerations(value: Any, where: str = "placement.clusterTolerations") -> tuple[Toleration, ...]:
    """A ``clusterTolerations`` list as typed tolerations; ``None`` gives ``()``."""

    if value is None:
        return ()
    if not isinstance(value, list | tuple):

        raise ModelError(f"{where}: must be a list")
    return tuple(Toleration.from_dict(t, f"{where}[{i}]") for i, t in enumerate(value))


def applied_cluster_tolerations(annotations: Mapping[str, Any] | None) -> tuple[Toleration, ...]:
    """The cluster tolerations of the placement the scheduler last applied (what the taint manager uses).

    Missing or empty annotation: :class:`AppliedPlacementError` with Karmada's message (the taint
    manager retries such a binding with backoff and never evicts it, as Karmada does: its taint manager reads
    the tolerations of the last applied placement, not ``spec.placement``).
    Invalid JSON, or JSON that is not an object: :class:`AppliedPlacementError`. JSON ``null`` is
    an empty placement (no tolerations), as Go's ``json.Unmarshal`` makes it.
    """
    raw = (annotations or {}).get(APPLIED_PLACEMENT_ANNOTATION)
    if not isinstance(raw, str) or raw == "":
        raise AppliedPlacementError(APPLIED_PLACEMENT_EMPTY_MESSAGE)
    try:
        placement = json.loads(raw)
    except ValueError as e:
        raise AppliedPlacementError(f"invalid applied placement: {e}") from None
    if placement is None:
        return ()
    if not isinstance(placement, dict):
        raise AppliedPlacementError("invalid applied placement: not a JSON object")
    try:
        return parse_tolerations(placement.get("clusterTolerations"))
    except ValueError as e:
        raise AppliedPlacementError(f"invalid applied placement: {e}") from None


# ------------------------------------------------------------------------------------------------
# matching
# ------------------------------------------------------------------------------------------------


def _deadline(time_added: datetime, seconds: int) -> datetime:
    if time_added.tzinfo is None:
        time_added = time_added.replace(tzinfo=UTC)
    try:
        return time_added + timedelta(seconds=seconds)
    except OverflowError:
        return MAX_TIME if seconds > 0 else datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class _Trigger:
    at: datetime
    taint: TaintLike
    immediate: bool  # a pair with tolerationSeconds <= 0


def _triggers(taints: Sequence[TaintLike], used: Sequence[TolerationLike]) -> list[_Trigger]:
    out: list[_Trigger] = []
    for tol in used:
        seconds = tol.toleration_seconds
        if seconds is None:
            continue
        for taint in taints:
            if taint.time_added is None or not tolerates(tol, taint):
                continue
            out.append(_Trigger(_deadline(taint.time_added, seconds), taint, seconds <= 0))
    return out


def toleration_deadline(taints: Sequence[TaintLike], used: Sequence[TolerationLike]) -> datetime | None:
    """The earliest ``timeAdded + tolerationSeconds`` over the tolerating (used toleration, taint) pairs.

    ``None`` when there is no such pair: the taints are tolerated forever. ``taints`` are the NoExecute
    taints, ``used`` what :func:`matching_tolerations` returned for them.
    """
    triggers = _triggers(taints, used)
    return min((t.at for t in triggers), default=None)


# ------------------------------------------------------------------------------------------------
# the decision
# ------------------------------------------------------------------------------------------------


class Eviction(StrEnum):
    NOW = "Now"
    AT = "At"
    NEVER = "Never"


@dataclass(frozen=True)
class EvictionDecision:
    """What the taint manager does with one (binding, cluster).

    ``at``: for ``AT`` the deadline; for ``NOW`` decided by a timer, the earliest deadline (passed, or
    from a ``tolerationSeconds <= 0`` pair).
    ``taint``: the first untolerated taint (``NOW`` without ``at``), or the taint of the deadline.
    ``error``: set when the applied placement could not be read (``NOW`` in :func:`enqueue_decision`,
    the fail-safe of Karmada's enqueue).
    """

    action: Eviction
    at: datetime | None = None
    taint: TaintLike | None = None
    error: str | None = None

    @property
    def queued(self) -> bool:
        """D10: only bindings that will be evicted are queued (a forever toleration never is)."""
        return self.action is not Eviction.NEVER

    def when(self, now: datetime) -> datetime | None:
        """When to process the key: ``now`` (NOW), the deadline (AT), ``None`` (NEVER)."""
        if self.action is Eviction.NOW:
            return now
        if self.action is Eviction.AT:
            return self.at
        return None

    def delay(self, now: datetime) -> float | None:
        """Seconds until the key is due (0.0 for NOW), or ``None`` (NEVER)."""
        when = self.when(now)
        if when is None:
            return None
        return max(0.0, (when - now).total_seconds())


NEVER = EvictionDecision(Eviction.NEVER)


def should_queue(decision: EvictionDecision) -> bool:
    """D10 as a predicate: a binding tolerating the cluster's NoExecute taints forever is never queued."""
    return decision.queued


def no_execute_eviction(
    taints: Sequence[TaintLike],
    tolerations: Sequence[TolerationLike],
    now: datetime,
    *,
    enabled: bool = True,
) -> EvictionDecision:
    """The taint manager's verdict for tolerations ``tolerations`` on a cluster with ``taints``.

    ``taints`` may hold every taint of the cluster: only the ``NoExecute`` ones count.
    ``enabled`` is ``--enable-no-execute-taint-eviction``.
    """
    if not enabled:
        return NEVER
    taints = no_execute_taints(taints)
    if not taints:
        return NEVER
    all_tolerated, used = matching_tolerations(taints, tolerations)
    if not all_tolerated:
        return EvictionDecision(Eviction.NOW, taint=first_untolerated_taint(taints, tolerations))
    triggers = _triggers(taints, used)
    if not triggers:
        return NEVER
    earliest = min(triggers, key=lambda t: t.at)
    if earliest.at <= now or any(t.immediate for t in triggers):
        return EvictionDecision(Eviction.NOW, at=earliest.at, taint=earliest.taint)
    return EvictionDecision(Eviction.AT, at=earliest.at, taint=earliest.taint)


def enqueue_decision(
    annotations: Mapping[str, Any] | None,
    taints: Sequence[TaintLike],
    now: datetime,
    *,
    enabled: bool = True,
) -> EvictionDecision:
    """The taint manager's reconcile of a cluster: should this binding's key be queued, and when.

    As Karmada's ``enqueueBinding``: a binding whose applied placement cannot be read is queued now
    (fail-safe: the worker then reports the error and retries with backoff).
    """
    if not enabled or not no_execute_taints(taints):
        return NEVER
    try:
        tolerations = applied_cluster_tolerations(annotations)
    except AppliedPlacementError as e:
        return EvictionDecision(Eviction.NOW, error=str(e))
    return no_execute_eviction(taints, tolerations, now, enabled=enabled)


def binding_eviction_decision(
    binding: Mapping[str, Any],
    cluster: str,
    taints: Sequence[TaintLike] | None,
    now: datetime,
    *,
    enabled: bool = True,
) -> EvictionDecision:
    """The eviction worker's verdict for one key: whether the binding is to be evicted from ``cluster`` now.

    ``taints``: the cluster's taints, ``None`` when the Cluster no longer exists (never evict). A
    binding being deleted, or no longer targeting ``cluster`` in ``spec.clusters``, is never evicted.
    Raises :class:`AppliedPlacementError` when the applied placement cannot be read: the worker
    retries with backoff.
    """
    meta = binding.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    if meta.get("deletionTimestamp"):
        return NEVER
    spec = binding.get("spec")
    targets = spec.get("clusters") if isinstance(spec, Mapping) else None
    names = {c.get("name") for c in targets or () if isinstance(c, Mapping)}
    if cluster not in names:
        return NEVER
    annotations = meta.get("annotations")
    tolerations = applied_cluster_tolerations(annotations if isinstance(annotations, Mapping) else None)
    if taints is None:
        return NEVER
    return no_execute_eviction(taints, tolerations, now, enabled=enabled)


def eviction_deadlines(
    placements: Iterable[tuple[K, str]],
    tolerations: Mapping[K, Sequence[TolerationLike] | None],
    cluster_taints: Mapping[str, Sequence[TaintLike]],
    now: datetime,
    *,
    enabled: bool = True,
) -> dict[tuple[K, str], datetime]:
    """The earliest time each (binding, cluster) must be looked at by the eviction worker.

    ``placements``: (binding key, cluster) for every binding whose ``spec.clusters`` names the
    cluster. ``tolerations[key]``: the binding's applied cluster tolerations, ``None`` when its
    applied placement could not be read (queued now, as :func:`enqueue_decision`). A key missing
    from ``tolerations`` counts as ``None``. ``cluster_taints``: the taints of each cluster, and a
    cluster missing from it has none.

    Pairs that are tolerated forever are absent (D10). A pair given twice keeps its earliest time,
    as the delaying queue does.
    """
    out: dict[tuple[K, str], datetime] = {}
    for key, cluster in placements:
        taints = cluster_taints.get(cluster, ())
        tols = tolerations.get(key)
        if not enabled or not no_execute_taints(taints):
            continue
        if tols is None:
            decision = EvictionDecision(Eviction.NOW, error=APPLIED_PLACEMENT_EMPTY_MESSAGE)
        else:
            decision = no_execute_eviction(taints, tols, now, enabled=enabled)
        when = decision.when(now)
        if when is None:
            continue
        pair = (key, cluster)
        if pair not in out or when < out[pair]:
            out[pair] = when
    return out
