"""The scheduler controller (and the dependencies distributor) on a real control plane.

Same set-up as ``test_detector.py``: an ApiServer, the detector, the dependencies distributor and the
scheduler in a ControllerManager, Clusters created directly with a Ready status, labels and taints.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from types import SimpleNamespace
from typing import Any

from flotilla.api import labels as L
from flotilla.client import ApiException
from flotilla.failover.state import INJECTED_STATE_ANNOTATION
from flotilla.kube.resources import CONFIGMAPS, DEPLOYMENTS
from flotilla.policy.naming import depended_by_label_key
from flotilla.runtime.forward_first import ForwardFirst
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
    # a NoSchedule taint keeps new placements away but does not move what is there
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
    for _ in range(5):  # as the taint manager does: on the binding as it is now (its status is still being written)
        rb = await plane.client.get(RBS, "nginx-deployment", NS)
        assert names(rb) == {"m1": 3}
        try:
            await plane.client.patch(RBS, "nginx-deployment",
                                     {"spec": {"clusters": None, "gracefulEvictionTasks": [task]},
                                      "metadata": {"resourceVersion": rb["metadata"]["resourceVersion"]}},
                                     namespace=NS)
            break
        except ApiException as e:
            if e.status != 409:
                raise
    else:
        raise AssertionError("the binding kept changing: the eviction task could not be written")
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


# ------------------------------------------------------------------ fewer passes and writes, same results


async def _versions(plane: Plane, name: str, since: str, quiet: float = 0.4) -> list[dict[str, Any]]:
    """Every version of binding ``name`` after resourceVersion ``since``, until none came for ``quiet`` s."""
    out: list[dict[str, Any]] = []
    stream = plane.client.watch(RBS, NS, resource_version=since, field_selector=f"metadata.name={name}")
    try:
        while True:
            try:
                ev = await asyncio.wait_for(stream.__anext__(), quiet)
            except (TimeoutError, StopAsyncIteration):
                return out
            if ev.type == "MODIFIED":
                out.append(ev.object)
    finally:
        await stream.aclose()


async def test_a_new_result_is_confirmed_in_one_status_write(plane: Plane) -> None:
    """Karmada's next pass after its own spec write (generation + 1, same result) is made at once: the spec
    write is followed by one status write that already confirms the new generation."""
    for name in ("m1", "m2"):
        await plane.cluster(name)
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    spread = [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    await plane.client.create(PPS, policy(placement={"spreadConstraints": spread}))
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3}
    since = rb["metadata"]["resourceVersion"]
    collecting = asyncio.ensure_future(_versions(plane, "nginx-deployment", since))
    await asyncio.sleep(0.05)
    # what the taint manager does: m1 leaves spec.clusters with a graceful-eviction task
    task = {"fromCluster": "m1", "purgeMode": "Directly", "reason": "TaintUntolerated", "producer": "TaintManager",
            "creationTimestamp": "2024-01-01T00:00:00Z"}
    evicted = await plane.client.patch(RBS, "nginx-deployment", {
        "metadata": {"resourceVersion": since},
        "spec": {"clusters": None, "gracefulEvictionTasks": [task]}}, namespace=NS)
    versions = await collecting
    assert versions[0]["metadata"]["resourceVersion"] == evicted["metadata"]["resourceVersion"]
    spec_write, status_write = versions[1:]  # nothing in between, nothing after
    assert names(spec_write) == {"m2": 3}
    assert spec_write["metadata"]["generation"] == evicted["metadata"]["generation"] + 1
    assert spec_write["status"] == evicted["status"]
    assert status_write["metadata"]["generation"] == spec_write["metadata"]["generation"]
    assert status_write["status"]["schedulerObservedGeneration"] == spec_write["metadata"]["generation"]
    assert condition(status_write)["reason"] == "Success"
    # Karmada records an event for each of its two passes (aggregated into one Event with count 2)
    events = await eventually(lambda: plane.events("ScheduleBindingSucceed", "nginx-deployment"),
                              what="ScheduleBindingSucceed")
    moved = [e for e in events if e["message"].endswith("Result: {m2:3}")]
    assert moved and moved[0].get("count", 1) == 2


async def test_a_spec_write_conflict_is_decided_again_at_once(plane: Plane) -> None:
    """A 409 on the spec write (another controller wrote the binding meanwhile) reads the binding again and
    decides at once, without the rate-limited requeue."""
    await plane.cluster("m1")
    conflicts = 0
    patch = plane.client.patch

    async def patch_once_conflicting(res: Any, name: str, body: Any, **kw: Any) -> Any:
        nonlocal conflicts
        if res == RBS and kw.get("subresource") is None and conflicts == 0 and "clusters" in body.get("spec", {}):
            conflicts += 1
            raise ApiException(409, message="the object has been modified")
        return await patch(res, name, body, **kw)

    plane.client.patch = patch_once_conflicting  # type: ignore[method-assign]
    manager = await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.client.create(PPS, policy())
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3} and conflicts == 1
    scheduler = next(c for c in manager.controllers if c.name == "scheduler")
    assert scheduler.queue.retries == 0


async def test_bindings_enqueued_by_a_cluster_change_wait_behind_spec_changes(plane: Plane) -> None:
    """Karmada enqueues every binding a Cluster change may concern; those whose own spec changed go first."""
    for name in ("m1", "m2"):
        await plane.cluster(name)
    await plane.start(controllers=["detector"])
    await plane.client.create(PPS, policy(selectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}]))
    for i in range(4):
        await plane.client.create(DEPLOYMENTS, deployment(f"app{i}"))
    for i in range(4):
        await plane.binding(f"app{i}-deployment")
    ctx = plane.managers[0].ctx
    assert ctx is not None
    from flotilla.controllers.scheduler import SchedulerController

    sched = SchedulerController(ctx)
    sched.setup()
    assert await ctx.informers.wait_for_sync(5)
    while sched.queue.depth:  # the initial adds
        sched.queue.done(sched.queue.get_nowait())
    m1 = await plane.get(CLUSTERS, "m1", None)
    tainted = {**m1, "metadata": {**m1["metadata"], "generation": m1["metadata"]["generation"] + 1}}
    sched._on_cluster_update(m1, tainted)
    assert sched.queue.ready() == [f"{NS}/app{i}-deployment" for i in range(4)]
    old = sched.rbs.store.get(f"{NS}/app2-deployment")
    assert old is not None
    new = {**old, "metadata": {**old["metadata"], "generation": old["metadata"]["generation"] + 1}}
    sched._on_binding_update(old, new)
    assert sched.queue.ready() == [f"{NS}/app2-deployment", *(f"{NS}/app{i}-deployment" for i in (0, 1, 3))]
    assert sched.queue.adds == 8  # 4 initial + 4 from the cluster; the spec change only moved app2 up


async def _true(value: bool) -> bool:
    return value


async def test_a_pass_that_only_confirms_writes_the_held_scheduled_condition(plane: Plane) -> None:
    """Under load a pass writes spec.clusters and holds its status write back (forward first). A second pass of the
    binding before that write, with nothing to schedule (a Divided binding whose placement and replicas did not
    change), confirms the generation: it must write the held result with it, or the binding never gets its
    Scheduled condition (seen in the rebalancer e2e scenario)."""
    for name in ("m1", "m2"):
        await plane.cluster(name)
    await plane.start(controllers=["detector"])
    placement = {"clusterAffinity": {"clusterNames": ["m1", "m2"]},
                 "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}}
    await plane.client.create(PPS, policy(placement=placement))
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.binding("nginx-deployment")
    ctx = plane.managers[0].ctx
    assert ctx is not None
    from flotilla.controllers.scheduler import SchedulerController

    # a forward queue with a key ready all along: status writes are held (for up to a minute)
    busy = ForwardFirst(max_wait=60.0)
    busy.add_forward(SimpleNamespace(depth=1))
    sched = SchedulerController(dataclasses.replace(ctx, forward_first=busy))
    sched.setup()
    try:
        assert await ctx.informers.wait_for_sync(5)
        key = f"{NS}/nginx-deployment"
        await sched.reconcile(key)
        rb = await plane.get(RBS, "nginx-deployment")
        held = [c for c in (rb.get("status") or {}).get("conditions") or [] if c["type"] == "Scheduled"]
        assert sum(names(rb).values()) == 3 and not held  # spec written, status held
        await sched.reconcile(key)  # the confirmation pass
        rb = await plane.get(RBS, "nginx-deployment")
        assert rb["status"]["schedulerObservedGeneration"] == rb["metadata"]["generation"]
        cond = condition(rb)
        assert cond["status"] == "True" and cond["reason"] == "Success"
        assert rb["status"].get("lastScheduledTime")
    finally:
        await sched._held.close()


async def test_another_controllers_status_write_is_no_conflict_for_the_spec_write(plane: Plane) -> None:
    """The spec write is guarded by what the decision read (uid, generation, labels, the scheduler's status),
    not by the resourceVersion: a status write of another controller meanwhile does not send it round again."""
    for name in ("m1", "m2"):
        await plane.cluster(name)
    await plane.start(controllers=["detector"])
    placement = {"clusterAffinities": [{"affinityName": "primary", "clusterNames": ["m1"]},
                                       {"affinityName": "fallback", "clusterNames": ["m2"]}],
                 "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]}
    await plane.client.create(PPS, policy(placement=placement))
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.binding("nginx-deployment")
    ctx = plane.managers[0].ctx
    assert ctx is not None
    from flotilla.controllers.scheduler import SchedulerController

    # forward first off (Karmada's order): the status write follows the spec write in the same pass, whatever
    # keys the queues hold
    sched = SchedulerController(dataclasses.replace(ctx, forward_first=ForwardFirst(max_wait=0)))
    sched.setup()
    assert await ctx.informers.wait_for_sync(5)
    key = f"{NS}/nginx-deployment"
    await sched.reconcile(key)
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3} and rb["status"]["schedulerObservingAffinityName"] == "primary"

    task = {"fromCluster": "m1", "purgeMode": "Directly", "reason": "TaintUntolerated", "producer": "TaintManager",
            "creationTimestamp": "2024-01-01T00:00:00Z"}
    evicted = await plane.client.patch(RBS, "nginx-deployment", {
        "spec": {"clusters": None, "gracefulEvictionTasks": [task]}}, namespace=NS)
    # another controller writes the status: the decision below is made on the version before it
    await plane.client.patch(RBS, "nginx-deployment", {"status": {"aggregatedStatus": [{"clusterName": "m1"}]}},
                             namespace=NS, subresource="status")
    writes: list[tuple[str, str | None, int]] = []
    patch = plane.client.patch

    async def recording(res: Any, name: str, body: Any, **kw: Any) -> Any:
        try:
            out = await patch(res, name, body, **kw)
        except ApiException as e:
            writes.append((kw.get("patch_type", "merge"), kw.get("subresource"), e.status))
            raise
        writes.append((kw.get("patch_type", "merge"), kw.get("subresource"), 200))
        return out

    plane.client.patch = recording  # type: ignore[method-assign]
    clusters, parsed = sched._cluster_snapshot()
    await sched._schedule(key, RBS, evicted, clusters, parsed)
    assert writes == [("json", None, 200), ("json", "status", 200)]
    rb = await plane.get(RBS, "nginx-deployment")
    # until the cache has it, a pass decides on what the scheduler wrote last, not on an older version
    assert sched._written[key][1]["metadata"]["resourceVersion"] == rb["metadata"]["resourceVersion"]
    await eventually(lambda: _true(key not in sched._written), what="the cache catching up")
    assert names(rb) == {"m2": 3}
    assert rb["status"]["aggregatedStatus"] == [{"clusterName": "m1"}]
    assert rb["status"]["schedulerObservingAffinityName"] == "fallback"
    assert rb["status"]["schedulerObservedGeneration"] == rb["metadata"]["generation"]
    assert condition(rb)["reason"] == "Success"

    # a spec change meanwhile is a conflict: the decision is made again on the binding as it is now
    stale = await plane.client.patch(RBS, "nginx-deployment", {"spec": {"clusters": None}}, namespace=NS)
    await plane.client.patch(RBS, "nginx-deployment", {"spec": {"clusters": [{"name": "m2", "replicas": 3}]}},
                             namespace=NS)
    from flotilla.controllers.scheduler import _Changed

    writes.clear()
    clusters, parsed = sched._cluster_snapshot()
    try:
        await sched._schedule(key, RBS, stale, clusters, parsed)
    except _Changed as e:
        assert e.fresh is not None and e.fresh["metadata"]["generation"] == stale["metadata"]["generation"] + 1
    else:
        raise AssertionError("no conflict")
    assert writes == [("json", None, 422)]
    now = await plane.get(RBS, "nginx-deployment")

    async def cache_caught_up() -> bool:
        cached = sched.rbs.store.get(key)
        return cached is not None and cached["metadata"]["resourceVersion"] == now["metadata"]["resourceVersion"]

    await eventually(cache_caught_up, what="the cache at the binding's latest version")
    await sched.reconcile(key)
    rb = await plane.get(RBS, "nginx-deployment")
    assert names(rb) == {"m2": 3} and rb["status"]["schedulerObservedGeneration"] == rb["metadata"]["generation"]


async def test_under_load_spec_clusters_is_written_first_and_the_scheduled_condition_once_the_queues_are_done(
        plane: Plane) -> None:
    """While a forward queue has keys ready, the scheduler writes ``spec.clusters`` (what the binding controller
    renders Works from) at once and leaves the ``Scheduled`` condition and ``schedulerObservedGeneration`` as a
    reporting pass; once the queues are done, the status confirms the generation as on an idle system."""
    await plane.cluster("m1")
    manager = await plane.start()
    assert manager.ctx is not None
    gate = manager.ctx.forward_first
    gate.max_wait, gate.trickle = 60.0, 0  # reports wait for the queues, however long (no trickle place)
    load = SimpleNamespace(depth=1)  # another forward controller with keys ready
    gate.add_forward(load)
    await plane.client.create(PPS, policy())
    await plane.client.create(DEPLOYMENTS, deployment())

    async def placed() -> dict[str, Any] | None:
        rb = await plane.maybe(RBS, "nginx-deployment")
        return rb if rb is not None and names(rb) == {"m1": 3} else None

    rb = await eventually(placed, what="spec.clusters written")
    assert not any(c["type"] == "Scheduled" for c in (rb.get("status") or {}).get("conditions") or [])
    await stays(lambda: _not_yet_scheduled(plane), for_=0.3)
    load.depth = 0
    rb = await eventually(lambda: scheduled(plane), what="the Scheduled condition once the queues are done")
    assert rb["status"]["schedulerObservedGeneration"] == rb["metadata"]["generation"]
    assert condition(rb)["reason"] == "Success"
    assert await plane.events("ScheduleBindingSucceed", "nginx-deployment")


async def _not_yet_scheduled(plane: Plane) -> bool:
    rb = await plane.get(RBS, "nginx-deployment")
    return not any(c["type"] == "Scheduled" for c in (rb.get("status") or {}).get("conditions") or [])


async def test_workers_are_the_controllers_own_or_concurrent_syncs_when_more(plane: Plane) -> None:
    await plane.start(controllers=["detector"])
    ctx = plane.managers[0].ctx
    assert ctx is not None
    from dataclasses import replace

    from flotilla.controllers.scheduler import SchedulerController
    from flotilla.runtime.base import ControllerContext

    def with_syncs(n: int) -> ControllerContext:
        return replace(ctx, options=replace(ctx.options, concurrent_syncs=n))

    assert SchedulerController(with_syncs(5)).worker_count() == SchedulerController.workers
    assert SchedulerController(with_syncs(100)).worker_count() == 100
    detector = plane.managers[0].controllers[0]
    assert detector.worker_count() == max(type(detector).workers, ctx.options.concurrent_syncs)


async def test_a_result_leading_to_a_state_injection_carries_the_injected_state_record(plane: Plane) -> None:
    """D4: the spec write that places a stateful failover on its new cluster also records the state the binding
    controller injects there (the record it would write before its Works): one binding write less."""
    for name in ("m1", "m2"):
        await plane.cluster(name)
    await plane.start()
    await plane.client.create(DEPLOYMENTS, deployment())
    spread = [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    await plane.client.create(PPS, policy(placement={"spreadConstraints": spread}))
    rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
    assert names(rb) == {"m1": 3}
    task = {"fromCluster": "m1", "purgeMode": "Directly", "reason": "TaintUntolerated", "producer": "TaintManager",
            "creationTimestamp": "2024-01-01T00:00:00Z", "clustersBeforeFailover": ["m1"],
            "preservedLabelState": {"example.io/job-id": "cafe"}}
    await plane.client.patch(RBS, "nginx-deployment", {
        "metadata": {"resourceVersion": rb["metadata"]["resourceVersion"]},
        "spec": {"clusters": None, "gracefulEvictionTasks": [task]}}, namespace=NS)

    async def moved() -> dict[str, Any] | None:
        got = await plane.client.get(RBS, "nginx-deployment", NS)
        return got if names(got) == {"m2": 3} else None

    rb = await eventually(moved, what="rescheduled to m2")
    record = json.loads(rb["metadata"]["annotations"][INJECTED_STATE_ANNOTATION])
    assert {k: record[k] for k in ("cluster", "labels", "fromCluster")} == {
        "cluster": "m2", "labels": {"example.io/job-id": "cafe"}, "fromCluster": "m1"}


class _Overtaken:
    """A scheduler's client whose next status write of a binding first lets ``meanwhile`` run: the write was
    decided on a version that another writer's pass then overtook (what a replica's informer, behind the other
    replica's writes, gives after a change of leader). Records the status of each status write."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.meanwhile: Any = None
        self.status_writes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def patch(self, res: Any, name: str, body: Any, **kw: Any) -> Any:
        if kw.get("subresource") != "status":
            return await self._client.patch(res, name, body, **kw)
        if self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            await meanwhile()
        try:
            out = await self._client.patch(res, name, body, **kw)
        except ApiException as e:
            self.status_writes.append(e.status)
            raise
        self.status_writes.append(200)
        return out


async def test_a_held_status_write_never_moves_scheduler_observed_generation_back(plane: Plane) -> None:
    """Two schedulers on one binding, as the two replicas of an HA controller-manager around a change of leader:
    scheduler A holds its status write back under load; before it lands, scheduler B schedules a newer generation
    of the binding and records it. A's held write (decided on the older version) must then not replace B's
    ``schedulerObservedGeneration`` with its own older one: the graceful-eviction controller would wait for its
    timeout. Twice: the first write carries the Scheduled condition (the resourceVersion precondition guards it),
    the second only the scheduler's own fields (the JSON patch's tests guard it)."""
    for name in ("m1", "m2"):
        await plane.cluster(name)
    await plane.start(controllers=["detector"])
    placement = {"clusterAffinity": {"clusterNames": ["m1", "m2"]},
                 "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}}
    await plane.client.create(PPS, policy(placement=placement))
    await plane.client.create(DEPLOYMENTS, deployment())
    first = await plane.binding("nginx-deployment")
    ctx = plane.managers[0].ctx
    assert ctx is not None
    from flotilla.controllers.scheduler import SchedulerController

    load = SimpleNamespace(depth=1)  # a forward queue with a key ready: A's status writes are held
    busy = ForwardFirst(max_wait=60.0, trickle=0)
    busy.add_forward(load)
    a = SchedulerController(dataclasses.replace(ctx, forward_first=busy))
    overtaken = _Overtaken(ctx.client)
    a.client = overtaken
    b = SchedulerController(dataclasses.replace(ctx, forward_first=ForwardFirst(max_wait=0)))
    a.setup()
    b.setup()
    key = f"{NS}/nginx-deployment"
    observed: list[int] = []

    async def watch_observed() -> None:
        stream = plane.client.watch(RBS, NS, resource_version=first["metadata"]["resourceVersion"],
                                    field_selector="metadata.name=nginx-deployment")
        try:
            async for ev in stream:
                value = ((ev.object or {}).get("status") or {}).get("schedulerObservedGeneration")
                if ev.type == "MODIFIED" and value is not None:
                    observed.append(value)
        finally:
            await stream.aclose()

    async def cached_generation_above(generation: int) -> bool:
        cached = a.rbs.store.get(key)
        return cached is not None and cached["metadata"]["generation"] > generation

    async def scale(replicas: int) -> None:
        before = (await plane.get(RBS, "nginx-deployment"))["metadata"]["generation"]
        await plane.client.patch(DEPLOYMENTS, "nginx", {"spec": {"replicas": replicas}}, namespace=NS)
        await eventually(lambda: cached_generation_above(before), within=30, what="the binding's new generation")

    async def b_schedules_a_newer_generation(replicas: int) -> None:
        await scale(replicas)
        await b.reconcile(key)
        rb = await plane.get(RBS, "nginx-deployment")
        assert sum(names(rb).values()) == replicas
        assert rb["status"]["schedulerObservedGeneration"] == rb["metadata"]["generation"]
        recorded.append(rb["metadata"]["generation"])

    watching = asyncio.ensure_future(watch_observed())
    recorded: list[int] = []
    try:
        assert await ctx.informers.wait_for_sync(5)
        for replicas in (4, 6):  # the first held write with the Scheduled condition, the second without
            load.depth = 1
            if replicas == 6:
                await scale(5)
            await a.reconcile(key)  # spec.clusters written, the status write held
            assert key in a._held
            held = a._held._held[key]
            overtaken.meanwhile = functools.partial(b_schedules_a_newer_generation, replicas)
            writes = len(overtaken.status_writes)

            async def held_write_made(writes: int = writes) -> bool:  # and whatever followed it: the task is idle
                task = a._held._task
                return (key not in a._held and overtaken.meanwhile is None and len(overtaken.status_writes) > writes
                        and (task is None or task.done()))

            while a.queue.depth:  # A's own queue, which its workers (not started here) would empty
                a.queue.done(a.queue.get_nowait())
            load.depth = 0  # the queues are done: the held write goes out, and B's pass overtakes it
            await eventually(held_write_made, within=30, what="the held write")
            rb = await plane.get(RBS, "nginx-deployment")
            assert held.observed < recorded[-1]
            assert rb["status"]["schedulerObservedGeneration"] == recorded[-1] == rb["metadata"]["generation"]
            assert condition(rb)["reason"] == "Success"
        await eventually(lambda: _true(bool(observed) and observed[-1] == recorded[-1]), within=30,
                         what="the watch seeing the last version")
        assert observed == sorted(observed), observed  # never back
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await a._held.close()
        await b._held.close()


async def test_a_confirmation_overtaken_by_a_change_to_schedule_schedules_it(plane: Plane) -> None:
    """A pass with nothing to schedule confirms the generation with the resourceVersion precondition. When the
    binding changed meanwhile into one that needs scheduling (its replicas, here), the conflict's re-read is decided
    again and scheduled, not confirmed: a confirmation would record a generation no pass scheduled, and the
    graceful-eviction controller would take the scheduler as caught up."""
    for name in ("m1", "m2"):
        await plane.cluster(name)
    await plane.start(controllers=["detector"])
    placement = {"clusterAffinity": {"clusterNames": ["m1", "m2"]},
                 "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}}
    await plane.client.create(PPS, policy(placement=placement))
    await plane.client.create(DEPLOYMENTS, deployment())
    await plane.binding("nginx-deployment")
    ctx = plane.managers[0].ctx
    assert ctx is not None
    from flotilla.controllers.scheduler import SchedulerController

    sched = SchedulerController(dataclasses.replace(ctx, forward_first=ForwardFirst(max_wait=0)))
    overtaken = _Overtaken(ctx.client)
    sched.client = overtaken
    sched.setup()
    key = f"{NS}/nginx-deployment"
    try:
        assert await ctx.informers.wait_for_sync(5)
        await sched.reconcile(key)
        rb = await eventually(lambda: scheduled(plane), what="scheduled binding")
        generation = rb["metadata"]["generation"]
        # the generation unconfirmed (as a pass that was lost would leave it), nothing to schedule
        await plane.client.patch(RBS, "nginx-deployment", {"status": {"schedulerObservedGeneration": generation - 1}},
                                 namespace=NS, subresource="status")

        async def cached_unconfirmed() -> bool:
            cached = sched.rbs.store.get(key)
            return cached is not None and cached["status"]["schedulerObservedGeneration"] == generation - 1

        await eventually(cached_unconfirmed, what="the cache with the generation unconfirmed")

        async def replicas_change() -> None:
            await plane.client.patch(DEPLOYMENTS, "nginx", {"spec": {"replicas": 5}}, namespace=NS)

            async def binding_changed() -> bool:
                return (await plane.get(RBS, "nginx-deployment"))["metadata"]["generation"] > generation

            await eventually(binding_changed, within=30, what="the binding's new generation")

        overtaken.meanwhile = replicas_change
        overtaken.status_writes.clear()
        await sched.reconcile(key)
        assert overtaken.status_writes[0] == 409  # the confirmation, made on the version before the change
        rb = await plane.get(RBS, "nginx-deployment")
        assert sum(names(rb).values()) == 5
        assert rb["status"]["schedulerObservedGeneration"] == rb["metadata"]["generation"]
    finally:
        await sched._held.close()
