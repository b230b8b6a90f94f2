"""The binding and execution controllers against a control plane and two simulated members.

Clusters (Secret + Cluster, Ready written through /status), execution namespaces and bindings are
written by the test, so nothing here depends on the cluster controller, detector or scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from flotilla.api import labels as L
from flotilla.client import Client, Resource
from flotilla.controllers.execution import ExecutionController
from flotilla.kube.resources import DEPLOYMENTS, NAMESPACES
from flotilla.member.runner import MemberGroup
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import (
    CLUSTER_RESOURCE_BINDINGS,
    OVERRIDE_POLICIES,
    RESOURCE_BINDINGS,
    RESOURCE_INTERPRETER_CUSTOMIZATIONS,
    WORKS,
)
from flotilla.runtime.manager import ControllerManager
from tests.support.controllers import (
    Eventually,
    MembersPlane,
    events_by_reason,
    get_or_none,
    plane_with_members,
    set_ready,
)

E = TypeVar("E", bound="Env")

MEMBERS = ("member1", "member2")
WORK_NAME = generate_work_name("Deployment", "nginx", "default")
BINDING = "nginx-deployment"


eventually = Eventually(timeout=15.0)


def deployment(namespace: str = "default", replicas: int = 3, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": namespace, "labels": {"app": "nginx"},
                     **({"annotations": annotations} if annotations else {})},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}},
    }


@dataclass
class Env:
    cp: Client
    members: dict[str, Client]
    group: MemberGroup
    manager: ControllerManager

    async def set_ready(self, cluster: str, status: str) -> None:
        await set_ready(self.cp, cluster, status, reason="ClusterReady" if status == "True" else "ClusterNotReady",
                        message="set by the test", stamp="2025-01-01T00:00:00Z")

    async def create_binding(self, template: dict[str, Any], clusters: list[tuple[str, int]],
                             **spec: Any) -> dict[str, Any]:
        meta = template["metadata"]
        return await self.cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{meta['name']}-{template['kind'].lower()}", "namespace": meta["namespace"],
                         "finalizers": [L.BINDING_CONTROLLER_FINALIZER]},
            "spec": {"resource": {"apiVersion": template["apiVersion"], "kind": template["kind"],
                                  "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
                     "replicas": template["spec"]["replicas"],
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}},
                     "clusters": [{"name": n, "replicas": r} for n, r in clusters], **spec},
        })

    async def patch_binding(self, spec: dict[str, Any], name: str = BINDING, namespace: str = "default") -> None:
        await self.cp.patch(RESOURCE_BINDINGS, name, {"spec": spec}, namespace=namespace)

    async def work(self, cluster: str, name: str = WORK_NAME) -> dict[str, Any] | None:
        return await get_or_none(self.cp, WORKS, name, f"karmada-es-{cluster}")

    async def member_object(self, cluster: str, name: str = "nginx", namespace: str | None = "default",
                            res: Resource = DEPLOYMENTS) -> dict[str, Any] | None:
        return await get_or_none(self.members[cluster], res, name, namespace)

    async def applied(self, cluster: str, status: str = "True", name: str = WORK_NAME) -> dict[str, Any] | None:
        work = await self.work(cluster, name)
        for c in ((work or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == "Applied" and c.get("status") == status:
                return c
        return None

    async def events(self, reason: str) -> list[dict[str, Any]]:
        return await events_by_reason(self.cp, reason)


@contextlib.asynccontextmanager
async def running(tmp_path: Path, make: Callable[[MembersPlane, ControllerManager], E],
                  **config: Any) -> AsyncIterator[E]:
    """The binding and execution controllers on a control plane (``config``) whose MEMBERS are Ready Push
    clusters; ``make`` builds the Env."""
    async with plane_with_members(tmp_path, MEMBERS, **config) as plane:
        manager = ControllerManager(plane.cp, controllers=["binding", "execution"])
        env = make(plane, manager)
        for name in MEMBERS:
            await env.set_ready(name, "True")
        await manager.start()
        try:
            yield env
        finally:
            await manager.stop()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running(tmp_path, lambda plane, manager: Env(plane.cp, plane.members, plane.group, manager)) as env:
        yield env


async def test_divided_deployment_overrides_orphans_and_deletion(env: Env) -> None:
    template = await env.cp.create(DEPLOYMENTS, deployment())
    rb = await env.create_binding(template, [("member1", 2), ("member2", 1)])
    rb_id = rb["metadata"]["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL]

    # one Work per cluster, with the revised replicas
    for cluster, replicas in (("member1", 2), ("member2", 1)):
        work = await eventually(lambda c=cluster: env.work(c), what=f"the Work for {cluster}")
        assert work["metadata"]["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL] == rb_id
        assert work["metadata"]["labels"][L.WORK_PERMANENT_ID_LABEL]
        assert work["metadata"]["annotations"][L.RESOURCE_BINDING_NAME_ANNOTATION] == BINDING
        assert work["metadata"]["annotations"][L.CONFLICT_RESOLUTION_ANNOTATION] == "abort"
        assert L.EXECUTION_CONTROLLER_FINALIZER in work["metadata"]["finalizers"]
        (manifest,) = work["spec"]["workload"]["manifests"]
        assert manifest["spec"]["replicas"] == replicas
        assert "status" not in manifest and "uid" not in manifest["metadata"]

    # the Deployments appear in the members with those replicas and Karmada's metadata
    for cluster, replicas in (("member1", 2), ("member2", 1)):
        obj = await eventually(lambda c=cluster: env.member_object(c), what=f"the Deployment in {cluster}")
        assert obj["spec"]["replicas"] == replicas
        labels, annotations = obj["metadata"]["labels"], obj["metadata"]["annotations"]
        assert labels[L.MANAGED_LABEL] == "true" and labels[L.RESOURCE_BINDING_PERMANENT_ID_LABEL] == rb_id
        assert annotations[L.WORK_NAME_ANNOTATION] == WORK_NAME
        assert annotations[L.WORK_NAMESPACE_ANNOTATION] == f"karmada-es-{cluster}"
        assert annotations[L.RESOURCE_TEMPLATE_UID_ANNOTATION] == template["metadata"]["uid"]
        assert L.MANAGED_LABELS_ANNOTATION in annotations and L.MANAGED_ANNOTATIONS_ANNOTATION in annotations
        cond = await eventually(lambda c=cluster: env.applied(c), what=f"Applied=True for {cluster}")
        assert cond["reason"] == "AppliedSuccessful"
    assert await eventually(lambda: env.events("SyncWorkSucceed"), what="SyncWorkSucceed events")

    # an OverridePolicy for member2 changes the image there only
    await env.cp.create(OVERRIDE_POLICIES, {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "image-member2", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
                 "overrideRules": [{"targetCluster": {"clusterNames": ["member2"]},
                                    "overriders": {"imageOverrider": [
                                        {"component": "Tag", "operator": "replace", "value": "1.28"}]}}]},
    })

    def image(obj: dict[str, Any] | None) -> str:
        return (obj or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [{}])[0].get("image")

    async def overridden() -> bool:
        return image(await env.member_object("member2")) == "nginx:1.28"

    await eventually(overridden, what="the image override in member2")
    assert image(await env.member_object("member1")) == "nginx:1.27"
    work2, work1 = await env.work("member2"), await env.work("member1")
    assert work2 is not None and work1 is not None
    assert "image-member2" in work2["metadata"]["annotations"][L.APPLIED_OVERRIDES_ANNOTATION]
    assert L.APPLIED_OVERRIDES_ANNOTATION not in work1["metadata"]["annotations"]

    # a template change reaches the members (no detector runs here: the binding controller watches templates)
    await env.cp.patch(DEPLOYMENTS, "nginx", {"metadata": {"labels": {"tier": "web"}}}, namespace="default")

    async def relabelled() -> bool:
        objs = [await env.member_object(c) for c in MEMBERS]
        return all(o is not None and o["metadata"]["labels"].get("tier") == "web" for o in objs)

    await eventually(relabelled, what="the template's new label in both members")

    # member2 leaves spec.clusters: its Work and its Deployment go, member1 stays
    await env.patch_binding({"clusters": [{"name": "member1", "replicas": 3}]})

    async def member2_cleaned() -> bool:
        return await env.work("member2") is None and await env.member_object("member2") is None

    await eventually(member2_cleaned, what="member2's Work and Deployment deleted")

    async def member1_scaled() -> bool:
        obj = await env.member_object("member1")
        return obj is not None and obj["spec"]["replicas"] == 3

    await eventually(member1_scaled, what="member1 scaled to 3")

    # deleting the binding deletes its Works, the member objects, then the binding
    await env.cp.delete(RESOURCE_BINDINGS, BINDING, "default")

    async def all_gone() -> bool:
        return (await env.work("member1") is None and await env.member_object("member1") is None
                and await get_or_none(env.cp, RESOURCE_BINDINGS, BINDING, "default") is None)

    await eventually(all_gone, what="Works, member objects and the binding deleted")


async def test_unmanaged_object_is_not_taken_over_unless_overwrite(env: Env) -> None:
    existing = await env.members["member1"].create(DEPLOYMENTS, deployment(replicas=5))
    template = await env.cp.create(DEPLOYMENTS, deployment())
    await env.create_binding(template, [("member1", 3)])

    cond = await eventually(lambda: env.applied("member1", "False"), what="Applied=False")
    assert cond["reason"] == "AppliedFailed"
    assert cond["message"].startswith("Failed to apply all manifests (0/1): resource(kind=Deployment, default/nginx) "
                                      "already exists in the cluster member1")
    assert "Karmada will not manage this resource" in cond["message"]
    obj = await env.member_object("member1")
    assert obj is not None and obj["spec"]["replicas"] == 5
    assert L.MANAGED_LABEL not in obj["metadata"].get("labels", {})
    assert obj["metadata"].get("annotations", {}).get(L.WORK_NAME_ANNOTATION) is None
    assert obj["metadata"]["uid"] == existing["metadata"]["uid"]

    # conflictResolution: Overwrite on the binding lets the Work take the object over
    await env.patch_binding({"conflictResolution": "Overwrite"})
    await eventually(lambda: env.applied("member1", "True"), what="Applied=True after Overwrite")
    obj = await env.member_object("member1")
    assert obj is not None and obj["spec"]["replicas"] == 3
    assert obj["metadata"]["labels"][L.MANAGED_LABEL] == "true"

    # deleting the Work (the binding controller does not re-create it unprompted) removes the now managed object
    await env.cp.delete(WORKS, WORK_NAME, "karmada-es-member1")

    async def gone() -> bool:
        return await env.work("member1") is None and await env.member_object("member1") is None

    await eventually(gone, what="the Work and the member object deleted")


async def test_refused_object_is_never_deleted(env: Env) -> None:
    await env.members["member1"].create(DEPLOYMENTS, deployment(replicas=5))
    template = await env.cp.create(DEPLOYMENTS, deployment())
    await env.create_binding(template, [("member1", 3)])
    await eventually(lambda: env.applied("member1", "False"), what="Applied=False")
    await env.cp.delete(RESOURCE_BINDINGS, BINDING, "default")

    async def binding_and_work_gone() -> bool:
        return (await env.work("member1") is None
                and await get_or_none(env.cp, RESOURCE_BINDINGS, BINDING, "default") is None)

    await eventually(binding_and_work_gone, what="the binding and its Work deleted")
    obj = await env.member_object("member1")
    assert obj is not None and obj["spec"]["replicas"] == 5


async def test_template_conflict_annotation_wins(env: Env) -> None:
    await env.members["member1"].create(DEPLOYMENTS, deployment(replicas=5))
    template = await env.cp.create(DEPLOYMENTS, deployment(**{L.CONFLICT_RESOLUTION_ANNOTATION: "overwrite"}))
    await env.create_binding(template, [("member1", 3)])
    await eventually(lambda: env.applied("member1", "True"), what="Applied=True")
    obj = await env.member_object("member1")
    assert obj is not None and obj["spec"]["replicas"] == 3 and obj["metadata"]["labels"][L.MANAGED_LABEL] == "true"


async def test_drift_is_corrected_and_deleted_objects_come_back(env: Env) -> None:
    template = await env.cp.create(DEPLOYMENTS, deployment())
    await env.create_binding(template, [("member1", 3)])
    await eventually(lambda: env.applied("member1"), what="Applied=True")
    member = env.members["member1"]
    await member.patch(DEPLOYMENTS, "nginx", {"spec": {"replicas": 9}}, namespace="default")

    async def reverted() -> bool:
        obj = await env.member_object("member1")
        return obj is not None and obj["spec"]["replicas"] == 3

    await eventually(reverted, what="the member-side edit reverted")
    await member.delete(DEPLOYMENTS, "nginx", "default")

    async def recreated() -> bool:
        obj = await env.member_object("member1")
        return obj is not None and not obj["metadata"].get("deletionTimestamp")

    await eventually(recreated, what="the deleted member object re-created")


async def test_member_namespace_is_created(env: Env) -> None:
    await env.cp.create(NAMESPACES, {"metadata": {"name": "apps"}})
    template = await env.cp.create(DEPLOYMENTS, deployment(namespace="apps"))
    await env.create_binding(template, [("member2", 3)])
    name = generate_work_name("Deployment", "nginx", "apps")
    await eventually(lambda: env.applied("member2", name=name), what="Applied=True")
    obj = await env.member_object("member2", namespace="apps")
    assert obj is not None and obj["spec"]["replicas"] == 3
    ns = await env.member_object("member2", name="apps", namespace=None, res=NAMESPACES)
    assert ns is not None


async def test_not_ready_cluster_is_retried_and_blocks_deletion(env: Env) -> None:
    await env.set_ready("member2", "False")
    template = await env.cp.create(DEPLOYMENTS, deployment())
    await env.create_binding(template, [("member1", 2), ("member2", 1)])
    await eventually(lambda: env.applied("member1"), what="member1 applied")
    assert await env.work("member2") is not None
    await asyncio.sleep(0.5)
    assert await env.member_object("member2") is None  # not applied while not Ready
    await env.set_ready("member2", "True")
    await eventually(lambda: env.member_object("member2"), what="member2 applied after becoming Ready")

    # a Work of a cluster that is not Ready (and not being deleted) stays until the cluster is back
    await env.set_ready("member2", "False")
    await env.patch_binding({"clusters": [{"name": "member1", "replicas": 3}]})

    async def terminating() -> dict[str, Any] | None:
        work = await env.work("member2")
        return work if work is not None and work["metadata"].get("deletionTimestamp") else None

    await eventually(terminating, what="member2's Work terminating")
    await asyncio.sleep(0.5)
    assert await env.work("member2") is not None and await env.member_object("member2") is not None
    await env.set_ready("member2", "True")

    async def cleaned() -> bool:
        return await env.work("member2") is None and await env.member_object("member2") is None

    await eventually(cleaned, what="member2's Work and object deleted once Ready")


async def test_preserve_resources_on_deletion(env: Env) -> None:
    template = await env.cp.create(DEPLOYMENTS, deployment())
    await env.create_binding(template, [("member1", 3)], preserveResourcesOnDeletion=True)
    await eventually(lambda: env.applied("member1"), what="Applied=True")
    work = await env.work("member1")
    assert work is not None and work["spec"]["preserveResourcesOnDeletion"] is True
    await env.cp.delete(RESOURCE_BINDINGS, BINDING, "default")
    await eventually(lambda: _is_none(env.work("member1")), what="the Work deleted")
    obj = await env.member_object("member1")
    assert obj is not None and obj["spec"]["replicas"] == 3
    labels, annotations = obj["metadata"].get("labels", {}), obj["metadata"].get("annotations", {})
    assert labels == {"app": "nginx"}
    for key in (L.WORK_NAME_ANNOTATION, L.MANAGED_ANNOTATIONS_ANNOTATION, L.RESOURCE_BINDING_NAME_ANNOTATION):
        assert key not in annotations


async def test_suspended_dispatching_is_not_applied(env: Env) -> None:
    template = await env.cp.create(DEPLOYMENTS, deployment())
    await env.create_binding(template, [("member1", 3)], suspension={"dispatching": True})

    async def suspended() -> dict[str, Any] | None:
        work = await env.work("member1")
        for c in ((work or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == "Dispatching" and c.get("status") == "False":
                return c
        return None

    cond = await eventually(suspended, what="Dispatching=False")
    assert cond["reason"] == "SuspendDispatching"
    await asyncio.sleep(0.3)
    assert await env.member_object("member1") is None
    await env.patch_binding({"suspension": {"dispatching": False}})
    await eventually(lambda: env.member_object("member1"), what="applied once dispatching resumes")


async def test_cluster_resource_binding(env: Env) -> None:
    ns = await env.cp.create(NAMESPACES, {"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    crb = await env.cp.create(CLUSTER_RESOURCE_BINDINGS, {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
        "metadata": {"name": "team-a-namespace", "finalizers": [L.CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER]},
        "spec": {"resource": {"apiVersion": "v1", "kind": "Namespace", "name": "team-a",
                              "uid": ns["metadata"]["uid"]},
                 "clusters": [{"name": "member1"}, {"name": "member2"}]},
    })
    crb_id = crb["metadata"]["labels"][L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL]
    name = generate_work_name("Namespace", "team-a", "")
    for cluster in MEMBERS:
        await eventually(lambda c=cluster: env.applied(c, name=name), what=f"Applied=True in {cluster}")
        obj = await env.member_object(cluster, name="team-a", namespace=None, res=NAMESPACES)
        assert obj is not None
        assert obj["metadata"]["labels"][L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL] == crb_id
        assert obj["metadata"]["annotations"][L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION] == "team-a-namespace"
    await env.cp.delete(CLUSTER_RESOURCE_BINDINGS, "team-a-namespace")

    async def gone() -> bool:
        for cluster in MEMBERS:
            obj = await env.member_object(cluster, name="team-a", namespace=None, res=NAMESPACES)
            if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                return False
        return await get_or_none(env.cp, CLUSTER_RESOURCE_BINDINGS, "team-a-namespace", None) is None

    await eventually(gone, what="the namespaces deleted in the members and the CRB gone")


async def _is_none(aw: Awaitable[Any]) -> bool:
    return await aw is None


async def test_binding_deleted_without_finalizer_leaves_no_works(env: Env) -> None:
    template = await env.cp.create(DEPLOYMENTS, deployment())
    rb = await env.create_binding(template, [("member1", 3)])
    await eventually(lambda: env.applied("member1"), what="Applied=True")
    await env.cp.patch(RESOURCE_BINDINGS, BINDING, {"metadata": {"finalizers": None,
                                                                 "resourceVersion": None}}, namespace="default")
    await env.cp.delete(RESOURCE_BINDINGS, BINDING, "default")

    async def gone() -> bool:
        return await env.work("member1") is None and await env.member_object("member1") is None

    await eventually(gone, what="the Work and member object of a binding deleted outright")
    assert rb["metadata"]["finalizers"] == [L.BINDING_CONTROLLER_FINALIZER]


async def test_fenced_cluster_work_is_released_without_contacting_it(env: Env,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The D2 hook: when ``fenced`` says so, a Work of a cluster that is not Ready still finishes deleting."""
    monkeypatch.setattr(ExecutionController, "fenced",
                        lambda self, cluster: ((cluster or {}).get("metadata") or {}).get("name") == "member2")
    template = await env.cp.create(DEPLOYMENTS, deployment())
    await env.create_binding(template, [("member1", 2), ("member2", 1)])
    await eventually(lambda: env.applied("member2"), what="member2 applied")
    await env.group.members["member2"].set_fault("down")  # it cannot be contacted
    await env.set_ready("member2", "False")
    await env.patch_binding({"clusters": [{"name": "member1", "replicas": 3}]})
    await eventually(lambda: _is_none(env.work("member2")), what="member2's Work released")
    assert await eventually(lambda: env.events("WorkAbandoned"), what="the WorkAbandoned event")
    # the copy stayed; once the member answers again the recovery purge deletes it, still "fenced" (D17)
    await env.group.members["member2"].set_fault("recover")
    await eventually(lambda: _is_none(env.member_object("member2")), timeout=20.0,
                     what="the abandoned copy purged once member2 answers")


async def test_directly_purge_writes_the_new_work_as_soon_as_the_old_one_is_gone(env: Env) -> None:
    template = await env.cp.create(DEPLOYMENTS, deployment())
    await env.create_binding(template, [("member1", 3)])
    await eventually(lambda: env.applied("member1"), what="member1 applied")
    await env.set_ready("member1", "False")  # the old copy cannot be removed for now
    await env.patch_binding({"clusters": [{"name": "member2", "replicas": 3}], "gracefulEvictionTasks": [
        {"fromCluster": "member1", "purgeMode": "Directly", "reason": "TaintUntolerated", "producer": "TaintManager"}]})

    async def terminating() -> dict[str, Any] | None:
        work = await env.work("member1")
        return work if work is not None and work["metadata"].get("deletionTimestamp") else None

    await eventually(terminating, what="member1's Work terminating")
    await asyncio.sleep(0.3)
    assert await env.work("member2") is None  # Directly: nothing new while the old copy may still run
    await env.set_ready("member1", "True")
    loop = asyncio.get_running_loop()

    async def gone() -> bool:
        return await env.work("member1") is None

    await eventually(gone, what="member1's Work gone")
    gone_at = loop.time()
    await eventually(lambda: env.work("member2"), what="the Work for member2")
    # woken by the old Work's deletion, not by a poll (Karmada looks again every 5 s)
    assert loop.time() - gone_at < 2.0
    assert await env.member_object("member1") is None
    await eventually(lambda: env.member_object("member2"), what="the Deployment in member2")


async def test_a_burst_of_works_is_applied_concurrently_not_five_at_a_time(env: Env) -> None:
    # Every request to member1 now takes 1 s: applied five at a time (Karmada's --concurrent-work-syncs), 30 Works
    # would take 6 rounds of a create (the first one after a read): >= 7 s. The execution controller runs 32 at once.
    await env.group.members["member1"].faults.set("slow", latency=1.0)
    count = 30
    loop = asyncio.get_running_loop()
    for i in range(count):
        template = deployment()
        template["metadata"]["name"] = f"web-{i}"
        template = await env.cp.create(DEPLOYMENTS, template)
        await env.create_binding(template, [("member1", 3)])
    names = [generate_work_name("Deployment", f"web-{i}", "default") for i in range(count)]
    await eventually(lambda: _all(env.work("member1", n) for n in names), what="the Works")
    started = loop.time()

    async def all_applied() -> bool:
        return await _all(env.applied("member1", name=n) for n in names)

    await eventually(all_applied, timeout=30.0, what="the Works applied")
    elapsed = loop.time() - started
    assert elapsed < 5.0, elapsed


async def _all(awaitables: Any) -> bool:
    return all(await asyncio.gather(*awaitables))


async def test_an_endless_revise_replica_script_fails_the_build_not_the_event_loop(env: Env) -> None:
    """ReviseReplica customized with an endless loop: the binding controller's Work build runs in a Lua worker
    thread and fails at the 1 s budget (no Work, counted), while the event loop keeps ticking."""
    await env.cp.create(RESOURCE_INTERPRETER_CUSTOMIZATIONS, {
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "endless-revise"},
        "spec": {"target": {"apiVersion": "apps/v1", "kind": "Deployment"},
                 "customizations": {"replicaRevision": {
                     "luaScript": "function ReviseReplica(obj, replicas) while true do end end"}}},
    })
    await asyncio.sleep(0.5)  # the controllers' RIC informers follow the create
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    failures = env.manager.metrics.interpreter.customization_failures
    try:
        template = await env.cp.create(DEPLOYMENTS, deployment())
        await env.create_binding(template, [("member1", 2), ("member2", 1)])

        async def counted() -> bool:
            return failures.value("endless-revise", "ReviseReplica", "timeout") >= 2

        await eventually(counted, what="two ReviseReplica timeouts counted")
    finally:
        task.cancel()
    assert await env.work("member1") is None and await env.work("member2") is None
    # with the script on the event loop, the loop would stop for the whole 1 s budget of each call
    assert len(gaps) > 20
    assert max(gaps) < 0.5
