"""The WorkloadRebalancer controller on a real control plane (apps.karmada.io/v1alpha1).

Same set-up as ``test_detector.py``: an ApiServer and a ControllerManager in process, Clusters created
directly with a Ready status. With the detector and the scheduler running too, a rebalancer makes the
scheduler place a Divided/dynamic-weight binding afresh; alone, the controller's own writes are checked on
bindings the test writes itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS, WORKLOAD_REBALANCERS
from flotilla.kube.resources import DEPLOYMENTS
from tests.integration.controllers.test_detector import (
    NS,
    PPS,
    Plane,
    deployment,
    eventually,
    names,
    plane_fixture,  # noqa: F401 - the ``plane`` fixture
    policy,
    stays,
)

DYNAMIC = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
           "weightPreference": {"dynamicWeight": "AvailableReplicas"}}
DEPLOY_REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx", "namespace": NS}
MISSING_REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx-2", "namespace": NS}
ROLE_REF = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "reader"}


def rebalancer(name: str, workloads: list[dict[str, Any]], ttl: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"workloads": workloads}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
            "metadata": {"name": name}, "spec": spec}


async def finished(plane: Plane, name: str) -> dict[str, Any] | None:
    """The rebalancer once its status covers its current generation and has a finish time."""
    obj = await plane.maybe(WORKLOAD_REBALANCERS, name, None)
    if obj is None:
        return None
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"]["generation"] or not status.get("finishTime"):
        return None
    return obj


async def create_binding(plane: Plane, name: str, resource: dict[str, Any], *, namespace: str | None = NS,
                         triggered_at: str | None = None) -> dict[str, Any]:
    res = RESOURCE_BINDINGS if namespace else CLUSTER_RESOURCE_BINDINGS
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    spec: dict[str, Any] = {"resource": resource}
    if triggered_at:
        spec["rescheduleTriggeredAt"] = triggered_at
    return await plane.client.create(res, {"apiVersion": "work.karmada.io/v1alpha2", "kind": res.kind,
                                           "metadata": metadata, "spec": spec})


def results(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(w["workload"]["name"], w.get("result", ""), w.get("reason", ""))
            for w in obj["status"]["observedWorkloads"]]


async def test_rebalancer_makes_the_scheduler_divide_a_dynamic_weight_binding_afresh(plane: Plane) -> None:
    await plane.cluster("m1")
    await plane.cluster("m2")
    await plane.start(controllers=["detector", "scheduler", "workloadRebalancer"])
    await plane.client.create(DEPLOYMENTS, deployment(replicas=4))
    await plane.client.create(PPS, policy(placement={"clusterAffinity": {"clusterNames": ["m1", "m2"]},
                                                     "replicaScheduling": DYNAMIC}))

    async def spread() -> dict[str, Any] | None:
        rb = await plane.maybe(RESOURCE_BINDINGS, "nginx-deployment")
        return rb if rb and (rb.get("status") or {}).get("lastScheduledTime") and names(rb) == {"m1": 2, "m2": 2} \
            else None

    await eventually(spread, what="4 replicas divided 2:2")
    # everything moved to m2 (what an eviction from m1 leaves behind): Steady mode keeps it there
    await plane.client.patch(RESOURCE_BINDINGS, "nginx-deployment", {"spec": {"clusters": [{"name": "m2",
                                                                                          "replicas": 4}]}},
                             namespace=NS)

    async def still_on_m2() -> bool:
        rb = await plane.get(RESOURCE_BINDINGS, "nginx-deployment")
        return names(rb) == {"m2": 4}

    await stays(still_on_m2, for_=1.2)  # also puts the rebalancer's creation a second after the last schedule
    await plane.client.create(WORKLOAD_REBALANCERS, rebalancer("demo", [DEPLOY_REF]))

    async def rebalanced() -> dict[str, Any] | None:
        rb = await plane.get(RESOURCE_BINDINGS, "nginx-deployment")
        return rb if names(rb) == {"m1": 2, "m2": 2} else None

    rb = await eventually(rebalanced, what="the binding divided 2:2 again")
    done = await eventually(lambda: finished(plane, "demo"), what="the rebalancer finished")
    assert results(done) == [("nginx", "Successful", "")]
    created = done["metadata"]["creationTimestamp"]
    assert rb["spec"]["rescheduleTriggeredAt"] == created
    assert rb["status"]["lastScheduledTime"] >= created  # same format: RFC 3339 UTC, whole seconds


async def test_results_for_a_namespaced_a_cluster_scoped_and_a_missing_binding(plane: Plane) -> None:
    await create_binding(plane, "nginx-deployment", DEPLOY_REF)
    await create_binding(plane, "reader-clusterrole", ROLE_REF, namespace=None)
    await plane.start(controllers=["workloadRebalancer"])
    await plane.client.create(WORKLOAD_REBALANCERS, rebalancer("demo", [ROLE_REF, MISSING_REF, DEPLOY_REF]))
    done = await eventually(lambda: finished(plane, "demo"), what="the rebalancer finished")
    assert results(done) == [("nginx", "Successful", ""), ("nginx-2", "Failed", "ReferencedBindingNotFound"),
                             ("reader", "Successful", "")]
    assert done["status"]["observedWorkloads"][2]["workload"] == ROLE_REF  # no namespace for cluster-scoped
    created = done["metadata"]["creationTimestamp"]
    rb = await plane.get(RESOURCE_BINDINGS, "nginx-deployment")
    crb = await plane.get(CLUSTER_RESOURCE_BINDINGS, "reader-clusterrole", None)
    assert rb["spec"]["rescheduleTriggeredAt"] == created
    assert crb["spec"]["rescheduleTriggeredAt"] == created


async def test_a_later_trigger_on_the_binding_is_kept(plane: Plane) -> None:
    await create_binding(plane, "nginx-deployment", DEPLOY_REF, triggered_at="2999-01-01T00:00:00Z")
    before = await plane.get(RESOURCE_BINDINGS, "nginx-deployment")
    await plane.start(controllers=["workloadRebalancer"])
    await plane.client.create(WORKLOAD_REBALANCERS, rebalancer("demo", [DEPLOY_REF]))
    done = await eventually(lambda: finished(plane, "demo"), what="the rebalancer finished")
    assert results(done) == [("nginx", "Successful", "")]
    after = await plane.get(RESOURCE_BINDINGS, "nginx-deployment")
    assert after["spec"]["rescheduleTriggeredAt"] == "2999-01-01T00:00:00Z"
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_spec_update_adds_new_workloads_and_keeps_only_successful_removed_ones(plane: Plane) -> None:
    """Karmada e2e step 4: workloads {deploy, missing, role} -> {role, new}."""
    await create_binding(plane, "nginx-deployment", DEPLOY_REF)
    await create_binding(plane, "reader-clusterrole", ROLE_REF, namespace=None)
    await plane.start(controllers=["workloadRebalancer"])
    await plane.client.create(WORKLOAD_REBALANCERS, rebalancer("demo", [DEPLOY_REF, MISSING_REF, ROLE_REF]))
    first = await eventually(lambda: finished(plane, "demo"), what="the rebalancer finished")
    new_ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx-3", "namespace": NS}
    await create_binding(plane, "nginx-3-deployment", new_ref)
    await plane.client.patch(WORKLOAD_REBALANCERS, "demo", {"spec": {"workloads": [ROLE_REF, new_ref]}})

    async def updated() -> dict[str, Any] | None:
        obj = await finished(plane, "demo")
        return obj if obj and obj["metadata"]["generation"] == 2 else None

    done = await eventually(updated, what="the rebalancer finished its second generation")
    assert results(done) == [("nginx", "Successful", ""), ("nginx-3", "Successful", ""), ("reader", "Successful", "")]
    assert done["status"]["finishTime"] >= first["status"]["finishTime"]
    rb3 = await plane.get(RESOURCE_BINDINGS, "nginx-3-deployment")
    assert rb3["spec"]["rescheduleTriggeredAt"] == done["metadata"]["creationTimestamp"]


async def test_finished_rebalancer_is_deleted_after_its_ttl(plane: Plane) -> None:
    await create_binding(plane, "nginx-deployment", DEPLOY_REF)
    await plane.start(controllers=["workloadRebalancer"])
    await plane.client.create(WORKLOAD_REBALANCERS, rebalancer("short", [DEPLOY_REF], ttl=2))
    await plane.client.create(WORKLOAD_REBALANCERS, rebalancer("kept", [DEPLOY_REF]))
    await eventually(lambda: finished(plane, "short"), what="the rebalancer with a TTL finished")
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def gone() -> bool:
        return await plane.maybe(WORKLOAD_REBALANCERS, "short", None) is None

    await eventually(gone, within=10.0, what="the rebalancer deleted after its TTL")
    assert loop.time() - start >= 0.5  # not at once: the TTL counts from finishTime (whole seconds)
    assert await finished(plane, "kept") is not None  # without a TTL it stays

    # a TTL added later to a finished rebalancer that is long past it deletes it at once
    await plane.client.patch(WORKLOAD_REBALANCERS, "kept", {"spec": {"ttlSecondsAfterFinished": 0}})

    async def kept_gone() -> bool:
        return await plane.maybe(WORKLOAD_REBALANCERS, "kept", None) is None

    await eventually(kept_gone, what="the rebalancer deleted once a TTL of 0 was set")
