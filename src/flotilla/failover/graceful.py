"""Graceful-eviction assessment: when a graceful-eviction task is done and may be removed.

Pure functions, no I/O, no clock (``now`` is passed in). Karmada's rules (stamp, suppressDeletion, timeout,
all healthy after the scheduler caught up) are kept exactly, with one divergence: D2, fencing, under which a
``Directly`` task is held until its old Work is gone.

For each task, in order (:func:`assess_eviction_tasks`):

1. no ``creationTimestamp``: stamp it with ``now`` (RFC 3339, whole seconds) and **keep** the task,
   unassessed, even with ``suppressDeletion: false``;
2. ``suppressDeletion: true``: **keep**, forever, with no timeout. ``suppressDeletion: false``:
   **remove** now, because a person confirmed the old copy may go;
3. timeout = the task's ``gracePeriodSeconds``, else ``--graceful-eviction-timeout``, taken per task.
   ``now > creationTimestamp + timeout`` (strictly after): **remove**;
4. the scheduler has caught up (``status.schedulerObservedGeneration == metadata.generation``) and
   every cluster in ``spec.clusters`` has an ``aggregatedStatus`` item whose ``health`` is
   ``Healthy``: **remove**. A missing item, ``Unhealthy`` or ``Unknown`` is not healthy: **Unknown
   health counts as not healthy**. An empty ``spec.clusters`` is vacuously healthy once the scheduler
   has caught up. Only ``spec.clusters`` is looked at, not ``requiredBy`` or the tasks' clusters;
5. otherwise **keep**.

The purge mode is not consulted. ``Directly``, ``Gracefully`` and ``Never`` tasks are assessed
alike, and ``Never`` differs only through ``suppressDeletion: true``. The one exception is D2, below.

When the kept list differs from the current one the controller patches
``spec.gracefulEvictionTasks`` with an optimistic lock (:meth:`Assessment.spec_patch`). After the
patch succeeds it emits, for each removed task, a Normal ``EvictWorkloadFromClusterSucceed`` event
"Evict from cluster X succeed." on the binding and on its resource template
(:attr:`Assessment.events`). It then looks again after :attr:`Assessment.requeue_after` seconds. That
is the smallest ``creationTimestamp + timeout - now`` over the kept tasks without ``suppressDeletion``,
or ``None`` when only ``suppressDeletion`` tasks remain. Karmada does not requeue when that value is
exactly 0 and relies on the next event. Flotilla returns 0.0 (look again at once), because the task
expires at that instant.

**D2, Directly tasks.** Karmada removes a ``Directly`` task on timeout even while the old Work is still
there (its cluster is unreachable, so the Work cannot finish deleting). That lifts the binding
controller's barrier, and the new copy is created while the old one may still run: the safety rule is
lost. When the caller passes ``directly_pending``, the ``fromCluster`` of each ``Directly`` task whose
Work still exists (:func:`flotilla.failover.purge.directly_pending_clusters`), such a task is **held**.
It is kept whatever its timeout and health, until the Work is gone, for example once the cluster is
fenced. Only ``suppressDeletion: false`` (an explicit human decision) still removes it. Held tasks
are listed in :attr:`Assessment.held`, and the controller looks again every ``held_recheck`` seconds.
Without ``directly_pending`` the assessment is exactly Karmada's.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from flotilla.failover.eviction import EVENT_EVICT_SUCCEEDED, evict_succeeded_message
from flotilla.failover.purge import eviction_tasks, is_purged_directly
from flotilla.failover.state import injected_state_stamp
from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.objects import as_list, as_map
from flotilla.kube.times import format_time, parse_time

__all__ = [
    "DEFAULT_GRACEFUL_EVICTION_TIMEOUT",
    "DEFAULT_HELD_RECHECK",
    "EVENT_TASK_REMOVED",
    "HEALTH_HEALTHY",
    "HEALTH_UNHEALTHY",
    "HEALTH_UNKNOWN",
    "Assessment",
    "EvictionEvent",
    "Removal",
    "RemovalReason",
    "all_targets_healthy",
    "assess_binding",
    "assess_eviction_tasks",
    "binding_needs_assessment",
    "has_scheduled",
    "next_retry",
    "removal_event",
    "removal_possible",
    "task_timeout",
    "timed_out_cluster",
]

#: Flotilla's Event reason for a removed graceful-eviction task, with why in its type and message
#: (:func:`removal_event`; Karmada's Event has no reason in it).
EVENT_TASK_REMOVED = "GracefulEvictionTaskRemoved"
HEALTH_HEALTHY = "Healthy"
HEALTH_UNHEALTHY = "Unhealthy"
HEALTH_UNKNOWN = "Unknown"
#: ``--graceful-eviction-timeout`` default (seconds).
DEFAULT_GRACEFUL_EVICTION_TIMEOUT = 600.0
#: How often a held Directly task (D2) is looked at again (seconds).
DEFAULT_HELD_RECHECK = 10.0
EVENT_TYPE_NORMAL = "Normal"


class RemovalReason(StrEnum):
    SUPPRESSION_LIFTED = "SuppressDeletionFalse"
    TIMEOUT = "Timeout"
    HEALTHY = "Healthy"


@dataclass(frozen=True)
class Removal:
    cluster: str
    reason: RemovalReason


@dataclass(frozen=True)
class EvictionEvent:
    """An event to emit on the binding and on its resource template after the patch succeeded."""

    type: str
    reason: str
    message: str
    cluster: str


@dataclass
class Assessment:
    """The outcome for one binding.

    ``tasks``: the tasks to keep (new copies; stamped ones carry ``creationTimestamp``).
    ``changed``: they differ from the current list, so a patch is due. ``stamped``: clusters
    whose task was stamped in this pass. ``removed``: the removed tasks and why. ``held``: D2,
    ``Directly`` tasks kept only because their old Work still exists. ``requeue_after``: seconds
    until the next timed look, or ``None``.
    """

    tasks: list[dict[str, Any]]
    changed: bool
    stamped: list[str] = field(default_factory=list)
    removed: list[Removal] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    requeue_after: float | None = None

    @property
    def events(self) -> list[EvictionEvent]:
        return [EvictionEvent(EVENT_TYPE_NORMAL, EVENT_EVICT_SUCCEEDED, evict_succeeded_message(r.cluster), r.cluster)
                for r in self.removed]

    def spec_patch(self, resource_version: str | None = None) -> dict[str, Any] | None:
        """The merge patch of ``spec.gracefulEvictionTasks`` (``None`` when nothing changed)."""
        if not self.changed:
            return None
        patch: dict[str, Any] = {"spec": {"gracefulEvictionTasks": self.tasks or None}}
        if resource_version is not None:
            patch["metadata"] = {"resourceVersion": resource_version}
        return patch


def task_timeout(task: Mapping[str, Any], default_timeout: float) -> float:
    """The task's ``gracePeriodSeconds``, else the global ``--graceful-eviction-timeout`` (seconds)."""
    grace = task.get("gracePeriodSeconds")
    if isinstance(grace, int) and not isinstance(grace, bool):
        return float(grace)
    return default_timeout


def _expiry(created: datetime, timeout: float) -> datetime:
    try:
        return created + timedelta(seconds=timeout)
    except OverflowError:
        return (datetime.max if timeout > 0 else datetime.min).replace(tzinfo=UTC)


def has_scheduled(binding: Mapping[str, Any]) -> bool:
    """``status.schedulerObservedGeneration == metadata.generation`` (the scheduler has caught up)."""
    generation: Any = as_map(binding.get("metadata")).get("generation", 0)
    observed: Any = as_map(binding.get("status")).get("schedulerObservedGeneration", 0)
    return bool(observed == generation)


def all_targets_healthy(clusters: Sequence[str], aggregated_status: Sequence[Mapping[str, Any]]) -> bool:
    """Every cluster has an ``aggregatedStatus`` item (the first one for that name) with ``Healthy``.

    Missing item, ``Unhealthy`` and ``Unknown`` are all not healthy. No clusters: vacuously true.
    """
    health: dict[str, Any] = {}
    for item in aggregated_status:
        name = as_map(item).get("clusterName")
        if isinstance(name, str) and name not in health:
            health[name] = as_map(item).get("health")
    return all(health.get(c) == HEALTH_HEALTHY for c in clusters)


def next_retry(tasks: Sequence[Mapping[str, Any]], default_timeout: float, now: datetime) -> float | None:
    """Seconds until the earliest timeout of a task without ``suppressDeletion`` (never below 0).

    ``None``: no such task, only ``suppressDeletion`` tasks (or none) remain. Tasks without a
    parseable ``creationTimestamp`` count as stamped ``now``.
    """
    best: float | None = None
    for task in tasks:
        if task.get("suppressDeletion") is not None:
            continue
        created = parse_time(task.get("creationTimestamp")) or now
        remaining = (_expiry(created, task_timeout(task, default_timeout)) - now).total_seconds()
        if best is None or remaining < best:
            best = remaining
    return None if best is None else max(0.0, best)


def assess_eviction_tasks(
    tasks: Sequence[Mapping[str, Any]],
    *,
    clusters: Sequence[str],
    aggregated_status: Sequence[Mapping[str, Any]],
    scheduled: bool,
    now: datetime,
    default_timeout: float = DEFAULT_GRACEFUL_EVICTION_TIMEOUT,
    directly_pending: Collection[str] = (),
    held_recheck: float = DEFAULT_HELD_RECHECK,
) -> Assessment:
    """Karmada's ``assessEvictionTasks`` (and ``nextRetry``), plus the D2 hold.

    ``clusters``: the names in ``spec.clusters``; ``scheduled``: :func:`has_scheduled`;
    ``default_timeout``: ``--graceful-eviction-timeout`` in seconds; ``directly_pending``: clusters
    whose old Work of a ``Directly`` task still exists (D2; empty for Karmada's exact behaviour).
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    original = [json_copy(dict(t)) for t in tasks if isinstance(t, Mapping)]
    kept: list[dict[str, Any]] = []
    result = Assessment(tasks=kept, changed=False)
    healthy: bool | None = None
    for task in original:
        cluster = task.get("fromCluster")
        cluster = cluster if isinstance(cluster, str) else ""
        created = parse_time(task.get("creationTimestamp"))
        if created is None:
            stamped = dict(task)
            stamped["creationTimestamp"] = format_time(now)
            kept.append(stamped)
            result.stamped.append(cluster)
            continue
        suppress = task.get("suppressDeletion")
        if suppress is True:
            kept.append(task)
            continue
        if suppress is False:
            result.removed.append(Removal(cluster, RemovalReason.SUPPRESSION_LIFTED))
            continue
        hold = is_purged_directly(task) and cluster in directly_pending
        reason: RemovalReason | None = None
        if now > _expiry(created, task_timeout(task, default_timeout)):
            reason = RemovalReason.TIMEOUT
        else:
            if healthy is None:
                healthy = scheduled and all_targets_healthy(clusters, aggregated_status)
            if healthy:
                reason = RemovalReason.HEALTHY
        if reason is None:
            kept.append(task)
        elif hold:
            kept.append(task)
            result.held.append(cluster)
        else:
            result.removed.append(Removal(cluster, reason))
    result.changed = kept != original
    held = set(result.held)
    timed = [t for t in kept if not (t.get("fromCluster") in held and is_purged_directly(t))]
    retry = next_retry(timed, default_timeout, now)
    if result.held:
        retry = held_recheck if retry is None else min(retry, held_recheck)
    result.requeue_after = retry
    return result


def assess_binding(
    binding: Mapping[str, Any],
    now: datetime,
    *,
    default_timeout: float = DEFAULT_GRACEFUL_EVICTION_TIMEOUT,
    directly_pending: Collection[str] = (),
    held_recheck: float = DEFAULT_HELD_RECHECK,
) -> Assessment:
    """:func:`assess_eviction_tasks` for a whole (Cluster)ResourceBinding object."""
    spec = as_map(binding.get("spec"))
    status = as_map(binding.get("status"))
    names = [n for n in (as_map(c).get("name") for c in as_list(spec.get("clusters"))) if isinstance(n, str)]
    return assess_eviction_tasks(
        as_list(spec.get("gracefulEvictionTasks")),
        clusters=names,
        aggregated_status=[i for i in as_list(status.get("aggregatedStatus")) if isinstance(i, Mapping)],
        scheduled=has_scheduled(binding),
        now=now,
        default_timeout=default_timeout,
        directly_pending=directly_pending,
        held_recheck=held_recheck,
    )


# ---------------------------------------------------------------------------------------------
# Which binding events can change the assessment, and the Event of a removal
# ---------------------------------------------------------------------------------------------


def binding_needs_assessment(old: Mapping[str, Any] | None, new: Mapping[str, Any], *,
                             stamps_health: bool = False, now: datetime | None = None) -> bool:
    """Whether a binding event can change what the assessment decides.

    Karmada's predicate (tasks present; created, or its generation, ``schedulerObservedGeneration`` or
    ``aggregatedStatus`` changed), narrowed to the events after which a pass can do something: the tasks
    themselves changed (new, unstamped, ``suppressDeletion``), or the scheduler has caught up and every target
    reports Healthy (a removal), or, with ``stamps_health``, the D5 ``healthyAt`` stamp is due. Timeouts come
    from the pass's own requeue, a held ``Directly`` task from the deletion of its Work (D2).
    """
    tasks = eviction_tasks(as_map(new.get("spec")))
    if not tasks:
        return False
    if old is None or eviction_tasks(as_map(old.get("spec"))) != tasks:
        return True
    old_status, new_status = as_map(old.get("status")), as_map(new.get("status"))
    if (as_map(old.get("metadata")).get("generation") == as_map(new.get("metadata")).get("generation")
            and old_status.get("schedulerObservedGeneration") == new_status.get("schedulerObservedGeneration")
            and old_status.get("aggregatedStatus") == new_status.get("aggregatedStatus")):
        return False
    if removal_possible(new):
        return True
    return stamps_health and injected_state_stamp(new, now or datetime.now(UTC)) is not None


def removal_possible(binding: Mapping[str, Any]) -> bool:
    """The scheduler has caught up with the binding and every cluster of ``spec.clusters`` reports Healthy."""
    if not has_scheduled(binding):
        return False
    names = [n for n in (as_map(c).get("name") for c in as_list(as_map(binding.get("spec")).get("clusters")))
             if isinstance(n, str)]
    items = [i for i in as_list(as_map(binding.get("status")).get("aggregatedStatus")) if isinstance(i, Mapping)]
    return all_targets_healthy(names, items)


def _removed_head(cluster: str) -> str:
    return f"Graceful-eviction task for cluster {cluster} removed"


_TIMED_OUT = re.compile(r"Graceful-eviction task for cluster (\S+) removed: timed out ")


def removal_event(removal: Removal, task: Mapping[str, Any], default_timeout: float) -> tuple[str, str]:
    """``(type, message)`` of Flotilla's ``GracefulEvictionTaskRemoved`` Event for a removed task."""
    head = _removed_head(removal.cluster)
    if removal.reason is RemovalReason.HEALTHY:
        return "Normal", f"{head}: every target cluster reports the workload Healthy."
    if removal.reason is RemovalReason.TIMEOUT:
        timeout = task_timeout(task, default_timeout)
        return "Warning", (f"{head}: timed out after {timeout:g}s before every target cluster reported the "
                           "workload Healthy.")
    return "Normal", f"{head}: suppressDeletion was set to false."


def timed_out_cluster(type_: Any, message: Any) -> str | None:
    """The cluster whose task a ``GracefulEvictionTaskRemoved`` Event of ``type_`` and ``message`` says was removed by
    its timeout (:func:`removal_event`'s Warning), else None (removed because the new copy is Healthy, or because
    ``suppressDeletion`` was lifted)."""
    if type_ != "Warning" or not isinstance(message, str):
        return None
    found = _TIMED_OUT.match(message)
    return found.group(1) if found else None
