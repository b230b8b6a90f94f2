"""A member's node and resource summaries (``Cluster.status.nodeSummary`` / ``status.resourceSummary``) as pure
functions of its Nodes, Pods and workloads. :func:`summarize` is the reference: it
walks every object. The cluster status controller keeps the same result as running totals
(:class:`flotilla.cluster.summary_totals.SummaryTotals`) that each watch event adjusts by one object's share, made
by the per-object rules below (:func:`node_resources`, :func:`pod_usage`, :func:`workload_usage`), and writes what
they give; the scheduler's general estimator (:mod:`flotilla.scheduler.estimation`) turns the summary into
available replicas.

``nodeSummary``
    ``totalNum`` = number of Nodes, ``readyNum`` = Nodes whose Ready condition is True. Zero counts are left
    out, as Karmada serialises them (``omitempty``).

``resourceSummary.allocatable``
    Σ ``status.allocatable`` of the **Ready** nodes. Karmada sums every node; a NotReady node cannot run
    anything, so Flotilla does not offer its capacity to the scheduler (deliberate deviation).

``resourceSummary.allocated`` / ``allocating``, when the member has Pods (any real cluster)
    allocated = Σ effective requests of the pods bound to a node (``spec.nodeName``) whose phase is neither
    Succeeded nor Failed, plus their count as ``pods``; allocating = the same for pods not bound to a node yet.
    Effective requests of a pod: per resource, the larger of its containers' summed requests and its largest
    init container request, plus ``spec.overhead``; a missing request counts as the limit (the same rule as
    the interpreter's replica requirements, so estimates and usage are measured alike).

``resourceSummary.allocated``, when the member has **no Pod at all** (Flotilla's simulated members, which run
workloads without creating Pods) - Flotilla's estimate, not Karmada's
    Σ over the workloads of ``pods × effective requests of the pod template``, plus the pods as ``pods``:
    Deployment, StatefulSet and ReplicaSet ``spec.replicas`` (ReplicaSets controlled by a Deployment are left
    out: their Deployment is counted); Job ``parallelism`` capped by the completions still missing (0 once it
    finished or while suspended); DaemonSet ``status.desiredNumberScheduled``. ``allocating`` is zero: a
    simulated pod is never pending. A cluster with even one Pod is measured by its Pods only, never by both.

``allocated`` and ``allocating`` always list ``cpu``, ``memory``, ``ephemeral-storage`` and ``pods`` (zero
included), as Karmada writes them; ``allocatable`` lists what the nodes offer. Quantities are canonical
Kubernetes spellings: CPU in decimal SI (``"24"``, ``"1500m"``), memory, ephemeral storage and hugepages in
binary SI (``"96Gi"``), everything else in decimal SI. ``allocatableModelings`` (resource models) is not
computed; it is left as it is.

:func:`merge_patch_diff` turns an old and a new summary into the JSON merge patch that makes one the other
(``null`` for resources that went away), for the status writes.

The status controller keeps the member's Nodes, Pods and (without Pods) workloads in watch-fed caches, as Karmada
keeps informers on a member's Nodes and Pods with a transform that strips what the summaries do not read.
:func:`project_node`, :func:`project_pod` and :func:`project_workload` are those transforms: they keep the
metadata a cache needs (name, namespace, uid, resourceVersion; owner references of workloads) and exactly the
fields :func:`summarize` reads, so ``summarize`` (and the running totals) give the same result on projections as
on whole objects, and :func:`same_projection` tells whether an update changed anything a summary is made of.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from flotilla.interpreter.native import pod_replica_requirements
from flotilla.kube.quantity import QuantityError, QuantityFormat, format_quantity, parse_quantity

__all__ = [
    "ALWAYS_LISTED",
    "OWNED_SUMMARY_KEYS",
    "RequestsOf",
    "ResourceTotals",
    "Summaries",
    "WORKLOAD_KINDS",
    "format_resource",
    "is_node_ready",
    "merge_patch_diff",
    "node_allocatable",
    "node_resources",
    "node_summary",
    "pod_requests",
    "pod_usage",
    "project_node",
    "project_pod",
    "project_workload",
    "same_projection",
    "pods_usage",
    "summarize",
    "workload_pods",
    "workload_usage",
    "workloads_usage",
]

#: Resources ``allocated`` and ``allocating`` always list, zero included.
ALWAYS_LISTED = ("cpu", "memory", "ephemeral-storage", "pods")
#: The keys of ``status.resourceSummary`` this module computes (``allocatableModelings`` is left alone).
OWNED_SUMMARY_KEYS = ("allocatable", "allocated", "allocating")
#: ``(group, kind)`` of the workloads counted when a member has no Pods.
WORKLOAD_KINDS = (("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet"),
                  ("apps", "DaemonSet"), ("batch", "Job"))

_BINARY = ("memory", "ephemeral-storage")
_TERMINAL_PHASES = ("Succeeded", "Failed")
_ZERO, _ONE = Fraction(0), Fraction(1)  # immutable: shared


def format_resource(name: str, value: Fraction | int) -> str:
    """The canonical quantity of resource ``name`` (CPU decimal, bytes binary, counts decimal)."""
    binary = name in _BINARY or name.startswith("hugepages-")
    return format_quantity(Fraction(value), QuantityFormat.BINARY_SI if binary else QuantityFormat.DECIMAL_SI)


def _quantities(resource_list: Any) -> dict[str, Fraction]:
    """A ResourceList as exact values; entries that are not quantities are skipped."""
    out: dict[str, Fraction] = {}
    if not isinstance(resource_list, Mapping):
        return out
    for name, raw in resource_list.items():
        try:
            out[str(name)] = parse_quantity(raw).value
        except (QuantityError, TypeError, ValueError):
            continue
    return out


@dataclass
class ResourceTotals:
    """Exact per-resource sums."""

    amounts: dict[str, Fraction] = field(default_factory=dict)

    def add(self, resources: Mapping[str, Fraction], times: int = 1) -> None:
        for name, value in resources.items():
            self.amounts[name] = self.amounts.get(name, _ZERO) + value * times

    def add_pods(self, count: int) -> None:
        self.add({"pods": _ONE}, count)

    def resource_list(self, always: Iterable[str] = ()) -> dict[str, str]:
        """The sums as a ResourceList; ``always`` names resources listed even when zero."""
        names = set(self.amounts) | set(always)
        return {name: format_resource(name, self.amounts.get(name, _ZERO)) for name in sorted(names)}


# ============================================================================================ nodes


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in conditions if isinstance(c, Mapping)] if isinstance(conditions, list) else []


def is_node_ready(node: Mapping[str, Any]) -> bool:
    """The node's Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in _conditions(node))


def node_summary(nodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``{totalNum, readyNum}`` with zero counts left out."""
    total = ready = 0
    for node in nodes:
        total += 1
        ready += is_node_ready(node)
    out: dict[str, int] = {}
    if total:
        out["totalNum"] = total
    if ready:
        out["readyNum"] = ready
    return out


def node_resources(node: Mapping[str, Any]) -> dict[str, Fraction]:
    """A node's ``status.allocatable`` as exact values (whether it is Ready or not)."""
    status = node.get("status")
    return _quantities(status.get("allocatable") if isinstance(status, Mapping) else None)


def node_allocatable(nodes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Σ ``status.allocatable`` of the Ready nodes."""
    totals = ResourceTotals()
    for node in nodes:
        if is_node_ready(node):
            totals.add(node_resources(node))
    return totals.resource_list()


# ============================================================================================ pods


def pod_requests(pod_spec: Any) -> dict[str, Fraction]:
    """Effective requests of one pod of ``pod_spec`` (see the module docstring); {} when none or malformed."""
    if not isinstance(pod_spec, Mapping):
        return {}
    try:
        requirements = pod_replica_requirements(pod_spec)
    except Exception:  # InterpreterError and anything a malformed spec provokes: count no resources
        return {}
    return _quantities((requirements or {}).get("resourceRequest"))


RequestsOf = Callable[[Any], Mapping[str, Fraction]]


def pod_usage(pod: Mapping[str, Any], requests: RequestsOf = pod_requests) -> tuple[str | None, Mapping[str, Fraction]]:
    """Where one Pod counts - ``"allocated"`` (bound to a node, not finished), ``"allocating"`` (not bound yet)
    or None (finished) - and its effective requests ({} when it counts nowhere). ``requests`` computes them from
    the pod spec (:func:`pod_requests`, or a memo of it); the result is read, never changed."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    if not spec.get("nodeName"):
        return "allocating", requests(spec)
    if status.get("phase") in _TERMINAL_PHASES:
        return None, {}
    return "allocated", requests(spec)


def pods_usage(pods: Iterable[Mapping[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """``(allocated, allocating)`` from Pods."""
    allocated, allocating = ResourceTotals(), ResourceTotals()
    for pod in pods:
        where, requests = pod_usage(pod)
        if where is None:
            continue
        target = allocated if where == "allocated" else allocating
        target.add(requests)
        target.add_pods(1)
    return allocated.resource_list(ALWAYS_LISTED), allocating.resource_list(ALWAYS_LISTED)


# ============================================================================================ workloads


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _controlled_by_deployment(obj: Mapping[str, Any]) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(r, Mapping) and r.get("controller") and r.get("kind") == "Deployment"
               and str(r.get("apiVersion", "")).startswith("apps/") for r in refs)


def _job_finished(obj: Mapping[str, Any]) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in _conditions(obj))


def workload_pods(group: str, kind: str, obj: Mapping[str, Any]) -> int:
    """How many pods a workload runs by Flotilla's estimate (see the module docstring)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    if (group, kind) in (("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet")):
        if kind == "ReplicaSet" and _controlled_by_deployment(obj):
            return 0
        return max(_int(spec.get("replicas"), 1), 0)
    if (group, kind) == ("apps", "DaemonSet"):
        return max(_int(status.get("desiredNumberScheduled"), 0), 0)
    if (group, kind) == ("batch", "Job"):
        if spec.get("suspend") or _job_finished(obj):
            return 0
        parallelism = max(_int(spec.get("parallelism"), 1), 0)
        completions = spec.get("completions")
        if isinstance(completions, int) and not isinstance(completions, bool):
            remaining = max(completions - max(_int(status.get("succeeded"), 0), 0), 0)
            return min(parallelism, remaining)
        return parallelism
    return 0


def workload_usage(group: str, kind: str, obj: Mapping[str, Any],
                   requests: RequestsOf = pod_requests) -> tuple[int, Mapping[str, Fraction]]:
    """How many pods a workload runs (:func:`workload_pods`) and the effective requests of one of them (its pod
    template's, by ``requests`` as in :func:`pod_usage`); ``(0, {})`` when it runs none."""
    pods = workload_pods(group, kind, obj)
    if pods <= 0:
        return 0, {}
    template = (obj.get("spec") or {}).get("template") if isinstance(obj.get("spec"), Mapping) else None
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    return pods, requests(pod_spec)


def workloads_usage(workloads: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, str]:
    """``allocated`` from ``(group, kind, object)`` workloads: pods × pod-template requests."""
    allocated = ResourceTotals()
    for group, kind, obj in workloads:
        pods, requests = workload_usage(group, kind, obj)
        if pods <= 0:
            continue
        allocated.add(requests, pods)
        allocated.add_pods(pods)
    return allocated.resource_list(ALWAYS_LISTED)


# ============================================================================================ summaries


@dataclass(frozen=True)
class Summaries:
    """``status.nodeSummary`` and the owned keys of ``status.resourceSummary``; ``from_pods`` tells whether
    usage was measured from Pods (True) or estimated from workloads (False)."""

    node_summary: dict[str, int]
    resource_summary: dict[str, dict[str, str]]
    from_pods: bool = True


def summarize(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
              workloads: Iterable[tuple[str, str, Mapping[str, Any]]] = ()) -> Summaries:
    """The summaries of a member with these Nodes and Pods; ``workloads`` (``(group, kind, object)``) are
    used only when there is no Pod at all."""
    nodes = list(nodes)
    pods = list(pods)
    summary: dict[str, dict[str, str]] = {}
    allocatable = node_allocatable(nodes)
    if allocatable:  # omitempty
        summary["allocatable"] = allocatable
    if pods:
        summary["allocated"], summary["allocating"] = pods_usage(pods)
    else:
        summary["allocated"] = workloads_usage(workloads)
        summary["allocating"] = ResourceTotals().resource_list(ALWAYS_LISTED)
    return Summaries(node_summary(nodes), summary, from_pods=bool(pods))


def merge_patch_diff(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) turning ``old`` into ``new``; ``None`` when they are equal.

    Objects are compared key by key (a key only in ``old`` becomes ``null``); anything else is replaced whole.
    ``new`` must not contain nulls (a merge patch cannot set one).
    """
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return None if old == new else new
    patch: dict[str, Any] = {}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
            continue
        sub = merge_patch_diff(old[key], value)
        if sub is not None:
            patch[key] = sub
    for key in old:
        if key not in new:
            patch[key] = None
    return patch or None


# ============================================================================================ projections


def _project_meta(obj: Mapping[str, Any], owners: bool = False) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return {}
    keys = ("name", "namespace", "uid", "resourceVersion", "ownerReferences") if owners else \
        ("name", "namespace", "uid", "resourceVersion")
    out = {k: meta[k] for k in keys if k in meta}
    refs = out.get("ownerReferences")
    if isinstance(refs, list):
        out["ownerReferences"] = [{k: r[k] for k in ("apiVersion", "kind", "controller") if k in r}
                                  if isinstance(r, Mapping) else r for r in refs]
    return out


def _project_conditions(status: Mapping[str, Any], only: str | None = None) -> list[Any] | None:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    return [{k: c[k] for k in ("type", "status") if k in c} for c in conditions
            if isinstance(c, Mapping) and (only is None or c.get("type") == only)]


def _project_container(container: Any) -> Any:
    if not isinstance(container, Mapping):
        return container
    return {k: container[k] for k in ("resources", "restartPolicy") if k in container}


def _project_pod_spec(spec: Any) -> Any:
    """What :func:`pod_requests` reads of a pod spec (and ``nodeName``)."""
    if not isinstance(spec, Mapping):
        return spec
    out: dict[str, Any] = {}
    for key in ("containers", "initContainers"):
        if key in spec:
            value = spec[key]
            out[key] = [_project_container(c) for c in value] if isinstance(value, list) else value
    for key in ("overhead", "nodeName"):
        if key in spec:
            out[key] = spec[key]
    return out


def project_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """A Node with only what :func:`node_summary` and :func:`node_allocatable` read (its Ready condition and
    ``status.allocatable``)."""
    out: dict[str, Any] = {"metadata": _project_meta(node)}
    status = node.get("status")
    if isinstance(status, Mapping):
        projected: dict[str, Any] = {}
        conditions = _project_conditions(status, only="Ready")
        if conditions is not None:
            projected["conditions"] = conditions
        if "allocatable" in status:
            projected["allocatable"] = status["allocatable"]
        out["status"] = projected
    return out


def project_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A Pod with only what :func:`pods_usage` reads (requests, overhead, ``nodeName``, ``status.phase``)."""
    out: dict[str, Any] = {"metadata": _project_meta(pod)}
    if "spec" in pod:
        out["spec"] = _project_pod_spec(pod["spec"])
    status = pod.get("status")
    if isinstance(status, Mapping):
        out["status"] = {"phase": status["phase"]} if "phase" in status else {}
    return out


def project_workload(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A workload with only what :func:`workload_pods` and :func:`workloads_usage` read (replicas, parallelism,
    completions, suspend, the pod template's requests, the owner references, ``desiredNumberScheduled``,
    ``succeeded`` and the conditions' type and status)."""
    out: dict[str, Any] = {"metadata": _project_meta(obj, owners=True)}
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        projected: dict[str, Any] = {k: spec[k] for k in ("replicas", "parallelism", "completions", "suspend")
                                     if k in spec}
        template = spec.get("template")
        if isinstance(template, Mapping):
            projected["template"] = {"spec": _project_pod_spec(template["spec"])} if "spec" in template else {}
        elif "template" in spec:
            projected["template"] = template
        out["spec"] = projected
    elif "spec" in obj:
        out["spec"] = spec
    status = obj.get("status")
    if isinstance(status, Mapping):
        projected = {k: status[k] for k in ("desiredNumberScheduled", "succeeded") if k in status}
        conditions = _project_conditions(status)
        if conditions is not None:
            projected["conditions"] = conditions
        out["status"] = projected
    return out


def same_projection(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Two projections of one object differ in nothing but their ``resourceVersion``."""
    def strip(obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata")
        out = dict(obj)
        if isinstance(meta, Mapping):
            out["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
        return out

    return strip(old) == strip(new)
