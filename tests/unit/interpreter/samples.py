"""Sample ResourceInterpreterCustomizations written for these tests (a CRD with ``spec.size``)."""

from __future__ import annotations

from typing import Any

WIDGET_API = "example.io/v1"

GET_REPLICAS = """
local kube = require("kube")
function GetReplicas(desiredObj)
  local requirement = kube.accuratePodRequirements(desiredObj.spec.template)
  return desiredObj.spec.size, requirement
end
"""

REVISE_REPLICA = """
function ReviseReplica(desiredObj, desiredReplica)
  desiredObj.spec.size = desiredReplica
  return desiredObj
end
"""

RETAIN = """
function Retain(desiredObj, observedObj)
  if observedObj.spec.paused ~= nil then
    desiredObj.spec.paused = observedObj.spec.paused
  end
  return desiredObj
end
"""

REFLECT_STATUS = """
function ReflectStatus(observedObj)
  local status = {}
  if observedObj.status == nil then
    return status
  end
  status.readySize = observedObj.status.readySize
  status.phase = observedObj.status.phase
  status.members = observedObj.status.members
  return status
end
"""

AGGREGATE_STATUS = """
function AggregateStatus(desiredObj, statusItems)
  if statusItems == nil then
    return desiredObj
  end
  local ready, phase = 0, "Ready"
  for i = 1, #statusItems do
    local st = statusItems[i].status
    if st ~= nil then
      ready = ready + (st.readySize or 0)
      if st.phase ~= "Ready" then phase = "Degraded" end
    end
  end
  if desiredObj.status == nil then desiredObj.status = {} end
  desiredObj.status.readySize = ready
  desiredObj.status.phase = phase
  desiredObj.status.clusters = #statusItems
  return desiredObj
end
"""

INTERPRET_HEALTH = """
function InterpretHealth(observedObj)
  if observedObj.status == nil then
    return false
  end
  return observedObj.status.readySize == observedObj.spec.size
end
"""

GET_DEPENDENCIES = """
local kube = require("kube")
function GetDependencies(desiredObj)
  local deps = kube.getPodDependencies(desiredObj.spec.template, desiredObj.metadata.namespace) or {}
  if desiredObj.spec.configName ~= nil then
    table.insert(deps, {apiVersion = "v1", kind = "ConfigMap", namespace = desiredObj.metadata.namespace,
                        name = desiredObj.spec.configName})
  end
  return deps
end
"""

GET_COMPONENTS = """
function GetComponents(desiredObj)
  return {
    {name = "leader", replicas = 1, replicaRequirements = {resourceRequest = {cpu = "500m"}}},
    {name = "follower", replicas = desiredObj.spec.size - 1,
     replicaRequirements = {resourceRequest = {cpu = 0.25, memory = "1024Mi"}, priorityClassName = "high"}},
  }
end
"""


# RestoreState for a StatefulSet-like kind: the snapshot path goes into an annotation and into the RESTORE_FROM
# variable of every container (replacing an earlier one); an existing object gets a new restore-nonce annotation.
RESTORE_STATE = """
function RestoreState(desiredObj, restore)
  desiredObj.metadata.annotations = desiredObj.metadata.annotations or {}
  desiredObj.metadata.annotations["example.io/restore-from"] = restore.path
  desiredObj.metadata.annotations["example.io/restore-kind"] = restore.kind
  if restore.existed then
    desiredObj.metadata.annotations["example.io/restore-nonce"] = tostring(restore.nonce)
  end
  for _, c in ipairs(desiredObj.spec.template.spec.containers) do
    local env = {}
    for _, e in ipairs(c.env or {}) do
      if e.name ~= "RESTORE_FROM" then table.insert(env, e) end
    end
    table.insert(env, {name = "RESTORE_FROM", value = restore.path})
    c.env = env
  end
  return desiredObj
end
"""


def ric(name: str = "widgets", api_version: str = WIDGET_API, kind: str = "Widget",
        **scripts: str) -> dict[str, Any]:
    """A RIC with the given hook scripts (keyword = hook field name)."""
    return {
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": name},
        "spec": {"target": {"apiVersion": api_version, "kind": kind},
                 "customizations": {hook: {"luaScript": s} for hook, s in scripts.items()}},
    }


def widget_ric(name: str = "widgets") -> dict[str, Any]:
    return ric(name, replicaResource=GET_REPLICAS, replicaRevision=REVISE_REPLICA, retention=RETAIN,
               statusReflection=REFLECT_STATUS, statusAggregation=AGGREGATE_STATUS,
               healthInterpretation=INTERPRET_HEALTH, dependencyInterpretation=GET_DEPENDENCIES,
               componentResource=GET_COMPONENTS, restoreState=RESTORE_STATE)


def widget(size: int = 3, *, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": WIDGET_API,
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "demo", "annotations": {}},
        "spec": {
            "size": size,
            "template": {"metadata": {"labels": {"app": "w"}}, "spec": {
                "serviceAccountName": "widget-sa",
                "nodeSelector": {"disk": "ssd"},
                "containers": [{"name": "main", "image": "widget:1", "args": [],
                                "envFrom": [{"secretRef": {"name": "widget-secret"}}],
                                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "widget-data"}}],
            }},
            **spec,
        },
    }
    if status is not None:
        out["status"] = status
    return out
