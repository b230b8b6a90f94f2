"""Purge modes as decisions: what happens to the old copy of a workload evicted from a cluster.

Pure functions, no I/O. Karmada's rules are kept exactly (``Directly`` removes the old copy before the new
one is created; ``Never`` keeps it). D2, fencing, changes only how a Work on a fenced cluster finishes being
deleted, not the rules here.

A graceful-eviction task (``spec.gracefulEvictionTasks[]``) names the cluster a workload left
(``fromCluster``) and how its old copy (the Work in that cluster) is purged:

==================  =====================================================  ========================
task                old copy (the Work in ``fromCluster``)                 new copies
==================  =====================================================  ========================
``Directly``        an orphan at once: deleted now                         written only once every
                                                                           Work in a ``Directly``
                                                                           cluster is gone (even a
                                                                           terminating one)
``Gracefully``      kept (not updated) until the task is removed           written at once
``Never``           kept while the task exists; the task has               written at once
                    ``suppressDeletion: true``, so only a person ends it
``""``/unknown      as ``Gracefully`` (this includes the legacy            written at once
                    ``Immediately``, removed in Karmada v1.19)
==================  =====================================================  ========================

A Work is kept when its cluster is one of the binding's **existing clusters**
(:func:`kept_clusters`, Karmada's ``ObtainBindingSpecExistingClusters``). These are the names in
``spec.clusters``, every ``spec.requiredBy[].clusters[].name``, and the ``fromCluster`` of every task
whose purge mode is not ``Directly``. Every other Work of the binding is an orphan and is deleted
(:func:`orphan_works`). While any Work of the binding (terminating ones included) is still in a
cluster of a ``Directly`` task, the binding controller writes no Work (:func:`directly_purge_pending`,
:func:`may_write_works`); Karmada looks again after :data:`DIRECTLY_PURGE_REQUEUE_SECONDS`, Flotilla's
binding controller when that Work's deletion is seen (with a long safety requeue). So the old copy is gone
before the new one is created. :func:`plan_purge` returns all of this at once.

The Work's cluster comes from its execution namespace ``karmada-es-<cluster>``. A Work outside such
a namespace has no cluster, so it counts as an orphan (as :mod:`flotilla.propagation.works` decides).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from flotilla.kube.objects import as_list, as_map

__all__ = [
    "eviction_tasks",
    "DIRECTLY_PURGE_REQUEUE_SECONDS",
    "EXECUTION_SPACE_PREFIX",
    "PURGE_MODE_DIRECTLY",
    "PURGE_MODE_GRACEFULLY",
    "PURGE_MODE_NEVER",
    "OldCopy",
    "PurgePlan",
    "directly_pending_clusters",
    "directly_purge_pending",
    "directly_purged_clusters",
    "is_purged_directly",
    "kept_clusters",
    "may_write_works",
    "old_copy_rule",
    "orphan_works",
    "plan_purge",
    "work_cluster",
]

PURGE_MODE_DIRECTLY = "Directly"
PURGE_MODE_GRACEFULLY = "Gracefully"
PURGE_MODE_NEVER = "Never"
#: Karmada's binding controller's ``requeueIntervalForDirectlyPurge`` (Flotilla's is woken by the Work's deletion).
DIRECTLY_PURGE_REQUEUE_SECONDS = 5.0
EXECUTION_SPACE_PREFIX = "karmada-es-"


class OldCopy(StrEnum):
    """What a task means for the Work in its ``fromCluster``."""

    #: ``Directly``: delete the old Work now, and create no new Work until it is gone.
    DELETE_FIRST = "DeleteFirst"
    #: ``Gracefully``, empty or unknown modes: keep it (no longer updated) until the task is removed.
    KEEP_UNTIL_TASK_REMOVED = "KeepUntilTaskRemoved"
    #: ``suppressDeletion: true`` (what ``Never`` sets): keep it until a person lets the task go.
    KEEP = "Keep"


def eviction_tasks(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A binding spec's ``gracefulEvictionTasks`` (the entries that are objects), oldest first."""
    return [t for t in as_list(spec.get("gracefulEvictionTasks")) if (type(t) is dict or isinstance(t, Mapping))]


def _from(task: Mapping[str, Any]) -> str:
    value = task.get("fromCluster")
    return value if isinstance(value, str) else ""


def is_purged_directly(task: Mapping[str, Any]) -> bool:
    """The task's purge mode is exactly ``Directly`` (the legacy ``Immediately`` no longer counts)."""
    return task.get("purgeMode") == PURGE_MODE_DIRECTLY


def old_copy_rule(task: Mapping[str, Any]) -> OldCopy:
    """What happens to the old copy while ``task`` exists (and after: see :class:`OldCopy`)."""
    if is_purged_directly(task):
        return OldCopy.DELETE_FIRST
    if task.get("suppressDeletion") is True:
        return OldCopy.KEEP
    return OldCopy.KEEP_UNTIL_TASK_REMOVED


def kept_clusters(spec: Mapping[str, Any]) -> set[str]:
    """The binding's existing clusters: its Works elsewhere are orphans."""
    names: set[str] = set()
    for target in as_list(spec.get("clusters")):
        name = as_map(target).get("name")
        if isinstance(name, str) and name:
            names.add(name)
    for snapshot in as_list(spec.get("requiredBy")):
        for target in as_list(as_map(snapshot).get("clusters")):
            name = as_map(target).get("name")
            if isinstance(name, str) and name:
                names.add(name)
    for task in eviction_tasks(spec):
        if not is_purged_directly(task) and _from(task):
            names.add(_from(task))
    return names


def directly_purged_clusters(spec: Mapping[str, Any]) -> set[str]:
    """Clusters named by a task with purge mode ``Directly`` (Karmada's ``ObtainClustersWithPurgeModeDirectly``)."""
    return {_from(t) for t in eviction_tasks(spec) if is_purged_directly(t) and _from(t)}


def work_cluster(work: Mapping[str, Any]) -> str | None:
    """The member cluster of a Work (from its ``karmada-es-<cluster>`` namespace), or ``None``."""
    namespace = as_map(work.get("metadata")).get("namespace")
    if not isinstance(namespace, str) or not namespace.startswith(EXECUTION_SPACE_PREFIX):
        return None
    return namespace[len(EXECUTION_SPACE_PREFIX):] or None


def _terminating(work: Mapping[str, Any]) -> bool:
    return bool(as_map(work.get("metadata")).get("deletionTimestamp"))


def orphan_works(works: Iterable[Mapping[str, Any]], spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The binding's Works whose cluster is not one of its existing clusters (to be deleted)."""
    kept = kept_clusters(spec)
    return [w for w in works if work_cluster(w) not in kept]


def directly_purge_pending(works: Iterable[Mapping[str, Any]], spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Works (terminating ones included) still in a cluster of a ``Directly`` task."""
    purged = directly_purged_clusters(spec)
    if not purged:
        return []
    return [w for w in works if work_cluster(w) in purged]


def directly_pending_clusters(works: Iterable[Mapping[str, Any]], spec: Mapping[str, Any]) -> set[str]:
    """The clusters of :func:`directly_purge_pending` (their old copy is not known to be gone yet)."""
    return {c for c in (work_cluster(w) for w in directly_purge_pending(works, spec)) if c is not None}


def may_write_works(works: Iterable[Mapping[str, Any]], spec: Mapping[str, Any]) -> bool:
    """The binding controller may create or update the binding's Works now.

    False while any Work remains in a cluster the binding was evicted from with ``Directly``: the old
    copy must be gone before a new one is created.
    """
    return not directly_purge_pending(works, spec)


@dataclass
class PurgePlan:
    """What the binding controller does about old copies before it renders Works.

    ``delete``: orphan Works to delete now (those already terminating are left out: their deletion
    is under way). ``orphans``: every orphan, terminating or not. ``pending_directly``: Works still in a
    ``Directly`` cluster. ``may_write``: whether Works may be written in this pass. ``requeue_after``:
    seconds until the controller looks again when it may not (``None`` otherwise).
    """

    delete: list[Mapping[str, Any]] = field(default_factory=list)
    orphans: list[Mapping[str, Any]] = field(default_factory=list)
    pending_directly: list[Mapping[str, Any]] = field(default_factory=list)
    kept_clusters: set[str] = field(default_factory=set)

    @property
    def may_write(self) -> bool:
        return not self.pending_directly

    @property
    def requeue_after(self) -> float | None:
        return None if self.may_write else DIRECTLY_PURGE_REQUEUE_SECONDS


def plan_purge(works: Iterable[Mapping[str, Any]], spec: Mapping[str, Any]) -> PurgePlan:
    """Orphans to delete, and whether the ``Directly`` barrier holds (the binding controller's first steps).

    The barrier is evaluated on the Works as they were before this pass deletes anything. Deleting
    an orphan only marks it terminating, and a terminating Work still blocks.
    """
    works = list(works)
    orphans = orphan_works(works, spec)
    return PurgePlan(
        delete=[w for w in orphans if not _terminating(w)],
        orphans=orphans,
        pending_directly=directly_purge_pending(works, spec),
        kept_clusters=kept_clusters(spec),
    )
