"""Graceful-eviction tasks: how cluster failover and application failover take a cluster off a binding.

Pure functions, no I/O. Karmada's ``GracefulEvictCluster`` and its purge-mode resolution are kept exactly;
the one divergence is D9 (cluster failover records ``clustersBeforeFailover`` too).

**Evicting** a cluster (:func:`graceful_evict_cluster`, Karmada's ``GracefulEvictCluster``):

1. if the cluster is not in ``spec.clusters`` nothing changes at all (no task either);
2. it is removed from ``spec.clusters``;
3. if a task with the same ``fromCluster`` already exists, nothing else happens. The old task is
   left exactly as it was, so there is never more than one task per cluster;
4. otherwise a task is appended, so list order is creation order. ``replicas`` is set only when
   the cluster had more than 0.

The result is returned as a merge patch of ``spec.clusters`` and ``spec.gracefulEvictionTasks``
(:meth:`EvictionPatch.spec_patch`). The caller sends it with an optimistic lock.

**Cluster failover** (the taint manager, :func:`cluster_failover_task_options`):
``producer: TaintManager``, ``reason: TaintUntolerated``. The purge mode is the binding's
``failover.cluster.purgeMode`` when ``failover.cluster`` is set (empty means ``Gracefully``),
otherwise ``--no-execute-taint-eviction-purge-mode`` (``Directly`` gives ``Directly``, any other
value gives ``Gracefully``), see :func:`resolve_cluster_purge_mode`. There is no
``gracePeriodSeconds`` and no ``suppressDeletion``.

**Application failover** (:func:`application_failover_task_options`): the producer is the
controller's name, ``resource-binding-application-failover-controller`` or
``cluster-resource-binding-application-failover-controller``, and ``reason: ApplicationFailure``.
The purge mode is the policy's ``failover.application.purgeMode``, copied as is (possibly empty).
``Gracefully`` copies ``gracePeriodSeconds``, and fails with Karmada's error when the
``GracefulEviction`` gate is off. ``Never`` sets ``suppressDeletion: true``. Other values add nothing.

**Preserved state** is extracted by the caller (failover/state.py) and passed in:
``preserved_label_state=None`` means no extraction happened (gate off, or no rules). When state is
given, the task records ``preservedLabelState`` and ``clustersBeforeFailover``, the names of
``spec.clusters`` before the eviction (before any cluster of the same batch was removed). Karmada
does this for application failover only. **D9**: Flotilla's cluster failover records
``clustersBeforeFailover`` the same way, so state is never injected into a copy that already ran in
the surviving cluster.

``creationTimestamp`` is left unset by default, as Karmada's producers leave it: the
graceful-eviction controller stamps it on its first pass. A producer may pass one, which saves that
extra write.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flotilla.failover.purge import (
    PURGE_MODE_DIRECTLY,
    PURGE_MODE_GRACEFULLY,
    PURGE_MODE_NEVER,
    eviction_tasks,
)
from flotilla.kube.objects import as_list, as_map
from flotilla.kube.times import format_time

__all__ = [
    "CLUSTER_RESOURCE_BINDING_KIND",
    "EVENT_EVICT_FAILED",
    "EVENT_EVICT_SUCCEEDED",
    "GRACEFUL_EVICTION_GATE_ERROR",
    "PRODUCER_CRB_APPLICATION_FAILOVER",
    "PRODUCER_RB_APPLICATION_FAILOVER",
    "PRODUCER_TAINT_MANAGER",
    "REASON_APPLICATION_FAILURE",
    "REASON_TAINT_UNTOLERATED",
    "RESOURCE_BINDING_KIND",
    "EvictionPatch",
    "TaskBuildError",
    "TaskOptions",
    "application_failover_producer",
    "application_failover_task_options",
    "build_task",
    "cluster_failover_task_options",
    "cluster_in_eviction_tasks",
    "cluster_names",
    "evict_failed_message",
    "evict_succeeded_message",
    "graceful_evict_cluster",
    "graceful_evict_clusters",
    "resolve_cluster_purge_mode",
]

RESOURCE_BINDING_KIND = "ResourceBinding"
CLUSTER_RESOURCE_BINDING_KIND = "ClusterResourceBinding"

#: ``EvictionProducerTaintManager``.
PRODUCER_TAINT_MANAGER = "TaintManager"
#: The application-failover controllers' names, used as producers.
PRODUCER_RB_APPLICATION_FAILOVER = "resource-binding-application-failover-controller"
PRODUCER_CRB_APPLICATION_FAILOVER = "cluster-resource-binding-application-failover-controller"
#: ``EvictionReasonTaintUntolerated`` / ``EvictionReasonApplicationFailure``.
REASON_TAINT_UNTOLERATED = "TaintUntolerated"
REASON_APPLICATION_FAILURE = "ApplicationFailure"

#: Event reasons (on the binding and on its resource template).
EVENT_EVICT_FAILED = "EvictWorkloadFromClusterFailed"  # Warning: writing the eviction failed
EVENT_EVICT_SUCCEEDED = "EvictWorkloadFromClusterSucceed"  # Normal: the task was removed (sic "Succeed")

GRACEFUL_EVICTION_GATE_ERROR = "GracefulEviction featureGate must be enabled when purgeMode is Gracefully"


def evict_failed_message(cluster: str) -> str:
    return f"Evict from cluster {cluster} failed."


def evict_succeeded_message(cluster: str) -> str:
    return f"Evict from cluster {cluster} succeed."


class TaskBuildError(Exception):
    """The task for a cluster cannot be built; the eviction must not happen (it is retried)."""


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ------------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskOptions:
    """Everything of a task except ``fromCluster`` and ``replicas`` (which come from the cluster)."""

    producer: str
    reason: str
    purge_mode: str = ""
    message: str = ""
    grace_period_seconds: int | None = None
    suppress_deletion: bool | None = None
    preserved_label_state: Mapping[str, str] | None = None
    clusters_before_failover: Sequence[str] = ()
    creation_timestamp: datetime | None = None


def cluster_names(spec: Mapping[str, Any]) -> list[str]:
    """The names in ``spec.clusters``, in order (what ``clustersBeforeFailover`` records).

    Same as :func:`flotilla.failover.state.clusters_before_failover`.
    """
    out: list[str] = []
    for target in as_list(spec.get("clusters")):
        name = as_map(target).get("name")
        if isinstance(name, str) and name:
            out.append(name)
    return out


def resolve_cluster_purge_mode(failover: Mapping[str, Any] | None, flag: str) -> str:
    """Cluster failover's purge mode: ``failover.cluster.purgeMode`` (empty: ``Gracefully``) when
    ``failover.cluster`` is set, else ``--no-execute-taint-eviction-purge-mode`` (only ``Directly``
    is taken as is, anything else is ``Gracefully``)."""
    cluster = as_map(failover).get("cluster")
    if isinstance(cluster, Mapping):
        mode = cluster.get("purgeMode")
        return mode if isinstance(mode, str) and mode else PURGE_MODE_GRACEFULLY
    return PURGE_MODE_DIRECTLY if flag == PURGE_MODE_DIRECTLY else PURGE_MODE_GRACEFULLY


def cluster_failover_task_options(
    failover: Mapping[str, Any] | None,
    *,
    default_purge_mode: str = PURGE_MODE_GRACEFULLY,
    preserved_label_state: Mapping[str, str] | None = None,
    clusters_before_failover: Sequence[str] = (),
    creation_timestamp: datetime | None = None,
) -> TaskOptions:
    """The taint manager's task options (reason ``TaintUntolerated``, producer ``TaintManager``).

    ``failover``: the binding's ``spec.failover``; ``default_purge_mode``: the flag
    ``--no-execute-taint-eviction-purge-mode``; ``preserved_label_state``: the extracted state, or
    ``None`` when none was extracted; ``clusters_before_failover``: :func:`cluster_names` of the
    spec before the eviction, recorded with the state (D9).
    """
    return TaskOptions(
        producer=PRODUCER_TAINT_MANAGER,
        reason=REASON_TAINT_UNTOLERATED,
        purge_mode=resolve_cluster_purge_mode(failover, default_purge_mode),
        preserved_label_state=None if preserved_label_state is None else dict(preserved_label_state),
        clusters_before_failover=tuple(clusters_before_failover) if preserved_label_state is not None else (),
        creation_timestamp=creation_timestamp,
    )


def application_failover_producer(binding_kind: str) -> str:
    """The producer name for a ``ResourceBinding`` or a ``ClusterResourceBinding``."""
    if binding_kind == CLUSTER_RESOURCE_BINDING_KIND:
        return PRODUCER_CRB_APPLICATION_FAILOVER
    return PRODUCER_RB_APPLICATION_FAILOVER


def application_failover_task_options(
    application: Mapping[str, Any],
    *,
    binding_kind: str = RESOURCE_BINDING_KIND,
    preserved_label_state: Mapping[str, str] | None = None,
    clusters_before_failover: Sequence[str] = (),
    graceful_eviction_enabled: bool = True,
    creation_timestamp: datetime | None = None,
) -> TaskOptions:
    """Application failover's task options (Karmada's ``buildTaskOptions``).

    ``application``: the binding's ``spec.failover.application``. Raises :class:`TaskBuildError` for
    ``purgeMode: Gracefully`` with the ``GracefulEviction`` gate off.
    """
    mode = application.get("purgeMode")
    mode = mode if isinstance(mode, str) else ""
    grace: int | None = None
    suppress: bool | None = None
    if mode == PURGE_MODE_GRACEFULLY:
        if not graceful_eviction_enabled:
            raise TaskBuildError(GRACEFUL_EVICTION_GATE_ERROR)
        grace = _opt_int(application.get("gracePeriodSeconds"))
    elif mode == PURGE_MODE_NEVER:
        suppress = True
    return TaskOptions(
        producer=application_failover_producer(binding_kind),
        reason=REASON_APPLICATION_FAILURE,
        purge_mode=mode,
        grace_period_seconds=grace,
        suppress_deletion=suppress,
        preserved_label_state=None if preserved_label_state is None else dict(preserved_label_state),
        clusters_before_failover=tuple(clusters_before_failover) if preserved_label_state is not None else (),
        creation_timestamp=creation_timestamp,
    )


# ------------------------------------------------------------------------------------------------
# the task and the eviction
# ------------------------------------------------------------------------------------------------


def build_task(cluster: str, replicas: int, options: TaskOptions) -> dict[str, Any]:
    """The task as stored (``omitempty`` fields left out, in the API's field order)."""
    task: dict[str, Any] = {"fromCluster": cluster}
    if options.purge_mode:
        task["purgeMode"] = options.purge_mode
    if replicas > 0:
        task["replicas"] = replicas
    task["reason"] = options.reason
    if options.message:
        task["message"] = options.message
    task["producer"] = options.producer
    if options.grace_period_seconds is not None:
        task["gracePeriodSeconds"] = options.grace_period_seconds
    if options.suppress_deletion is not None:
        task["suppressDeletion"] = options.suppress_deletion
    if options.preserved_label_state:
        task["preservedLabelState"] = dict(options.preserved_label_state)
    if options.creation_timestamp is not None:
        task["creationTimestamp"] = format_time(options.creation_timestamp)
    if options.clusters_before_failover:
        task["clustersBeforeFailover"] = list(options.clusters_before_failover)
    return task


def cluster_in_eviction_tasks(spec: Mapping[str, Any], cluster: str) -> bool:
    """``ClusterInGracefulEvictionTasks``: some task has ``fromCluster == cluster``."""
    return any(t.get("fromCluster") == cluster for t in eviction_tasks(spec))


@dataclass
class EvictionPatch:
    """The binding's new ``spec.clusters`` and ``spec.gracefulEvictionTasks`` after evictions.

    ``removed``: clusters taken out of ``spec.clusters``; ``added``: clusters that got a new task
    (a removed cluster that already had a task is in ``removed`` only).
    """

    clusters: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.removed)

    def spec_patch(self, resource_version: str | None = None) -> dict[str, Any]:
        """A JSON merge patch of the two lists (an empty list is removed, as Go's ``omitempty``).

        With ``resource_version`` the patch carries it as the optimistic lock.
        """
        patch: dict[str, Any] = {
            "spec": {
                "clusters": self.clusters or None,
                "gracefulEvictionTasks": self.tasks or None,
            }
        }
        if resource_version is not None:
            patch["metadata"] = {"resourceVersion": resource_version}
        return patch

    def apply(self, binding: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``binding`` with the new lists."""
        out = copy.deepcopy(dict(binding))
        spec = out.get("spec")
        if not isinstance(spec, dict):
            spec = out["spec"] = {}
        for key, value in (("clusters", self.clusters), ("gracefulEvictionTasks", self.tasks)):
            if value:
                spec[key] = copy.deepcopy(value)
            else:
                spec.pop(key, None)
        return out


def graceful_evict_clusters(
    spec: Mapping[str, Any], evictions: Iterable[tuple[str, TaskOptions]]
) -> EvictionPatch:
    """Evict each ``(cluster, options)`` in turn, as repeated ``GracefulEvictCluster`` calls."""
    clusters = [copy.deepcopy(dict(c)) for c in as_list(spec.get("clusters")) if isinstance(c, Mapping)]
    tasks = [copy.deepcopy(dict(t)) for t in as_list(spec.get("gracefulEvictionTasks")) if isinstance(t, Mapping)]
    result = EvictionPatch(clusters, tasks)
    for cluster, options in evictions:
        index = next((i for i, c in enumerate(result.clusters) if c.get("name") == cluster), None)
        if index is None:
            continue
        evicted = result.clusters.pop(index)
        result.removed.append(cluster)
        if any(t.get("fromCluster") == cluster for t in result.tasks):
            continue
        replicas = _opt_int(evicted.get("replicas")) or 0
        result.tasks.append(build_task(cluster, replicas, options))
        result.added.append(cluster)
    return result


def graceful_evict_cluster(spec: Mapping[str, Any], cluster: str, options: TaskOptions) -> EvictionPatch:
    """``GracefulEvictCluster(cluster, options)`` on a copy of ``spec`` (the input is not changed)."""
    return graceful_evict_clusters(spec, [(cluster, options)])
