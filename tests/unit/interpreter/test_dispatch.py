"""The dispatch chain: customization > third-party > native > default."""

from __future__ import annotations

import pytest

from flotilla.interpreter import (
    GVK,
    HookNotFoundError,
    InterpreterError,
    Operation,
    ReplicaResult,
    ResourceHealth,
    ResourceInterpreter,
    Source,
    interpret,
)

from . import samples
from .objects import deployment, item, obj
from .test_thirdparty_flink import RUNNING_STATUS, flink

CRD = obj("example.io/v1", "Gadget", spec={"replicas": 4}, status={"ready": True})


def test_customization_beats_native_per_operation() -> None:
    ric = samples.ric("deploy", api_version="apps/v1", kind="Deployment",
                      healthInterpretation="function InterpretHealth(o) return false end")
    interp = ResourceInterpreter([ric])
    d = deployment(1, generation=1, status={"observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 1})
    assert interp.source(d, Operation.INTERPRET_HEALTH) is Source.CUSTOMIZATION
    assert interp.healthy(d) is False
    assert ResourceInterpreter().healthy(d) is True
    # other operations still use the native rules
    assert interp.source(d, Operation.INTERPRET_REPLICA) is Source.NATIVE
    assert interp.get_replicas(d).replicas == 1


def test_customization_beats_third_party() -> None:
    ric = samples.ric("flink", api_version="flink.apache.org/v1beta1", kind="FlinkDeployment",
                      statusReflection="function ReflectStatus(o) return {custom = true} end")
    interp = ResourceInterpreter([ric])
    f = flink(status=RUNNING_STATUS)
    assert interp.reflect_status(f) == {"custom": True}
    assert interp.source(f, Operation.INTERPRET_HEALTH) is Source.THIRD_PARTY
    assert interp.healthy(f)
    assert ResourceInterpreter(third_party=False).source(f, Operation.INTERPRET_HEALTH) is Source.FALLBACK


def test_hook_enabled() -> None:
    interp = ResourceInterpreter([samples.widget_ric()])
    gvk = GVK("apps/v1", "Deployment")
    assert interp.hook_enabled(gvk, Operation.INTERPRET_REPLICA)
    assert not interp.hook_enabled(GVK("apps/v1", "DaemonSet"), Operation.INTERPRET_REPLICA)
    assert interp.hook_enabled(GVK("example.io/v1", "Gadget"), Operation.INTERPRET_STATUS)  # always (whole status)
    assert not interp.hook_enabled(GVK("example.io/v1", "Gadget"), Operation.INTERPRET_HEALTH)
    assert interp.hook_enabled(GVK(samples.WIDGET_API, "Widget"), Operation.INTERPRET_COMPONENT)
    # exact apiVersion: no fallback to another version
    assert not interp.hook_enabled(GVK("apps/v1beta1", "Deployment"), Operation.INTERPRET_REPLICA)


def test_fallback_for_unknown_kinds() -> None:
    interp = ResourceInterpreter()
    assert interp.interpret_replica(CRD).source is Source.FALLBACK
    assert interp.get_replicas(CRD) == ReplicaResult(0, None)
    assert interp.revise_replica(CRD, 9) == CRD
    assert interp.retain(CRD, {**CRD, "spec": {"replicas": 1}}) == CRD
    assert interp.reflect_status(CRD) == {"ready": True}
    assert interp.interpret_status(CRD).source is Source.NATIVE
    assert interp.aggregate_status(CRD, [item("m1", {"ready": False})]) == CRD
    assert interp.healthy(CRD) is True
    assert interp.health(CRD) is ResourceHealth.HEALTHY
    assert interp.get_dependencies(CRD) == []
    with pytest.raises(HookNotFoundError, match="nothing interprets example.io/v1 Gadget"):
        interp.get_components(CRD)


def test_errors_do_not_fall_through() -> None:
    ric = samples.ric("g", api_version="example.io/v1", kind="Gadget",
                      healthInterpretation="function InterpretHealth(o) return nil end")
    interp = ResourceInterpreter([ric])
    with pytest.raises(InterpreterError) as e:
        interp.healthy(CRD)
    assert e.value.source is Source.CUSTOMIZATION
    assert e.value.operation is Operation.INTERPRET_HEALTH
    assert interp.health(CRD) is ResourceHealth.UNKNOWN  # not Unhealthy


def test_health_mapping() -> None:
    interp = ResourceInterpreter()
    bad = deployment(3, generation=2, status={"observedGeneration": 1})
    assert interp.health(bad) is ResourceHealth.UNHEALTHY
    broken = deployment(3, generation=2, status="nope")  # type: ignore[arg-type]
    assert interp.health(broken) is ResourceHealth.UNKNOWN


def test_interpret_entry_point() -> None:
    rics = [samples.widget_ric()]
    w = samples.widget(3, status={"readySize": 3})
    result = interpret("interprethealth", customizations=rics, observed=w)
    assert (result.value, result.source) == (True, Source.CUSTOMIZATION)
    assert result.named_values() == (("healthy", True),)
    replica = interpret(Operation.INTERPRET_REPLICA, customizations=rics, desired=w)
    assert [name for name, _ in replica.named_values()] == ["replica", "requires"]
    retained = interpret("Retain", customizations=rics, desired=w, observed={**w, "spec": {**w["spec"], "paused": 1}})
    assert retained.value["spec"]["paused"] == 1
    revised = interpret("replicaRevision", customizations=rics, desired=w, replicas=5)
    assert revised.value["spec"]["size"] == 5
    agg = interpret("AggregateStatus", customizations=rics, desired=w, status_items=[item("a", {"readySize": 1})])
    assert agg.value["status"]["readySize"] == 1
    with pytest.raises(InterpreterError, match="needs both"):
        interpret("Retain", desired=w)
    with pytest.raises(ValueError, match="not supported"):
        interpret("Explode", desired=w)


def test_objects_need_api_version_and_kind() -> None:
    with pytest.raises(InterpreterError, match="apiVersion/kind"):
        ResourceInterpreter().get_replicas({"metadata": {"name": "x"}})
