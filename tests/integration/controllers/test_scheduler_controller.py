"""The scheduler controller (and the dependencies distributor) on a real control plane.

Same set-up as ``test_detector.py``: an ApiServer, the detector, the dependencies distributor and the
scheduler in a ControllerManager, Clusters created directly with a Ready status, labels and taints.
"""

from __future__ import annotations

import json
from typing import Any

from flotilla.api import labels as L
from flotilla.client.resources import CONFIGMAPS, DEPLOYMENTS
from flotilla.policy.naming import depended_by_label_key
from tests.integration.controllers.test_detector import (
    CLUSTERS,
    NS,
    PPS,
    RBS,
    Plane,
    configmap,
    deployment,
    eventually,
    names,
    plane_fixture,  # noqa: F401 - the ``plane`` fixture
    policy,
    stays,
)

DIVIDED_STATIC = {
    "replicaSchedulingType": "Divided",
    "replicaDivisionPreference": "Weighted",
    "weightPreference": {"staticWeightList": [
        {"targetCluster": {"clusterNames": ["m1"]}, "weight": 1},
        {"targetCluster": {"clusterNames": ["m2"]}, "weight": 2},
    ]},
}


async def scheduled(plane: Plane, name: str = "nginx-deployment", *, reason: str = "Success") -> dict[str, Any] | None:
    """The binding once the scheduler has confirmed its current generation with ``reason``."""
    rb = await plane.maybe(RBS, name)
    if rb is None:
        return None
    status = rb.get("status") or {}
    cond = next((c for c in status.get("conditions") or [] if c["type"] == "Scheduled"), None)
    if cond is None or cond["reason"] != reason:
        return None
    if reason == "Success" and status.get("schedulerObservedGeneration") != rb["metadata"]["generation"]:
        return None
    return rb


def condition(rb: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in rb["status"]["conditions"] if c["type"] == "Scheduled")


async def test_duplicated_goes_to_every_matching_cluster(plane: Plane) -> None:
    await plane.cluster("m1", {"env": "prod"})
    await plane.cluster("m2", {"env": "prod"})
    await plane.cluster("m3", {"env": "dev"})
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    placement = {"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}}}
    await plane.client.create(PPS, policy(placement=placement))
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3, "m2": 3}
    cond = condition(rb)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True", "Success", "Binding has been scheduled successfully.")
    assert cond["lastTransitionTime"]
    assert rb["status"]["lastScheduledTime"]
    assert json.loads(rb["metadata"]["annotations"][L.POLICY_PLACEMENT_ANNOTATION]) == rb["spec"]["placement"]
    events = await eventually(lambda: plane.events("ScheduleBindingSucceed", "nginx-deployment"),
                              what="ScheduleBindingSucceed on the binding")
    assert events[0]["message"] == "Binding has been scheduled successfully. Result: {m1:3, m2:3}"
    assert await eventually(lambda: plane.events("ScheduleBindingSucceed", "nginx"),
                            what="ScheduleBindingSucceed on the template")


async def test_static_weights_divide_the_replicas(plane: Plane) -> None:
    for name in ("m1", "m2", "m3"):
        await plane.cluster(name)
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment(replicas=6))
    await plane.client.create(PPS, policy(placement={"replicaScheduling": DIVIDED_STATIC}))
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 2, "m2": 4}  # m3 matches no weight rule: dropped

    # scaling the template reschedules a Divided binding (replicas changed)
    await plane.client.patch(DEPLOYMENTS, "nginx", {"spec": {"replicas": 9}}, namespace=NS)

    async def rescheduled() -> bool:
        b = await scheduled(plane)
        return b is not None and names(b) == {"m1": 3, "m2": 6}

    await eventually(rescheduled, what="9 replicas divided 1:2")


async def test_spread_constraint_picks_one_cluster(plane: Plane) -> None:
    for name in ("m1", "m2", "m3"):
        await plane.cluster(name)
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    spread = [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    await plane.client.create(PPS, policy(placement={"spreadConstraints": spread}))
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3}  # equal scores and capacity: the first by name


async def test_tainted_clusters_are_not_chosen(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.cluster("m2", taints=[{"key": "maintenance", "value": "yes", "effect": "NoSchedule"}])
    await plane.cluster("m3", taints=[{"key": "dead", "effect": "NoExecute"}])
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy())
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3}

    # tolerating the NoSchedule taint lets m2 in
    tolerations = [{"key": "maintenance", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
    await plane.client.patch(PPS, "pp", {"spec": {"placement": {"clusterTolerations": tolerations}}}, namespace=NS)

    async def with_m2() -> bool:
        b = await scheduled(plane)
        return b is not None and names(b) == {"m1": 3, "m2": 3}

    await eventually(with_m2, what="m2 chosen once tolerated")


async def test_no_cluster_fit_clears_the_result_and_waits_for_a_cluster_change(plane: Plane) -> None:
    await plane.cluster("m1", {"env": "dev"})
    await plane.cluster("m2", {"env": "dev"})
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    placement = {"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}}}
    await plane.client.create(PPS, policy(placement=placement))
    rb = await eventually(lambda: scheduled(plane, reason="NoClusterFit"), what="NoClusterFit")
    cond = condition(rb)
    assert cond["status"] == "False"
    assert cond["message"].startswith("0/2 clusters are available")
    assert not rb["spec"].get("clusters")
    assert "lastScheduledTime" not in rb["status"]
    assert await eventually(lambda: plane.events("ScheduleBindingFailed", "nginx-deployment"),
                            what="ScheduleBindingFailed")
    # a Cluster status change (Ready flip) does not re-enqueue; a label change that matches does
    await plane.client.patch(CLUSTERS, "m2", {"metadata": {"labels": {"env": "prod"}}})
    rb = await eventually(lambda: scheduled(plane), what="scheduled after the label change")
    assert names(rb) == {"m2": 3}


async def test_cluster_taint_change_does_not_evict_an_existing_placement(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.cluster("m2")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy())
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3, "m2": 3}
    generation = rb["metadata"]["generation"]
    # a NoSchedule taint keeps new placements away but does not move what is there (§14 #3)
    await plane.client.patch(CLUSTERS, "m2", {"spec": {"taints": [
        {"key": L.TAINT_CLUSTER_NOT_READY, "effect": "NoSchedule"}]}})
    await plane.cluster("m3", taints=[{"key": "x", "effect": "NoSchedule"}])

    async def same() -> bool:
        b = await plane.get(RBS, "nginx-deployment")
        return names(b) == {"m1": 3, "m2": 3} and b["metadata"]["generation"] == generation

    await stays(same, 0.3)


async def test_unschedulable_when_clusters_have_no_room(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment(replicas=2000))
    dynamic = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
               "weightPreference": {"dynamicWeight": "AvailableReplicas"}}
    await plane.client.create(PPS, policy(placement={"replicaScheduling": dynamic}))
    rb = await eventually(lambda: scheduled(plane, reason="Unschedulable"), what="Unschedulable")
    assert condition(rb)["status"] == "False"
    assert not rb["spec"].get("clusters")


async def test_released_binding_is_not_scheduled_any_more(plane: Plane) -> None:
    await plane.cluster("m1", {"env": "prod"})
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy(placement={"clusterAffinity": {"labelSelector": {
        "matchLabels": {"env": "prod"}}}}))
    await eventually(lambda: scheduled(plane), what="scheduled binding")
    await plane.client.delete(PPS, "pp", NS)

    async def released() -> bool:
        b = await plane.get(RBS, "nginx-deployment")
        return L.PROPAGATION_POLICY_PERMANENT_ID_LABEL not in b["metadata"]["labels"]

    await eventually(released, what="binding released")
    await plane.cluster("m2", {"env": "prod"})
    await plane.client.patch(CLUSTERS, "m1", {"metadata": {"labels": {"extra": "x"}}})

    async def frozen() -> bool:
        return names(await plane.get(RBS, "nginx-deployment")) == {"m1": 3}

    await stays(frozen, 0.3)


# ============================================================================ dependencies (D15)


async def attached(plane: Plane, name: str = "cfg-configmap") -> dict[str, Any] | None:
    return await plane.maybe(RBS, name)


def required_clusters(rb: dict[str, Any], by: str = "nginx-deployment") -> list[str]:
    entry = next((r for r in rb["spec"].get("requiredBy") or [] if r["name"] == by), None)
    return [] if entry is None else [c["name"] for c in entry.get("clusters") or []]


async def test_configmap_follows_its_deployment(plane: Plane) -> None:
    for name in ("m1", "m2", "m3"):
        await plane.cluster(name)
    await plane.start()
    cm = await plane.client.create(CONFIGMAPS, configmap())
    await plane.client.create(DEPLOYMENTS, deployment(configmap="cfg"))
    spread = [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    await plane.client.create(PPS, policy(propagateDeps=True, placement={
        "clusterAffinity": {"clusterNames": ["m2", "m3"]}, "spreadConstraints": spread}))
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m2": 3}

    async def following(clusters: list[str]) -> dict[str, Any] | None:
        a = await attached(plane)
        return a if a is not None and required_clusters(a) == clusters else None

    dep = await eventually(lambda: following(["m2"]), what="attached binding for the ConfigMap")
    independent = await plane.get(RBS, "nginx-deployment")
    assert json.loads(independent["metadata"]["annotations"][L.DEPENDENCIES_ANNOTATION]) == [
        {"apiVersion": "v1", "kind": "ConfigMap", "namespace": NS, "name": "cfg"}]
    assert L.BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER in independent["metadata"]["finalizers"]
    assert dep["metadata"]["ownerReferences"][0]["uid"] == cm["metadata"]["uid"]
    assert dep["metadata"]["labels"][depended_by_label_key(NS, "nginx-deployment")] == \
        independent["metadata"]["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL]
    assert dep["spec"]["resource"]["kind"] == "ConfigMap"
    assert "placement" not in dep["spec"]  # attached: never scheduled itself
    assert "status" not in dep or not (dep["status"] or {}).get("conditions")

    # the workload moves: its ConfigMap moves with it
    await plane.client.patch(PPS, "pp", {"spec": {"placement": {
        "clusterAffinity": {"clusterNames": ["m3"]}, "spreadConstraints": spread}}}, namespace=NS)
    await eventually(lambda: following(["m3"]), what="ConfigMap follows to m3")


async def test_d15_dependencies_stay_with_the_old_copy_during_graceful_eviction(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.cluster("m2")
    await plane.start()
    await plane.client.create(CONFIGMAPS, configmap())
    await plane.client.create(DEPLOYMENTS, deployment(configmap="cfg"))
    spread = [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    await plane.client.create(PPS, policy(propagateDeps=True, placement={"spreadConstraints": spread}))
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3}
    await eventually(lambda: _required_is(plane, ["m1"]), what="ConfigMap in m1")

    # what the taint manager does on a NoExecute taint: m1 leaves spec.clusters, a Gracefully task keeps the
    # old copy there until the new one is healthy
    task = {"fromCluster": "m1", "purgeMode": "Gracefully", "replicas": 3, "reason": "TaintUntolerated",
            "producer": "TaintManager"}
    await plane.client.patch(RBS, "nginx-deployment", {"spec": {"clusters": None, "gracefulEvictionTasks": [task]},
                                                       "metadata": {"resourceVersion": rb["metadata"]["resourceVersion"]}},
                             namespace=NS)
    rb = await eventually(lambda: _scheduled_to(plane, {"m2": 3}), what="rescheduled to m2")
    await eventually(lambda: _required_is(plane, ["m2", "m1"]), what="ConfigMap in m2 and still in m1")

    # the eviction is over: the old copy goes, and the ConfigMap with it
    await plane.client.patch(RBS, "nginx-deployment", {"spec": {"gracefulEvictionTasks": None}}, namespace=NS)
    await eventually(lambda: _required_is(plane, ["m2"]), what="ConfigMap only in m2")


async def _required_is(plane: Plane, clusters: list[str]) -> bool:
    a = await attached(plane)
    return a is not None and required_clusters(a) == clusters


async def _scheduled_to(plane: Plane, expected: dict[str, int]) -> dict[str, Any] | None:
    b = await scheduled(plane)
    return b if b is not None and names(b) == expected else None


async def test_dependency_no_longer_required_is_detached(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(CONFIGMAPS, configmap())
    await plane.client.create(CONFIGMAPS, configmap("other"))
    await plane.client.create(DEPLOYMENTS, deployment(configmap="cfg"))
    await plane.client.create(PPS, policy(propagateDeps=True))
    await eventually(lambda: _required_is(plane, ["m1"]), what="attached binding")

    # the Deployment now reads another ConfigMap: the first one's attached binding goes, the other's comes
    await plane.client.patch(DEPLOYMENTS, "nginx", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.27", "envFrom": [{"configMapRef": {"name": "other"}}]}]}}}},
        namespace=NS, patch_type="strategic")
    await eventually(lambda: _attached_gone(plane, "cfg-configmap"), what="cfg detached")
    other = await eventually(lambda: attached(plane, "other-configmap"), what="other attached")
    assert required_clusters(other) == ["m1"]

    # propagateDeps switched off: everything is detached and the distributor's finalizer removed
    await plane.client.patch(PPS, "pp", {"spec": {"propagateDeps": False}}, namespace=NS)
    await eventually(lambda: _attached_gone(plane, "other-configmap"), what="other detached")

    async def finalizer_removed() -> bool:
        b = await plane.get(RBS, "nginx-deployment")
        return L.BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER not in b["metadata"]["finalizers"]

    await eventually(finalizer_removed, what="distributor finalizer removed")


async def _attached_gone(plane: Plane, name: str) -> bool:
    """Deleted; its binding-controller finalizer holds it until the binding controller removed its Works."""
    b = await plane.maybe(RBS, name)
    return b is None or bool(b["metadata"].get("deletionTimestamp"))


async def test_dependency_created_after_the_workload(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment(configmap="late"))
    await plane.client.create(PPS, policy(propagateDeps=True))
    await eventually(lambda: scheduled(plane), what="scheduled binding")
    await plane.client.create(CONFIGMAPS, configmap("late"))
    dep = await eventually(lambda: attached(plane, "late-configmap"), what="attached once the ConfigMap exists")
    assert required_clusters(dep) == ["m1"]


async def test_scheduler_error_is_retried_with_backoff(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.cluster("m2")
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    spread = [{"spreadByField": "cluster", "minGroups": 3, "maxGroups": 3}]
    await plane.client.create(PPS, policy(placement={"spreadConstraints": spread}))
    rb = await eventually(lambda: scheduled(plane, reason="SchedulerError"), what="SchedulerError")
    assert condition(rb)["status"] == "False"
    # a new cluster is no event for the binding (Karmada ignores cluster additions), but the retry finds it
    await plane.cluster("m3")
    rb = await eventually(lambda: scheduled(plane), within=15, what="scheduled on a retry")
    assert names(rb) == {"m1": 3, "m2": 3, "m3": 3}
