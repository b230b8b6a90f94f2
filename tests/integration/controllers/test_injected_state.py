"""Injected state on a real control plane and two simulated members (D4, the injected-state record; D5, state
carried over consecutive failovers).

The binding, work-status, binding-status, execution, graceful-eviction and application-failover controllers
run; the test plays the scheduler (``spec.clusters``, ``schedulerObservedGeneration``, ``lastScheduledTime``)
and, where a failover trigger is not under test, writes the eviction task as the taint manager would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.client import Client
from flotilla.failover.state import EVENT_STATE_CARRIED_FORWARD, INJECTED_STATE_ANNOTATION
from flotilla.kube.resources import DEPLOYMENTS
from flotilla.kube.times import parse_time
from flotilla.member.simulated import ANNOTATION_READY_DELAY
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import RESOURCE_BINDINGS, WORKS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, events_by_reason, get_or_none, plane_with_members, set_ready

MEMBERS = ("member1", "member2")
CONTROLLERS = ["binding", "execution", "work-status", "binding-status", "graceful-eviction", "application-failover"]
BINDING = "app-deployment"
WORK_NAME = generate_work_name("Deployment", "app", "default")
JOB = "failover.example.io/job-id"
CKPT = "failover.example.io/checkpoint"
STAMP = "2025-01-01T00:00:00Z"


eventually = Eventually(timeout=20.0)


def deployment(image: str = "nginx:1.27", **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "app", "namespace": "default", "labels": {"app": "app"},
                     **({"annotations": annotations} if annotations else {})},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "app"}},
                 "template": {"metadata": {"labels": {"app": "app"}},
                              "spec": {"containers": [{"name": "app", "image": image}]}}},
    }


def directly_task(from_cluster: str, state: dict[str, str], before: list[str] | None = None,
                  producer: str = "TaintManager") -> dict[str, Any]:
    # stamped already, so the graceful-eviction controller's stamp does not bump the generation past the scheduler's
    return {"fromCluster": from_cluster, "purgeMode": "Directly", "reason": "TaintUntolerated", "producer": producer,
            "preservedLabelState": state, "clustersBeforeFailover": before if before is not None else [from_cluster],
            "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def manifest_labels(work: dict[str, Any] | None) -> dict[str, str]:
    manifests = (((work or {}).get("spec") or {}).get("workload") or {}).get("manifests") or [{}]
    return dict((manifests[0].get("metadata") or {}).get("labels") or {})


@dataclass
class Env:
    cp: Client
    members: dict[str, Client]
    managers: list[ControllerManager] = field(default_factory=list)

    async def start(self, **options: Any) -> ControllerManager:
        manager = await ControllerManager(self.cp, ControllerOptions(**options), controllers=CONTROLLERS).start()
        self.managers.append(manager)
        return manager

    async def template(self, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.cp.create(DEPLOYMENTS, obj)

    async def create_binding(self, template: dict[str, Any], cluster: str, tasks: list[dict[str, Any]],
                             annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
        meta = template["metadata"]
        rb = await self.cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": BINDING, "namespace": "default", "finalizers": [L.BINDING_CONTROLLER_FINALIZER],
                         **({"annotations": annotations} if annotations else {})},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                  "name": meta["name"], "uid": meta["uid"]},
                     "replicas": 1, "clusters": [{"name": cluster, "replicas": 1}],
                     "gracefulEvictionTasks": tasks, **spec},
        })
        await self.scheduled()
        return rb

    async def scheduled(self) -> None:
        """What the scheduler writes once it has placed the binding's current generation."""
        rb = await self.binding()
        await self.cp.patch(RESOURCE_BINDINGS, BINDING, {"status": {
            "schedulerObservedGeneration": rb["metadata"]["generation"], "lastScheduledTime": STAMP,
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "Success",
                            "message": "Binding has been scheduled successfully.", "lastTransitionTime": STAMP}]}},
            namespace="default", subresource="status")

    async def reschedule(self, spec: dict[str, Any]) -> None:
        await self.cp.patch(RESOURCE_BINDINGS, BINDING, {"spec": spec}, namespace="default")
        await self.scheduled()

    async def binding(self) -> dict[str, Any]:
        return await self.cp.get(RESOURCE_BINDINGS, BINDING, "default")

    async def annotation(self) -> str | None:
        return ((await self.binding())["metadata"].get("annotations") or {}).get(INJECTED_STATE_ANNOTATION)

    async def record(self) -> dict[str, Any] | None:
        raw = await self.annotation()
        return json.loads(raw) if raw else None

    async def tasks(self) -> list[dict[str, Any]]:
        return (await self.binding())["spec"].get("gracefulEvictionTasks") or []

    async def work(self, cluster: str) -> dict[str, Any] | None:
        return await get_or_none(self.cp, WORKS, WORK_NAME, f"karmada-es-{cluster}")

    async def member_object(self, cluster: str) -> dict[str, Any] | None:
        return await get_or_none(self.members[cluster], DEPLOYMENTS, "app", "default")

    async def health(self, cluster: str) -> str | None:
        for item in (await self.binding()).get("status", {}).get("aggregatedStatus") or []:
            if item.get("clusterName") == cluster:
                return item.get("health")
        return None

    async def events(self, reason: str) -> list[dict[str, Any]]:
        return await events_by_reason(self.cp, reason)

    async def rendered_after_template_change(self, cluster: str) -> dict[str, Any]:
        """Change the template and wait for the Work to follow: proof of a render from the current binding."""
        await self.cp.patch(DEPLOYMENTS, "app", {"metadata": {"labels": {"tier": "web"}}}, namespace="default")

        async def follows() -> dict[str, Any] | None:
            work = await self.work(cluster)
            return work if manifest_labels(work).get("tier") == "web" else None

        return await eventually(follows, what=f"the Work in {cluster} after the template change")


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with plane_with_members(tmp_path, MEMBERS) as plane:
        env = Env(plane.cp, plane.members)
        try:
            for name in MEMBERS:
                await set_ready(plane.cp, name, "True", reason="ClusterReady", message="set by the test", stamp=STAMP)
            yield env
        finally:
            for manager in env.managers:
                await manager.stop()


async def _injected_into_member2(env: Env, state: dict[str, str]) -> dict[str, Any]:
    """member1 failed over to member2 with ``state`` (a Directly task); the task is removed once member2 is
    Healthy. Returns the record once the task is gone."""
    template = await env.template(deployment())
    await env.create_binding(template, "member2", [directly_task("member1", state)])

    async def injected() -> dict[str, Any] | None:
        work = await env.work("member2")
        return work if all(manifest_labels(work).get(k) == v for k, v in state.items()) else None

    await eventually(injected, what="the preserved state injected into member2's Work")

    async def task_removed() -> bool:
        return not await env.tasks()

    await eventually(task_removed, what="the graceful-eviction controller removing the task (member2 Healthy)")
    record = await env.record()
    assert record is not None
    return record


async def test_d4_injected_labels_stay_after_the_eviction_task_is_removed(env: Env) -> None:
    await env.start()
    state = {JOB: "cafe", CKPT: "1734462491693"}
    record = await _injected_into_member2(env, state)
    assert {k: record[k] for k in ("cluster", "labels", "fromCluster")} == {
        "cluster": "member2", "labels": state, "fromCluster": "member1"}
    assert parse_time(record["at"]) is not None

    # Karmada's next render (the task is gone) would drop the labels; Flotilla's keeps them
    work = await env.rendered_after_template_change("member2")
    labels = manifest_labels(work)
    assert {k: labels.get(k) for k in state} == state
    assert set(state) <= set(work["spec"]["workload"]["manifests"][0]["metadata"]["annotations"][
        L.MANAGED_LABELS_ANNOTATION].split(","))

    async def member_labels() -> dict[str, Any] | None:
        obj = await env.member_object("member2")
        got = (obj or {}).get("metadata", {}).get("labels") or {}
        return obj if got.get("tier") == "web" else None

    obj = await eventually(member_labels, what="the member object after the re-render")
    assert {k: obj["metadata"]["labels"].get(k) for k in state} == state
    after = await env.record()
    assert after is not None and {k: after[k] for k in ("cluster", "labels", "fromCluster", "at")} == {
        k: record[k] for k in ("cluster", "labels", "fromCluster", "at")}


async def test_d4_a_later_failover_replaces_the_injected_labels(env: Env) -> None:
    await env.start()
    await _injected_into_member2(env, {JOB: "cafe", CKPT: "1734462491693"})

    # member2 fails over to member1 (as the taint manager writes it, D9 clustersBeforeFailover), new state
    await env.reschedule({"clusters": [{"name": "member1", "replicas": 1}],
                          "gracefulEvictionTasks": [directly_task("member2", {JOB: "beef"})]})

    async def replaced() -> dict[str, Any] | None:
        work = await env.work("member1")
        return work if manifest_labels(work).get(JOB) == "beef" else None

    work = await eventually(replaced, what="the new state injected into member1's Work")
    assert CKPT not in manifest_labels(work)  # only the new failover's labels
    assert await env.work("member2") is None  # Directly: the old copy went first
    record = await env.record()
    assert record is not None
    assert {k: record[k] for k in ("cluster", "labels", "fromCluster")} == {
        "cluster": "member1", "labels": {JOB: "beef"}, "fromCluster": "member2"}

    async def task_removed() -> bool:
        return not await env.tasks()

    await eventually(task_removed, what="the task removed once member1 is Healthy")
    work = await env.rendered_after_template_change("member1")
    assert manifest_labels(work).get(JOB) == "beef" and CKPT not in manifest_labels(work)

    async def member_object() -> dict[str, Any] | None:
        obj = await env.member_object("member1")
        return obj if (obj or {}).get("metadata", {}).get("labels", {}).get("tier") == "web" else None

    obj = await eventually(member_object, what="member1's object after the re-render")
    assert obj["metadata"]["labels"].get(JOB) == "beef" and CKPT not in obj["metadata"]["labels"]


async def test_d4_gate_off_injects_nothing_and_leaves_the_record(env: Env) -> None:
    await env.start(feature_gates={"StatefulFailoverInjection": False})
    recorded = json.dumps({"cluster": "member2", "labels": {JOB: "recorded"}, "fromCluster": "member1",
                           "at": STAMP}, separators=(",", ":"))
    template = await env.template(deployment())
    await env.create_binding(template, "member2", [directly_task("member1", {JOB: "from-task"})],
                             annotations={INJECTED_STATE_ANNOTATION: recorded})
    work = await eventually(lambda: env.work("member2"), what="member2's Work")
    assert JOB not in manifest_labels(work)

    async def healthy() -> bool:
        return await env.health("member2") == "Healthy"

    await eventually(healthy, what="member2 reported Healthy")  # binding-status looked at the binding

    async def task_removed() -> bool:
        return not await env.tasks()

    await eventually(task_removed, what="the task removed once member2 is Healthy")
    work = await env.rendered_after_template_change("member2")
    assert JOB not in manifest_labels(work)
    obj = await env.member_object("member2")
    assert obj is not None and JOB not in obj["metadata"]["labels"]
    assert await env.annotation() == recorded  # neither replaced, dropped nor stamped


async def test_d5_healthy_at_is_stamped_when_the_injected_copy_becomes_healthy(env: Env) -> None:
    await env.start()
    template = await env.template(deployment(**{ANNOTATION_READY_DELAY: "3"}))
    await env.create_binding(template, "member2", [directly_task("member1", {JOB: "cafe"})])
    first = await eventually(env.record, what="the injected-state record")
    assert "healthyAt" not in first  # written before the Work: the copy has not run yet

    async def stamped() -> dict[str, Any] | None:
        record = await env.record()
        return record if record and "healthyAt" in record else None

    record = await eventually(stamped, what="healthyAt stamped once member2's copy is Healthy")
    assert await env.health("member2") == "Healthy"
    healthy_at, at = parse_time(record["healthyAt"]), parse_time(record["at"])
    assert isinstance(healthy_at, datetime) and isinstance(at, datetime) and healthy_at >= at
    assert {k: record[k] for k in ("cluster", "labels", "fromCluster", "at")} == {
        k: first[k] for k in ("cluster", "labels", "fromCluster", "at")}

    # the binding controller's later renders keep the stamp (the two writers do not clobber each other)
    async def task_removed() -> bool:
        return not await env.tasks()

    await eventually(task_removed, what="the task removed once member2 is Healthy")
    await env.rendered_after_template_change("member2")
    assert await env.record() == record


async def test_d5_application_failover_carries_forward_state_from_a_copy_that_never_became_healthy(
        env: Env) -> None:
    await env.start()
    # member1 failed over to member2 with state; member2's copy never starts (a broken image)
    template = await env.template(deployment(image="fake/app:1"))
    application = {"decisionConditions": {"tolerationSeconds": 0}, "purgeMode": "Directly",
                   "statePreservation": {"rules": [{"aliasLabelName": JOB, "jsonPath": "{.replicas}"}]}}
    await env.create_binding(template, "member2", [directly_task("member1", {JOB: "from-member1"})],
                             propagateDeps=True, failover={"application": application})

    async def evicted() -> list[dict[str, Any]] | None:
        tasks = await env.tasks()
        return tasks if any(t["fromCluster"] == "member2" for t in tasks) else None

    tasks = await eventually(evicted, what="the application-failover eviction from member2")
    task = tasks[-1]
    assert task["fromCluster"] == "member2" and task["reason"] == "ApplicationFailure"
    # not what the unhealthy copy reported (its replicas), the state it was started from
    assert task["preservedLabelState"] == {JOB: "from-member1"}
    assert task["clustersBeforeFailover"] == ["member2"]
    events = await eventually(lambda: env.events(EVENT_STATE_CARRIED_FORWARD), what="StateCarriedForward event")
    assert any("member2" in e["message"] and "from-member1" in e["message"] for e in events)
    assert any(e["involvedObject"]["kind"] == "ResourceBinding" for e in events)

    # the scheduler places it in member1 (the policy now tolerates the copy starting up): the carried state
    # goes into the new copy
    await env.reschedule({"clusters": [{"name": "member1", "replicas": 1}],
                          "failover": {"application": {**application, "decisionConditions": {
                              "tolerationSeconds": 600}}}})

    async def injected() -> dict[str, Any] | None:
        work = await env.work("member1")
        return work if manifest_labels(work).get(JOB) == "from-member1" else None

    await eventually(injected, what="the carried-forward state injected into member1's Work")
    record = await eventually(env.record, what="the record of the injection into member1")
    assert {k: record[k] for k in ("cluster", "labels", "fromCluster")} == {
        "cluster": "member1", "labels": {JOB: "from-member1"}, "fromCluster": "member2"}


async def test_d5_healthy_at_is_stamped_in_the_same_write_as_the_task_removal(env: Env) -> None:
    """With the graceful-eviction controller running, the copy's first Healthy removes the task and stamps
    ``healthyAt`` in one binding write (D5 unchanged: the stamp is on the binding when the task goes)."""
    await env.start()
    template = await env.template(deployment())
    rb = await env.create_binding(template, "member2", [directly_task("member1", {JOB: "cafe"})])
    stream = env.cp.watch(RESOURCE_BINDINGS, "default", resource_version=rb["metadata"]["resourceVersion"],
                          field_selector=f"metadata.name={BINDING}")
    versions: list[dict[str, Any]] = []
    try:
        while True:
            ev = await asyncio.wait_for(stream.__anext__(), 20)
            if ev.type == "MODIFIED":
                versions.append(ev.object)
                if not ev.object["spec"].get("gracefulEvictionTasks"):
                    break
    finally:
        await stream.aclose()

    def record_of(obj: dict[str, Any]) -> dict[str, Any]:
        raw = (obj["metadata"].get("annotations") or {}).get(INJECTED_STATE_ANNOTATION)
        return json.loads(raw) if raw else {}

    removal = versions[-1]
    assert "healthyAt" in record_of(removal)
    assert all("healthyAt" not in record_of(v) for v in versions[:-1])  # not stamped in a write of its own
    assert any(i.get("clusterName") == "member2" and i.get("health") == "Healthy"
               for i in removal["status"].get("aggregatedStatus") or [])


async def test_d5_healthy_at_is_stamped_without_the_graceful_eviction_controller(env: Env) -> None:
    """Without the graceful-eviction controller the binding-status controller stamps ``healthyAt`` itself."""
    env.managers.append(await ControllerManager(env.cp, ControllerOptions(), controllers=[
        c for c in CONTROLLERS if c != "graceful-eviction"]).start())
    template = await env.template(deployment())
    await env.create_binding(template, "member2", [directly_task("member1", {JOB: "cafe"})])

    async def stamped() -> dict[str, Any] | None:
        record = await env.record()
        return record if record and "healthyAt" in record else None

    record = await eventually(stamped, what="healthyAt stamped by the binding-status controller")
    assert record["cluster"] == "member2" and await env.tasks()  # nobody removed the task
