"""Status collection as pure functions: member object -> Work -> binding -> template.

No I/O and no clock reads (``now`` is passed in). The controllers
(:mod:`flotilla.controllers.work_status`, :mod:`flotilla.controllers.binding_status`) read caches, call these
and write the result.

Work side
    A member object is identified in its Work by ``identifier`` = ``{ordinal, group, version, kind, resource,
    namespace, name}``, ``ordinal`` being the index of the manifest with the same apiVersion/kind/namespace/name
    (:func:`build_identifier`). The Work's ``status.manifestStatuses`` holds one ``{identifier, status, health}``
    per manifest whose object has been observed (:func:`merge_manifest_statuses`). Karmada replaces the whole list
    with the latest single entry, which is the same thing for the one-manifest Works the binding controller
    writes; for Works with several manifests Flotilla keeps the entries of the other manifests.

Binding side
    ``status.aggregatedStatus`` has one item per Work of the binding that is not being deleted, sorted by
    cluster: ``{clusterName, applied, appliedMessage, status, health}`` (:func:`build_aggregated_status`;
    ``applied`` and ``appliedMessage`` are left out when false/empty, as Karmada writes them).
    ``FullyApplied`` is True when the expected clusters (``spec.clusters``, the clusters of ``spec.requiredBy``
    and the ``fromCluster`` of eviction tasks not purged ``Directly``) are exactly the clusters of the items and
    every item is applied (:func:`fully_applied_condition`).

Stale status (D14, stale health is Unknown)
    While a cluster is not Ready (its Cluster object has no ``Ready=True`` condition, or is gone), the item of
    that cluster keeps the last ``status`` (and ``applied``/``appliedMessage``) taken from the Work, but its
    ``health`` is ``Unknown`` instead of the last observed value. The binding carries the Flotilla condition
    ``StatusUpToDate``: ``True``/``AllClustersReady`` when every cluster with an item is Ready,
    ``False``/``ClusterNotReady`` naming the clusters whose status is the last one observed
    (:func:`status_up_to_date_condition`). The Work itself keeps what was last observed (it is a record of
    observations); staleness is decided where the cluster's readiness is known, in the aggregation.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from flotilla.api.labels import (
    CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION,
    EXECUTION_SPACE_PREFIX,
    RESOURCE_BINDING_NAME_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION,
    WORK_NAME_ANNOTATION,
    WORK_NAMESPACE_ANNOTATION,
)
from flotilla.cluster.health import is_ready
from flotilla.failover.purge import kept_clusters
from flotilla.kube.conditions import find_condition, set_condition, set_conditions
from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.objects import meta_of, spec_of, status_of
from flotilla.kube.times import format_micro_time, utc_seconds

__all__ = [
    "CONDITION_APPLIED",
    "CONDITION_FULLY_APPLIED",
    "CONDITION_READY",
    "CONDITION_STATUS_UP_TO_DATE",
    "FULLY_APPLIED_FAILED_REASON",
    "FULLY_APPLIED_SUCCESS_MESSAGE",
    "FULLY_APPLIED_SUCCESS_REASON",
    "HEALTH_HEALTHY",
    "HEALTH_UNHEALTHY",
    "HEALTH_UNKNOWN",
    "REAPPLY_REQUESTED_ANNOTATION",
    "STATUS_STALE_REASON",
    "STATUS_UP_TO_DATE_REASON",
    "aggregated_status_item",
    "binding_key_for_work",
    "binding_needs_sync",
    "binding_spec_only_changed",
    "binding_status_patch",
    "build_aggregated_status",
    "build_identifier",
    "expected_clusters",
    "expected_clusters_gained",
    "fully_applied_condition",
    "fully_applied_overstated",
    "fully_applied_written",
    "identifier_matches",
    "manifest_index",
    "manifest_status_entry",
    "merge_manifest_statuses",
    "object_ref",
    "ready_changed",
    "reapply_patch",
    "split_api_version",
    "stale_clusters",
    "status_up_to_date_condition",
    "template_status_changed",
    "work_applied",
    "work_cluster",
    "work_needs_informer_sync",
    "work_ref_of",
    "work_report_patch",
    "work_status_changed",
    "works_fully_applied",
]

CONDITION_READY = "Ready"
CONDITION_APPLIED = "Applied"
CONDITION_FULLY_APPLIED = "FullyApplied"
FULLY_APPLIED_SUCCESS_REASON = "FullyAppliedSuccess"
FULLY_APPLIED_FAILED_REASON = "FullyAppliedFailed"
FULLY_APPLIED_SUCCESS_MESSAGE = "All works have been successfully applied"

#: Flotilla-only binding condition (D14): is every item of ``aggregatedStatus`` from a Ready cluster?
CONDITION_STATUS_UP_TO_DATE = "StatusUpToDate"
STATUS_UP_TO_DATE_REASON = "AllClustersReady"
STATUS_STALE_REASON = "ClusterNotReady"

#: Flotilla-only Work annotation: set (to the time of the request) by the work-status controller when a
#: member object the Work manages disappeared while the Work still wants it; a change of this annotation asks
#: the execution controller to apply the Work again.
REAPPLY_REQUESTED_ANNOTATION = "work.flotilla.io/reapply-requested"

HEALTH_HEALTHY = "Healthy"
HEALTH_UNHEALTHY = "Unhealthy"
HEALTH_UNKNOWN = "Unknown"

Obj = Mapping[str, Any]


# ============================================================================================ helpers


def _timestamp(now: datetime) -> str:
    return utc_seconds(now)


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` -> ``("apps", "v1")``; ``v1`` -> ``("", "v1")``."""
    group, sep, version = str(api_version or "").rpartition("/")
    return (group, version) if sep else ("", version)


def ready_changed(old: Obj | None, new: Obj | None) -> bool:
    """Whether a Cluster update flips its readiness (the D14 trigger for the binding status)."""
    return is_ready(old) != is_ready(new)


def work_cluster(work: Obj) -> str | None:
    """The member cluster of a Work, from its execution namespace ``karmada-es-<cluster>``."""
    ns = str(meta_of(work).get("namespace") or "")
    if not ns.startswith(EXECUTION_SPACE_PREFIX) or len(ns) == len(EXECUTION_SPACE_PREFIX):
        return None
    return ns[len(EXECUTION_SPACE_PREFIX):]


def work_applied(work: Obj) -> tuple[bool, str]:
    """``(applied, message)`` from the Work's ``Applied`` condition; the message only when not applied."""
    cond = find_condition(status_of(work).get("conditions"), CONDITION_APPLIED)
    if cond is None:
        return False, ""
    if cond.get("status") == "True":
        return True, ""
    return False, str(cond.get("message") or "")


def work_ref_of(obj: Obj) -> tuple[str, str] | None:
    """``(namespace, name)`` of the Work managing a member object, from its annotations."""
    ann = meta_of(obj).get("annotations") or {}
    ns, name = ann.get(WORK_NAMESPACE_ANNOTATION), ann.get(WORK_NAME_ANNOTATION)
    if not ns or not name:
        return None
    return str(ns), str(name)


def object_ref(obj: Obj) -> tuple[str, str, str, str]:
    """``(apiVersion, kind, namespace, name)`` of an object (namespace ``""`` when cluster-scoped)."""
    md = meta_of(obj)
    return (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), str(md.get("namespace") or ""),
            str(md.get("name") or ""))


def _manifests(work: Obj) -> list[Any]:
    workload = spec_of(work).get("workload")
    manifests = workload.get("manifests") if isinstance(workload, Mapping) else None
    return list(manifests) if isinstance(manifests, list) else []


# ================================================================================================= Work side


def manifest_index(manifests: Sequence[Any], api_version: str, kind: str, namespace: str, name: str) -> int:
    """Index of the manifest with this apiVersion/kind/namespace/name, or -1."""
    want = (api_version, kind, namespace or "", name)
    for i, m in enumerate(manifests):
        if isinstance(m, Mapping) and object_ref(m) == want:
            return i
    return -1


def build_identifier(manifests: Sequence[Any], obj: Obj, resource: str = "") -> dict[str, Any] | None:
    """The ``identifier`` of a member object in its Work, or None when no manifest of the Work is this object.

    ``resource`` (the plural) is informative; Karmada leaves it empty and nothing matches on it.
    """
    api_version, kind, namespace, name = object_ref(obj)
    ordinal = manifest_index(manifests, api_version, kind, namespace, name)
    if ordinal < 0:
        return None
    group, version = split_api_version(api_version)
    return {"ordinal": ordinal, "group": group, "version": version, "kind": kind, "resource": resource,
            "namespace": namespace, "name": name}


def manifest_status_entry(identifier: Mapping[str, Any], status: Any, health: str) -> dict[str, Any]:
    """One ``manifestStatuses`` item; ``status`` is left out when the interpreter reflected none."""
    entry: dict[str, Any] = {"identifier": dict(identifier)}
    if status is not None:
        entry["status"] = json_copy(status)
    entry["health"] = str(health)
    return entry


def _identity(identifier: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    return (str(identifier.get("group") or ""), str(identifier.get("version") or ""),
            str(identifier.get("kind") or ""), str(identifier.get("namespace") or ""),
            str(identifier.get("name") or ""))


def identifier_matches(identifier: Any, ordinal: int, api_version: str, kind: str, namespace: str,
                       name: str) -> bool:
    """Whether ``identifier`` names manifest ``ordinal`` = apiVersion/kind/namespace/name (resource ignored)."""
    if not isinstance(identifier, Mapping) or ordinal < 0:
        return False
    group, version = split_api_version(api_version)
    return identifier.get("ordinal") == ordinal and _identity(identifier) == (group, version, kind,
                                                                                namespace or "", name)


def merge_manifest_statuses(current: Any, entry: Mapping[str, Any], manifests: Sequence[Any]) -> list[dict[str, Any]]:
    """``manifestStatuses`` after recording ``entry``: the entry replaces the one of the same object; entries of
    objects that are no longer manifest ``ordinal`` of the Work are dropped; sorted by ordinal."""
    new_identity = _identity(entry.get("identifier") or {})
    out: list[dict[str, Any]] = []
    for item in current or ():
        if not isinstance(item, Mapping):
            continue
        ident = item.get("identifier")
        if not isinstance(ident, Mapping) or _identity(ident) == new_identity:
            continue
        ordinal = ident.get("ordinal")
        if not isinstance(ordinal, int) or not 0 <= ordinal < len(manifests):
            continue
        m = manifests[ordinal]
        if not isinstance(m, Mapping):
            continue
        api_version, kind, namespace, name = object_ref(m)
        if identifier_matches(ident, ordinal, api_version, kind, namespace, name):
            out.append(json_copy(dict(item)))
    out.append(json_copy(dict(entry)))
    out.sort(key=lambda e: e["identifier"].get("ordinal", 0))
    return out


def reapply_patch(now: datetime) -> dict[str, Any]:
    """The Work merge patch that asks the execution controller to apply the Work again."""
    return {"metadata": {"annotations": {REAPPLY_REQUESTED_ANNOTATION: format_micro_time(now)}}}


def work_report_patch(work: Obj, reflected: Iterable[tuple[Obj, str, Any, str]],
                      conditions: Iterable[Mapping[str, Any]] = (), now: str = "") -> dict[str, Any] | None:
    """The ``status`` of the Work's merge patch that records the ``reflected`` member objects (``(object, plural,
    status, health)``; one the Work does not carry is left out) and sets ``conditions`` (``lastTransitionTime``
    ``now`` for one that changes status); None when it would change nothing."""
    status = status_of(work)
    manifests = (spec_of(work).get("workload") or {}).get("manifests") or []
    current = status.get("manifestStatuses")
    merged = current
    for obj, plural, reflected_status, health in reflected:
        identifier = build_identifier(manifests, obj, plural)
        if identifier is not None:
            merged = merge_manifest_statuses(merged, manifest_status_entry(identifier, reflected_status, health),
                                             manifests)
    out: dict[str, Any] = {}
    if merged != current:
        out["manifestStatuses"] = merged
    new_conditions, changed = set_conditions(status.get("conditions"), conditions, now)
    if changed:
        out["conditions"] = new_conditions
    return out or None


def work_needs_informer_sync(old: Obj, new: Obj) -> bool:
    """Whether a Work update matters to the work-status controller (its informers and the objects to look at):
    spec (generation), ``Applied`` or deletion changed. Its own ``manifestStatuses`` writes do not."""
    if meta_of(old).get("generation") != meta_of(new).get("generation"):
        return True
    if bool(meta_of(old).get("deletionTimestamp")) != bool(meta_of(new).get("deletionTimestamp")):
        return True
    return work_applied(old)[0] != work_applied(new)[0]


# ============================================================================================== binding side


def aggregated_status_item(work: Obj, resource: Mapping[str, Any], ready: bool) -> dict[str, Any] | None:
    """The ``aggregatedStatus`` item of one Work for the template ``resource`` (the binding's ``spec.resource``);
    None when the Work is being deleted or is not in an execution namespace. ``ready``: the cluster's
    readiness; a not-Ready cluster's item keeps the status and reports health ``Unknown`` (D14)."""
    if meta_of(work).get("deletionTimestamp"):
        return None
    cluster = work_cluster(work)
    if cluster is None:
        return None
    applied, message = work_applied(work)
    item: dict[str, Any] = {"clusterName": cluster}
    if applied:
        item["applied"] = True  # omitted when false, as Karmada serialises it
    else:
        if message:
            item["appliedMessage"] = message
        item["health"] = HEALTH_UNKNOWN
        return item
    api_version = str(resource.get("apiVersion") or "")
    kind = str(resource.get("kind") or "")
    namespace = str(resource.get("namespace") or "")
    name = str(resource.get("name") or "")
    ordinal = manifest_index(_manifests(work), api_version, kind, namespace, name)
    health = HEALTH_UNKNOWN
    for ms in status_of(work).get("manifestStatuses") or ():
        if isinstance(ms, Mapping) and identifier_matches(ms.get("identifier"), ordinal, api_version, kind,
                                                          namespace, name):
            if ms.get("status") is not None:
                item["status"] = json_copy(ms["status"])
            health = str(ms.get("health") or HEALTH_UNKNOWN)
            break
    item["health"] = health if ready else HEALTH_UNKNOWN
    return item


def build_aggregated_status(works: Iterable[Obj], resource: Mapping[str, Any],
                            ready_clusters: Container[str] | Callable[[str], bool]) -> list[dict[str, Any]]:
    """``status.aggregatedStatus`` of a binding from its Works, sorted by cluster name (D14 applied).

    ``ready_clusters``: the names of the Ready clusters, or a predicate.
    """
    is_ready: Callable[[str], bool] = (ready_clusters if callable(ready_clusters)
                                       else lambda c: c in ready_clusters)  # type: ignore[operator]
    items = []
    for work in works:
        cluster = work_cluster(work)
        item = aggregated_status_item(work, resource, bool(cluster) and is_ready(cluster or ""))
        if item is not None:
            items.append(item)
    items.sort(key=lambda i: i["clusterName"])
    return items


def stale_clusters(items: Iterable[Mapping[str, Any]],
                   ready_clusters: Container[str] | Callable[[str], bool]) -> list[str]:
    """Clusters of ``items`` that are not Ready: their status is the last one observed (D14)."""
    is_ready: Callable[[str], bool] = (ready_clusters if callable(ready_clusters)
                                       else lambda c: c in ready_clusters)  # type: ignore[operator]
    return sorted({str(i.get("clusterName")) for i in items if not is_ready(str(i.get("clusterName")))})


def expected_clusters(spec: Mapping[str, Any]) -> set[str]:
    """Clusters a binding wants a copy in: the purge rule's kept clusters."""
    return kept_clusters(spec)


def clusters_without_work(spec: Mapping[str, Any], works: Iterable[Obj]) -> set[str]:
    """The clusters a binding wants a copy in (:func:`expected_clusters`) that have no Work of it, or only one
    being deleted: the binding controller has still to create it."""
    expected = expected_clusters(spec)
    if not expected:
        return expected
    have = {work_cluster(w) for w in works if not meta_of(w).get("deletionTimestamp")}
    return expected - have


def works_fully_applied(items: Sequence[Mapping[str, Any]], expected: set[str]) -> bool:
    """True iff ``expected`` is non-empty, has one item per cluster, and every item is applied and expected."""
    if not expected or len(expected) != len(items):
        return False
    return all(i.get("applied") is True and i.get("clusterName") in expected for i in items)


def fully_applied_condition(spec: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``FullyApplied`` condition (without ``lastTransitionTime``; :func:`set_condition` stamps it)."""
    expected = expected_clusters(spec)
    if works_fully_applied(items, expected):
        return {"type": CONDITION_FULLY_APPLIED, "status": "True", "reason": FULLY_APPLIED_SUCCESS_REASON,
                "message": FULLY_APPLIED_SUCCESS_MESSAGE}
    if not expected:
        message = "The binding is not scheduled to any cluster yet"
    else:
        have = {str(i.get("clusterName")) for i in items}
        parts = []
        missing = sorted(expected - have)
        if missing:
            parts.append("no Work yet for " + ", ".join(missing))
        failed = sorted(str(i.get("clusterName")) for i in items if i.get("applied") is not True)
        if failed:
            parts.append("not applied in " + ", ".join(failed))
        extra = sorted(have - expected)
        if extra:
            parts.append("Works left in clusters no longer targeted: " + ", ".join(extra))
        message = "Not every Work is applied: " + "; ".join(parts) + " (see status.aggregatedStatus)"
    return {"type": CONDITION_FULLY_APPLIED, "status": "False", "reason": FULLY_APPLIED_FAILED_REASON,
            "message": message}


def fully_applied_written(status: Mapping[str, Any] | None) -> bool:
    """Whether a binding's written status says ``FullyApplied`` True."""
    cond = find_condition((status or {}).get("conditions"), CONDITION_FULLY_APPLIED)
    return cond is not None and cond.get("status") == "True"


def fully_applied_overstated(status: Mapping[str, Any] | None, spec: Mapping[str, Any],
                             items: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the binding's written ``FullyApplied`` is True while its Works no longer bear it out (a target
    cluster without an applied Work, e.g. the new cluster of a failover). Such a status is written at once,
    never held back for the Works still to come: a True must not outlive what it says."""
    return fully_applied_written(status) and not works_fully_applied(items, expected_clusters(spec))


def expected_clusters_gained(old_spec: Mapping[str, Any], new_spec: Mapping[str, Any]) -> set[str]:
    """The clusters a spec change adds to :func:`expected_clusters`: none of them has an applied Work yet."""
    return expected_clusters(new_spec) - expected_clusters(old_spec)


def status_up_to_date_condition(stale: Sequence[str]) -> dict[str, Any]:
    """The Flotilla ``StatusUpToDate`` condition (D14) for the clusters whose status is stale."""
    if not stale:
        return {"type": CONDITION_STATUS_UP_TO_DATE, "status": "True", "reason": STATUS_UP_TO_DATE_REASON,
                "message": "The status of every cluster is current"}
    return {"type": CONDITION_STATUS_UP_TO_DATE, "status": "False", "reason": STATUS_STALE_REASON,
            "message": f"Cluster(s) {', '.join(stale)} not Ready: their status is the last one observed and "
                       "their health is reported Unknown"}


def binding_status_patch(status: Mapping[str, Any] | None, items: list[dict[str, Any]],
                         conditions: Iterable[Mapping[str, Any]], now: datetime) -> dict[str, Any] | None:
    """The ``status`` fields to write (``aggregatedStatus`` and ``conditions``), or None when nothing changes.

    Only these two fields are in the patch: the scheduler's fields (``schedulerObservedGeneration``,
    ``lastScheduledTime``) are left alone; the ``conditions`` list is the current one with ours set, so it must
    be written with the binding's ``resourceVersion`` as precondition. An empty ``aggregatedStatus`` is removed
    (``None``), as Karmada omits it.
    """
    status = status or {}
    current_conditions = status.get("conditions") or []
    new_conditions: list[dict[str, Any]] = list(current_conditions)
    for cond in conditions:
        new_conditions = set_condition(new_conditions, cond, now)
    patch: dict[str, Any] = {}
    if (status.get("aggregatedStatus") or []) != items:
        patch["aggregatedStatus"] = items or None
    if new_conditions != current_conditions:
        patch["conditions"] = new_conditions
    return patch or None


def binding_key_for_work(work: Obj) -> str | None:
    """Work queue key of the binding a Work belongs to, from the Work's annotations:
    ``rb|<namespace>|<name>`` or ``crb|<name>``."""
    ann = meta_of(work).get("annotations") or {}
    ns, name = ann.get(RESOURCE_BINDING_NAMESPACE_ANNOTATION), ann.get(RESOURCE_BINDING_NAME_ANNOTATION)
    if ns and name:
        return f"rb|{ns}|{name}"
    crb = ann.get(CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION)
    if crb:
        return f"crb|{crb}"
    return None


def _scheduled(binding: Obj | None) -> bool:
    return bool(status_of(binding).get("lastScheduledTime"))


def binding_needs_sync(old: Obj | None, new: Obj) -> bool:
    """Whether a binding event wakes the binding status controller: a create only once scheduled; an update when
    scheduled and the template (``spec.resource.resourceVersion``) or the spec (generation: target clusters,
    eviction tasks) changed. Status-only updates (including our own) do not."""
    if not _scheduled(new):
        return False
    if old is None:
        return True
    if meta_of(old).get("generation") != meta_of(new).get("generation"):
        return True
    old_res = spec_of(old).get("resource") or {}
    new_res = spec_of(new).get("resource") or {}
    return old_res.get("resourceVersion") != new_res.get("resourceVersion") or not _scheduled(old)


def binding_spec_only_changed(old: Obj | None, new: Obj) -> bool:
    """Whether what makes :func:`binding_needs_sync` true is only a spec change (the generation: target
    clusters, eviction tasks), not the first schedule nor a template change. Such a change is normally followed
    by Work events (a Work deleted or created) that bring the new picture; the controller waits a moment for
    them instead of writing an intermediate ``FullyApplied`` first."""
    if old is None or not _scheduled(old) or not _scheduled(new):
        return False
    old_res = spec_of(old).get("resource") or {}
    new_res = spec_of(new).get("resource") or {}
    return (old_res.get("resourceVersion") == new_res.get("resourceVersion")
            and meta_of(old).get("generation") != meta_of(new).get("generation"))


def work_status_changed(old: Obj, new: Obj) -> bool:
    """Whether a Work update wakes the binding status controller: status or deletion changed."""
    if status_of(old) != status_of(new):
        return True
    return bool(meta_of(old).get("deletionTimestamp")) != bool(meta_of(new).get("deletionTimestamp"))


def _reports_healthy(work: Obj) -> bool:
    """Whether every manifest of an applied Work reports ``Healthy`` (no report yet: not Healthy)."""
    reports = status_of(work).get("manifestStatuses") or []
    return bool(reports) and all(isinstance(r, Mapping) and r.get("health") == HEALTH_HEALTHY for r in reports)


def work_awaits_first_status(work: Obj) -> str | None:
    """The uid of a Work that has no ``Applied`` condition yet and is not being deleted (just created: the
    execution controller's first status follows), else ``None``."""
    if meta_of(work).get("deletionTimestamp") or find_condition(status_of(work).get("conditions"), CONDITION_APPLIED):
        return None
    return str(meta_of(work).get("uid") or f"{meta_of(work).get('namespace')}/{meta_of(work).get('name')}")


def work_awaits_first_report(work: Obj) -> str | None:
    """The uid of a Work applied in its cluster whose copy has not reported yet (no ``manifestStatuses``), and
    that is not being deleted: the work-status controller's first report follows. Else ``None``."""
    if meta_of(work).get("deletionTimestamp") or status_of(work).get("manifestStatuses") or not work_applied(work)[0]:
        return None
    return str(meta_of(work).get("uid") or f"{meta_of(work).get('namespace')}/{meta_of(work).get('name')}")


#: what :func:`awaited_reports` waits for: a Work to be created or to get its first status (long), or the first
#: report of a copy applied moments ago (short)
AWAIT_WORK = "work"
AWAIT_REPORT = "report"


def awaited_reports(spec: Mapping[str, Any], works: Iterable[Obj]) -> dict[str, str]:
    """What a binding's status write would report only until moments later, by a token naming it: a target cluster
    without its Work yet (``cluster:<name>``) and a Work without a first status (its uid) -> :data:`AWAIT_WORK`; a
    Work applied whose copy has not reported yet (its uid) -> :data:`AWAIT_REPORT`."""
    works = list(works)
    awaited = {f"cluster:{c}": AWAIT_WORK for c in clusters_without_work(spec, works)}
    for work in works:
        uid = work_awaits_first_status(work)
        if uid is not None:
            awaited[uid] = AWAIT_WORK
            continue
        uid = work_awaits_first_report(work)
        if uid is not None:
            awaited[uid] = AWAIT_REPORT
    return awaited


def work_status_starting(old: Obj, new: Obj) -> bool:
    """Whether a Work status change is a copy still starting: applied, not being deleted, not all Healthy
    before nor now (applied without a report yet, or reporting Unknown/Unhealthy while it comes up). Such a
    step is usually superseded within moments by the next report; a copy that was Healthy and stops being so,
    a failed apply, a deletion or the first Healthy are never such a step."""
    if meta_of(new).get("deletionTimestamp") or not work_applied(new)[0]:
        return False
    return not _reports_healthy(new) and not _reports_healthy(old)


def template_status_changed(old: Obj, new: Obj) -> bool:
    """Whether the aggregation changed the template's ``status``."""
    return old.get("status") != new.get("status")
