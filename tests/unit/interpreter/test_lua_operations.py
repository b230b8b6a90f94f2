"""Each operation through a sample customization's Lua script."""

from __future__ import annotations

import copy

import pytest

from flotilla.interpreter import LuaScriptError, ReplicaResult
from flotilla.interpreter.lua import (
    lua_aggregate_status,
    lua_get_components,
    lua_get_dependencies,
    lua_get_replicas,
    lua_interpret_health,
    lua_reflect_status,
    lua_retain,
    lua_revise_replica,
    run_script,
)

from . import samples
from .objects import item


def test_get_replicas_with_kube_requirements() -> None:
    result = lua_get_replicas(samples.GET_REPLICAS, samples.widget(4))
    assert result == ReplicaResult(4, {"nodeClaim": {"nodeSelector": {"disk": "ssd"}},
                                       "resourceRequest": {"cpu": "250m", "memory": "256Mi"}})


def test_get_replicas_results_are_checked_and_normalized() -> None:
    w = samples.widget()
    assert lua_get_replicas("function GetReplicas(o) return 2.9, nil end", w) == ReplicaResult(2, None)
    requirement = "function GetReplicas(o) return 1, {resourceRequest = {cpu = 1.5, memory = '1024Mi'}} end"
    assert lua_get_replicas(requirement, w).requirements == {"resourceRequest": {"cpu": "1500m", "memory": "1Gi"}}
    with pytest.raises(LuaScriptError, match="replica.*must be a number, got string"):
        lua_get_replicas("function GetReplicas(o) return 'three' end", w)
    with pytest.raises(LuaScriptError, match="requirement.*table or nil, got number"):
        lua_get_replicas("function GetReplicas(o) return 1, 5 end", w)
    with pytest.raises(LuaScriptError, match="resourceRequest.cpu"):
        lua_get_replicas("function GetReplicas(o) return 1, {resourceRequest = {cpu = 'lots'}} end", w)
    with pytest.raises(LuaScriptError, match="int32"):
        lua_get_replicas("function GetReplicas(o) return 2^40 end", w)


def test_revise_replica() -> None:
    w = samples.widget(3)
    before = copy.deepcopy(w)
    revised = lua_revise_replica(samples.REVISE_REPLICA, w, 7)
    expected = copy.deepcopy(w)
    expected["spec"]["size"] = 7
    assert revised == expected  # empty annotations and args come back: the object is the reference
    assert w == before


def test_retain_keeps_member_field_and_empty_values_of_either_object() -> None:
    desired = samples.widget(3, paused=False)
    observed = samples.widget(3, paused=True, status={"readySize": 1, "members": []})
    retained = lua_retain(samples.RETAIN, desired, observed)
    assert retained["spec"]["paused"] is True
    assert retained["metadata"]["annotations"] == {}
    assert retained["spec"]["template"]["spec"]["containers"][0]["args"] == []
    assert "status" not in retained


def test_retain_must_return_the_whole_object() -> None:
    with pytest.raises(LuaScriptError, match="no kind"):
        lua_retain("function Retain(d, o) return d.spec end", samples.widget(), samples.widget())
    with pytest.raises(LuaScriptError, match="must be a table, got nil"):
        lua_retain("function Retain(d, o) end", samples.widget(), samples.widget())


def test_reflect_status() -> None:
    w = samples.widget(status={"readySize": 2, "phase": "Ready", "members": [], "internal": "x"})
    assert lua_reflect_status(samples.REFLECT_STATUS, w) == {"readySize": 2, "phase": "Ready"}
    assert lua_reflect_status(samples.REFLECT_STATUS, samples.widget()) == {}
    with pytest.raises(LuaScriptError, match="reflected status must be a table, got nil"):
        lua_reflect_status("function ReflectStatus(o) return o.status end", samples.widget())


def test_aggregate_status() -> None:
    template = samples.widget(3, status={"readySize": 0})
    items = [item("m1", {"readySize": 2, "phase": "Ready"}), item("m2", {"readySize": 1, "phase": "Scaling"}),
             item("m3", None)]
    out = lua_aggregate_status(samples.AGGREGATE_STATUS, template, items)
    assert out["status"] == {"readySize": 3, "phase": "Degraded", "clusters": 3}
    assert "annotations" not in out["metadata"]  # no references for AggregateStatus: empty values drop
    unchanged = lua_aggregate_status(samples.AGGREGATE_STATUS, template, None)
    assert unchanged["status"] == {"readySize": 0}


def test_status_items_reach_the_script_as_karmada_sends_them() -> None:
    script = """
    function AggregateStatus(obj, items)
      local seen = {}
      for i = 1, #items do
        local it = items[i]
        table.insert(seen, it.clusterName .. ":" .. tostring(it.applied) .. ":" .. tostring(it.health) .. ":"
                           .. tostring(it.status ~= nil))
      end
      obj.status = {seen = seen}
      return obj
    end"""
    items = [item("a", {"x": 1}, health="Healthy"), {"clusterName": "b", "applied": False, "appliedMessage": ""}]
    out = lua_aggregate_status(script, samples.widget(), items)
    assert out["status"]["seen"] == ["a:true:Healthy:true", "b:nil:nil:false"]


@pytest.mark.parametrize(("size", "ready", "healthy"), [(3, 3, True), (3, 2, False)])
def test_interpret_health(size: int, ready: int, healthy: bool) -> None:
    assert lua_interpret_health(samples.INTERPRET_HEALTH, samples.widget(size, status={"readySize": ready})) is healthy


def test_interpret_health_must_return_a_boolean() -> None:
    script = "function InterpretHealth(o) if o.status.readySize == o.spec.size then return true end end"
    with pytest.raises(LuaScriptError, match="must return a boolean, got nil"):
        lua_interpret_health(script, samples.widget(3, status={"readySize": 1}))
    with pytest.raises(LuaScriptError, match="got number"):
        lua_interpret_health("function InterpretHealth(o) return 1 end", samples.widget())


def test_get_dependencies() -> None:
    deps = lua_get_dependencies(samples.GET_DEPENDENCIES, samples.widget(configName="widget-config"))
    assert deps == [
        {"apiVersion": "v1", "kind": "Secret", "namespace": "demo", "name": "widget-secret"},
        {"apiVersion": "v1", "kind": "ServiceAccount", "namespace": "demo", "name": "widget-sa"},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "demo", "name": "widget-data"},
        {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "demo", "name": "widget-config"},
    ]


def test_get_dependencies_are_validated() -> None:
    with pytest.raises(LuaScriptError, match="name or a labelSelector"):
        lua_get_dependencies("function GetDependencies(o) return {{apiVersion = 'v1', kind = 'Secret'}} end",
                             samples.widget())
    with pytest.raises(LuaScriptError, match=r"kind: is required"):
        lua_get_dependencies("function GetDependencies(o) return {{apiVersion = 'v1', name = 'x'}} end",
                             samples.widget())
    selector = ("function GetDependencies(o) return {{apiVersion = 'v1', kind = 'Secret',"
                " labelSelector = {matchLabels = {app = 'w'}}}} end")
    assert lua_get_dependencies(selector, samples.widget()) == [
        {"apiVersion": "v1", "kind": "Secret", "labelSelector": {"matchLabels": {"app": "w"}}}]
    assert lua_get_dependencies("function GetDependencies(o) return {} end", samples.widget()) == []


def test_get_components() -> None:
    assert lua_get_components(samples.GET_COMPONENTS, samples.widget(4)) == [
        {"name": "leader", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "500m"}}},
        {"name": "follower", "replicas": 3, "replicaRequirements": {
            "resourceRequest": {"cpu": "250m", "memory": "1Gi"}, "priorityClassName": "high"}},
    ]
    assert lua_get_components("function GetComponents(o) return nil end", samples.widget()) is None
    with pytest.raises(LuaScriptError, match="whole number"):
        lua_get_components("function GetComponents(o) return {{name = 'a', replicas = 1.5}} end", samples.widget())


def test_kube_helpers() -> None:
    script = """
    local kube = require("kube")
    function Probe(o)
      return {
        sum = kube.resourceAdd("1Gi", "512Mi"),
        sumDecimal = kube.resourceAdd("1", "500m", nil),
        zero = kube.resourceAdd(),
        fromNil = kube.resourceAdd(nil, "2"),
        bytes = kube.getResourceQuantity("1Ki"),
        cores = kube.getResourceQuantity("250m"),
        none = kube.accuratePodRequirements({spec = {containers = {{name = "c"}}}}) == nil,
        noDeps = kube.getPodDependencies({spec = {}}, nil) == nil,
        defaultNs = kube.getPodDependencies({spec = {serviceAccountName = "sa"}}, nil)[1].namespace,
      }
    end"""
    (result,) = run_script(script, "Probe", [{}])
    assert result.value == {"sum": "1536Mi", "sumDecimal": "1500m", "zero": "0", "fromNil": "2", "bytes": 1024,
                            "cores": 0.25, "none": True, "noDeps": True, "defaultNs": "default"}


@pytest.mark.parametrize(
    ("call", "message"),
    [("kube.resourceAdd(1)", "string expected, got number"),
     ("kube.resourceAdd('lots')", "'lots' is not a quantity"),
     ("kube.getResourceQuantity('1', '2')", "exactly one argument"),
     ("kube.getResourceQuantity('-1')", "negative"),
     ("kube.accuratePodRequirements('x')", "table expected, got string"),
     ("kube.getPodDependencies({spec = {}})", "exactly two arguments"),
     ("kube.getPodDependencies({spec = {}}, {})", "string expected, got table")],
)
def test_kube_helper_errors(call: str, message: str) -> None:
    script = f'local kube = require("kube")\nfunction F(o) return {call} end'
    with pytest.raises(LuaScriptError, match=message):
        run_script(script, "F", [{}])


def test_print_goes_to_the_sink() -> None:
    lines: list[str] = []
    lua_interpret_health("function InterpretHealth(o) print('size', o.spec.size, nil) return true end",
                         samples.widget(5), print_sink=lines.append)
    assert lines == ["size\t5\tnil"]


def test_globals_do_not_leak_between_calls() -> None:
    script = "counter = (counter or 0) + 1\nfunction InterpretHealth(o) return counter == 1 end"
    assert lua_interpret_health(script, samples.widget())
    assert lua_interpret_health(script, samples.widget())
