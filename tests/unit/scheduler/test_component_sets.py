"""MultiplePodTemplatesScheduling in the scheduler: multi-component workloads estimated in whole component sets."""

from __future__ import annotations

from typing import Any

from flotilla.scheduler.estimation import general_component_sets, multi_template_applicable
from flotilla.scheduler.model import parse_binding_spec, parse_cluster
from flotilla.scheduler.schedule import schedule
from tests.unit.scheduler.builders import NOW, binding, cluster, single_cluster

COMPONENTS = [
    {"name": "jobmanager", "replicas": 1,
     "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "2Gi"}}},
    {"name": "taskmanager", "replicas": 2,
     "replicaRequirements": {"resourceRequest": {"cpu": "500m", "memory": "4Gi"}}},
]  # one set: 2 CPU, 10Gi, 3 pods


def flink_binding(placement: dict[str, Any] | None = None) -> dict[str, Any]:
    b = binding(single_cluster() if placement is None else placement, replicas=0,
                kind="FlinkDeployment", api_version="flink.apache.org/v1beta1")
    del b["spec"]["replicas"]
    b["spec"]["components"] = COMPONENTS
    return b


def sets(**cluster_kw: Any) -> int:
    spec = parse_binding_spec(flink_binding()["spec"])
    return general_component_sets(parse_cluster(cluster("m1", **cluster_kw)), spec.component_specs)


def test_sets_are_bounded_by_each_resource_and_by_pods() -> None:
    assert sets(allocatable={"cpu": "9", "memory": "100Gi"}) == 4  # CPU: 9 // 2
    assert sets(allocatable={"cpu": "100", "memory": "35Gi"}) == 3  # memory: 35 // 10
    assert sets(allocatable={"cpu": "100", "memory": "100Gi"}, pods=7) == 2  # pods: 7 // 3
    assert sets(allocatable={"cpu": "10", "memory": "100Gi"}, allocated={"cpu": "9"}) == 0
    assert sets(allocatable={"memory": "100Gi"}) == 0  # a requested resource the cluster does not list
    assert sets(pods=None) == 0


def test_only_several_components_bound_to_one_cluster_are_estimated_as_sets() -> None:
    assert multi_template_applicable(parse_binding_spec(flink_binding()["spec"]))
    two_clusters = {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 2}]}
    assert not multi_template_applicable(parse_binding_spec(flink_binding(two_clusters)["spec"]))
    one = flink_binding()
    one["spec"]["components"] = COMPONENTS[:1]
    assert not multi_template_applicable(parse_binding_spec(one["spec"]))


def test_with_the_gate_the_workload_goes_where_a_whole_set_fits() -> None:
    apis = [("flink.apache.org/v1beta1", "FlinkDeployment")]
    clusters = [cluster("a-small", allocatable={"cpu": "1", "memory": "100Gi"}, apis=apis),
                cluster("b-big", allocatable={"cpu": "64", "memory": "256Gi"}, apis=apis)]
    result = schedule(flink_binding(), None, clusters, now=NOW, multiple_pod_templates=True)
    assert [c.name for c in result.clusters] == ["b-big"]
    # as in Karmada, a multi-component workload gets its clusters without replica counts
    assert [c.replicas for c in result.clusters] == [0]
    # without the gate nothing is estimated: the first cluster by name wins, too small as it is
    off = schedule(flink_binding(), None, clusters, now=NOW)
    assert [c.name for c in off.clusters] == ["a-small"]
