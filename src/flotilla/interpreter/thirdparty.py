"""Built-in rules for well-known custom resources (the "third-party" link of the dispatch chain).

Karmada ships these as Lua customizations; here they are Python functions with the same results,
including what the Lua round trip does to the values (``null``s and empty objects/arrays disappear
from what a script returns, numbers that are whole become integers).

``flink.apache.org/v1beta1 FlinkDeployment`` (Apache Flink Kubernetes operator):

* **InterpretHealth**: ``status.jobStatus.state`` decides. Without a state the deployment is healthy
  only when ``jobManagerDeploymentStatus`` is ``READY`` and ``lifecycleState`` is ``STABLE``.
  ``RUNNING``, the terminal states (``FINISHED FAILED CANCELED SUSPENDED``) and the short-lived ones
  (``CANCELLING FAILING RESTARTING``) are healthy, so a failed job never triggers a failover. The
  ephemeral states (``CREATED INITIALIZING RECONCILING``) are healthy only while ``status.error``
  contains ``ErrImagePull``, ``ImagePullBackOff`` or ``CrashLoopBackOff`` (user errors a failover
  would not fix). Every other state is unhealthy. States are compared exactly (upper case).
* **InterpretStatus**: keeps ``clusterInfo error jobManagerDeploymentStatus jobStatus
  observedGeneration lifecycleState reconciliationStatus taskManager`` (``{}`` without a status).
* **AggregateStatus**: the last item (in the given order) that has a status supplies those eight
  fields, each replaced whole; with items but no status at all they are reset to empty values (the two
  enum fields ``jobManagerDeploymentStatus`` and ``lifecycleState`` are removed rather than set to ``""``,
  which the operator's CRD refuses); with no items the template is returned as it is.
* **InterpretReplica**: job manager replicas (default 1) + task manager replicas (``taskManager.replicas``,
  else ``ceil(job.parallelism / taskmanager.numberOfTaskSlots)``, else 1); the per-replica request is
  the larger CPU and the larger memory of the two; node selector, tolerations and priority class
  come from ``spec.podTemplate.spec``; the namespace is set.
* **InterpretComponent**: ``jobmanager`` and ``taskmanager`` components with their own replicas and
  resources. No ReviseReplica or InterpretDependency rule: the object moves whole.
* **Retain** (Flotilla's addition; Karmada's customization has no retention): when the member set
  ``spec.job.initialSavepointPath`` (the member-side restore step, Kyverno in Karmada's proposal, Flotilla's
  savepoint rule) and the control plane's copy sets none, the member's path and ``upgradeMode`` are kept;
  otherwise re-applying the Work would drop the path the job restored from, and a later restart of the job would
  start from nothing. Likewise the member's ``spec.job.savepointRedeployNonce`` is kept when the control plane's
  copy sets none (dropping it would be a spec change the operator may act on). Whatever the control plane's copy
  sets wins.
* **RestoreState** (Flotilla's operation): ``spec.job.initialSavepointPath`` = the restore path;
  ``spec.job.upgradeMode`` = ``savepoint`` when it is ``stateless`` or unset (a job restored from a snapshot
  must go on taking savepoints on upgrades; ``last-state`` and ``savepoint`` stay); when the object already
  exists in the cluster (``existed``), ``spec.job.savepointRedeployNonce`` = the restore nonce, since the
  operator honours ``initialSavepointPath`` only on a first deploy and redeploys from it when that nonce
  changes. A FlinkDeployment without ``spec.job`` (a session cluster) has no job to restore: an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flotilla.interpreter import lua as _lua
from flotilla.interpreter.operations import (
    GVK,
    JSON,
    HookNotFoundError,
    InterpreterError,
    Operation,
    ReplicaResult,
    restore_input,
)
from flotilla.kube.jsoncopy import json_copy
from flotilla.kube.quantity import QuantityError, parse_quantity

__all__ = [
    "FLINK_DEPLOYMENT",
    "has_hook",
    "get_replicas",
    "get_components",
    "revise_replica",
    "retain",
    "reflect_status",
    "aggregate_status",
    "interpret_health",
    "get_dependencies",
    "restore_state",
    "lua_round_trip",
]

FLINK_DEPLOYMENT = GVK("flink.apache.org/v1beta1", "FlinkDeployment")

FLINK_STATUS_FIELDS = ("clusterInfo", "error", "jobManagerDeploymentStatus", "jobStatus", "observedGeneration",
                       "lifecycleState", "reconciliationStatus", "taskManager")
# Karmada's script resets jobManagerDeploymentStatus and lifecycleState to "", which the operator's CRD refuses
# (both are enums): the template's status write would fail until a member reports. Flotilla removes them instead.
_FLINK_STATUS_RESET: dict[str, Any] = {"clusterInfo": {}, "error": "", "jobManagerDeploymentStatus": None,
                                       "jobStatus": {}, "lifecycleState": None, "observedGeneration": 0,
                                       "reconciliationStatus": {}, "taskManager": {}}
TERMINAL_STATES = frozenset({"FINISHED", "FAILED", "CANCELED", "SUSPENDED"})
SHORT_LIVED_STATES = frozenset({"CANCELLING", "FAILING", "RESTARTING"})
EPHEMERAL_STATES = frozenset({"CREATED", "INITIALIZING", "RECONCILING"})
USER_ERRORS = ("ErrImagePull", "ImagePullBackOff", "CrashLoopBackOff")
TASK_SLOTS = "taskmanager.numberOfTaskSlots"


# ------------------------------------------------------------------------------------ helpers


def _marked(value: Any) -> Any:
    """``value`` as it is inside Lua: no nulls, whole floats as ints; empty containers -> None."""
    if type(value) is dict or isinstance(value, Mapping):
        out = {str(k): _marked(v) for k, v in value.items() if v is not None}
        return out or None
    if isinstance(value, list):
        items = [_marked(v) for v in value if v is not None]
        return items or None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


def lua_round_trip(value: Any, *, root_is_object: bool = True) -> Any:
    """What a value looks like after passing through a Lua script untouched (no references)."""
    return _lua.resolve_empty_tables(_marked(value), root_is_object=root_is_object)


def _get(obj: Any, *keys: str) -> Any:
    cur = obj
    for k in keys:
        if cur is None:
            return None
        if type(cur) is not dict and not isinstance(cur, Mapping):
            raise InterpreterError(f"{'.'.join(keys)}: {k!r} is looked up in a {type(cur).__name__}, "
                                   "which is not an object")
        cur = cur.get(k)
    return cur


_LUA_DECIMAL = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_LUA_HEX = re.compile(r"\s*0[xX][0-9a-fA-F]+\s*")


def _lua_tonumber(v: Any) -> float | int | None:
    """Lua's ``tonumber``: numbers as they are, numeric strings parsed, anything else ``None``."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        if _LUA_DECIMAL.fullmatch(v):
            f = float(v)
            return int(f) if f.is_integer() and abs(f) < 2**63 else f
        if _LUA_HEX.fullmatch(v):
            return int(v.strip(), 16)
    return None


def _to_num(v: Any, default: float | int | None) -> float | int | None:
    if v is None or v == "":
        return default
    n = _lua_tonumber(v)
    return default if n is None else n


def _cpu_number(v: Any, where: str) -> float | int:
    n = _lua_tonumber(v)
    if n is None:
        raise InterpreterError(f"{where} must be a number (CPU cores), got {v!r}")
    return n


def _memory_value(v: Any, where: str) -> float:
    """``kube.getResourceQuantity``: the quantity as a number of bytes (strings only)."""
    if not isinstance(v, str):
        raise InterpreterError(f"{where} must be a quantity string such as \"2048Mi\", got {v!r}")
    try:
        q = parse_quantity(v)
    except QuantityError as e:
        raise InterpreterError(f"{where}: {e}") from None
    if q.value < 0:
        raise InterpreterError(f"{where}: the quantity {v} is negative")
    return float(q)


def _task_manager_replicas(obj: JSON) -> float | int:
    tm = _to_num(_get(obj, "spec", "taskManager", "replicas"), None)
    if tm is not None:
        return tm
    parallelism = _to_num(_get(obj, "spec", "job", "parallelism"), None)
    slots = _to_num(_get(obj, "spec", "flinkConfiguration", TASK_SLOTS), None)
    if parallelism is None or slots is None or slots == 0:
        return 1
    return math.ceil(parallelism / slots)


def _pod_template_claims(obj: JSON, requires: dict[str, Any]) -> None:
    spec = _get(obj, "spec", "podTemplate", "spec")
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        raise InterpreterError("spec.podTemplate.spec must be an object")
    selector, tolerations = spec.get("nodeSelector"), spec.get("tolerations")
    if selector is not None or tolerations is not None:
        claim: dict[str, Any] = {}
        if selector is not None:
            claim["nodeSelector"] = json_copy(selector)
        if tolerations is not None:
            claim["tolerations"] = json_copy(tolerations)
        requires["nodeClaim"] = claim
    priority = spec.get("priorityClassName")
    if priority is not None and priority != "":
        requires["priorityClassName"] = priority


def _int32(v: float | int, where: str, *, truncate: bool) -> int:
    if isinstance(v, float) and not v.is_integer():
        if not truncate:
            raise InterpreterError(f"{where} must be a whole number, got {v!r}")
        v = math.trunc(v)
    i = int(v)
    if not -(2**31) <= i < 2**31:
        raise InterpreterError(f"{where} = {i} does not fit in int32")
    return i


def _normalized(op: Operation, requires: dict[str, Any], *, component: bool) -> dict[str, Any] | None:
    value = lua_round_trip(requires)
    return _lua.normalize_requirements(op, value, "requirement", component=component)


# ----------------------------------------------------------------------------- FlinkDeployment


def _flink_health(obj: JSON) -> bool:
    status = _get(obj, "status") or {}
    if not isinstance(status, Mapping):
        raise InterpreterError("status must be an object")
    state = _get(status, "jobStatus", "state")
    if state is None:
        return status.get("jobManagerDeploymentStatus") == "READY" and status.get("lifecycleState") == "STABLE"
    if state == "RUNNING" or state in TERMINAL_STATES or state in SHORT_LIVED_STATES:
        return True
    if state in EPHEMERAL_STATES:
        error = status.get("error")
        if isinstance(error, (int, float)) and not isinstance(error, bool):
            error = str(error)
        return isinstance(error, str) and any(e in error for e in USER_ERRORS)
    return False


def _flink_reflect(obj: JSON) -> JSON:
    status = obj.get("status")
    if status is None:
        return {}
    if not isinstance(status, Mapping):
        raise InterpreterError("status must be an object")
    return lua_round_trip({k: status.get(k) for k in FLINK_STATUS_FIELDS})


def _flink_aggregate(obj: JSON, items: list[Mapping[str, Any]]) -> JSON:
    if not items:
        return lua_round_trip(obj)
    out = json_copy(dict(obj))
    status = out.get("status")
    if status is None:
        status = {}
    if not isinstance(status, dict):
        raise InterpreterError("status must be an object")
    fields: dict[str, Any] = dict(_FLINK_STATUS_RESET)
    for item in items:
        member = item.get("status")
        if member is not None:
            if not isinstance(member, Mapping):
                raise InterpreterError(f"status of cluster {item.get('clusterName')!r} must be an object")
            fields = {k: json_copy(member.get(k)) for k in FLINK_STATUS_FIELDS}
    for k, v in fields.items():
        if v is None:
            status.pop(k, None)
        else:
            status[k] = v
    out["status"] = status
    return lua_round_trip(out)


def _flink_replicas(obj: JSON) -> ReplicaResult:
    jm = _to_num(_get(obj, "spec", "jobManager", "replicas"), 1)
    assert jm is not None
    replicas = _int32(jm + _task_manager_replicas(obj), "replica", truncate=True)
    request: dict[str, Any] = {}
    tm_cpu, jm_cpu = _get(obj, "spec", "taskManager", "resource", "cpu"), _get(obj, "spec", "jobManager", "resource", "cpu")
    if tm_cpu is not None and jm_cpu is not None:
        request["cpu"] = max(_cpu_number(tm_cpu, "spec.taskManager.resource.cpu"),
                             _cpu_number(jm_cpu, "spec.jobManager.resource.cpu"))
    elif tm_cpu is not None or jm_cpu is not None:
        request["cpu"] = tm_cpu if tm_cpu is not None else jm_cpu
    jm_mem = _get(obj, "spec", "jobManager", "resource", "memory")
    tm_mem = _get(obj, "spec", "taskManager", "resource", "memory")
    if jm_mem is not None and tm_mem is not None:
        bigger_jm = (_memory_value(jm_mem, "spec.jobManager.resource.memory")
                     > _memory_value(tm_mem, "spec.taskManager.resource.memory"))
        request["memory"] = jm_mem if bigger_jm else tm_mem
    elif jm_mem is not None or tm_mem is not None:
        request["memory"] = jm_mem if jm_mem is not None else tm_mem
    requires: dict[str, Any] = {"resourceRequest": request, "nodeClaim": {}}
    spec = _get(obj, "spec", "podTemplate", "spec")
    if spec is not None:
        if not isinstance(spec, Mapping):
            raise InterpreterError("spec.podTemplate.spec must be an object")
        requires["nodeClaim"] = {"nodeSelector": json_copy(spec.get("nodeSelector")),
                                 "tolerations": json_copy(spec.get("tolerations"))}
        if spec.get("priorityClassName") not in (None, ""):
            requires["priorityClassName"] = spec["priorityClassName"]
    namespace = _get(obj, "metadata", "namespace")
    if namespace not in (None, ""):
        requires["namespace"] = namespace
    return ReplicaResult(replicas, _normalized(Operation.INTERPRET_REPLICA, requires, component=False))


def _flink_component(obj: JSON, name: str, role: str, replicas: float | int) -> dict[str, Any]:
    request: dict[str, Any] = {}
    cpu, memory = _get(obj, "spec", role, "resource", "cpu"), _get(obj, "spec", role, "resource", "memory")
    if cpu is not None:
        request["cpu"] = cpu
    if memory is not None:
        request["memory"] = _memory_value(memory, f"spec.{role}.resource.memory")
    requires: dict[str, Any] = {"resourceRequest": request}
    _pod_template_claims(obj, requires)
    component: dict[str, Any] = {"name": name, "replicas": _int32(replicas, f"{name} replicas", truncate=False)}
    normalized = _normalized(Operation.INTERPRET_COMPONENT, requires, component=True)
    component["replicaRequirements"] = normalized
    return component


def _flink_components(obj: JSON) -> list[dict[str, Any]]:
    jm = _to_num(_get(obj, "spec", "jobManager", "replicas"), 1)
    assert jm is not None
    return [_flink_component(obj, "jobmanager", "jobManager", jm),
            _flink_component(obj, "taskmanager", "taskManager", _task_manager_replicas(obj))]


def _flink_retain(desired: JSON, observed: JSON) -> JSON:
    out = json_copy(desired)
    observed_job = _get(observed, "spec", "job")
    if not isinstance(observed_job, Mapping):
        return out
    path, nonce = observed_job.get("initialSavepointPath"), observed_job.get("savepointRedeployNonce")
    if not path and nonce is None:
        return out
    spec = out.setdefault("spec", {})
    job = spec.setdefault("job", {}) if isinstance(spec, dict) else None
    if not isinstance(job, dict):
        return out
    if path and not job.get("initialSavepointPath"):
        job["initialSavepointPath"] = path
        if observed_job.get("upgradeMode"):
            job["upgradeMode"] = observed_job["upgradeMode"]
    if nonce is not None and job.get("savepointRedeployNonce") is None:
        job["savepointRedeployNonce"] = nonce
    return out


def _flink_restore(obj: JSON, restore: Mapping[str, Any]) -> JSON:
    out = json_copy(obj)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        raise InterpreterError("spec must be an object holding spec.job (the job to restore)")
    job = spec.get("job")
    if job is None:
        raise InterpreterError("spec.job is not set: a session cluster has no job to restore "
                               f"from {restore['path']}")
    if not isinstance(job, dict):
        raise InterpreterError("spec.job must be an object")
    job["initialSavepointPath"] = restore["path"]
    if job.get("upgradeMode") in (None, "", "stateless"):
        job["upgradeMode"] = "savepoint"
    if restore["existed"]:
        job["savepointRedeployNonce"] = restore["nonce"]
    return out


# ------------------------------------------------------------------------------------- the API

_RULES: dict[GVK, dict[Operation, Callable[..., Any]]] = {
    FLINK_DEPLOYMENT: {
        Operation.INTERPRET_HEALTH: _flink_health,
        Operation.INTERPRET_STATUS: _flink_reflect,
        Operation.AGGREGATE_STATUS: _flink_aggregate,
        Operation.INTERPRET_REPLICA: _flink_replicas,
        Operation.INTERPRET_COMPONENT: _flink_components,
        Operation.RETAIN: _flink_retain,
        Operation.RESTORE_STATE: _flink_restore,
    },
}


def has_hook(gvk: GVK, operation: Operation) -> bool:
    return operation in _RULES.get(gvk, {})


def _rule(obj: JSON, operation: Operation) -> Callable[..., Any]:
    if not isinstance(obj, Mapping):
        raise InterpreterError(f"the object must be a Kubernetes object (a mapping), got {type(obj).__name__}")
    gvk = GVK.of(obj)
    rule = _RULES.get(gvk, {}).get(operation)
    if rule is None:
        raise HookNotFoundError(f"no third-party {operation} rule for {gvk}", operation=operation, gvk=gvk)
    return rule


def get_replicas(obj: JSON) -> ReplicaResult:
    result: ReplicaResult = _rule(obj, Operation.INTERPRET_REPLICA)(obj)
    return result


def get_components(obj: JSON) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = _rule(obj, Operation.INTERPRET_COMPONENT)(obj)
    return result


def revise_replica(obj: JSON, replicas: int) -> JSON:
    return _rule(obj, Operation.REVISE_REPLICA)(obj, replicas)


def retain(desired: JSON, observed: JSON) -> JSON:
    return _rule(desired, Operation.RETAIN)(desired, observed)


def reflect_status(obj: JSON) -> JSON:
    return _rule(obj, Operation.INTERPRET_STATUS)(obj)


def aggregate_status(obj: JSON, items: Iterable[Mapping[str, Any]] | None) -> JSON:
    rule = _rule(obj, Operation.AGGREGATE_STATUS)
    return rule(obj, [i for i in items or () if isinstance(i, Mapping)])


def interpret_health(obj: JSON) -> bool:
    return bool(_rule(obj, Operation.INTERPRET_HEALTH)(obj))


def get_dependencies(obj: JSON) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = _rule(obj, Operation.INTERPRET_DEPENDENCY)(obj)
    return result


def restore_state(obj: JSON, restore: Mapping[str, Any]) -> JSON:
    return _rule(obj, Operation.RESTORE_STATE)(obj, restore_input(restore))
