"""Node and resource summaries of a member (Cluster.status.nodeSummary / resourceSummary),
the status patch that publishes them, and the replica estimates the scheduler makes of them."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from flotilla.cluster.health import Collected, new_condition, plan_status
from flotilla.cluster.resources import (
    format_resource,
    is_node_ready,
    merge_patch_diff,
    node_allocatable,
    node_summary,
    pod_requests,
    pods_usage,
    project_node,
    project_pod,
    project_workload,
    same_projection,
    summarize,
    workload_pods,
    workloads_usage,
)
from flotilla.interpreter.native import pod_replica_requirements
from flotilla.scheduler import schedule
from flotilla.scheduler.estimation import general_estimate
from flotilla.scheduler.model import ReplicaRequirements, parse_cluster, parse_quantity

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
ZERO = {"cpu": "0", "ephemeral-storage": "0", "memory": "0", "pods": "0"}


def node(name: str, *, ready: str | None = "True", cpu: str = "8", memory: str = "32Gi",
         pods: str = "110") -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                              "capacity": {"cpu": cpu, "memory": memory, "pods": pods}}
    if ready is not None:
        status["conditions"] = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
    return {"metadata": {"name": name}, "status": status}


def container(cpu: str | None = None, memory: str | None = None, *, limits: dict[str, str] | None = None,
              name: str = "c") -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "nginx", "resources": resources}


def pod(node_name: str | None, *containers: dict[str, Any], phase: str = "Running", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": list(containers) or [container()], **spec}
    if node_name:
        s["nodeName"] = node_name
    return {"metadata": {"name": "p"}, "spec": s, "status": {"phase": phase}}


def workload(kind: str, replicas: int | None = 1, *containers: dict[str, Any], **spec: Any) -> tuple[str, str, dict]:
    group = "batch" if kind == "Job" else "apps"
    s: dict[str, Any] = {"template": {"spec": {"containers": list(containers) or [container()]}}, **spec}
    if replicas is not None and kind != "Job":
        s["replicas"] = replicas
    return group, kind, {"metadata": {"name": kind.lower()}, "spec": s}


# ============================================================================================ nodes


def test_node_summary_counts_ready_nodes_and_omits_zeros() -> None:
    nodes = [node("a"), node("b", ready="False"), node("c", ready="Unknown"), node("d", ready=None)]
    assert [is_node_ready(n) for n in nodes] == [True, False, False, False]
    assert node_summary(nodes) == {"totalNum": 4, "readyNum": 1}
    assert node_summary([node("x", ready="False")]) == {"totalNum": 1}
    assert node_summary([]) == {}


def test_allocatable_sums_ready_nodes_only_in_canonical_units() -> None:
    nodes = [node("a", cpu="8", memory="32Gi"), node("b", cpu="7500m", memory="1048576Ki"),
             node("down", ready="False", cpu="64", memory="1Ti")]
    assert node_allocatable(nodes) == {"cpu": "15500m", "memory": "33Gi", "pods": "220"}
    assert node_allocatable([node("a"), node("b"), node("c")]) == {"cpu": "24", "memory": "96Gi", "pods": "330"}
    assert node_allocatable([]) == {}
    broken = node("a")
    broken["status"]["allocatable"]["nvidia.com/gpu"] = "two"  # not a quantity: skipped
    assert node_allocatable([broken]) == {"cpu": "8", "memory": "32Gi", "pods": "110"}


def test_format_resource() -> None:
    assert format_resource("cpu", Fraction(3, 2)) == "1500m"
    assert format_resource("cpu", 24) == "24"
    assert format_resource("memory", 3 * 2**30) == "3Gi"
    assert format_resource("ephemeral-storage", 1000) == "1k"  # below 1024 bytes: decimal, as Kubernetes
    assert format_resource("hugepages-2Mi", 2 * 2**20) == "2Mi"
    assert format_resource("pods", 330) == "330"
    assert format_resource("nvidia.com/gpu", 4) == "4"
    assert format_resource("memory", 0) == "0"


# ============================================================================================ pods


def test_pod_requests_effective_rules() -> None:
    # containers add up; a missing request counts as the limit
    assert pod_requests({"containers": [container("250m", "64Mi"), container(limits={"cpu": "1"}, name="d")]}) \
        == {"cpu": Fraction(5, 4), "memory": 64 * 2**20}
    # the largest init container wins when larger than the sum; overhead is added
    spec = {"containers": [container("500m")], "initContainers": [container("2", name="i")],
            "overhead": {"cpu": "100m"}}
    assert pod_requests(spec) == {"cpu": Fraction(21, 10)}
    assert pod_requests({"containers": [container()]}) == {}
    assert pod_requests(None) == {}
    assert pod_requests({"containers": [{"name": "c", "resources": {"requests": "lots"}}]}) == {}


def test_pods_usage_splits_bound_pending_and_finished_pods() -> None:
    pods = [
        pod("n1", container("1", "1Gi")),
        pod("n2", container("500m")),
        pod(None, container("2", "2Gi"), phase="Pending"),  # not bound yet: allocating
        pod("n1", container("4"), phase="Succeeded"),  # finished: counts nowhere
        pod("n1", container("4"), phase="Failed"),
    ]
    allocated, allocating = pods_usage(pods)
    assert allocated == {"cpu": "1500m", "ephemeral-storage": "0", "memory": "1Gi", "pods": "2"}
    assert allocating == {"cpu": "2", "ephemeral-storage": "0", "memory": "2Gi", "pods": "1"}
    assert pods_usage([]) == (ZERO, ZERO)


# ============================================================================================ workloads


def test_workload_pods_per_kind() -> None:
    assert workload_pods(*workload("Deployment", 4)) == 4
    assert workload_pods(*workload("Deployment", None)) == 1  # replicas defaults to 1
    assert workload_pods(*workload("Deployment", 0)) == 0
    assert workload_pods(*workload("StatefulSet", 3)) == 3
    assert workload_pods(*workload("ReplicaSet", 2)) == 2
    owned = workload("ReplicaSet", 2)
    owned[2]["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d",
                                                "uid": "u", "controller": True}]
    assert workload_pods(*owned) == 0  # its Deployment is counted instead
    ds = workload("DaemonSet", None)
    assert workload_pods(*ds) == 0
    ds[2]["status"] = {"desiredNumberScheduled": 3}
    assert workload_pods(*ds) == 3
    assert workload_pods(*workload("Job", None)) == 1
    assert workload_pods(*workload("Job", None, parallelism=4)) == 4
    assert workload_pods(*workload("Job", None, parallelism=4, completions=2)) == 2
    job = workload("Job", None, parallelism=3, completions=5)
    job[2]["status"] = {"succeeded": 4}
    assert workload_pods(*job) == 1
    job[2]["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    assert workload_pods(*job) == 0
    assert workload_pods(*workload("Job", None, suspend=True)) == 0
    assert workload_pods("apps", "Unknown", {"spec": {"replicas": 3}}) == 0


def test_workloads_usage_is_replicas_times_template_requests() -> None:
    usage = workloads_usage([
        workload("Deployment", 3, container("1", "2Gi")),
        workload("StatefulSet", 2, container("250m")),
        workload("Deployment", 2),  # no requests: pods only
        workload("Deployment", 0, container("8")),
    ])
    assert usage == {"cpu": "3500m", "ephemeral-storage": "0", "memory": "6Gi", "pods": "7"}
    assert workloads_usage([]) == ZERO


def test_summarize_prefers_pods_and_falls_back_to_workloads_only_without_any_pod() -> None:
    nodes = [node("a"), node("b"), node("c")]
    busy = [workload("Deployment", 5, container("1"))]
    from_workloads = summarize(nodes, [], busy)
    assert not from_workloads.from_pods
    assert from_workloads.node_summary == {"totalNum": 3, "readyNum": 3}
    assert from_workloads.resource_summary == {
        "allocatable": {"cpu": "24", "memory": "96Gi", "pods": "330"},
        "allocated": {"cpu": "5", "ephemeral-storage": "0", "memory": "0", "pods": "5"},
        "allocating": ZERO,
    }
    # one real pod: the workloads are not counted any more (they would be counted twice)
    from_pods = summarize(nodes, [pod("a", container("2"))], busy)
    assert from_pods.from_pods
    assert from_pods.resource_summary["allocated"] == {"cpu": "2", "ephemeral-storage": "0", "memory": "0",
                                                       "pods": "1"}
    # no nodes: no allocatable at all (omitempty)
    assert "allocatable" not in summarize([], [], busy).resource_summary
    assert summarize([], []).node_summary == {}


# ============================================================================================ status patch


def test_merge_patch_diff() -> None:
    assert merge_patch_diff({"a": "1"}, {"a": "1"}) is None
    assert merge_patch_diff(None, {"a": "1"}) == {"a": "1"}
    assert merge_patch_diff(None, {}) == {}
    assert merge_patch_diff({"a": "1", "b": "2"}, {"a": "3"}) == {"a": "3", "b": None}
    assert merge_patch_diff({"x": {"cpu": "1", "gpu": "1"}, "y": {"cpu": "0"}},
                            {"x": {"cpu": "2"}, "y": {"cpu": "0"}}) == {"x": {"cpu": "2", "gpu": None}}
    assert merge_patch_diff({"x": "s"}, {"x": {"a": "1"}}) == {"x": {"a": "1"}}


READY = new_condition("Ready", "True", "ClusterReady", "cluster is healthy and ready to accept workloads")


def collected(nodes: list[dict[str, Any]], pods: list[dict[str, Any]] = (), workloads: Any = ()) -> Collected:
    return Collected("v1.37.0", [{"groupVersion": "v1"}], None, summarize(nodes, list(pods), workloads))


def test_plan_status_writes_summaries_once_and_only_what_changed() -> None:
    first = plan_status({}, READY, collected([node("a"), node("b")]), NOW)
    assert first is not None
    assert first["nodeSummary"] == {"totalNum": 2, "readyNum": 2}
    assert first["resourceSummary"] == {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "220"},
                                        "allocated": ZERO, "allocating": ZERO}
    status = {**first, "kubernetesVersion": "v1.37.0", "apiEnablements": [{"groupVersion": "v1"}]}
    status["resourceSummary"]["allocatableModelings"] = [{"grade": 0, "count": 2}]
    assert plan_status(status, READY, collected([node("a"), node("b")]), NOW) is None  # unchanged: no write

    # node b goes NotReady and a workload arrives: only the changed entries, allocatableModelings untouched
    patch = plan_status(status, READY, collected([node("a"), node("b", ready="False")], [],
                                                 [workload("Deployment", 2, container("1"))]), NOW)
    assert patch == {
        "nodeSummary": {"readyNum": 1},
        "resourceSummary": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                            "allocated": {"cpu": "2", "pods": "2"}},
    }
    # a resource that went away is removed with null; no nodes left at all removes allocatable
    patch = plan_status(status, READY, collected([]), NOW)
    assert patch is not None
    assert patch["nodeSummary"] == {"totalNum": None, "readyNum": None}
    assert patch["resourceSummary"] == {"allocatable": None}
    # summaries not collected (listing failed): nothing about them is written
    assert plan_status(status, READY, Collected("v1.37.0", [{"groupVersion": "v1"}]), NOW) is None


# ============================================================================================ estimates


def cluster_with(name: str, summaries: Any) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"syncMode": "Push"},
            "status": {"conditions": [{"type": "Ready", "status": "True"},
                                      {"type": "CompleteAPIEnablements", "status": "True"}],
                       "apiEnablements": [{"groupVersion": "apps/v1",
                                           "resources": [{"name": "deployments", "kind": "Deployment"}]}],
                       "nodeSummary": summaries.node_summary,
                       "resourceSummary": summaries.resource_summary}}


def requirements(*containers: dict[str, Any]) -> ReplicaRequirements:
    """What the detector puts into a binding for a pod template with these containers."""
    raw = pod_replica_requirements({"containers": list(containers)}) or {}
    return ReplicaRequirements({k: parse_quantity(v) for k, v in (raw.get("resourceRequest") or {}).items()})


THREE_NODES = [node("a"), node("b"), node("c")]


@pytest.mark.parametrize(
    ("running", "request_", "expected"),
    [
        ([], container("1"), 24),  # 3 nodes x 8 CPU, 1 CPU a replica
        ([workload("Deployment", 5, container("1"))], container("1"), 19),  # minus what runs already
        ([workload("Deployment", 5, container("1"))], container("1500m"), 12),  # floor(19 / 1.5)
        ([workload("Deployment", 2, container("1", "30Gi"))], container("1", "10Gi"), 3),  # memory-bound
        ([], container(), 330),  # no requests: pods left
        ([workload("Deployment", 320)], container(), 10),
    ],
)
def test_general_estimate_from_summaries(running: Any, request_: dict[str, Any], expected: int) -> None:
    cluster = parse_cluster(cluster_with("m1", summarize(THREE_NODES, [], running)))
    reqs = requirements(request_)
    assert general_estimate(cluster, reqs if reqs.resource_request else None) == expected


def test_dynamic_weights_divide_by_available_replicas() -> None:
    """The e2e set-up in small: equal members, one of them half full, 4 CPU a replica -> 3:6:6 available."""
    ballast = [workload("Deployment", 3, container("4"))]
    clusters = [cluster_with("member1", summarize(THREE_NODES, [], ballast)),
                cluster_with("member2", summarize(THREE_NODES, [])),
                cluster_with("member3", summarize(THREE_NODES, []))]
    rb = {"spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                "name": "dynamic", "uid": "u"},
                   "replicas": 5, "replicaRequirements": {"resourceRequest": {"cpu": "4"}},
                   "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2", "member3"]},
                                 "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                       "replicaDivisionPreference": "Weighted",
                                                       "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}}}
    result = schedule(rb, None, clusters, now=NOW)
    assert result.ok, result.message
    assert {c["name"]: c["replicas"] for c in result.target_clusters} == {"member1": 1, "member2": 2, "member3": 2}
    # 16 replicas exceed the 15 available
    rb["spec"]["replicas"] = 16
    failed = schedule(rb, None, clusters, now=NOW)
    assert not failed.ok and "Clusters available replicas 15 are not enough to schedule." in failed.message


# ============================================================================================ projections


def _with_noise(obj: dict[str, Any], rv: str = "7") -> dict[str, Any]:
    """``obj`` as a member serves it: metadata, labels, fields no summary reads."""
    out = {**obj, "apiVersion": "v1", "kind": "Thing"}
    out["metadata"] = {**obj.get("metadata", {}), "namespace": "default", "uid": "u-1", "resourceVersion": rv,
                       "labels": {"app": "x"}, "annotations": {"a": "b" * 100}, "managedFields": [{"manager": "m"}]}
    spec = out.get("spec")
    if isinstance(spec, dict):
        out["spec"] = {**spec, "nodeSelector": {"zone": "a"}, "tolerations": [{"key": "k"}], "selector": {"x": 1}}
        template = spec.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            out["spec"]["template"] = {"metadata": {"labels": {"app": "x"}},
                                       "spec": {**template["spec"], "volumes": [{"name": "v"}]}}
    status = out.get("status")
    if isinstance(status, dict):
        out["status"] = {**status, "readyReplicas": 1, "observedGeneration": 3}
        if isinstance(status.get("conditions"), list):
            out["status"]["conditions"] = [{**c, "reason": "R", "message": "m", "lastHeartbeatTime": "t"}
                                           for c in status["conditions"]]
    return out


NODES_CASES = [node("a"), node("b", ready="False"), node("c", ready=None, cpu="7500m"),
               {"metadata": {"name": "weird"}, "status": {"allocatable": {"cpu": "lots"}}}, {"metadata": {"name": "x"}}]
POD_CASES = [
    pod("n1", container("1", "1Gi")),
    pod(None, container("2", "2Gi"), phase="Pending"),
    pod("n1", container("4"), phase="Succeeded"),
    pod("n2", container("500m"), initContainers=[container("2", name="i")], overhead={"cpu": "100m"}),
    pod("n2", container(limits={"cpu": "1", "memory": "1Gi"})),
    pod("n1", {"name": "c", "resources": {"requests": "lots"}}),
    {"metadata": {"name": "no-spec"}, "status": {"phase": "Running"}},
    {"metadata": {"name": "bad-spec"}, "spec": "nonsense"},
]
WORKLOAD_CASES = [
    workload("Deployment", 3, container("1", "2Gi")),
    workload("Deployment", None, container("250m")),
    workload("StatefulSet", 2, container("250m"), initContainers=[container("1", name="i")]),
    workload("Job", None, container("1"), parallelism=3, completions=5),
    workload("Job", None, container("1"), suspend=True),
    ("apps", "DaemonSet", {"metadata": {"name": "ds"}, "spec": {"template": {"spec": {"containers": [container("1")]}}},
                           "status": {"desiredNumberScheduled": 3}}),
    ("batch", "Job", {"metadata": {"name": "done"}, "spec": {"template": {"spec": {"containers": [container("1")]}}},
                      "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}),
    ("apps", "Deployment", {"metadata": {"name": "no-template"}, "spec": {"replicas": 2}}),
    ("apps", "Deployment", {"metadata": {"name": "bad"}, "spec": {"replicas": 2, "template": "x"}}),
]


def test_projections_keep_exactly_what_the_summaries_read() -> None:
    owned = workload("ReplicaSet", 2, container("1"))
    owned[2]["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d",
                                                "uid": "u", "controller": True, "blockOwnerDeletion": True}]
    workloads = [*WORKLOAD_CASES, owned, workload("ReplicaSet", 2, container("1"))]
    full_nodes = [_with_noise(n) for n in NODES_CASES]
    full_pods = [_with_noise(p) for p in POD_CASES]
    full_workloads = [(g, k, _with_noise(o)) for g, k, o in workloads]
    projected_nodes = [project_node(n) for n in full_nodes]
    projected_pods = [project_pod(p) for p in full_pods]
    projected_workloads = [(g, k, project_workload(o)) for g, k, o in full_workloads]
    assert summarize(projected_nodes, projected_pods) == summarize(full_nodes, full_pods)
    assert summarize(projected_nodes, [], projected_workloads) == summarize(full_nodes, [], full_workloads)
    for (g, k, full), (_, _, projected) in zip(full_workloads, projected_workloads, strict=True):
        assert workload_pods(g, k, projected) == workload_pods(g, k, full), full["metadata"]["name"]
    # what a cache needs is kept, what no summary reads is not
    meta = projected_pods[0]["metadata"]
    assert meta == {"name": "p", "namespace": "default", "uid": "u-1", "resourceVersion": "7"}
    assert projected_workloads[-2][2]["metadata"]["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "Deployment", "controller": True}]
    assert "nodeSelector" not in projected_pods[0]["spec"] and "annotations" not in meta
    assert project_node(full_nodes[0])["status"] == {"conditions": [{"type": "Ready", "status": "True"}],
                                                     "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}


def test_same_projection_ignores_the_resource_version_only() -> None:
    a = project_workload(_with_noise(workload("Deployment", 3, container("1"))[2], rv="1"))
    b = project_workload(_with_noise(workload("Deployment", 3, container("1"))[2], rv="2"))
    assert a != b and same_projection(a, b)
    rolling, ready = (_with_noise(workload("Deployment", 3, container("1"))[2], rv=rv) for rv in ("3", "4"))
    rolling["status"] = {"readyReplicas": 1, "conditions": [{"type": "Available", "status": "False", "reason": "x"}]}
    ready["status"] = {"readyReplicas": 3, "availableReplicas": 3,
                       "conditions": [{"type": "Available", "status": "False", "reason": "y"}]}
    assert same_projection(project_workload(rolling), project_workload(ready))  # nothing a summary reads changed
    c = project_workload(_with_noise(workload("Deployment", 4, container("1"))[2], rv="3"))
    assert not same_projection(a, c)
    heartbeat = _with_noise(node("a"), rv="9")
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "later"
    assert same_projection(project_node(_with_noise(node("a"))), project_node(heartbeat))
