"""The graceful-eviction controller against a control plane: bindings and Works written by the test.

No member cluster and no other controller: the test writes ``spec.gracefulEvictionTasks``, the scheduler's
``schedulerObservedGeneration`` and ``aggregatedStatus`` itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.api.resources import RESOURCE_BINDINGS, WORKS
from flotilla.apiserver.server import ApiServer
from flotilla.client import Client
from flotilla.kube.resources import NAMESPACES
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, control_plane, events_by_reason

RB_ID_LABEL = "resourcebinding.karmada.io/permanent-id"
NAME = "nginx-deployment"


eventually = Eventually(timeout=10.0)


@dataclass
class Env:
    cp: Client
    server: ApiServer
    manager: ControllerManager | None = None

    async def start(self, **options: Any) -> ControllerManager:
        self.manager = await ControllerManager(self.cp, ControllerOptions(**options),
                                               controllers=["graceful-eviction"]).start()
        return self.manager

    async def binding(self) -> dict[str, Any]:
        return await self.cp.get(RESOURCE_BINDINGS, NAME, "default")

    async def tasks(self) -> list[dict[str, Any]]:
        return (await self.binding())["spec"].get("gracefulEvictionTasks") or []

    async def create_binding(self, tasks: list[dict[str, Any]], clusters: tuple[str, ...] = ("member2",),
                             health: dict[str, str] | None = None, caught_up: bool = True) -> dict[str, Any]:
        rb = await self.cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": NAME, "namespace": "default"},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                  "name": "nginx"},
                     "replicas": 2, "clusters": [{"name": c, "replicas": 2} for c in clusters],
                     "gracefulEvictionTasks": tasks},
        })
        await self.set_status(health or {}, caught_up=caught_up)
        return rb

    async def set_status(self, health: dict[str, str], caught_up: bool = True) -> None:
        rb = await self.binding()
        generation = rb["metadata"]["generation"]
        await self.cp.patch(RESOURCE_BINDINGS, NAME, {"status": {
            "schedulerObservedGeneration": generation if caught_up else generation - 1,
            "aggregatedStatus": [{"clusterName": c, "applied": True, "health": h} for c, h in health.items()] or None,
        }}, namespace="default", subresource="status")

    async def events(self, reason: str) -> list[dict[str, Any]]:
        return await events_by_reason(self.cp, reason)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with control_plane(tmp_path) as (server, cp):
        env = Env(cp, server)
        try:
            for ns in ("karmada-es-member1", "karmada-es-member2"):
                await cp.create(NAMESPACES, {"metadata": {"name": ns}})
            yield env
        finally:
            if env.manager is not None:
                await env.manager.stop()


def task(cluster: str = "member1", **extra: Any) -> dict[str, Any]:
    return {"fromCluster": cluster, "purgeMode": "Gracefully", "reason": "TaintUntolerated",
            "producer": "TaintManager", **extra}


async def test_gracefully_task_stamped_kept_while_unhealthy_removed_when_healthy(env: Env) -> None:
    await env.create_binding([task()], health={"member2": "Unhealthy"})
    await env.start()

    async def stamped() -> list[dict[str, Any]] | None:
        tasks = await env.tasks()
        return tasks if tasks and tasks[0].get("creationTimestamp") else None

    tasks = await eventually(stamped, what="creationTimestamp stamped")
    assert tasks[0]["fromCluster"] == "member1"
    await asyncio.sleep(0.3)
    assert len(await env.tasks()) == 1  # Unhealthy: kept
    await env.set_status({"member2": "Unknown"})
    await asyncio.sleep(0.3)
    assert len(await env.tasks()) == 1  # Unknown counts as not healthy
    await env.set_status({"member2": "Healthy"}, caught_up=False)
    await asyncio.sleep(0.3)
    assert len(await env.tasks()) == 1  # the scheduler has not caught up
    await env.set_status({"member2": "Healthy"})

    async def removed() -> bool:
        return not await env.tasks()

    await eventually(removed, what="task removed once Healthy")
    events = await eventually(lambda: env.events("EvictWorkloadFromClusterSucceed"), what="event")
    kinds = {e["involvedObject"]["kind"] for e in events}
    assert "ResourceBinding" in kinds and "Deployment" in kinds
    assert all(e["message"] == "Evict from cluster member1 succeed." for e in events)
    assert all(e["type"] == "Normal" for e in events)


async def test_task_removed_on_timeout(env: Env) -> None:
    await env.create_binding([task()], health={"member2": "Unhealthy"})
    await env.start(graceful_eviction_timeout=1.0)

    async def removed() -> bool:
        return not await env.tasks()

    loop = asyncio.get_running_loop()
    started = loop.time()
    await eventually(removed, timeout=6.0, what="task removed on timeout")
    # stamped in whole seconds: more than the timeout, at most about a second more
    assert loop.time() - started < 4.0


async def test_grace_period_seconds_overrides_global_timeout(env: Env) -> None:
    await env.create_binding([task(gracePeriodSeconds=1)], health={"member2": "Unhealthy"})
    await env.start(graceful_eviction_timeout=600.0)

    async def removed() -> bool:
        return not await env.tasks()

    await eventually(removed, timeout=6.0, what="task removed after gracePeriodSeconds")


async def test_suppress_deletion_keeps_the_task(env: Env) -> None:
    await env.create_binding([task("member1", purgeMode="Never", suppressDeletion=True),
                              task("member3", creationTimestamp="2020-01-01T00:00:00Z")],
                             health={"member2": "Healthy"})
    await env.start(graceful_eviction_timeout=0.5)

    async def only_suppressed() -> list[dict[str, Any]] | None:
        tasks = await env.tasks()
        return tasks if [t["fromCluster"] for t in tasks] == ["member1"] else None

    tasks = await eventually(only_suppressed, what="expired task removed")
    await asyncio.sleep(2.0)  # healthy, and its timeout long past: still kept
    tasks = await env.tasks()
    assert [t["fromCluster"] for t in tasks] == ["member1"] and tasks[0]["suppressDeletion"] is True
    # a person lets it go
    rb = await env.binding()
    tasks[0]["suppressDeletion"] = False
    await env.cp.patch(RESOURCE_BINDINGS, NAME, {"spec": {"gracefulEvictionTasks": tasks},
                                                "metadata": {"resourceVersion": rb["metadata"]["resourceVersion"]}},
                       namespace="default")

    async def removed() -> bool:
        return not await env.tasks()

    await eventually(removed, what="task removed once suppressDeletion is false")


async def test_directly_task_held_while_old_work_remains(env: Env) -> None:
    rb = await env.create_binding(
        [task(purgeMode="Directly", creationTimestamp="2020-01-01T00:00:00Z")], health={"member2": "Healthy"})
    rb_id = rb["metadata"]["labels"][RB_ID_LABEL]
    await env.cp.create(WORKS, {
        "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "nginx-old", "namespace": "karmada-es-member1", "labels": {RB_ID_LABEL: rb_id},
                     "annotations": {"resourcebinding.karmada.io/namespace": "default",
                                     "resourcebinding.karmada.io/name": NAME}},
        "spec": {"workload": {"manifests": []}},
    })
    # a Work of the binding in another cluster does not hold the task
    await env.cp.create(WORKS, {
        "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "nginx-new", "namespace": "karmada-es-member2", "labels": {RB_ID_LABEL: rb_id},
                     "annotations": {"resourcebinding.karmada.io/namespace": "default",
                                     "resourcebinding.karmada.io/name": NAME}},
        "spec": {"workload": {"manifests": []}},
    })
    await env.start(graceful_eviction_timeout=1.0)
    await asyncio.sleep(1.0)  # timed out long ago and all healthy: held while the old Work is there (D2)
    tasks = await env.tasks()
    assert [t["fromCluster"] for t in tasks] == ["member1"]
    await env.cp.delete(WORKS, "nginx-old", "karmada-es-member1")
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def removed() -> bool:
        return not await env.tasks()

    await eventually(removed, what="Directly task released once the old Work is gone")
    assert loop.time() - started < 3.0  # woken by the Work's deletion, not by the 10 s recheck


# ---------------------------------------------------------------------------------------------- why a task went


async def removal_events(env: Env) -> list[dict[str, Any]] | None:
    """The GracefulEvictionTaskRemoved events once there is one on the binding and one on its template."""
    events = await env.events("GracefulEvictionTaskRemoved")
    kinds = {e["involvedObject"]["kind"] for e in events}
    return events if kinds == {"ResourceBinding", "Deployment"} else None


async def test_task_removed_event_says_every_target_is_healthy(env: Env) -> None:
    await env.create_binding([task()], health={"member2": "Healthy"})
    manager = await env.start()

    async def stamped() -> bool:
        return bool((await env.tasks())[0].get("creationTimestamp"))

    await eventually(stamped, what="creationTimestamp stamped")
    await env.set_status({"member2": "Healthy"})  # the scheduler catches up with the stamped generation
    events = await eventually(lambda: removal_events(env), what="removal events")
    assert all(e["type"] == "Normal" and e["message"] == "Graceful-eviction task for cluster member1 removed: "
               "every target cluster reports the workload Healthy." for e in events)
    metrics = manager.metrics.failover
    assert metrics.tasks_removed.value("cluster_taint", "Healthy") == 1
    assert metrics.eviction_to_healthy.count("cluster_taint") == 1


async def test_task_removed_event_warns_on_timeout(env: Env) -> None:
    await env.create_binding([task(gracePeriodSeconds=1)], health={"member2": "Unhealthy"})
    manager = await env.start()
    events = await eventually(lambda: removal_events(env), timeout=8.0, what="removal events")
    assert all(e["type"] == "Warning" and e["message"] == "Graceful-eviction task for cluster member1 removed: "
               "timed out after 1s before every target cluster reported the workload Healthy." for e in events)
    metrics = manager.metrics.failover
    assert metrics.tasks_removed.value("cluster_taint", "Timeout") == 1
    assert metrics.eviction_to_healthy.count("cluster_taint") == 0  # not healthy: no time-to-healthy


async def test_task_removed_event_says_suppress_deletion_was_lifted(env: Env) -> None:
    await env.create_binding([task(producer="resource-binding-application-failover-controller",
                                   reason="ApplicationFailure", suppressDeletion=False,
                                   creationTimestamp="2020-01-01T00:00:00Z")], health={"member2": "Unhealthy"})
    manager = await env.start()
    events = await eventually(lambda: removal_events(env), what="removal events")
    assert all(e["type"] == "Normal" and e["message"] == "Graceful-eviction task for cluster member1 removed: "
               "suppressDeletion was set to false." for e in events)
    assert manager.metrics.failover.tasks_removed.value("application", "SuppressDeletionFalse") == 1
