"""Fencing a failed cluster (D2, fencing instead of deadlock), pure.

Karmada's ``Directly`` purge mode never completes while the failed cluster is unreachable: the old Work
cannot be deleted there, and the new copy is created only after it is gone (in Karmada: once the task has
timed out, and then without its preserved state).
Flotilla keeps the safety rule (the old copy must be known gone before the new one starts) and adds a way
to know it, as Kubernetes does for nodes with ``node.kubernetes.io/out-of-service``: a person who knows the
cluster is down (powered off, isolated) runs ``flotilla fence NAME``, which puts the taint
``cluster.flotilla.io/out-of-service:NoExecute`` on the Cluster. A cluster with that taint is **fenced**:

* deleting a Work there completes without contacting the member (:func:`work_deletion_decision`); the Work
  records that its objects were abandoned on a fenced cluster and a Warning Event ``WorkAbandoned`` says so;
* being a NoExecute taint, it also evicts the workloads that do not tolerate it (the taint manager);
* when the cluster's API answers again (fenced or merely failed, D17), the execution controller deletes every
  object Flotilla had placed there that no Work wants any more (:func:`stale_objects_on_recovery`) at once,
  before applying anything else: it does not wait for the cluster to be unfenced, nor for its Ready condition
  (the success threshold). The fence keeps new applies away, not these deletions
  (:func:`recovery_purge_step`). The stateful copy is therefore never running in two clusters under
  ``Directly`` once the member answers.

``flotilla unfence NAME`` removes the taint (:func:`unfence_patch`). The taint's value is not significant
(``is_fenced`` looks at key and effect only); ``fence_patch`` writes it empty.
"""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NamedTuple

from flotilla.api.labels import (
    MANAGED_LABEL,
    MANAGED_LABEL_VALUE,
    TAINT_CLUSTER_OUT_OF_SERVICE,
    TAINT_EFFECT_NO_EXECUTE,
    WORK_NAME_ANNOTATION,
    WORK_NAMESPACE_ANNOTATION,
)
from flotilla.failover.state import EventSpec
from flotilla.kube.objects import as_map, meta_of
from flotilla.kube.times import format_time

__all__ = [
    "ABANDONED_ANNOTATION",
    "CONDITION_ABANDONED",
    "EVENT_WORK_ABANDONED",
    "OUT_OF_SERVICE_TAINT",
    "OUT_OF_SERVICE_TAINT_EFFECT",
    "OUT_OF_SERVICE_TAINT_KEY",
    "REASON_CLUSTER_FENCED",
    "ObjectIdentity",
    "PurgeStep",
    "WorkDeletionDecision",
    "fence_patch",
    "is_fenced",
    "is_out_of_service_taint",
    "purge_retry_delay",
    "recovery_purge_step",
    "stale_objects_on_recovery",
    "unfence_patch",
    "wanted_identities",
    "work_deletion_decision",
]

OUT_OF_SERVICE_TAINT_KEY: Final = TAINT_CLUSTER_OUT_OF_SERVICE
OUT_OF_SERVICE_TAINT_EFFECT: Final = TAINT_EFFECT_NO_EXECUTE
#: The taint as ``fence_patch`` writes it (``timeAdded`` is added then).
OUT_OF_SERVICE_TAINT: Final[Mapping[str, str]] = {"key": OUT_OF_SERVICE_TAINT_KEY, "effect": OUT_OF_SERVICE_TAINT_EFFECT}

#: Flotilla-only Work annotation: JSON ``{"cluster": ..., "at": "<RFC 3339>"}``, set when the Work's objects
#: were abandoned on a fenced cluster (the Work is then released without contacting the member).
ABANDONED_ANNOTATION: Final = "work.flotilla.io/abandoned-on-fenced-cluster"
#: Flotilla-only Work condition: ``Abandoned=True``, reason ``ClusterFenced``.
CONDITION_ABANDONED: Final = "Abandoned"
REASON_CLUSTER_FENCED: Final = "ClusterFenced"
#: Warning Event on the Work (reason the execution controller already uses).
EVENT_WORK_ABANDONED: Final = "WorkAbandoned"


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _name(cluster: Mapping[str, Any] | str | None) -> str:
    if isinstance(cluster, str):
        return cluster
    return str(meta_of(cluster).get("name") or "")


def _taints(cluster: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [t for t in _list(as_map(as_map(cluster).get("spec")).get("taints")) if isinstance(t, Mapping)]


def is_out_of_service_taint(taint: Mapping[str, Any]) -> bool:
    """The taint is ``cluster.flotilla.io/out-of-service`` with effect ``NoExecute`` (any value)."""
    return taint.get("key") == OUT_OF_SERVICE_TAINT_KEY and taint.get("effect") == OUT_OF_SERVICE_TAINT_EFFECT


def is_fenced(cluster: Mapping[str, Any] | None) -> bool:
    """Whether the Cluster carries ``cluster.flotilla.io/out-of-service:NoExecute``."""
    return any(is_out_of_service_taint(t) for t in _taints(cluster))


def _patch(cluster: Mapping[str, Any], taints: list[dict[str, Any]]) -> dict[str, Any]:
    patch: dict[str, Any] = {"spec": {"taints": taints or None}}
    rv = meta_of(cluster).get("resourceVersion")
    if rv:  # optimistic lock: a concurrent taint change (cluster controller, policies) is not lost
        patch["metadata"] = {"resourceVersion": rv}
    return patch


def fence_patch(cluster: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """A JSON merge patch adding the out-of-service taint (``timeAdded`` = ``now``) and keeping every other
    taint; ``None`` when the cluster is already fenced. It carries ``metadata.resourceVersion`` when known."""
    if is_fenced(cluster):
        return None
    taints = [copy.deepcopy(dict(t)) for t in _taints(cluster)]
    taints.append({**OUT_OF_SERVICE_TAINT, "timeAdded": format_time(now)})
    return _patch(cluster, taints)


def unfence_patch(cluster: Mapping[str, Any]) -> dict[str, Any] | None:
    """A JSON merge patch removing the out-of-service taint and keeping every other taint; ``None`` when the
    cluster is not fenced."""
    if not is_fenced(cluster):
        return None
    taints = [copy.deepcopy(dict(t)) for t in _taints(cluster) if not is_out_of_service_taint(t)]
    return _patch(cluster, taints)


# ---------------------------------------------------------------------------------------------- Work deletion


@dataclass(frozen=True)
class WorkDeletionDecision:
    """How a deleted Work of a cluster finishes with respect to fencing.

    ``abandon``: release the Work without contacting the member; then ``annotations`` (to merge into the
    Work), ``condition`` (to set in its status) and ``event`` (to record on it) say so. Not fenced: the
    usual deletion path applies and the other fields are empty.
    """

    abandon: bool
    reason: str
    annotations: Mapping[str, str]
    condition: Mapping[str, Any] | None
    event: EventSpec | None


def _manifest_names(work: Mapping[str, Any] | None) -> list[str]:
    out = []
    for m in _list(as_map(as_map(as_map(work).get("spec")).get("workload")).get("manifests")):
        if isinstance(m, Mapping):
            meta = meta_of(m)
            ns = meta.get("namespace")
            out.append(f"{m.get('kind', '')} {ns + '/' if ns else ''}{meta.get('name', '')}")
    return out


def work_deletion_decision(
    cluster: Mapping[str, Any] | str | None,
    fenced: bool | None = None,
    *,
    work: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> WorkDeletionDecision:
    """D2: whether a deleted Work in ``cluster`` is released without contacting the member, and the record.

    ``fenced`` defaults to :func:`is_fenced` of the Cluster object. ``work`` (optional) names the Work and its
    objects in the messages; ``now`` stamps the annotation (``at``, omitted without it).
    """
    name = _name(cluster)
    if fenced is None:
        fenced = is_fenced(cluster) if isinstance(cluster, Mapping) else False
    if not fenced:
        return WorkDeletionDecision(False, f"cluster {name} is not fenced: its objects are deleted there", {},
                                    None, None)
    objects = _manifest_names(work)
    what = f" ({', '.join(objects)})" if objects else ""
    work_meta = meta_of(work)
    work_name = f"Work {work_meta.get('namespace')}/{work_meta.get('name')}" if work_meta.get("name") else "the Work"
    message = (f"Cluster {name} is fenced (taint {OUT_OF_SERVICE_TAINT_KEY}:{OUT_OF_SERVICE_TAINT_EFFECT}): "
               f"the objects of {work_name}{what} were not deleted there; they are deleted as soon as the "
               "cluster's API answers again, fenced or not, before anything else is applied to it")
    condition = {"type": CONDITION_ABANDONED, "status": "True", "reason": REASON_CLUSTER_FENCED, "message": message}
    record = {"cluster": name, **({"at": format_time(now)} if now is not None else {})}
    annotations = {ABANDONED_ANNOTATION: json.dumps(record, separators=(",", ":"))}
    return WorkDeletionDecision(True, f"cluster {name} is fenced", annotations, condition,
                                EventSpec("Warning", EVENT_WORK_ABANDONED, message))


# ---------------------------------------------------------------------------------------------- recovery


class ObjectIdentity(NamedTuple):
    """An object of a member cluster, whatever the version it is read at: (group, kind, namespace, name)."""

    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectIdentity:
        api_version = str(obj.get("apiVersion") or "")
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        meta = meta_of(obj)
        return cls(group, str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def __str__(self) -> str:
        kind = f"{self.kind}.{self.group}" if self.group else self.kind
        return f"{kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


def wanted_identities(works: Iterable[Mapping[str, Any]]) -> set[ObjectIdentity]:
    """The objects the cluster's Works want: every manifest of every Work not being deleted."""
    out: set[ObjectIdentity] = set()
    for work in works:
        if meta_of(work).get("deletionTimestamp"):
            continue
        for manifest in _list(as_map(as_map(as_map(work).get("spec")).get("workload")).get("manifests")):
            if isinstance(manifest, Mapping):
                out.add(ObjectIdentity.of(manifest))
    return out


def recovery_works(listed: Mapping[str, Any] | None) -> list[Mapping[str, Any]] | None:
    """The Works a recovery purge may decide from: those of a fresh, complete list of the cluster's execution
    namespace (a WorkList as the API server answered it), or None when there is no such list - the list failed
    (``listed`` None), or it is one page of several (it has a ``continue`` token) - and then nothing is purged.

    The purge deletes every managed member object no Work wants, so it must never decide from a cache that is
    empty or not synced (an agent or controller-manager that just restarted, or whose lists are refused): that would
    delete every object of the member."""
    if not isinstance(listed, Mapping) or not isinstance(listed.get("items"), list):
        return None
    if as_map(listed.get("metadata")).get("continue"):
        return None
    return [w for w in listed["items"] if isinstance(w, Mapping)]


def _placed_by_flotilla(obj: Mapping[str, Any]) -> bool:
    meta = meta_of(obj)
    labels = as_map(meta.get("labels"))
    annotations = as_map(meta.get("annotations"))
    return (labels.get(MANAGED_LABEL) == MANAGED_LABEL_VALUE and bool(annotations.get(WORK_NAME_ANNOTATION))
            and bool(annotations.get(WORK_NAMESPACE_ANNOTATION)))


_LAST_KINDS: Final = {("", "Namespace"): 2, ("apiextensions.k8s.io", "CustomResourceDefinition"): 1}


def stale_objects_on_recovery(
    member_objects_managed_by_flotilla: Iterable[Mapping[str, Any]],
    wanted_work_identities: Iterable[ObjectIdentity | tuple[str, str, str, str]],
) -> list[Mapping[str, Any]]:
    """The member objects to delete when a fenced or failed cluster comes back, before anything else.

    An object qualifies when Flotilla placed it (label ``karmada.io/managed=true`` and the
    ``work.karmada.io/namespace``/``name`` annotations; objects released with ``preserveResourcesOnDeletion``
    and namespaces Flotilla created for convenience carry no Work annotations and are never touched), it is not
    already being deleted, and no Work wants it any more (``wanted_work_identities``: :func:`wanted_identities`
    of the cluster's Works). Ordered so that namespaced objects go first, then CRDs, then namespaces.
    """
    wanted = {ObjectIdentity(*w) for w in wanted_work_identities}
    stale = []
    for obj in member_objects_managed_by_flotilla:
        if not isinstance(obj, Mapping) or not _placed_by_flotilla(obj) or meta_of(obj).get("deletionTimestamp"):
            continue
        identity = ObjectIdentity.of(obj)
        if identity not in wanted:
            stale.append((identity, obj))
    stale.sort(key=lambda pair: (_LAST_KINDS.get((pair[0].group, pair[0].kind), 0), pair[0]))
    return [obj for _, obj in stale]


class PurgeStep(enum.Enum):
    """What to do with a cluster's pending recovery purge (:func:`recovery_purge_step`)."""

    #: nothing is pending (done before, or the cluster is gone)
    DONE = "done"
    #: the member is known not to answer: do not contact it; look again when it does (or after a delay)
    WAIT = "wait"
    #: purge now (a member that does not answer after all fails the purge, which is retried)
    PURGE = "purge"


def recovery_purge_step(cluster: Mapping[str, Any] | None, *, pending: bool, ready: bool,
                        answering: bool | None) -> PurgeStep:
    """D17: whether a cluster's pending recovery purge runs now.

    The purge runs as soon as the member's API answers again, whether the cluster is fenced or not and whether
    its Ready condition is True yet (a failed cluster turns Ready only after the success threshold): the fence
    keeps new applies away, not the deletion of what no Work wants any more. ``answering`` is the last answer of
    the member's health probe (the cluster-status controller's, in the same process): True (answered healthy),
    False (failed or did not answer), None (not probed here, as when the cluster-status controller runs
    elsewhere: the purge's own requests to the member find out). ``ready`` is the cluster's Ready condition;
    Ready True is reason enough to try.
    """
    if not pending or cluster is None:
        return PurgeStep.DONE
    if ready or answering is not False:
        return PurgeStep.PURGE
    return PurgeStep.WAIT


def purge_retry_delay(failures: int, base: float, cap: float) -> float:
    """Seconds before a recovery purge that could not run (the member or the control plane did not answer) is
    tried again: ``base`` doubled with each failure in a row (``failures`` >= 1), at most ``cap``.

    The cap keeps a member that comes back after a long outage from waiting minutes for the next try (a work
    queue's exponential backoff grows to 1000 s); a probe that answers healthy wakes the purge sooner anyway."""
    if failures <= 0:
        return base
    return float(min(cap, base * 2 ** min(failures - 1, 30)))
