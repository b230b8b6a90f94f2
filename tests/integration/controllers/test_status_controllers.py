"""The work-status and binding-status controllers against a control plane and a simulated member.

The Cluster, Secret, binding, Work and member object are written by the test (with Karmada's labels and
annotations), so nothing here depends on the scheduler, binding or execution controllers.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.api.resources import (
    CLUSTER_RESOURCE_BINDINGS,
    RESOURCE_BINDINGS,
    RESOURCE_INTERPRETER_CUSTOMIZATIONS,
    WORKS,
)
from flotilla.client import Client
from flotilla.controllers.work_status import WorkStatusController
from flotilla.kube.resources import DEPLOYMENTS, NAMESPACES
from flotilla.member.runner import MemberGroup
from flotilla.policy.naming import generate_work_name
from flotilla.runtime.interpreter_failures import EVENT_REASON as CUSTOMIZATION_FAILED
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.members import CLUSTERS
from tests.support.controllers import Eventually, events_by_reason, plane_with_members, set_ready

EXEC_NS = "karmada-es-member1"
WORK_NAME = generate_work_name("Deployment", "nginx", "default")
RB_ID_LABEL = "resourcebinding.karmada.io/permanent-id"


eventually = Eventually(timeout=15.0)


def deployment(replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}},
    }


def member_manifest(rb_id: str) -> dict[str, Any]:
    obj = deployment()
    obj["metadata"]["labels"].update({"karmada.io/managed": "true", RB_ID_LABEL: rb_id})
    obj["metadata"]["annotations"] = {
        "work.karmada.io/namespace": EXEC_NS, "work.karmada.io/name": WORK_NAME,
        "resourcebinding.karmada.io/namespace": "default", "resourcebinding.karmada.io/name": "nginx-deployment",
        "resourcetemplate.karmada.io/generation": "1",
    }
    return obj


@dataclass
class Env:
    cp: Client
    member: Client
    members: MemberGroup
    manager: ControllerManager
    rb_id: str

    @property
    def work_status(self) -> WorkStatusController:
        return next(c for c in self.manager.controllers if isinstance(c, WorkStatusController))

    async def set_ready(self, status: str) -> None:
        await set_ready(self.cp, "member1", status,
                        reason="ClusterReady" if status == "True" else "ClusterNotReachable",
                        message="set by the test", stamp="2025-01-01T00:00:00Z")

    async def work(self) -> dict[str, Any]:
        return await self.cp.get(WORKS, WORK_NAME, EXEC_NS)

    async def binding(self) -> dict[str, Any]:
        return await self.cp.get(RESOURCE_BINDINGS, "nginx-deployment", "default")

    async def events(self, reason: str) -> list[dict[str, Any]]:
        return await events_by_reason(self.cp, reason)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with plane_with_members(tmp_path, ["member1"], name_labels=False) as plane:
        cp, member = plane.cp, plane.members["member1"]
        template = await cp.create(DEPLOYMENTS, deployment())
        rb = await cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": "nginx-deployment", "namespace": "default"},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                  "name": "nginx", "uid": template["metadata"]["uid"]},
                     "replicas": 2, "clusters": [{"name": "member1", "replicas": 2}]},
        })
        rb_id = rb["metadata"]["labels"][RB_ID_LABEL]
        await cp.patch(RESOURCE_BINDINGS, "nginx-deployment", {"status": {
            "schedulerObservedGeneration": rb["metadata"]["generation"],
            "lastScheduledTime": "2025-01-01T00:00:00Z",
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "Success",
                            "message": "Binding has been scheduled successfully.",
                            "lastTransitionTime": "2025-01-01T00:00:00Z"}]}},
            namespace="default", subresource="status")
        env = Env(cp, member, plane.group, ControllerManager(cp, controllers=["work-status", "binding-status"]),
                  rb_id)
        await env.set_ready("True")
        await cp.create(WORKS, {
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": WORK_NAME, "namespace": EXEC_NS, "labels": {RB_ID_LABEL: rb_id},
                         "annotations": {"resourcebinding.karmada.io/namespace": "default",
                                         "resourcebinding.karmada.io/name": "nginx-deployment"}},
            "spec": {"workload": {"manifests": [member_manifest(rb_id)]}},
        })
        await cp.patch(WORKS, WORK_NAME, {"status": {"conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedSuccessful",
             "message": "Manifest has been successfully applied", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}},
            namespace=EXEC_NS, subresource="status")
        await member.create(DEPLOYMENTS, member_manifest(rb_id))
        await env.manager.start()
        try:
            yield env
        finally:
            await env.manager.stop()


async def healthy_work(env: Env) -> dict[str, Any] | None:
    work = await env.work()
    statuses = (work.get("status") or {}).get("manifestStatuses") or []
    if statuses and statuses[0].get("health") == "Healthy" and statuses[0].get("status", {}).get(
            "availableReplicas") == 2:
        return work
    return None


async def test_member_status_flows_to_work_binding_and_template(env: Env) -> None:
    work = await eventually(lambda: healthy_work(env), what="Work manifestStatuses Healthy")
    entry = work["status"]["manifestStatuses"][0]
    assert entry["identifier"] == {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                                   "resource": "deployments", "namespace": "default", "name": "nginx"}
    assert entry["status"]["readyReplicas"] == 2 and entry["status"]["resourceTemplateGeneration"] == 1
    # the Applied condition (the execution controller's) is untouched
    assert work["status"]["conditions"][0]["type"] == "Applied"

    async def aggregated() -> dict[str, Any] | None:
        rb = await env.binding()
        items = (rb.get("status") or {}).get("aggregatedStatus") or []
        return rb if items and items[0].get("health") == "Healthy" else None

    rb = await eventually(aggregated, what="binding aggregatedStatus Healthy")
    item = rb["status"]["aggregatedStatus"][0]
    assert item["clusterName"] == "member1" and item["applied"] is True
    assert item["status"]["availableReplicas"] == 2
    conditions = {c["type"]: c for c in rb["status"]["conditions"]}
    assert conditions["FullyApplied"]["status"] == "True"
    assert conditions["FullyApplied"]["reason"] == "FullyAppliedSuccess"
    assert conditions["StatusUpToDate"]["status"] == "True"
    # the scheduler's fields are left alone
    assert conditions["Scheduled"]["status"] == "True"
    assert rb["status"]["schedulerObservedGeneration"] == rb["metadata"]["generation"]
    assert rb["status"]["lastScheduledTime"] == "2025-01-01T00:00:00Z"

    async def template_status() -> dict[str, Any] | None:
        t = await env.cp.get(DEPLOYMENTS, "nginx", "default")
        st = t.get("status") or {}
        return st if st.get("availableReplicas") == 2 else None

    st = await eventually(template_status, what="template status aggregated")
    assert st["replicas"] == 2 and st["readyReplicas"] == 2 and st["updatedReplicas"] == 2
    assert st["observedGeneration"] == 1
    assert await eventually(lambda: env.events("AggregateStatusSucceed"), what="AggregateStatusSucceed events")

    # converged: nothing is written again while nothing changes
    before = [(await env.work())["metadata"]["resourceVersion"], (await env.binding())["metadata"]["resourceVersion"],
              (await env.cp.get(DEPLOYMENTS, "nginx", "default"))["metadata"]["resourceVersion"]]
    await asyncio.sleep(0.6)
    after = [(await env.work())["metadata"]["resourceVersion"], (await env.binding())["metadata"]["resourceVersion"],
             (await env.cp.get(DEPLOYMENTS, "nginx", "default"))["metadata"]["resourceVersion"]]
    assert before == after


async def test_d14_stale_health_is_unknown_while_cluster_not_ready(env: Env) -> None:
    await eventually(lambda: healthy_work(env), what="Work manifestStatuses Healthy")

    async def item_health(health: str) -> dict[str, Any] | None:
        rb = await env.binding()
        items = (rb.get("status") or {}).get("aggregatedStatus") or []
        return rb if items and items[0].get("health") == health else None

    await eventually(lambda: item_health("Healthy"), what="Healthy before the outage")
    await env.set_ready("False")
    rb = await eventually(lambda: item_health("Unknown"), what="health Unknown while member1 is not Ready")
    item = rb["status"]["aggregatedStatus"][0]
    assert item["status"]["availableReplicas"] == 2, "the last status is kept"
    assert item["applied"] is True
    conditions = {c["type"]: c for c in rb["status"]["conditions"]}
    assert conditions["StatusUpToDate"]["status"] == "False"
    assert conditions["StatusUpToDate"]["reason"] == "ClusterNotReady"
    assert "member1" in conditions["StatusUpToDate"]["message"]
    assert conditions["FullyApplied"]["status"] == "True"
    assert await eventually(lambda: env.events("StatusStale"), what="StatusStale event")
    # the Work keeps the last observation; the member's informers are stopped while it is not Ready
    assert (await env.work())["status"]["manifestStatuses"][0]["health"] == "Healthy"
    await eventually(lambda: _no_watch(env), what="member informers stopped")

    await env.set_ready("True")
    rb = await eventually(lambda: item_health("Healthy"), what="Healthy again once member1 is Ready")
    assert {c["type"]: c["status"] for c in rb["status"]["conditions"]}["StatusUpToDate"] == "True"


async def _no_watch(env: Env) -> bool:
    return "member1" not in env.work_status._watches


async def test_member_status_changes_are_reflected(env: Env) -> None:
    await eventually(lambda: healthy_work(env), what="Work manifestStatuses Healthy")
    obj = await env.member.get(DEPLOYMENTS, "nginx", "default")
    obj["spec"]["replicas"] = 3
    await env.member.update(DEPLOYMENTS, obj)

    async def three() -> dict[str, Any] | None:
        rb = await env.binding()
        items = (rb.get("status") or {}).get("aggregatedStatus") or []
        ok = items and items[0].get("health") == "Healthy" and items[0]["status"].get("availableReplicas") == 3
        return rb if ok else None

    await eventually(three, what="3 available replicas aggregated")
    t = await eventually(lambda: _template_available(env.cp, 3), what="template shows 3 available replicas")
    assert t["status"]["replicas"] == 3


async def test_an_endless_health_script_leaves_the_loop_running_and_is_reported(env: Env) -> None:
    """InterpretHealth customized with an endless loop: each call ends at the 1 s budget in a Lua worker thread
    while the controllers' event loop keeps ticking; the health is Unknown, the failure counted and recorded as
    a Warning Event on the ResourceInterpreterCustomization."""
    await eventually(lambda: healthy_work(env), what="Work manifestStatuses Healthy")
    await env.cp.create(RESOURCE_INTERPRETER_CUSTOMIZATIONS, {
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "endless-health"},
        "spec": {"target": {"apiVersion": "apps/v1", "kind": "Deployment"},
                 "customizations": {"healthInterpretation": {
                     "luaScript": "function InterpretHealth(observedObj) while true do end end"}}},
    })
    informer = env.work_status.interpreters.informer
    await eventually(lambda: _true(informer.store.get("endless-health") is not None), what="RIC in the informer")
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    try:
        obj = await env.member.get(DEPLOYMENTS, "nginx", "default")
        obj["spec"]["replicas"] = 3
        await env.member.update(DEPLOYMENTS, obj)

        async def unknown() -> dict[str, Any] | None:
            work = await env.work()
            statuses = (work.get("status") or {}).get("manifestStatuses") or []
            return work if statuses and statuses[0].get("health") == "Unknown" else None

        await eventually(unknown, what="Work manifestStatuses health Unknown")
        failures = env.manager.metrics.interpreter.customization_failures
        assert failures.value("endless-health", "InterpretHealth", "timeout") >= 1
        events = await eventually(lambda: _nonempty(env.events(CUSTOMIZATION_FAILED)),
                                  what="InterpreterCustomizationFailed Event")
    finally:
        task.cancel()
    event = events[0]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "ResourceInterpreterCustomization"
    assert event["involvedObject"]["name"] == "endless-health"
    assert "InterpretHealth of apps/v1 Deployment default/nginx failed (timeout)" in event["message"]
    assert "1s time limit" in event["message"]
    # with the script on the event loop, the loop would stop for the whole 1 s budget of each call
    assert len(gaps) > 20
    assert max(gaps) < 0.5


async def _true(value: bool) -> bool | None:
    return True if value else None


async def _nonempty(found: Any) -> Any:
    items = await found
    return items or None


async def _template_available(cp: Client, n: int) -> dict[str, Any] | None:
    t = await cp.get(DEPLOYMENTS, "nginx", "default")
    return t if (t.get("status") or {}).get("availableReplicas") == n else None


async def test_deleted_member_object_asks_for_the_work_to_be_applied_again(env: Env) -> None:
    await eventually(lambda: healthy_work(env), what="Work manifestStatuses Healthy")
    await env.member.delete(DEPLOYMENTS, "nginx", "default")

    async def stamped() -> dict[str, Any] | None:
        work = await env.work()
        ann = (work.get("metadata") or {}).get("annotations") or {}
        return work if ann.get("work.flotilla.io/reapply-requested") else None

    work = await eventually(stamped, what="re-apply requested on the Work")
    assert work["metadata"]["generation"] == 1, "an annotation, not a spec change"
    events = await eventually(lambda: env.events("MemberObjectMissing"), what="MemberObjectMissing event")
    assert events[0]["involvedObject"]["name"] == WORK_NAME and events[0]["type"] == "Warning"

    # the execution controller's part, done by hand: the object comes back and its status is collected again
    first = work["metadata"]["annotations"]["work.flotilla.io/reapply-requested"]
    await env.member.create(DEPLOYMENTS, member_manifest(env.rb_id))
    await eventually(lambda: healthy_work(env), what="status collected from the re-created object")
    # a deleted object whose Work is being deleted is left alone (the execution controller deletes it then)
    await env.cp.patch(WORKS, WORK_NAME, {"metadata": {"finalizers": ["karmada.io/execution-controller"]}},
                       namespace=EXEC_NS)
    await env.cp.delete(WORKS, WORK_NAME, EXEC_NS)
    await env.member.delete(DEPLOYMENTS, "nginx", "default")
    await asyncio.sleep(0.5)
    work = await env.work()
    assert work["metadata"].get("deletionTimestamp")
    assert work["metadata"]["annotations"]["work.flotilla.io/reapply-requested"] == first
    missing = await env.events("MemberObjectMissing")
    assert len(missing) == 1 and missing[0].get("count", 1) == 1


async def test_informers_follow_the_cluster(env: Env) -> None:
    await eventually(lambda: healthy_work(env), what="Work manifestStatuses Healthy")
    watch = env.work_status._watches["member1"]
    assert set(watch.informers) == {("apps/v1", "Deployment")}
    inf = watch.informers[("apps/v1", "Deployment")]
    assert inf.label_selector == "karmada.io/managed=true"

    # an unmanaged object in the member is not cached
    other = copy.deepcopy(deployment())
    other["metadata"]["name"] = "unmanaged"
    await env.member.create(DEPLOYMENTS, other)
    await asyncio.sleep(0.3)
    assert inf.store.get("default/unmanaged") is None

    await env.cp.delete(CLUSTERS, "member1")
    await eventually(lambda: _no_watch(env), what="informers stopped for the deleted cluster")
    assert not inf.running

    async def unknown() -> dict[str, Any] | None:
        rb = await env.binding()
        items = (rb.get("status") or {}).get("aggregatedStatus") or []
        return rb if items and items[0].get("health") == "Unknown" else None

    await eventually(unknown, what="health Unknown once the cluster is gone")


async def test_cluster_resource_binding_of_a_kind_without_status_aggregation(env: Env) -> None:
    crb_label = "clusterresourcebinding.karmada.io/permanent-id"
    template = await env.cp.create(NAMESPACES, {"metadata": {"name": "demo"}})
    crb = await env.cp.create(CLUSTER_RESOURCE_BINDINGS, {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
        "metadata": {"name": "demo-namespace"},
        "spec": {"resource": {"apiVersion": "v1", "kind": "Namespace", "name": "demo",
                              "uid": template["metadata"]["uid"]},
                 "clusters": [{"name": "member1"}]},
    })
    crb_id = crb["metadata"]["labels"][crb_label]
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "demo", "labels": {"karmada.io/managed": "true", crb_label: crb_id},
        "annotations": {"work.karmada.io/namespace": EXEC_NS, "work.karmada.io/name": "demo-ns",
                        "clusterresourcebinding.karmada.io/name": "demo-namespace"}}}
    await env.cp.create(WORKS, {
        "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "demo-ns", "namespace": EXEC_NS, "labels": {crb_label: crb_id},
                     "annotations": {"clusterresourcebinding.karmada.io/name": "demo-namespace"}},
        "spec": {"workload": {"manifests": [manifest]}},
    })
    await env.cp.patch(WORKS, "demo-ns", {"status": {"conditions": [
        {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "",
         "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}, namespace=EXEC_NS, subresource="status")
    await env.member.create(NAMESPACES, manifest)

    async def collected() -> dict[str, Any] | None:
        got = await env.cp.get(CLUSTER_RESOURCE_BINDINGS, "demo-namespace")
        items = (got.get("status") or {}).get("aggregatedStatus") or []
        return got if items and items[0].get("health") == "Healthy" else None

    got = await eventually(collected, what="CRB aggregatedStatus")
    assert got["status"]["aggregatedStatus"][0]["status"] == {"phase": "Active"}
    work = await env.cp.get(WORKS, "demo-ns", EXEC_NS)
    assert work["status"]["manifestStatuses"][0]["identifier"] == {
        "ordinal": 0, "group": "", "version": "v1", "kind": "Namespace", "resource": "namespaces",
        "namespace": "", "name": "demo"}
    # the CRB was never scheduled here (no lastScheduledTime): Work events alone brought it up to date, and
    # FullyApplied reflects spec.clusters
    assert {c["type"]: c["status"] for c in got["status"]["conditions"]}["FullyApplied"] == "True"
    # Namespace has no AggregateStatus hook: the template's status is not written
    assert (await env.cp.get(NAMESPACES, "demo"))["metadata"]["resourceVersion"] == template["metadata"][
        "resourceVersion"]


def _fully_applied(rb: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (rb.get("status") or {}).get("conditions") or [] if c["type"] == "FullyApplied"), None)


async def _fully_applied_is(env: Env, status: str) -> dict[str, Any] | None:
    cond = _fully_applied(await env.binding())
    return cond if cond is not None and cond["status"] == status else None


async def test_a_new_target_cluster_turns_fully_applied_false_until_its_work_is_applied(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A binding that says FullyApplied True and gains a target cluster (as in a failover) says False at once:
    the Work of the new cluster is missing, and the wait for it must not keep the old True on show."""
    from flotilla.controllers import binding_status

    monkeypatch.setattr(binding_status, "FIRST_STATUS_WAIT", 60.0)
    await eventually(lambda: _fully_applied_is(env, "True"), what="FullyApplied True")
    await env.cp.patch(RESOURCE_BINDINGS, "nginx-deployment",
                       {"spec": {"clusters": [{"name": "member1", "replicas": 2}, {"name": "member2", "replicas": 2}]}},
                       namespace="default")
    cond = await Eventually(timeout=10.0)(lambda: _fully_applied_is(env, "False"),
                                          what="FullyApplied False well before the 60 s wait is over")
    assert "no Work yet for member2" in cond["message"]


async def test_a_target_cluster_without_its_work_yet_is_awaited_then_reported(env: Env,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A binding not fully applied gains a target cluster whose Work the binding controller has not created yet:
    its status is not rewritten with a transient "no Work yet" (the Work's first status follows as a rule, and
    one write serves both); when no Work comes within FIRST_STATUS_WAIT, the binding says so."""
    from flotilla.controllers import binding_status

    monkeypatch.setattr(binding_status, "FIRST_STATUS_WAIT", 3.0)
    await eventually(lambda: _fully_applied_is(env, "True"), what="FullyApplied True")
    await env.cp.patch(WORKS, WORK_NAME, {"status": {"conditions": [
        {"type": "Applied", "status": "False", "reason": "AppliedFailed", "message": "failed by the test",
         "lastTransitionTime": "2025-01-01T00:00:01Z"}]}}, namespace=EXEC_NS, subresource="status")
    await eventually(lambda: _fully_applied_is(env, "False"), what="FullyApplied False: not applied")
    await env.cp.patch(RESOURCE_BINDINGS, "nginx-deployment",
                       {"spec": {"clusters": [{"name": "member1", "replicas": 2}, {"name": "member2", "replicas": 2}]}},
                       namespace="default")
    for _ in range(20):  # 2 s: past the 1 s a spec change settles, within the 3 s wait
        cond = _fully_applied(await env.binding())
        assert cond is not None and "member2" not in cond["message"], cond
        await asyncio.sleep(0.1)

    async def reported() -> dict[str, Any] | None:
        cond = await _fully_applied_is(env, "False")
        return cond if cond is not None and "no Work yet for member2" in cond["message"] else None

    await eventually(reported, what="FullyApplied says so once the wait is over")
