"""Built-in FlinkDeployment rules (flink.apache.org/v1beta1)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flotilla.interpreter import InterpreterError, Operation, ReplicaResult, thirdparty
from flotilla.interpreter.operations import GVK

from .objects import item


def flink(spec: dict | None = None, status: dict | None = None, namespace: str = "streams") -> dict:
    out: dict = {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                 "metadata": {"name": "orders", "namespace": namespace},
                 "spec": spec if spec is not None else {}}
    if status is not None:
        out["status"] = status
    return out


RUNNING_STATUS: dict[str, Any] = {
    "clusterInfo": {"flink-version": "1.20.1", "total-cpu": "3.0"},
    "jobManagerDeploymentStatus": "READY",
    "lifecycleState": "STABLE",
    "observedGeneration": 3,
    "jobStatus": {"jobName": "orders-enrichment", "jobId": "6f1c0e2b9a4d4b7e8c3a1d2e5f607182", "state": "RUNNING",
                  "startTime": "1734462400000", "updateTime": "1734462506836", "upgradeSavepointPath": None,
                  "checkpointInfo": {"lastPeriodicCheckpointTimestamp": 1734462491693},
                  "savepointInfo": {"lastPeriodicSavepointTimestamp": 0, "savepointHistory": []}},
    "reconciliationStatus": {"state": "DEPLOYED", "reconciliationTimestamp": 1734462390000},
    "taskManager": {"labelSelector": "component=taskmanager,app=orders", "replicas": 2},
    "conditions": [{"type": "Running", "status": "True"}],
}


def test_hooks() -> None:
    gvk = GVK("flink.apache.org/v1beta1", "FlinkDeployment")
    enabled = {op for op in Operation if thirdparty.has_hook(gvk, op)}
    assert enabled == {Operation.INTERPRET_HEALTH, Operation.INTERPRET_STATUS, Operation.AGGREGATE_STATUS,
                       Operation.INTERPRET_REPLICA, Operation.INTERPRET_COMPONENT, Operation.RETAIN,
                       Operation.RESTORE_STATE}
    assert not thirdparty.has_hook(GVK("flink.apache.org/v1beta2", "FlinkDeployment"), Operation.INTERPRET_HEALTH)


@pytest.mark.parametrize(
    ("status", "healthy"),
    [
        ({"jobStatus": {"state": "RUNNING"}}, True),
        ({"jobStatus": {"state": "FINISHED"}}, True),
        ({"jobStatus": {"state": "FAILED"}}, True),  # terminal failure does not fail over
        ({"jobStatus": {"state": "CANCELED"}}, True),
        ({"jobStatus": {"state": "SUSPENDED"}}, True),
        ({"jobStatus": {"state": "CANCELLING"}}, True),
        ({"jobStatus": {"state": "FAILING"}}, True),
        ({"jobStatus": {"state": "RESTARTING"}}, True),
        ({"jobStatus": {"state": "CREATED"}}, False),
        ({"jobStatus": {"state": "INITIALIZING"}, "error": "something else"}, False),
        ({"jobStatus": {"state": "RECONCILING"}, "error": "Back-off: ImagePullBackOff for flink:9"}, True),
        ({"jobStatus": {"state": "CREATED"}, "error": "pod crashed: CrashLoopBackOff"}, True),
        ({"jobStatus": {"state": "INITIALIZING"}, "error": "ErrImagePull"}, True),
        ({"jobStatus": {"state": "running"}}, False),  # states are compared exactly
        ({"jobStatus": {"state": "UNKNOWN_STATE"}}, False),
        ({"jobManagerDeploymentStatus": "READY", "lifecycleState": "STABLE"}, True),
        ({"jobManagerDeploymentStatus": "READY", "lifecycleState": "DEPLOYED"}, False),
        ({"jobManagerDeploymentStatus": "DEPLOYING", "lifecycleState": "STABLE", "jobStatus": {}}, False),
        ({}, False),
        (None, False),
    ],
)
def test_health(status: dict | None, healthy: bool) -> None:
    assert thirdparty.interpret_health(flink(status=status)) is healthy


def test_reflect_status_keeps_the_flink_fields_and_drops_empty_values() -> None:
    reflected = thirdparty.reflect_status(flink(status=RUNNING_STATUS))
    expected = copy.deepcopy(RUNNING_STATUS)
    del expected["conditions"]
    del expected["jobStatus"]["upgradeSavepointPath"]  # null: gone through Lua
    del expected["jobStatus"]["savepointInfo"]["savepointHistory"]  # empty array: dropped
    assert reflected == expected
    assert reflected["jobStatus"]["jobId"] == "6f1c0e2b9a4d4b7e8c3a1d2e5f607182"


def test_reflect_status_without_status_is_empty() -> None:
    assert thirdparty.reflect_status(flink()) == {}
    assert thirdparty.reflect_status(flink(status={})) == {}
    assert thirdparty.reflect_status(flink(status={"error": "boom", "unknown": 1})) == {"error": "boom"}


def test_aggregate_takes_the_last_status_whole() -> None:
    template = flink(status={"lifecycleState": "CREATED", "other": "kept"})
    first = thirdparty.reflect_status(flink(status=RUNNING_STATUS))
    second = {"lifecycleState": "DEPLOYED", "jobStatus": {"state": "CREATED", "jobId": "abc"}}
    out = thirdparty.aggregate_status(template, [item("a", first), item("b", second), item("c", None)])
    assert out["status"] == {"lifecycleState": "DEPLOYED", "jobStatus": {"state": "CREATED", "jobId": "abc"},
                             "other": "kept"}
    out = thirdparty.aggregate_status(template, [item("b", second), item("a", first)])
    assert out["status"]["jobStatus"]["jobId"] == "6f1c0e2b9a4d4b7e8c3a1d2e5f607182"


def test_aggregate_without_any_status_resets_the_fields() -> None:
    template = flink(status={"lifecycleState": "STABLE", "jobStatus": {"state": "RUNNING"}, "other": "kept"})
    out = thirdparty.aggregate_status(template, [item("a", None)])
    # '' and 0 stay; the empty objects vanish on the way back from Lua; the two enum fields go (Karmada's
    # script sets them to "", which the operator's CRD refuses)
    assert out["status"] == {"error": "", "observedGeneration": 0, "other": "kept"}


def test_aggregate_without_items_returns_the_template() -> None:
    template = flink({"image": "flink:1.20"}, status={"lifecycleState": "STABLE"})
    assert thirdparty.aggregate_status(template, []) == template
    assert thirdparty.aggregate_status(template, None) == template
    # as through Lua, empty objects and arrays of the template do not come back (no cascade)
    bare = flink({"job": {"args": []}, "podTemplate": {}}, status={"lifecycleState": "STABLE"})
    assert thirdparty.aggregate_status(bare, [])["spec"] == {"job": {}}


@pytest.mark.parametrize(
    ("spec", "replicas"),
    [
        ({}, 2),  # 1 job manager + 1 task manager
        ({"jobManager": {"replicas": 2}, "taskManager": {"replicas": 3}}, 5),
        ({"job": {"parallelism": 5}, "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "2"}}, 4),
        ({"job": {"parallelism": 4}, "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "2"}}, 3),
        ({"job": {"parallelism": 4}, "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "0"}}, 2),
        ({"job": {"parallelism": 4}}, 2),
        ({"taskManager": {"replicas": 2}, "job": {"parallelism": 10},
          "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "1"}}, 3),
    ],
)
def test_replicas(spec: dict, replicas: int) -> None:
    assert thirdparty.get_replicas(flink(spec)).replicas == replicas


def test_requirements_take_the_larger_cpu_and_memory() -> None:
    spec = {
        "jobManager": {"resource": {"cpu": 0.5, "memory": "2Gi"}},
        "taskManager": {"resource": {"cpu": 2, "memory": "1536Mi"}},
        "podTemplate": {"spec": {"nodeSelector": {"pool": "flink"}, "priorityClassName": "high",
                                 "tolerations": [{"key": "dedicated", "operator": "Exists"}]}},
    }
    result = thirdparty.get_replicas(flink(spec))
    assert result == ReplicaResult(2, {
        "nodeClaim": {"nodeSelector": {"pool": "flink"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}]},
        "resourceRequest": {"cpu": "2", "memory": "2Gi"},
        "namespace": "streams",
        "priorityClassName": "high",
    })
    only_tm = thirdparty.get_replicas(flink({"taskManager": {"resource": {"cpu": 0.25, "memory": "512Mi"}}}))
    assert only_tm.requirements == {"resourceRequest": {"cpu": "250m", "memory": "512Mi"}, "namespace": "streams"}
    assert thirdparty.get_replicas(flink({}, namespace="")).requirements == {}


def test_components() -> None:
    spec = {"jobManager": {"replicas": 1, "resource": {"cpu": 1, "memory": "1Gi"}},
            "taskManager": {"resource": {"cpu": 2, "memory": "4Gi"}},
            "job": {"parallelism": 6}, "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "4"},
            "podTemplate": {"spec": {"nodeSelector": {"pool": "flink"}}}}
    assert thirdparty.get_components(flink(spec)) == [
        {"name": "jobmanager", "replicas": 1, "replicaRequirements": {
            "nodeClaim": {"nodeSelector": {"pool": "flink"}},
            "resourceRequest": {"cpu": "1", "memory": "1073741824"}}},
        {"name": "taskmanager", "replicas": 2, "replicaRequirements": {
            "nodeClaim": {"nodeSelector": {"pool": "flink"}},
            "resourceRequest": {"cpu": "2", "memory": "4294967296"}}},
    ]


def test_bad_memory_is_an_error() -> None:
    spec = {"jobManager": {"resource": {"memory": "lots"}}, "taskManager": {"resource": {"memory": "1Gi"}}}
    with pytest.raises(InterpreterError, match="memory"):
        thirdparty.get_replicas(flink(spec))


def test_no_revise_or_dependency_rules() -> None:
    with pytest.raises(InterpreterError):
        thirdparty.revise_replica(flink(), 3)
    with pytest.raises(InterpreterError):
        thirdparty.get_dependencies(flink())
