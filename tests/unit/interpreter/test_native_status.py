"""Native rules: ReflectStatus, AggregateStatus and InterpretHealth of the native workload kinds."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from flotilla.interpreter import InterpreterError, native

from .objects import deployment, item, obj, workload

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


# ----------------------------------------------------------------------------- ReflectStatus


def test_deployment_reflects_counters_and_generations() -> None:
    d = deployment(3, generation=4, template_generation="7", status={
        "replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 1,
        "observedGeneration": 4, "conditions": [{"type": "Available", "status": "True"}]})
    assert native.reflect_status(d) == {
        "replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 1,
        "observedGeneration": 4, "generation": 4, "resourceTemplateGeneration": 7}


def test_deployment_zero_counters_are_left_out_and_empty_is_none() -> None:
    d = deployment(3, generation=2, status={"replicas": 1, "readyReplicas": 0})
    assert native.reflect_status(d) == {"replicas": 1, "generation": 2, "resourceTemplateGeneration": 1}
    empty = deployment(3, generation=0, template_generation="0", status={})
    assert native.reflect_status(empty) is None


def test_no_status_reflects_nothing() -> None:
    assert native.reflect_status(deployment(3)) is None
    assert native.reflect_status(workload("StatefulSet")) is None


@pytest.mark.parametrize("annotation", [None, "", "abc", "1.5"])
def test_missing_or_bad_generation_annotation_is_an_error(annotation: str | None) -> None:
    d = deployment(3, template_generation=annotation, status={"replicas": 1})
    with pytest.raises(InterpreterError, match="resourcetemplate.karmada.io/generation"):
        native.reflect_status(d)


def test_statefulset_does_not_keep_observed_generation() -> None:
    s = workload("StatefulSet", generation=3, status={"replicas": 2, "readyReplicas": 2, "currentReplicas": 2,
                                                       "updatedReplicas": 2, "availableReplicas": 0,
                                                       "observedGeneration": 3})
    assert native.reflect_status(s) == {"replicas": 2, "readyReplicas": 2, "currentReplicas": 2, "updatedReplicas": 2,
                                        "availableReplicas": 0, "generation": 3, "resourceTemplateGeneration": 1}


def test_daemonset_reflection() -> None:
    ds = workload("DaemonSet", generation=2, status={"currentNumberScheduled": 2, "desiredNumberScheduled": 2,
                                                      "numberReady": 2, "numberAvailable": 2, "numberMisscheduled": 0,
                                                      "updatedNumberScheduled": 2, "observedGeneration": 2})
    assert native.reflect_status(ds) == {
        "currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberReady": 2, "numberAvailable": 2,
        "numberMisscheduled": 0, "updatedNumberScheduled": 2, "observedGeneration": 2, "generation": 2,
        "resourceTemplateGeneration": 1}


def test_job_service_pdb_hpa_and_whole_status() -> None:
    job = obj("batch/v1", "Job", status={"active": 1, "succeeded": 0, "ready": 1, "startTime": "2025-01-01T00:00:00Z",
                                          "conditions": [{"type": "Complete", "status": "False"}]})
    assert native.reflect_status(job) == {"active": 1, "startTime": "2025-01-01T00:00:00Z",
                                          "conditions": [{"type": "Complete", "status": "False"}]}
    lb = {"ingress": [{"ip": "1.2.3.4"}]}
    svc = obj("v1", "Service", spec={"type": "LoadBalancer"}, status={"loadBalancer": lb, "conditions": []})
    assert native.reflect_status(svc) == {"loadBalancer": lb}
    assert native.reflect_status(obj("v1", "Service", spec={"type": "ClusterIP"}, status={"loadBalancer": {}})) is None
    pdb = obj("policy/v1", "PodDisruptionBudget", status={"currentHealthy": 2, "desiredHealthy": 2,
                                                          "observedGeneration": 1})
    assert native.reflect_status(pdb) == {"currentHealthy": 2, "desiredHealthy": 2, "disruptionsAllowed": 0,
                                          "expectedPods": 0}
    hpa = obj("autoscaling/v2", "HorizontalPodAutoscaler", status={"currentReplicas": 0, "desiredReplicas": 0,
                                                                   "conditions": [{"type": "AbleToScale"}]})
    assert native.reflect_status(hpa) == {"desiredReplicas": 0}
    crd = obj("example.io/v1", "Widget", status={"anything": [1, {"x": None}]})
    assert native.reflect_status(crd) == {"anything": [1, {"x": None}]}
    assert native.reflect_status(obj("example.io/v1", "Widget")) is None


# ---------------------------------------------------------------------------- AggregateStatus


def reflected(replicas: int, ready: int, *, generation: int = 2, observed: int = 2, template: int = 2) -> dict:
    return {"replicas": replicas, "readyReplicas": ready, "updatedReplicas": replicas, "availableReplicas": ready,
            "observedGeneration": observed, "generation": generation, "resourceTemplateGeneration": template}


def test_deployment_sums_and_advances_observed_generation() -> None:
    d = deployment(5, generation=2, status={"observedGeneration": 1, "conditions": [{"type": "Available"}]})
    out = native.aggregate_status(d, [item("m1", reflected(3, 3)), item("m2", reflected(2, 1))])
    assert out["status"] == {"replicas": 5, "readyReplicas": 4, "updatedReplicas": 5, "availableReplicas": 4,
                             "observedGeneration": 2, "conditions": [{"type": "Available"}]}


def test_observed_generation_waits_for_every_member() -> None:
    d = deployment(5, generation=3, status={"observedGeneration": 2})
    stale_template = item("m1", reflected(3, 3, template=2))
    out = native.aggregate_status(d, [stale_template, item("m2", reflected(2, 2, template=3))])
    assert out["status"]["observedGeneration"] == 2
    not_observed = item("m1", reflected(3, 3, generation=5, observed=4, template=3))
    out = native.aggregate_status(d, [not_observed, item("m2", reflected(2, 2, template=3))])
    assert out["status"]["observedGeneration"] == 2
    no_status = item("m2", None)
    out = native.aggregate_status(d, [item("m1", reflected(3, 3, template=3)), no_status])
    assert out["status"]["observedGeneration"] == 2
    assert out["status"]["replicas"] == 3
    out = native.aggregate_status(d, [item("m1", reflected(3, 3, template=3)), item("m2", reflected(2, 2, template=3))])
    assert out["status"]["observedGeneration"] == 3


def test_unchanged_status_returns_the_object() -> None:
    d = deployment(3, generation=1, status={"replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
                                            "availableReplicas": 3, "observedGeneration": 1})
    out = native.aggregate_status(d, [item("m1", reflected(3, 3, generation=1, observed=1, template=1))])
    assert out == d and out is not d


def test_zero_sums_are_removed_from_a_deployment_status() -> None:
    d = deployment(3, generation=1, status={"replicas": 3, "readyReplicas": 3, "observedGeneration": 1})
    out = native.aggregate_status(d, [item("m1", {"replicas": 2, "generation": 1, "resourceTemplateGeneration": 1})])
    assert out["status"] == {"replicas": 2, "observedGeneration": 1}


def test_aggregation_is_pure() -> None:
    d = deployment(3, status={})
    items = [item("m1", reflected(1, 1))]
    before = copy.deepcopy((d, items))
    native.aggregate_status(d, items)
    assert (d, items) == before


def test_statefulset_observed_generation_quirk() -> None:
    s = workload("StatefulSet", generation=2, status={"observedGeneration": 1})
    member = {"replicas": 2, "availableReplicas": 2, "generation": 2, "resourceTemplateGeneration": 2}
    out = native.aggregate_status(s, [item("m1", member)])
    # the reflected status has no observedGeneration (0 < generation 2): never advances with members
    assert out["status"] == {"replicas": 2, "availableReplicas": 2, "observedGeneration": 1}
    assert native.aggregate_status(s, [])["status"]["observedGeneration"] == 2


def test_daemonset_sums() -> None:
    ds = workload("DaemonSet", generation=1, status={})
    m = {"currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberReady": 1, "numberAvailable": 1,
         "updatedNumberScheduled": 1, "numberMisscheduled": 0, "observedGeneration": 1, "generation": 1,
         "resourceTemplateGeneration": 1}
    out = native.aggregate_status(ds, [item("a", m), item("b", m)])
    assert out["status"] == {"currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberReady": 2,
                             "numberAvailable": 2, "updatedNumberScheduled": 2, "numberMisscheduled": 0,
                             "observedGeneration": 1}


def test_job_aggregation() -> None:
    job = obj("batch/v1", "Job", spec={"parallelism": 2})
    done = {"succeeded": 1, "startTime": "2025-01-01T00:00:05Z", "completionTime": "2025-01-01T00:01:00Z",
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}
    running = {"active": 1, "startTime": "2025-01-01T00:00:01Z"}
    out = native.aggregate_status(job, [item("a", done), item("b", running)], now=NOW)
    assert out["status"] == {"active": 1, "succeeded": 1, "startTime": "2025-01-01T00:00:01Z"}
    other = dict(done, startTime="2025-01-01T00:00:02Z", completionTime="2025-01-01T00:02:00Z")
    out = native.aggregate_status(job, [item("a", done), item("b", other)], now=NOW)
    status = out["status"]
    assert status["succeeded"] == 2
    assert status["completionTime"] == "2025-01-01T00:02:00Z"
    assert status["startTime"] == "2025-01-01T00:00:02Z"
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Complete", "True", "Completed"), ("SuccessCriteriaMet", "True", "CompletionsReached")]
    assert status["conditions"][0]["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    failed = {"failed": 3, "conditions": [{"type": "Failed", "status": "True"}]}
    out = native.aggregate_status(job, [item("a", done), item("b", failed)], now=NOW)
    (cond,) = out["status"]["conditions"]
    assert cond["type"] == "Failed" and cond["reason"] == "JobFailed" and "b" in cond["message"]
    finished = obj("batch/v1", "Job", status={"conditions": [{"type": "Complete", "status": "True"}]})
    assert native.aggregate_status(finished, [item("a", running)], now=NOW) == finished


def test_job_start_time_keeps_the_templates() -> None:
    job = obj("batch/v1", "Job", status={"startTime": "2024-12-31T00:00:00Z"})
    out = native.aggregate_status(job, [item("a", {"active": 1, "startTime": "2025-01-01T00:00:00Z"})], now=NOW)
    assert out["status"]["startTime"] == "2024-12-31T00:00:00Z"


def test_pod_aggregation() -> None:
    pod = obj("v1", "Pod", status={"phase": "Pending"})
    running = {"phase": "Running", "containerStatuses": [{"name": "c", "ready": True, "restartCount": 2,
                                                          "state": {"running": {}}}]}
    out = native.aggregate_status(pod, [item("a", running), item("b", dict(running, phase="Succeeded"))])
    assert out["status"] == {"phase": "Running", "containerStatuses": [
        {"ready": True, "state": {"running": {}}}, {"ready": True, "state": {"running": {}}}]}
    assert native.aggregate_status(pod, [item("a", running), item("b", None)])["status"]["phase"] == "Pending"
    assert native.aggregate_status(pod, [item("a", running), item("b", {"phase": "Failed"})])["status"]["phase"] == "Failed"
    assert native.aggregate_status(pod, [item("a", {"phase": "Succeeded"})])["status"]["phase"] == "Succeeded"
    assert native.aggregate_status(pod, []) == pod


def test_service_and_ingress_union_of_load_balancers() -> None:
    svc = obj("v1", "Service", spec={"type": "LoadBalancer"})
    items = [item("a", {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}, {"hostname": "b.example"}]}}),
             item("b", {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"},
                                                     {"hostname": "a.example"}]}})]
    out = native.aggregate_status(svc, items)
    assert out["status"] == {"loadBalancer": {"ingress": [
        {"hostname": "a.example"}, {"hostname": "b.example"}, {"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}}
    cluster_ip = obj("v1", "Service", spec={"type": "ClusterIP"})
    assert native.aggregate_status(cluster_ip, items) == cluster_ip
    ing = obj("networking.k8s.io/v1", "Ingress")
    ports = [item("a", {"loadBalancer": {"ingress": [{"ip": "1.1.1.1", "ports": [{"port": 443, "protocol": "TCP"}]}]}}),
             item("b", {"loadBalancer": {"ingress": [{"ip": "1.1.1.1", "ports": [{"port": 80, "protocol": "TCP"}]}]}})]
    assert native.aggregate_status(ing, ports)["status"] == {"loadBalancer": {"ingress": [
        {"ip": "1.1.1.1", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]}]}}


def test_cronjob_aggregation() -> None:
    cj = obj("batch/v1", "CronJob")
    out = native.aggregate_status(cj, [
        item("a", {"active": [{"name": "j1"}], "lastScheduleTime": "2025-01-01T00:00:00Z"}),
        item("b", {"active": [{"name": "j2"}], "lastScheduleTime": "2025-01-01T01:00:00Z",
                   "lastSuccessfulTime": "2024-12-31T00:00:00Z"})])
    assert out["status"] == {"active": [{"name": "j1"}, {"name": "j2"}], "lastScheduleTime": "2025-01-01T01:00:00Z",
                             "lastSuccessfulTime": "2024-12-31T00:00:00Z"}


@pytest.mark.parametrize(
    ("phases", "expected"),
    [(["Bound", "Bound"], "Bound"), (["Pending", "Bound"], "Pending"), (["Pending", "Lost", "Bound"], "Lost"),
     ([None, "Bound"], "Bound")],
)
def test_pvc_phase(phases: list[str | None], expected: str) -> None:
    items = [item(f"m{i}", None if p is None else {"phase": p}) for i, p in enumerate(phases)]
    out = native.aggregate_status(obj("v1", "PersistentVolumeClaim"), items)
    assert out["status"] == {"phase": expected}


@pytest.mark.parametrize(
    ("phases", "expected"),
    [(["Bound", "Released"], "Bound"), (["Available", "Bound"], "Available"), ([None, "Bound"], "Pending"),
     (["Pending", "Failed"], "Failed"), (["Released"], "Released")],
)
def test_pv_phase_priority(phases: list[str | None], expected: str) -> None:
    items = [item(f"m{i}", None if p is None else {"phase": p}) for i, p in enumerate(phases)]
    assert native.aggregate_status(obj("v1", "PersistentVolume"), items)["status"] == {"phase": expected}


def test_pdb_and_hpa_sums() -> None:
    pdb = obj("policy/v1", "PodDisruptionBudget")
    out = native.aggregate_status(pdb, [
        item("a", {"currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2, "disruptionsAllowed": 1,
                   "disruptedPods": {"p1": "2025-01-01T00:00:00Z"}}),
        item("b", {"currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1, "disruptionsAllowed": 0})])
    assert out["status"] == {"currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3, "disruptionsAllowed": 1,
                             "disruptedPods": {"a/p1": "2025-01-01T00:00:00Z"}}
    hpa = obj("autoscaling/v2", "HorizontalPodAutoscaler")
    out = native.aggregate_status(hpa, [item("a", {"currentReplicas": 2, "desiredReplicas": 3}),
                                        item("b", {"currentReplicas": 1, "desiredReplicas": 1})])
    assert out["status"] == {"currentReplicas": 3, "desiredReplicas": 4}


# ---------------------------------------------------------------------------- InterpretHealth


@pytest.mark.parametrize(
    ("replicas", "status", "healthy"),
    [
        (3, {"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 3}, True),
        (3, {"observedGeneration": 1, "updatedReplicas": 3, "availableReplicas": 3}, False),  # not observed
        (3, {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2}, False),  # rollout
        (3, {"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 2}, False),  # unavailable
        (None, {"observedGeneration": 2, "updatedReplicas": 0, "availableReplicas": 0}, True),
        (0, {"observedGeneration": 2}, True),
        (3, {"observedGeneration": 2, "updatedReplicas": 4, "availableReplicas": 4}, True),
    ],
)
@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_rollout_health(kind: str, replicas: int | None, status: dict, healthy: bool) -> None:
    assert native.interpret_health(workload(kind, replicas=replicas, generation=2, status=status)) is healthy


@pytest.mark.parametrize(
    ("status", "healthy"),
    [({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}, True),
     ({"observedGeneration": 0, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}, False),
     ({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 1, "numberAvailable": 1}, False),
     ({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 1}, False)],
)
def test_daemonset_health(status: dict, healthy: bool) -> None:
    assert native.interpret_health(workload("DaemonSet", generation=1, status=status)) is healthy


def test_replicaset_health() -> None:
    assert native.interpret_health(workload("ReplicaSet", replicas=2, generation=1,
                                            status={"observedGeneration": 1, "availableReplicas": 2}))
    assert not native.interpret_health(workload("ReplicaSet", replicas=2, generation=1,
                                                status={"observedGeneration": 1, "availableReplicas": 1}))


@pytest.mark.parametrize(
    ("phase", "ready", "healthy"),
    [("Succeeded", None, True), ("Running", "True", True), ("Running", "False", False), ("Running", None, False),
     ("Pending", "True", False), ("Failed", None, False)],
)
def test_pod_health(phase: str, ready: str | None, healthy: bool) -> None:
    status: dict = {"phase": phase}
    if ready is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": ready}]
    assert native.interpret_health(obj("v1", "Pod", status=status)) is healthy


def test_service_ingress_pvc_pdb_health() -> None:
    assert native.interpret_health(obj("v1", "Service", spec={"type": "ClusterIP"}))
    lb = obj("v1", "Service", spec={"type": "LoadBalancer"}, status={"loadBalancer": {}})
    assert not native.interpret_health(lb)
    lb["status"]["loadBalancer"]["ingress"] = [{"ports": []}, {"hostname": "lb.example"}]
    assert native.interpret_health(lb)
    assert not native.interpret_health(obj("networking.k8s.io/v1", "Ingress", status={"loadBalancer": {}}))
    assert native.interpret_health(obj("networking.k8s.io/v1", "Ingress",
                                       status={"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}))
    assert native.interpret_health(obj("v1", "PersistentVolumeClaim", status={"phase": "Bound"}))
    assert not native.interpret_health(obj("v1", "PersistentVolumeClaim", status={"phase": "Pending"}))
    assert native.interpret_health(obj("policy/v1", "PodDisruptionBudget",
                                       status={"currentHealthy": 2, "desiredHealthy": 2}))
    assert not native.interpret_health(obj("policy/v1", "PodDisruptionBudget",
                                           status={"currentHealthy": 1, "desiredHealthy": 2}))


def test_job_has_no_health_rule() -> None:
    with pytest.raises(InterpreterError):
        native.interpret_health(obj("batch/v1", "Job"))
