"""Built-in interpreter rules for Kubernetes kinds (the "native" link of the dispatch chain).

Each operation has a table from :class:`GVK` to a rule; :func:`has_hook` tells whether a kind has a
rule, and the module-level functions (:func:`get_replicas`, :func:`reflect_status`...) run it.
Rules are pure: they deep-copy what they return and never touch their arguments.

Reflected statuses follow the Kubernetes JSON encoding of the typed status: counters that are
``omitempty`` in the API types are left out when zero (so ``{.readyReplicas}`` on a Deployment with
no ready pod finds nothing), the ones that are not (``replicas`` of a StatefulSet or ReplicaSet,
DaemonSet's scheduled/ready numbers, PodDisruptionBudget's numbers, HPA ``desiredReplicas``) are
always written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from flotilla.interpreter.operations import (
    GVK,
    JSON,
    RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
    RETAIN_REPLICAS_LABEL,
    HookNotFoundError,
    InterpreterError,
    Operation,
    ReplicaResult,
)
from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.objects import as_int
from flotilla.kube.quantity import (
    Quantity,
    QuantityError,
    QuantityFormat,
    format_quantity,
    parse_quantity,
)
from flotilla.kube.times import format_time, parse_time

__all__ = [
    "has_hook",
    "get_replicas",
    "revise_replica",
    "retain",
    "reflect_status",
    "aggregate_status",
    "interpret_health",
    "get_dependencies",
    "pod_replica_requirements",
    "pod_dependencies",
    "verify_dependencies",
    "prune_irrelevant_fields",
]

DEPLOYMENT = GVK("apps/v1", "Deployment")
REPLICA_SET = GVK("apps/v1", "ReplicaSet")
STATEFUL_SET = GVK("apps/v1", "StatefulSet")
DAEMON_SET = GVK("apps/v1", "DaemonSet")
JOB = GVK("batch/v1", "Job")
CRON_JOB = GVK("batch/v1", "CronJob")
POD = GVK("v1", "Pod")
SERVICE = GVK("v1", "Service")
SERVICE_ACCOUNT = GVK("v1", "ServiceAccount")
SECRET = GVK("v1", "Secret")
PVC = GVK("v1", "PersistentVolumeClaim")
PV = GVK("v1", "PersistentVolume")
INGRESS = GVK("networking.k8s.io/v1", "Ingress")
PDB = GVK("policy/v1", "PodDisruptionBudget")
HPA = GVK("autoscaling/v2", "HorizontalPodAutoscaler")
SERVICE_IMPORT = GVK("multicluster.x-k8s.io/v1alpha1", "ServiceImport")

SA_TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token"
_INT32 = (-(2**31), 2**31 - 1)


# ------------------------------------------------------------------------------------ small helpers


def _err(obj: Mapping[str, Any], message: str) -> InterpreterError:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    ns, name = meta.get("namespace") or "", meta.get("name") or ""
    who = f"{obj.get('kind', 'object')} {ns + '/' if ns else ''}{name}".strip()
    return InterpreterError(f"{who}: {message}")


def _path(obj: Any, *keys: str) -> Any:
    """The value at ``keys`` or ``None`` when a step is missing or not a mapping."""
    cur = obj
    for k in keys:
        if type(cur) is not dict and not isinstance(cur, Mapping):
            return None
        cur = cur.get(k)
    return cur


def _map(obj: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """The mapping at ``keys`` ({} when absent); anything else there is an error, as in the typed API."""
    v = _path(obj, *keys)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise _err(obj, f"{'.'.join(keys)} must be an object, got {type(v).__name__}")
    return dict(v)


def _list(obj: Mapping[str, Any], *keys: str) -> list[Any]:
    v = _path(obj, *keys)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _err(obj, f"{'.'.join(keys)} must be a list, got {type(v).__name__}")
    return v


def _int(obj: Mapping[str, Any], *keys: str, default: int | None = 0) -> int | None:
    """An integer field (``default`` when absent); a non-integer there is an error."""
    v = _path(obj, *keys)
    if v is None:
        return default
    i = as_int(v)
    if i is None:
        raise _err(obj, f"{'.'.join(keys)} must be an integer, got {v!r}")
    return i


def _str(obj: Mapping[str, Any], *keys: str) -> str:
    v = _path(obj, *keys)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise _err(obj, f"{'.'.join(keys)} must be a string, got {v!r}")
    return v


def _string_map(obj: Mapping[str, Any], *keys: str) -> dict[str, str] | None:
    v = _path(obj, *keys)
    if v is None:
        return None
    if not isinstance(v, Mapping) or not all(isinstance(x, str) for x in v.values()):
        raise _err(obj, f"{'.'.join(keys)} must be a map of strings")
    return dict(v)


def _set_path(obj: dict[str, Any], keys: Sequence[str], value: Any) -> None:
    cur = obj
    for k in keys[:-1]:
        nxt = cur.get(k)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[k] = nxt
        cur = nxt
    cur[keys[-1]] = value


def _set_or_drop(target: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` unless ``value`` is empty, as ``omitempty`` would print it."""
    if value in (None, "", [], {}, 0, False):
        target.pop(key, None)
    else:
        target[key] = value


def _time(obj: Mapping[str, Any], v: Any, what: str) -> datetime | None:
    if v is None:
        return None
    t = parse_time(v) if isinstance(v, str) else None
    if t is None:
        raise _err(obj, f"{what} must be an RFC 3339 time string, got {v!r}")
    return t


def _items(items: Iterable[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    out = []
    for i, item in enumerate(items or ()):
        if not isinstance(item, Mapping):
            raise InterpreterError(f"status item {i} must be an object with clusterName and status")
        out.append(item)
    return out


def _item_status(item: Mapping[str, Any]) -> dict[str, Any] | None:
    status = item.get("status")
    if status is None:
        return None
    if not isinstance(status, Mapping):
        raise InterpreterError(f"status of cluster {item.get('clusterName')!r} must be an object, "
                               f"got {type(status).__name__}")
    return dict(status)


def _count(status: Mapping[str, Any], key: str, who: str = "") -> int:
    v = status.get(key)
    if v is None:
        return 0
    i = as_int(v)
    if i is None:
        raise InterpreterError(f"{who}status.{key} must be an integer, got {v!r}")
    return i


# ------------------------------------------------------------------------- replica requirements

_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_qualified_name(value: str) -> bool:
    """Kubernetes qualified name: ``[prefix/]name`` (label keys, resource names...)."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and _QUALIFIED_NAME.fullmatch(value) is not None)


def _is_scalar_resource(name: str) -> bool:
    """Extended resources (``vendor.com/gpu``), hugepages, attachable volumes and prefixed native ones."""
    if name.startswith(("hugepages-", "attachable-volumes-")) or "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.") and is_qualified_name("requests." + name)


class _Resources:
    """Sums of requests in the units Kubernetes' scheduler uses (milli-CPU, bytes, counts)."""

    def __init__(self) -> None:
        self.amounts: dict[str, int] = {}

    @staticmethod
    def _amount(name: str, q: Quantity) -> int | None:
        if name == "cpu":
            return q.milli_value
        if name in ("memory", "ephemeral-storage", "pods") or _is_scalar_resource(name):
            return q.int_value
        return None  # names the scheduler does not count

    def add(self, rl: Mapping[str, Quantity]) -> None:
        for name, q in rl.items():
            a = self._amount(name, q)
            if a is not None:
                self.amounts[name] = self.amounts.get(name, 0) + a

    def set_max(self, rl: Mapping[str, Quantity]) -> None:
        for name, q in rl.items():
            a = self._amount(name, q)
            if a is not None and a > self.amounts.get(name, 0):
                self.amounts[name] = a

    def resource_list(self) -> dict[str, str] | None:
        out: dict[str, str] = {}
        for name, a in self.amounts.items():
            if a <= 0:
                continue
            if name == "cpu":
                out[name] = format_quantity(Fraction(a, 1000), QuantityFormat.DECIMAL_SI)
            elif name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
                out[name] = format_quantity(a, QuantityFormat.BINARY_SI)
            else:
                out[name] = format_quantity(a, QuantityFormat.DECIMAL_SI)
        return out or None


def _resource_list(value: Any, where: str) -> dict[str, Quantity]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InterpreterError(f"{where} must be a map of resource quantities, got {value!r}")
    out = {}
    for k, v in value.items():
        try:
            out[str(k)] = parse_quantity(v)
        except QuantityError as e:
            raise InterpreterError(f"{where}.{k}: {e}") from None
    return out


def _effective_requests(container: Any, where: str) -> dict[str, Quantity]:
    """A container's requests, a missing request defaulting to its limit."""
    if not isinstance(container, Mapping):
        raise InterpreterError(f"{where} must be an object")
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise InterpreterError(f"{where}.resources must be an object")
    requests = _resource_list(resources.get("requests"), f"{where}.resources.requests")
    for k, q in _resource_list(resources.get("limits"), f"{where}.resources.limits").items():
        requests.setdefault(k, q)
    return requests


def pod_replica_requirements(pod_spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Per-replica requirements of a pod spec: node claim and resource request (``None`` if neither).

    ``resourceRequest`` is, per resource, the larger of the summed app-container requests and the
    largest init-container request, plus the pod overhead; a missing request counts as its limit.
    ``nodeClaim`` holds ``nodeSelector``, ``tolerations`` and ``hardNodeAffinity`` (the required node
    affinity). Both are left out when empty.
    """
    spec = pod_spec or {}
    if not isinstance(spec, Mapping):
        raise InterpreterError("the pod template's spec must be an object")
    node_claim: dict[str, Any] | None = {}
    node_selector = spec.get("nodeSelector")
    tolerations = spec.get("tolerations") or []
    hard = _path(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    if node_selector is None and hard is None and not tolerations:
        node_claim = None
    else:
        assert node_claim is not None
        if node_selector:
            node_claim["nodeSelector"] = json_copy(node_selector)
        if tolerations:
            node_claim["tolerations"] = json_copy(tolerations)
        if hard is not None:
            node_claim["hardNodeAffinity"] = json_copy(hard)

    res = _Resources()
    for i, c in enumerate(spec.get("containers") or []):
        res.add(_effective_requests(c, f"containers[{i}]"))
    for i, c in enumerate(spec.get("initContainers") or []):
        res.set_max(_effective_requests(c, f"initContainers[{i}]"))
    res.add(_resource_list(spec.get("overhead"), "overhead"))
    request = res.resource_list()

    if node_claim is None and request is None:
        return None
    out: dict[str, Any] = {}
    if node_claim is not None:
        out["nodeClaim"] = node_claim
    if request is not None:
        out["resourceRequest"] = request
    return out


# ----------------------------------------------------------------------------------- GetReplicas


def _workload_replicas(obj: JSON) -> ReplicaResult:
    replicas = _int(obj, "spec", "replicas")
    assert replicas is not None
    return ReplicaResult(replicas, pod_replica_requirements(_map(obj, "spec", "template", "spec")))


def _job_replicas(obj: JSON) -> ReplicaResult:
    parallelism = _int(obj, "spec", "parallelism")
    assert parallelism is not None
    completions = _int(obj, "spec", "completions", default=parallelism)
    assert completions is not None
    return ReplicaResult(min(parallelism, completions),
                         pod_replica_requirements(_map(obj, "spec", "template", "spec")))


def _pod_replicas(obj: JSON) -> ReplicaResult:
    return ReplicaResult(1, pod_replica_requirements(_map(obj, "spec")))


REPLICA_RULES: dict[GVK, Callable[[JSON], ReplicaResult]] = {
    DEPLOYMENT: _workload_replicas,
    REPLICA_SET: _workload_replicas,
    STATEFUL_SET: _workload_replicas,
    JOB: _job_replicas,
    POD: _pod_replicas,
}


# --------------------------------------------------------------------------------- ReviseReplica


def _revise_field(field: str) -> Callable[[JSON, int], JSON]:
    def revise(obj: JSON, replicas: int) -> JSON:
        out = json_copy(obj)
        # Only an existing field is rewritten (templates from the API server always have it).
        if _int(obj, "spec", field, default=None) is not None:
            out["spec"][field] = replicas
        return out

    return revise


REVISE_RULES: dict[GVK, Callable[[JSON, int], JSON]] = {
    DEPLOYMENT: _revise_field("replicas"),
    REPLICA_SET: _revise_field("replicas"),
    STATEFUL_SET: _revise_field("replicas"),
    JOB: _revise_field("parallelism"),
}


# ---------------------------------------------------------------------------------------- Retain


def _retain_workload_replicas(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    labels = _string_map(desired, "metadata", "labels") or {}
    if labels.get(RETAIN_REPLICAS_LABEL) == "true":
        replicas = _path(observed, "spec", "replicas")
        if as_int(replicas) is None:
            raise _err(observed, f"cannot keep the member's replicas ({RETAIN_REPLICAS_LABEL}=true): "
                                 "the member object has no integer spec.replicas")
        _set_path(out, ("spec", "replicas"), as_int(replicas))
    return out


def _retain_pod(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    spec = out.setdefault("spec", {})
    if not isinstance(spec, dict):
        raise _err(desired, "spec must be an object")
    member = _map(observed, "spec")
    for key in ("nodeName", "serviceAccountName", "volumes"):
        _set_or_drop(spec, key, json_copy(member.get(key)))
    for key in ("containers", "initContainers"):
        by_name = {c.get("name"): c for c in member.get(key) or [] if isinstance(c, Mapping)}
        for c in spec.get(key) or []:
            if isinstance(c, dict) and c.get("name") in by_name:
                _set_or_drop(c, "volumeMounts", json_copy(by_name[c.get("name")].get("volumeMounts")))
    return out


def _keep_member_string(out: JSON, observed: JSON, *keys: str) -> None:
    """Set ``keys`` of ``out`` to the member object's string there, when it has a non-empty one."""
    value = _str(observed, *keys)
    if value:
        _set_path(out, keys, value)


def _retain_service(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    port = _int(observed, "spec", "healthCheckNodePort", default=None)
    if port is not None and port > 0:
        _set_path(out, ("spec", "healthCheckNodePort"), port)
    _keep_member_string(out, observed, "spec", "clusterIP")
    return out


def _retain_service_account(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    for key in ("secrets", "imagePullSecrets"):
        merged: list[Any] = []
        seen: set[str] = set()
        for src in (desired, observed):
            for ref in _list(src, key):
                name = ref.get("name") if isinstance(ref, Mapping) else None
                if not isinstance(name, str):
                    raise _err(src, f"every entry of {key} needs a name")
                if name not in seen:
                    seen.add(name)
                    merged.append(json_copy(ref))
        _set_or_drop(out, key, merged)
    return out


def _retain_pvc(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    _keep_member_string(out, observed, "spec", "volumeName")
    return out


def _retain_pv(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    spec = observed.get("spec")
    if isinstance(spec, Mapping) and "claimRef" in spec:
        _set_path(out, ("spec", "claimRef"), json_copy(spec["claimRef"]))
    return out


def _retain_job(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    for keys in (("spec", "selector", "matchLabels"), ("spec", "template", "metadata", "labels")):
        member = _string_map(observed, *keys)
        if member is not None:
            _set_path(out, keys, member)
    return out


def _retain_secret(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    if desired.get("type") == SA_TOKEN_SECRET_TYPE:
        data = _string_map(observed, "data")
        if data is not None:
            out["data"] = data
    return out


RETAIN_RULES: dict[GVK, Callable[[JSON, JSON], JSON]] = {
    DEPLOYMENT: _retain_workload_replicas,
    POD: _retain_pod,
    SERVICE: _retain_service,
    SERVICE_ACCOUNT: _retain_service_account,
    PVC: _retain_pvc,
    PV: _retain_pv,
    JOB: _retain_job,
    SECRET: _retain_secret,
}


# ---------------------------------------------------------------------------------- ReflectStatus

# Status counters kept per kind, and those the API types always print (not ``omitempty``).
DEPLOYMENT_FIELDS = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas",
                     "observedGeneration")
REPLICA_SET_FIELDS = ("replicas", "readyReplicas", "availableReplicas", "observedGeneration")
STATEFUL_SET_FIELDS = ("availableReplicas", "currentReplicas", "readyReplicas", "replicas", "updatedReplicas")
DAEMON_SET_FIELDS = ("currentNumberScheduled", "desiredNumberScheduled", "numberAvailable", "numberMisscheduled",
                     "numberReady", "updatedNumberScheduled", "numberUnavailable", "observedGeneration")
_ALWAYS: dict[GVK, frozenset[str]] = {
    DEPLOYMENT: frozenset(),
    REPLICA_SET: frozenset({"replicas"}),
    STATEFUL_SET: frozenset({"replicas", "availableReplicas"}),
    DAEMON_SET: frozenset({"currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"}),
}


def _template_generation(obj: JSON) -> int:
    annotations = _string_map(obj, "metadata", "annotations") or {}
    raw = annotations.get(RESOURCE_TEMPLATE_GENERATION_ANNOTATION)
    if raw is None or not re.fullmatch(r"[+-]?\d+", raw) or not -(2**63) <= int(raw) < 2**63:
        raise _err(obj, f"annotation {RESOURCE_TEMPLATE_GENERATION_ANNOTATION} must hold the template's "
                        f"generation as an integer, got {raw!r}")
    return int(raw)


def _wrapped_status(gvk: GVK, fields: Sequence[str], *, drop_empty: bool) -> Callable[[JSON], JSON | None]:
    always = _ALWAYS[gvk]

    def reflect(obj: JSON) -> JSON | None:
        status = obj.get("status")
        if status is None:
            return None
        status = _map(obj, "status")
        template_generation = _template_generation(obj)
        out: dict[str, Any] = {}
        generation = _int(obj, "metadata", "generation")
        if generation:
            out["generation"] = generation
        if template_generation:
            out["resourceTemplateGeneration"] = template_generation
        for f in fields:
            v = _int(status, f)
            if v or f in always:
                out[f] = v
        if drop_empty and not out:
            return None
        return out

    return reflect


def _reflect_service(obj: JSON) -> JSON | None:
    if _str(obj, "spec", "type") != "LoadBalancer" or obj.get("status") is None:
        return None
    status = _map(obj, "status")
    lb = status.get("loadBalancer")
    return {"loadBalancer": json_copy(lb) if isinstance(lb, Mapping) else {}}


def _reflect_job(obj: JSON) -> JSON | None:
    if obj.get("status") is None:
        return None
    status = _map(obj, "status")
    out: dict[str, Any] = {}
    for f in ("active", "succeeded", "failed"):
        _set_or_drop(out, f, _int(status, f))
    for f in ("conditions", "startTime", "completionTime"):
        _set_or_drop(out, f, json_copy(status.get(f)))
    return out


def _reflect_pdb(obj: JSON) -> JSON | None:
    if obj.get("status") is None:
        return None
    status = _map(obj, "status")
    out: dict[str, Any] = {f: _int(status, f) for f in
                           ("disruptionsAllowed", "expectedPods", "desiredHealthy", "currentHealthy")}
    _set_or_drop(out, "disruptedPods", json_copy(status.get("disruptedPods")))
    return out


def _reflect_hpa(obj: JSON) -> JSON | None:
    if obj.get("status") is None:
        return None
    status = _map(obj, "status")
    out: dict[str, Any] = {}
    _set_or_drop(out, "currentReplicas", _int(status, "currentReplicas"))
    out["desiredReplicas"] = _int(status, "desiredReplicas")
    return out


def reflect_whole_status(obj: JSON) -> JSON | None:
    """The fallback: the whole ``.status`` (``None`` when there is none)."""
    status = obj.get("status")
    return None if status is None else json_copy(status)


REFLECT_RULES: dict[GVK, Callable[[JSON], JSON | None]] = {
    DEPLOYMENT: _wrapped_status(DEPLOYMENT, DEPLOYMENT_FIELDS, drop_empty=True),
    REPLICA_SET: _wrapped_status(REPLICA_SET, REPLICA_SET_FIELDS, drop_empty=True),
    STATEFUL_SET: _wrapped_status(STATEFUL_SET, STATEFUL_SET_FIELDS, drop_empty=False),
    DAEMON_SET: _wrapped_status(DAEMON_SET, DAEMON_SET_FIELDS, drop_empty=False),
    SERVICE: _reflect_service,
    INGRESS: reflect_whole_status,
    JOB: _reflect_job,
    PDB: _reflect_pdb,
    HPA: _reflect_hpa,
}


# -------------------------------------------------------------------------------- AggregateStatus

Aggregator = Callable[[JSON, list[Mapping[str, Any]], datetime], JSON]


def _with_status(obj: JSON, new_status: dict[str, Any]) -> JSON:
    out = json_copy(obj)
    out["status"] = new_status
    return out


def _aggregated(obj: JSON, new_status: dict[str, Any]) -> JSON:
    """``obj`` with the aggregated status ``new_status``; a plain copy when that is its status already."""
    if (obj.get("status") or {}) == new_status:
        return json_copy(obj)
    return _with_status(obj, new_status)


def _reports(items: Iterable[Mapping[str, Any]]) -> Iterator[tuple[Mapping[str, Any], dict[str, Any], str]]:
    """``(item, status, who)`` of every member that reported a status; ``who`` names the member in errors."""
    for item in items:
        status = _item_status(item)
        if status is not None:
            yield item, status, f"cluster {item.get('clusterName')!r}: "


def _sum_workload(gvk: GVK, fields: Sequence[str], *, sts_quirk: bool = False) -> Aggregator:
    counters = [f for f in fields if f != "observedGeneration"]
    always = _ALWAYS[gvk]

    def aggregate(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
        old = _map(obj, "status")
        template_generation = _int(obj, "metadata", "generation")
        assert template_generation is not None
        sums = dict.fromkeys(counters, 0)
        up_to_date = 0
        for _, st, who in _reports(items):
            member_generation = _count(st, "generation", who)
            newer_than = member_generation if sts_quirk else template_generation
            if (_count(st, "observedGeneration", who) >= member_generation
                    and _count(st, "resourceTemplateGeneration", who) >= newer_than):
                up_to_date += 1
            for f in counters:
                sums[f] += _count(st, f, who)
        observed = _int(old, "observedGeneration")
        if up_to_date == len(items):
            observed = template_generation
        new = {**sums, "observedGeneration": observed}
        if all(_int(old, f) == new[f] for f in new):
            return json_copy(obj)
        status = dict(old)
        for f, v in new.items():
            if v or f in always:
                status[f] = v
            else:
                status.pop(f, None)
        return _with_status(obj, status)

    return aggregate


def _sort_ports(ports: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    unique = {(p.get("port"), p.get("protocol"), p.get("error")): dict(p) for p in ports}
    return [unique[k] for k in sorted(unique, key=lambda k: (k[0] or 0, k[1] or "", k[2] is not None, k[2] or ""))]


def _merge_lb_ingress(entries: list[Mapping[str, Any]], *, with_ip_mode: bool) -> list[dict[str, Any]]:
    """Union of load-balancer ingress entries: one per hostname/IP (/ipMode), ports merged, sorted."""
    merged: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    ports: dict[tuple[str, str, str | None], list[Mapping[str, Any]]] = {}
    for e in entries:
        if not isinstance(e, Mapping):
            continue
        key = (e.get("hostname") or "", e.get("ip") or "", e.get("ipMode") if with_ip_mode else None)
        ports.setdefault(key, []).extend(p for p in e.get("ports") or [] if isinstance(p, Mapping))
        entry = {k: json_copy(v) for k, v in e.items() if k != "ports"}
        merged[key] = entry
    out = []
    for key in sorted(merged, key=lambda k: (k[0] == "", k[0], k[1], k[2] is None, k[2] or "")):
        entry = merged[key]
        if ports[key]:
            entry["ports"] = _sort_ports(ports[key])
        out.append(entry)
    return out


def _aggregate_lb(with_ip_mode: bool, only_load_balancer: bool) -> Aggregator:
    def aggregate(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
        if only_load_balancer and _str(obj, "spec", "type") != "LoadBalancer":
            return json_copy(obj)
        entries: list[Mapping[str, Any]] = []
        for _, st, _ in _reports(items):
            entries.extend(_list(st, "loadBalancer", "ingress"))
        ingress = _merge_lb_ingress(entries, with_ip_mode=with_ip_mode)
        new = {"loadBalancer": {"ingress": ingress} if ingress else {}}
        return _aggregated(obj, new)

    return aggregate


def _job_finished(conditions: Iterable[Any]) -> str | None:
    for c in conditions:
        if isinstance(c, Mapping) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


def _aggregate_job(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
    if _job_finished(_list(obj, "status", "conditions")):
        return json_copy(obj)
    totals = {"active": 0, "succeeded": 0, "failed": 0}
    failed_clusters: list[str] = []
    complete = criteria_met = started = completed = 0
    earliest_start: datetime | None = None
    latest_completion: datetime | None = None
    for item, st, who in _reports(items):
        for k in totals:
            totals[k] += _count(st, k, who)
        finished = _job_finished(st.get("conditions") or [])
        if finished == "Complete":
            complete += 1
        elif finished == "Failed":
            failed_clusters.append(str(item.get("clusterName", "")))
        if any(isinstance(c, Mapping) and c.get("type") == "SuccessCriteriaMet" and c.get("status") == "True"
               for c in st.get("conditions") or []):
            criteria_met += 1
        start = _time(obj, st.get("startTime"), f"{who}status.startTime")
        if start is not None:
            started += 1
            if earliest_start is None or start < earliest_start:
                earliest_start = start
        completion = _time(obj, st.get("completionTime"), f"{who}status.completionTime")
        if completion is not None:
            completed += 1
            if latest_completion is None or completion > latest_completion:
                latest_completion = completion
    stamp = format_time(now)
    conditions: list[dict[str, Any]] = []

    def condition(kind: str, reason: str, message: str) -> dict[str, Any]:
        return {"type": kind, "status": "True", "lastProbeTime": stamp, "lastTransitionTime": stamp,
                "reason": reason, "message": message}

    if failed_clusters:
        conditions.append(condition("Failed", "JobFailed",
                                    f"Job failed in member clusters {','.join(failed_clusters)}"))
    if complete and complete == len(items):
        conditions.append(condition("Complete", "Completed", "Job completed in every member cluster"))
        if criteria_met == len(items):
            conditions.append(condition("SuccessCriteriaMet", "CompletionsReached",
                                        "Every member cluster met the success criteria"))
    new: dict[str, Any] = {}
    for k, v in totals.items():
        _set_or_drop(new, k, v)
    _set_or_drop(new, "conditions", conditions)
    start_time = _path(obj, "status", "startTime")
    if start_time is None and started and started == len(items) and earliest_start is not None:
        start_time = format_time(earliest_start)
    _set_or_drop(new, "startTime", json_copy(start_time))
    if latest_completion is not None and completed == len(items):
        new["completionTime"] = format_time(latest_completion)
    return _aggregated(obj, new)


def _aggregate_cron_job(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
    active: list[Any] = []
    latest: dict[str, tuple[datetime, str] | None] = {"lastScheduleTime": None, "lastSuccessfulTime": None}
    for _, st, who in _reports(items):
        active.extend(json_copy(st.get("active") or []))
        for key in latest:
            t = _time(obj, st.get(key), f"{who}status.{key}")
            cur = latest[key]
            if t is not None and (cur is None or cur[0] < t):
                latest[key] = (t, st[key])
    old = _map(obj, "status")
    status = dict(old)
    _set_or_drop(status, "active", active)
    for key, value in latest.items():
        _set_or_drop(status, key, value[1] if value else None)
    if status == old:
        return json_copy(obj)
    return _with_status(obj, status)


def _aggregate_pod(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
    if not items:
        return json_copy(obj)
    containers: list[dict[str, Any]] = []
    init_containers: list[dict[str, Any]] = []
    phases: set[str] = set()
    for item in items:
        st = _item_status(item)
        if st is None:
            phases.add("Pending")
            continue
        phases.add(str(st.get("phase") or ""))
        for key, target in (("containerStatuses", containers), ("initContainerStatuses", init_containers)):
            for cs in st.get(key) or []:
                if isinstance(cs, Mapping):
                    entry: dict[str, Any] = {"ready": bool(cs.get("ready", False))}
                    if cs.get("state"):
                        entry["state"] = json_copy(cs["state"])
                    target.append(entry)
    new: dict[str, Any] = {}
    for phase in ("Failed", "Pending", "Running", "Succeeded"):
        if phase in phases:
            new["phase"] = phase
            break
    _set_or_drop(new, "containerStatuses", containers)
    _set_or_drop(new, "initContainerStatuses", init_containers)
    return _aggregated(obj, new)


def _aggregate_pv(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
    phases: set[str] = set()
    for item in items:
        st = _item_status(item)
        phases.add("Pending" if st is None else str(st.get("phase") or ""))
    new: dict[str, Any] = {}
    for phase in ("Failed", "Pending", "Available", "Bound", "Released"):
        if phase in phases:
            new["phase"] = phase
            break
    return _aggregated(obj, new)


def _aggregate_pvc(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
    phase = "Bound"
    for _, st, _ in _reports(items):
        member = str(st.get("phase") or "")
        if member == "Lost":
            phase = "Lost"
            break
        if member != "Bound":
            phase = member
    new: dict[str, Any] = {"phase": phase} if phase else {}
    return _aggregated(obj, new)


def _aggregate_pdb(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
    keys = ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed")
    new: dict[str, Any] = dict.fromkeys(keys, 0)
    disrupted: dict[str, Any] = {}
    for item, st, who in _reports(items):
        for k in keys:
            new[k] += _count(st, k, who)
        for pod, when in (st.get("disruptedPods") or {}).items():
            disrupted[f"{item.get('clusterName', '')}/{pod}"] = when
    _set_or_drop(new, "disruptedPods", disrupted)
    return _aggregated(obj, new)


def _aggregate_hpa(obj: JSON, items: list[Mapping[str, Any]], now: datetime) -> JSON:
    current = desired = 0
    for _, st, who in _reports(items):
        current += _count(st, "currentReplicas", who)
        desired += _count(st, "desiredReplicas", who)
    new: dict[str, Any] = {}
    _set_or_drop(new, "currentReplicas", current)
    new["desiredReplicas"] = desired
    return _aggregated(obj, new)


AGGREGATE_RULES: dict[GVK, Aggregator] = {
    DEPLOYMENT: _sum_workload(DEPLOYMENT, DEPLOYMENT_FIELDS),
    REPLICA_SET: _sum_workload(REPLICA_SET, REPLICA_SET_FIELDS),
    STATEFUL_SET: _sum_workload(STATEFUL_SET, STATEFUL_SET_FIELDS, sts_quirk=True),
    DAEMON_SET: _sum_workload(DAEMON_SET, DAEMON_SET_FIELDS),
    SERVICE: _aggregate_lb(with_ip_mode=True, only_load_balancer=True),
    INGRESS: _aggregate_lb(with_ip_mode=False, only_load_balancer=False),
    JOB: _aggregate_job,
    CRON_JOB: _aggregate_cron_job,
    POD: _aggregate_pod,
    PV: _aggregate_pv,
    PVC: _aggregate_pvc,
    PDB: _aggregate_pdb,
    HPA: _aggregate_hpa,
}


# -------------------------------------------------------------------------------- InterpretHealth


def _observed_status(obj: JSON) -> Mapping[str, Any] | None:
    """The workload's status once its controller saw the latest spec (``status.observedGeneration`` is
    ``metadata.generation``); None before: it is not healthy yet."""
    status = _map(obj, "status")
    return status if _int(status, "observedGeneration") == _int(obj, "metadata", "generation") else None


def _rollout_health(obj: JSON) -> bool:
    """Deployment / StatefulSet: the controller saw the latest spec, all replicas updated and available."""
    status = _observed_status(obj)
    if status is None:
        return False
    replicas = _int(obj, "spec", "replicas", default=None)
    updated = _int(status, "updatedReplicas")
    assert updated is not None
    if replicas is not None and updated < replicas:
        return False
    available = _int(status, "availableReplicas")
    assert available is not None
    return available >= updated


def _replica_set_health(obj: JSON) -> bool:
    status = _observed_status(obj)
    if status is None:
        return False
    replicas = _int(obj, "spec", "replicas", default=None)
    available = _int(status, "availableReplicas")
    assert available is not None
    return replicas is None or available >= replicas


def _daemon_set_health(obj: JSON) -> bool:
    status = _observed_status(obj)
    if status is None:
        return False
    updated, desired, available = (_int(status, k) or 0 for k in
                                   ("updatedNumberScheduled", "desiredNumberScheduled", "numberAvailable"))
    return updated >= desired and available >= updated


def _has_lb_address(obj: JSON) -> bool:
    return any(isinstance(e, Mapping) and (e.get("ip") or e.get("hostname"))
               for e in _list(obj, "status", "loadBalancer", "ingress"))


def _service_health(obj: JSON) -> bool:
    return _str(obj, "spec", "type") != "LoadBalancer" or _has_lb_address(obj)


def _pvc_health(obj: JSON) -> bool:
    return _str(obj, "status", "phase") == "Bound"


def _pod_health(obj: JSON) -> bool:
    phase = _str(obj, "status", "phase")
    if phase == "Succeeded":
        return True
    ready = next((c for c in _list(obj, "status", "conditions") if isinstance(c, Mapping) and c.get("type") == "Ready"),
                 None)
    return phase == "Running" and ready is not None and ready.get("status") == "True"


def _pdb_health(obj: JSON) -> bool:
    current, desired = _int(obj, "status", "currentHealthy"), _int(obj, "status", "desiredHealthy")
    assert current is not None and desired is not None
    return current >= desired


HEALTH_RULES: dict[GVK, Callable[[JSON], bool]] = {
    DEPLOYMENT: _rollout_health,
    STATEFUL_SET: _rollout_health,
    REPLICA_SET: _replica_set_health,
    DAEMON_SET: _daemon_set_health,
    SERVICE: _service_health,
    INGRESS: _has_lb_address,
    PVC: _pvc_health,
    POD: _pod_health,
    PDB: _pdb_health,
}


# ------------------------------------------------------------------------------ GetDependencies

_SECRET_REF_VOLUMES = {
    "azureFile": ("secretName",), "cephfs": ("secretRef", "name"), "cinder": ("secretRef", "name"),
    "flexVolume": ("secretRef", "name"), "rbd": ("secretRef", "name"), "secret": ("secretName",),
    "scaleIO": ("secretRef", "name"), "iscsi": ("secretRef", "name"), "storageos": ("secretRef", "name"),
    "csi": ("nodePublishSecretRef", "name"),
}


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        out.extend(c for c in spec.get(key) or [] if isinstance(c, Mapping))
    return out


def _names(values: Iterable[Any]) -> list[str]:
    return sorted({v for v in values if isinstance(v, str) and v})


def pod_dependencies(pod_spec: Mapping[str, Any] | None, namespace: str) -> list[dict[str, Any]]:
    """ConfigMaps, Secrets, the ServiceAccount (unless ``default``) and PVCs a pod spec refers to.

    Returned in that kind order, names sorted, all in ``namespace``.
    """
    spec = pod_spec or {}
    containers = _containers(spec)
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, Mapping)]

    config_maps: list[Any] = []
    secrets: list[Any] = [_path(r, "name") for r in spec.get("imagePullSecrets") or []]
    for c in containers:
        for src in c.get("envFrom") or []:
            config_maps.append(_path(src, "configMapRef", "name"))
            secrets.append(_path(src, "secretRef", "name"))
        for env in c.get("env") or []:
            config_maps.append(_path(env, "valueFrom", "configMapKeyRef", "name"))
            secrets.append(_path(env, "valueFrom", "secretKeyRef", "name"))
    pvcs: list[Any] = []
    for vol in volumes:
        for projected in _path(vol, "projected", "sources") or []:
            config_maps.append(_path(projected, "configMap", "name"))
            secrets.append(_path(projected, "secret", "name"))
        config_maps.append(_path(vol, "configMap", "name"))
        for source, ref in _SECRET_REF_VOLUMES.items():
            if isinstance(vol.get(source), Mapping):
                secrets.append(_path(vol[source], *ref))
        pvcs.append(_path(vol, "persistentVolumeClaim", "claimName"))
    service_account = spec.get("serviceAccountName")
    accounts = [service_account] if service_account != "default" else []

    out: list[dict[str, Any]] = []
    for kind, names in (("ConfigMap", config_maps), ("Secret", secrets), ("ServiceAccount", accounts),
                        ("PersistentVolumeClaim", pvcs)):
        for name in _names(names):
            dep = {"apiVersion": "v1", "kind": kind, "name": name}
            if namespace:
                dep["namespace"] = namespace
            out.append(dep)
    return out


def _template_dependencies(*keys: str) -> Callable[[JSON], list[dict[str, Any]]]:
    def deps(obj: JSON) -> list[dict[str, Any]]:
        return pod_dependencies(_map(obj, *keys), _str(obj, "metadata", "namespace"))

    return deps


def _stateful_set_dependencies(obj: JSON) -> list[dict[str, Any]]:
    claim_templates = {_path(t, "metadata", "name") for t in _list(obj, "spec", "volumeClaimTemplates")}
    return [d for d in _template_dependencies("spec", "template", "spec")(obj)
            if d["kind"] != "PersistentVolumeClaim" or d["name"] not in claim_templates]


def _ingress_dependencies(obj: JSON) -> list[dict[str, Any]]:
    namespace = _str(obj, "metadata", "namespace")
    out = []
    for tls in _list(obj, "spec", "tls"):
        dep = {"apiVersion": "v1", "kind": "Secret", "name": _path(tls, "secretName") or ""}
        if namespace:
            dep["namespace"] = namespace
        out.append(dep)
    return out


def _service_import_dependencies(obj: JSON) -> list[dict[str, Any]]:
    namespace = _str(obj, "metadata", "namespace")
    derived = f"derived-{_str(obj, 'metadata', 'name')}"
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Service", "name": derived},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "labelSelector": {"matchLabels": {"kubernetes.io/service-name": derived}}},
    ]
    if namespace:
        for d in out:
            d["namespace"] = namespace
    return out


DEPENDENCY_RULES: dict[GVK, Callable[[JSON], list[dict[str, Any]]]] = {
    DEPLOYMENT: _template_dependencies("spec", "template", "spec"),
    REPLICA_SET: _template_dependencies("spec", "template", "spec"),
    DAEMON_SET: _template_dependencies("spec", "template", "spec"),
    JOB: _template_dependencies("spec", "template", "spec"),
    CRON_JOB: _template_dependencies("spec", "jobTemplate", "spec", "template", "spec"),
    POD: _template_dependencies("spec"),
    STATEFUL_SET: _stateful_set_dependencies,
    INGRESS: _ingress_dependencies,
    SERVICE_IMPORT: _service_import_dependencies,
}


def _label_selector_errors(selector: Any, where: str) -> list[str]:
    if selector is None:
        return []
    if not isinstance(selector, Mapping):
        return [f"{where}: must be an object with matchLabels/matchExpressions"]
    errs = []
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        errs.append(f"{where}.matchLabels: must be a map of strings")
    else:
        for k, v in labels.items():
            if not isinstance(k, str) or not is_qualified_name(k):
                errs.append(f"{where}.matchLabels: invalid label key {k!r}")
            if not isinstance(v, str) or not is_label_value(v):
                errs.append(f"{where}.matchLabels[{k}]: invalid label value {v!r}")
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        at = f"{where}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            errs.append(f"{at}: must be an object")
            continue
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str) or not is_qualified_name(key):
            errs.append(f"{at}.key: invalid label key {key!r}")
        if op in ("In", "NotIn"):
            if not values:
                errs.append(f"{at}.values: In and NotIn need at least one value")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(f"{at}.values: Exists and DoesNotExist take no values")
        else:
            errs.append(f"{at}.operator: unknown operator {op!r} (use In, NotIn, Exists or DoesNotExist)")
        for v in values:
            if not isinstance(v, str) or not is_label_value(v):
                errs.append(f"{at}.values: invalid label value {v!r}")
    return errs


def verify_dependencies(dependencies: Sequence[Mapping[str, Any]]) -> None:
    """Every dependency needs apiVersion, kind and a name or a label selector (valid, if given)."""
    errs: list[str] = []
    for i, d in enumerate(dependencies):
        at = f"dependencies[{i}]"
        if not d.get("apiVersion"):
            errs.append(f"{at}.apiVersion: is required")
        if not d.get("kind"):
            errs.append(f"{at}.kind: is required")
        if not d.get("name") and d.get("labelSelector") is None:
            errs.append(f"{at}: a dependency needs a name or a labelSelector")
        errs.extend(_label_selector_errors(d.get("labelSelector"), f"{at}.labelSelector"))
    if errs:
        raise InterpreterError("invalid dependencies: " + "; ".join(errs))


# ------------------------------------------------------------------------------------- the API

_TABLES: dict[Operation, Mapping[GVK, Any]] = {
    Operation.INTERPRET_REPLICA: REPLICA_RULES,
    Operation.REVISE_REPLICA: REVISE_RULES,
    Operation.RETAIN: RETAIN_RULES,
    Operation.AGGREGATE_STATUS: AGGREGATE_RULES,
    Operation.INTERPRET_HEALTH: HEALTH_RULES,
    Operation.INTERPRET_DEPENDENCY: DEPENDENCY_RULES,
    Operation.INTERPRET_STATUS: REFLECT_RULES,
    Operation.INTERPRET_COMPONENT: {},
    Operation.RESTORE_STATE: {},  # no native kind restores from a snapshot
}


def has_hook(gvk: GVK, operation: Operation) -> bool:
    """Whether a native rule exists; InterpretStatus is answered for every kind (whole status)."""
    return operation is Operation.INTERPRET_STATUS or gvk in _TABLES[operation]


def _rule(obj: JSON, operation: Operation) -> Any:
    gvk = GVK.of(obj)
    rule = _TABLES[operation].get(gvk)
    if rule is None:
        raise HookNotFoundError(f"no native {operation} rule for {gvk}", operation=operation, gvk=gvk)
    return rule


def _check_object(obj: Any, what: str = "object") -> None:
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InterpreterError(f"the {what} must be a Kubernetes object (a mapping), got {type(obj).__name__}")


def get_replicas(obj: JSON) -> ReplicaResult:
    """InterpretReplica: desired replicas and per-replica requirements of a workload template."""
    _check_object(obj)
    result: ReplicaResult = _rule(obj, Operation.INTERPRET_REPLICA)(obj)
    if not _INT32[0] <= result.replicas <= _INT32[1]:
        raise _err(obj, f"replicas {result.replicas} do not fit in int32")
    return result


def revise_replica(obj: JSON, replicas: int) -> JSON:
    """ReviseReplica: the object with its replica field set to ``replicas``."""
    _check_object(obj)
    return _rule(obj, Operation.REVISE_REPLICA)(obj, replicas)


def retain(desired: JSON, observed: JSON) -> JSON:
    """Retain: ``desired`` with the member-owned fields taken from ``observed``."""
    _check_object(desired, "desired object")
    _check_object(observed, "observed object")
    return _rule(desired, Operation.RETAIN)(desired, observed)


def reflect_status(obj: JSON) -> JSON | None:
    """InterpretStatus: the status to record for a member object (kinds without a rule: whole status)."""
    _check_object(obj)
    rule = REFLECT_RULES.get(GVK.of(obj), reflect_whole_status)
    return rule(obj)


def aggregate_status(obj: JSON, items: Iterable[Mapping[str, Any]] | None, *, now: datetime | None = None) -> JSON:
    """AggregateStatus: the template with the member statuses folded into its ``.status``.

    ``items`` are ``AggregatedStatusItem``-shaped (``clusterName``, ``status``, ``applied``, ``health``).
    ``now`` stamps the conditions added to a Job (defaults to the current time).
    """
    _check_object(obj)
    rule = _rule(obj, Operation.AGGREGATE_STATUS)
    return rule(obj, _items(items), now or datetime.now(UTC))


def interpret_health(obj: JSON) -> bool:
    """InterpretHealth: whether a member object is healthy."""
    _check_object(obj)
    return bool(_rule(obj, Operation.INTERPRET_HEALTH)(obj))


def get_dependencies(obj: JSON) -> list[dict[str, Any]]:
    """InterpretDependency: the objects a template needs in the same clusters (validated)."""
    _check_object(obj)
    deps: list[dict[str, Any]] = _rule(obj, Operation.INTERPRET_DEPENDENCY)(obj)
    verify_dependencies(deps)
    return deps


# ----------------------------------------------------------------------------------------- prune

_PRUNED_METADATA = ("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                    "managedFields", "resourceVersion", "selfLink", "uid", "ownerReferences", "finalizers")


def prune_irrelevant_fields(obj: JSON, *, remove_job_ttl: bool = True) -> JSON:
    """A copy without what must not be copied into a member cluster (server-set metadata, status...).

    Per kind it also drops: Deployment revision annotations; Job generated selector/labels (unless
    ``manualSelector``) and, with ``remove_job_ttl``, ``ttlSecondsAfterFinished``; ServiceAccount
    ``<name>-token-*`` secrets; Service ``clusterIP``/``clusterIPs`` (unless headless); the
    service-account-token Secret's UID annotation and data; the PVC selected-node annotation.
    """
    _check_object(obj)
    out = json_copy({k: v for k, v in obj.items() if k != "status"})  # status is dropped: not worth copying
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for k in _PRUNED_METADATA:
            meta.pop(k, None)
    kind = out.get("kind")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if kind == "Deployment" and isinstance(annotations, dict):
        annotations.pop("deployment.kubernetes.io/revision", None)
        annotations.pop("deployment.kubernetes.io/revision-history", None)
    elif kind == "Job":
        spec = out.get("spec")
        if isinstance(spec, dict):
            if remove_job_ttl:
                spec.pop("ttlSecondsAfterFinished", None)
            if spec.get("manualSelector") is not True:
                match = _path(spec, "selector", "matchLabels")
                if isinstance(match, dict):
                    for k in ("controller-uid", "batch.kubernetes.io/controller-uid"):
                        match.pop(k, None)
                labels = _path(spec, "template", "metadata", "labels")
                if isinstance(labels, dict):
                    for k in ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid",
                              "batch.kubernetes.io/job-name"):
                        labels.pop(k, None)
    elif kind == "ServiceAccount" and isinstance(out.get("secrets"), list):
        prefix = f"{_str(out, 'metadata', 'name')}-token-"
        out["secrets"] = [s for s in out["secrets"]
                          if not (isinstance(s, Mapping) and str(s.get("name", "")).startswith(prefix))]
    elif kind == "Service":
        spec = out.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("clusterIP"), str) and spec["clusterIP"] != "None":
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
    elif kind == "Secret" and out.get("type") == SA_TOKEN_SECRET_TYPE:
        if isinstance(annotations, dict):
            annotations.pop("kubernetes.io/service-account.uid", None)
        out.pop("data", None)
    elif kind == "PersistentVolumeClaim" and isinstance(annotations, dict):
        if annotations.get("volume.kubernetes.io/selected-node"):
            annotations.pop("volume.kubernetes.io/selected-node")
    return out
