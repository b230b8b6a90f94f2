"""Application failover: when a workload that stays Unhealthy in a cluster is evicted from it.

Pure functions, no I/O, no clock (``now`` is passed in). Karmada's filter, timer and task rules, with one
divergence: D8, application-failover timers that survive restarts.

**Which bindings** (:func:`application_failover_applies`, Karmada's ``bindingFilter``): the binding
has ``spec.failover.application``, a non-empty ``status.aggregatedStatus``, a kind whose health the
resource interpreter can tell (the caller says so), and ``spec.propagateDeps: true``. Karmada checks
``propagateDeps`` for ResourceBindings only, not for ClusterResourceBindings. Flotilla checks it for both kinds,
because admission requires it for both. A binding that fails the filter loses its record.

**The record** (D8). Karmada keeps "first seen Unhealthy" times in memory, so a restart or a change
of leader starts every timer again. Flotilla persists them on the binding in the annotation
:data:`UNHEALTHY_SINCE_ANNOTATION` (``failover.flotilla.io/unhealthy-since``). Its value is a JSON
object ``{"<cluster>": "<RFC 3339 time>"}`` with keys sorted, UTC with a ``Z`` suffix, and
microseconds when they are not zero. It is removed when empty. An entry that does not parse is
ignored (it starts again at ``now``), and a time later than ``now`` is taken as ``now``, so a skewed
or hand-edited record cannot postpone a failover.

**One pass** (:func:`detect_application_failure`), with ``tol = decisionConditions.tolerationSeconds``
(300 when absent, the CRD default; a negative value counts as 0):

1. *unhealthy*: the clusters of ``aggregatedStatus`` items with ``health: Unhealthy`` that are not
   the ``fromCluster`` of any graceful-eviction task. Flotilla also requires the cluster to be in
   ``spec.clusters``: Karmada's eviction does nothing for any other cluster, and Karmada would then
   write an empty update;
2. a cluster of *unhealthy* with no record gets one at ``now``; a cluster whose record is at least
   ``tol`` old (``now >= since + tol``) is **evicted**; the others are due at ``since + tol``, and
   the earliest of those is :attr:`ApplicationFailoverDecision.next_check`;
3. the record keeps only clusters still in ``spec.clusters`` that were not evicted, and forgets every
   cluster whose health is ``Healthy`` or ``Unknown`` (see below). A cluster with no item, or one
   that is Unhealthy while it also has a task, keeps its time unchanged.

D8 changes Karmada's comparison from strictly after (``now > since + tol``) to ``>=``. As a result
``tolerationSeconds: 0`` evicts at the first look, as the API documents. It also means a recheck that
lands exactly on ``since + tol`` evicts. Karmada computes a remaining time of 0 at that moment and
never requeues, so the binding waits for an unrelated event. Flotilla returns exact
deadlines, not whole seconds.

**Unknown health**: as in Karmada, an ``Unknown`` item neither starts a timer nor counts towards
one, and it **resets** a running one. A workload whose health cannot be read for a
moment therefore gets the full ``tolerationSeconds`` again. With D14 (stale health is Unknown while a
cluster is not Ready) this also holds while the member is unreachable, which cluster failover, not
application failover, deals with. ``unknown_resets=False`` makes Unknown leave the record alone
instead. Flotilla does not use that option: it would be a divergence from Karmada that none of D1-D22 makes.

The caller then builds one task per evicted cluster (``eviction.application_failover_task_options``,
with ``clustersBeforeFailover = eviction.cluster_names(spec)`` computed once, before any removal) and
writes the eviction and the record in one update. If building any task fails, nothing is evicted:
Karmada returns the error, and the binding is retried with backoff. The record is then written as
:meth:`ApplicationFailoverDecision.record_after` with no evicted cluster, so the timers keep running.
On a failed write the controller emits ``EvictWorkloadFromClusterFailed`` for each cluster. On
success no event is emitted.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from flotilla.kube.metadata import json_annotation
from flotilla.kube.objects import as_list, as_map
from flotilla.kube.times import as_utc, format_time, parse_time

__all__ = [
    "DEFAULT_TOLERATION_SECONDS",
    "UNHEALTHY_SINCE_ANNOTATION",
    "ApplicationFailoverDecision",
    "application_failover_applies",
    "decide_for_binding",
    "detect_application_failure",
    "format_unhealthy_since",
    "parse_unhealthy_since",
    "record_patch",
    "toleration_seconds",
]

#: Binding annotation (Flotilla only, D8): JSON ``{cluster: RFC 3339}`` of when the workload was
#: first seen Unhealthy there.
UNHEALTHY_SINCE_ANNOTATION = "failover.flotilla.io/unhealthy-since"
#: ``decisionConditions.tolerationSeconds`` CRD default.
DEFAULT_TOLERATION_SECONDS = 300

HEALTH_HEALTHY = "Healthy"
HEALTH_UNHEALTHY = "Unhealthy"
HEALTH_UNKNOWN = "Unknown"


def _format_time(t: datetime) -> str:
    """``t`` as ``metav1.Time`` writes it, with microseconds when it has any."""
    t = as_utc(t)
    return format_time(t, 6 if t.microsecond else 0)


# ------------------------------------------------------------------------------------------------
# the persisted record (D8)
# ------------------------------------------------------------------------------------------------


def parse_unhealthy_since(annotations: Mapping[str, Any] | None) -> dict[str, datetime]:
    """The record held by :data:`UNHEALTHY_SINCE_ANNOTATION` (entries that do not parse are dropped)."""
    data = json_annotation(annotations, UNHEALTHY_SINCE_ANNOTATION)
    if not isinstance(data, dict):
        return {}
    out: dict[str, datetime] = {}
    for cluster, value in data.items():
        t = parse_time(value)
        if isinstance(cluster, str) and cluster and t is not None:
            out[cluster] = t
    return out


def format_unhealthy_since(record: Mapping[str, datetime]) -> str | None:
    """The annotation value for ``record`` (``None``: no entry, remove the annotation)."""
    if not record:
        return None
    return json.dumps({c: _format_time(record[c]) for c in sorted(record)}, separators=(",", ":"))


def record_patch(annotations: Mapping[str, Any] | None, record: Mapping[str, datetime]) -> dict[str, Any] | None:
    """A merge patch setting (or removing) the annotation, or ``None`` when it already holds exactly that."""
    wanted = format_unhealthy_since(record)
    current = as_map(annotations).get(UNHEALTHY_SINCE_ANNOTATION)
    if wanted is None and UNHEALTHY_SINCE_ANNOTATION not in as_map(annotations):
        return None
    if current == wanted:
        return None
    return {"metadata": {"annotations": {UNHEALTHY_SINCE_ANNOTATION: wanted}}}


# ------------------------------------------------------------------------------------------------
# the filter
# ------------------------------------------------------------------------------------------------


def application_failover_applies(binding: Mapping[str, Any], *, health_interpretable: bool) -> bool:
    """Karmada's ``bindingFilter`` (with ``propagateDeps`` required for both binding kinds).

    ``health_interpretable``: the resource interpreter has an ``InterpretHealth`` hook for the
    binding's resource kind.
    """
    spec = as_map(binding.get("spec"))
    if not isinstance(as_map(spec.get("failover")).get("application"), Mapping):
        return False
    if not as_list(as_map(binding.get("status")).get("aggregatedStatus")):
        return False
    if not health_interpretable:
        return False
    return spec.get("propagateDeps") is True


def toleration_seconds(application: Mapping[str, Any]) -> int:
    """``decisionConditions.tolerationSeconds`` (300 when absent, negative counts as 0)."""
    value = as_map(application.get("decisionConditions")).get("tolerationSeconds")
    if not isinstance(value, int) or isinstance(value, bool):
        return DEFAULT_TOLERATION_SECONDS
    return max(0, value)


# ------------------------------------------------------------------------------------------------
# the decision
# ------------------------------------------------------------------------------------------------


@dataclass
class ApplicationFailoverDecision:
    """One pass of application failover for one binding.

    ``evict``: clusters to evict now, in ``aggregatedStatus`` order. ``next_check``: the earliest
    time a still-tolerated Unhealthy cluster becomes due (``None``: nothing pending, wait for the next
    binding event). ``unhealthy``: the clusters counted as Unhealthy in this pass. ``record``: the
    record before evictions are taken into account; use :attr:`unhealthy_since` or
    :meth:`record_after`.
    """

    evict: list[str]
    next_check: datetime | None
    record: dict[str, datetime]
    unhealthy: list[str] = field(default_factory=list)

    def record_after(self, evicted: Collection[str]) -> dict[str, datetime]:
        """The record to persist once ``evicted`` have been evicted (pass ``()`` if the eviction failed)."""
        return {c: t for c, t in self.record.items() if c not in evicted}

    @property
    def unhealthy_since(self) -> dict[str, datetime]:
        """The record to persist together with the eviction of :attr:`evict`."""
        return self.record_after(self.evict)

    def requeue_after(self, now: datetime) -> float | None:
        """Seconds until :attr:`next_check` (``None``: no timed recheck)."""
        if self.next_check is None:
            return None
        return max(0.0, (self.next_check - as_utc(now)).total_seconds())


def _deadline(since: datetime, tol: int) -> datetime:
    try:
        return since + timedelta(seconds=tol)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def detect_application_failure(
    *,
    clusters: Sequence[str],
    aggregated_status: Sequence[Mapping[str, Any]],
    evicting: Collection[str],
    record: Mapping[str, datetime],
    tolerance: int,
    now: datetime,
    unknown_resets: bool = True,
) -> ApplicationFailoverDecision:
    """The pass described in the module docstring.

    ``clusters``: the names in ``spec.clusters``. ``evicting``: the ``fromCluster`` of every
    graceful-eviction task. ``record``: :func:`parse_unhealthy_since` of the binding.
    ``tolerance``: :func:`toleration_seconds`.
    """
    now = as_utc(now)
    tolerance = max(0, tolerance)
    targets = set(clusters)
    known = {c: min(as_utc(t), now) for c, t in record.items()}
    unhealthy: list[str] = []
    others: set[str] = set()
    resetting = (HEALTH_HEALTHY, HEALTH_UNKNOWN) if unknown_resets else (HEALTH_HEALTHY,)
    for item in aggregated_status:
        item = as_map(item)
        cluster = item.get("clusterName")
        if not isinstance(cluster, str) or not cluster:
            continue
        health = item.get("health")
        if (health == HEALTH_UNHEALTHY and cluster not in evicting and cluster in targets
                and cluster not in unhealthy):
            unhealthy.append(cluster)
        if health in resetting:
            others.add(cluster)
    evict: list[str] = []
    next_check: datetime | None = None
    for cluster in unhealthy:
        since = known.setdefault(cluster, now)
        due = _deadline(since, tolerance)
        if now >= due:
            evict.append(cluster)
        elif next_check is None or due < next_check:
            next_check = due
    kept = {c: t for c, t in known.items() if c in targets and c not in others}
    return ApplicationFailoverDecision(evict=evict, next_check=next_check, record=kept, unhealthy=unhealthy)


def decide_for_binding(
    binding: Mapping[str, Any],
    now: datetime,
    *,
    health_interpretable: bool,
    unknown_resets: bool = True,
) -> ApplicationFailoverDecision:
    """:func:`detect_application_failure` for a whole binding (an empty decision if the filter fails).

    When the filter fails the decision is empty and its record is empty, so
    :func:`record_patch` removes the annotation.
    """
    if not application_failover_applies(binding, health_interpretable=health_interpretable):
        return ApplicationFailoverDecision(evict=[], next_check=None, record={})
    spec = as_map(binding.get("spec"))
    meta = as_map(binding.get("metadata"))
    application = as_map(as_map(spec.get("failover")).get("application"))
    names = [n for n in (as_map(c).get("name") for c in as_list(spec.get("clusters"))) if isinstance(n, str)]
    evicting = {t.get("fromCluster") for t in as_list(spec.get("gracefulEvictionTasks")) if isinstance(t, Mapping)}
    return detect_application_failure(
        clusters=names,
        aggregated_status=[i for i in as_list(as_map(binding.get("status")).get("aggregatedStatus"))
                           if isinstance(i, Mapping)],
        evicting={c for c in evicting if isinstance(c, str)},
        record=parse_unhealthy_since(as_map(meta.get("annotations"))),
        tolerance=toleration_seconds(application),
        now=now,
        unknown_resets=unknown_resets,
    )
