"""D21 on a real control plane and two simulated members: the plannedMove and binding controllers move a running
Flink job with a savepoint, and a move that cannot take one goes on as an ordinary failover.

The binding, execution, work-status, binding-status, graceful-eviction and plannedMove controllers run; the test
plays the scheduler and the taint manager (it writes the eviction of member1 as the taint manager does).
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
from flotilla.client import Client, Resource
from flotilla.failover.moves import MOVE_ANNOTATION, MOVE_SAVEPOINT_ANNOTATION, RESTORE_ANNOTATION
from flotilla.kube.resources import CRDS
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import RESOURCE_BINDINGS, WORKS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, events_by_reason, get_or_none, plane_with_members, set_ready

MEMBERS = ("member1", "member2")
CONTROLLERS = ["binding", "execution", "work-status", "binding-status", "graceful-eviction", "plannedMove"]
FLINK = Resource("flink.apache.org", "v1beta1", "flinkdeployments", "FlinkDeployment", True)
BINDING = "wc-flinkdeployment"
WORK_NAME = generate_work_name("FlinkDeployment", "wc", "default")
STAMP = "2025-01-01T00:00:00Z"

eventually = Eventually(timeout=25.0)


def flink(image: str = "flink:1.20") -> dict[str, Any]:
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": "wc", "namespace": "default"},
            "spec": {"image": image, "flinkVersion": "v1_20",
                     "flinkConfiguration": {"execution.checkpointing.interval": "1s"},
                     "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 1,
                             "upgradeMode": "last-state"}}}


def manifest(work: dict[str, Any] | None) -> dict[str, Any]:
    return (((work or {}).get("spec") or {}).get("workload") or {}).get("manifests", [{}])[0]


@dataclass
class Env:
    cp: Client
    members: dict[str, Client]
    managers: list[ControllerManager] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)

    async def start(self, **options: Any) -> None:
        self.managers.append(await ControllerManager(self.cp, ControllerOptions(**options),
                                                     controllers=CONTROLLERS).start())

    async def binding(self) -> dict[str, Any]:
        return await self.cp.get(RESOURCE_BINDINGS, BINDING, "default")

    async def move(self) -> dict[str, Any] | None:
        raw = ((await self.binding())["metadata"].get("annotations") or {}).get(MOVE_ANNOTATION)
        return json.loads(raw) if raw else None

    async def work(self, cluster: str) -> dict[str, Any] | None:
        return await get_or_none(self.cp, WORKS, WORK_NAME, f"karmada-es-{cluster}")

    async def job(self, cluster: str) -> dict[str, Any] | None:
        return await get_or_none(self.members[cluster], FLINK, "wc", "default")

    async def scheduled(self) -> None:
        rb = await self.binding()
        await self.cp.patch(RESOURCE_BINDINGS, BINDING, {"status": {
            "schedulerObservedGeneration": rb["metadata"]["generation"], "lastScheduledTime": STAMP,
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "Success", "message": "ok",
                            "lastTransitionTime": STAMP}]}}, namespace="default", subresource="status")

    async def running_in_member1(self, template: dict[str, Any]) -> None:
        meta = template["metadata"]
        await self.cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": BINDING, "namespace": "default", "finalizers": [L.BINDING_CONTROLLER_FINALIZER]},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                  "namespace": "default", "name": "wc", "uid": meta["uid"]},
                     "replicas": 1, "clusters": [{"name": "member1", "replicas": 1}],
                     "failover": {"cluster": {"purgeMode": "Directly"}}}})
        await self.scheduled()

    async def evict_member1(self) -> None:
        """What the taint manager and the scheduler write for a NoExecute taint on member1."""
        task = {"fromCluster": "member1", "purgeMode": "Directly", "reason": "TaintUntolerated",
                "producer": "TaintManager", "clustersBeforeFailover": ["member1"],
                "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        await self.cp.patch(RESOURCE_BINDINGS, BINDING, {"spec": {
            "clusters": [{"name": "member2", "replicas": 1}], "gracefulEvictionTasks": [task]}}, namespace="default")
        await self.scheduled()

    async def watch_member2_before_done(self, stop: asyncio.Event) -> None:
        """Records a Work in member2 seen while the move had not recorded its savepoint (must never happen)."""
        while not stop.is_set():
            move = await self.move()
            if (move is None or move["phase"] == "Savepointing") and await self.work("member2") is not None:
                self.seen.append(f"Work in member2 while the move was {move}")
            await asyncio.sleep(0.05)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with plane_with_members(tmp_path, MEMBERS) as plane:
        env = Env(plane.cp, plane.members)
        try:
            await plane.cp.create(CRDS, flink_deployment_crd())
            for name in MEMBERS:
                await set_ready(plane.cp, name, "True", reason="ClusterReady", stamp=STAMP)
            yield env
        finally:
            for manager in env.managers:
                await manager.stop()


async def test_d21_a_taint_eviction_from_a_ready_cluster_moves_the_job_with_a_savepoint(env: Env) -> None:
    await env.start()
    template = await env.cp.create(FLINK, flink())
    await env.running_in_member1(template)

    async def checkpointed() -> dict[str, Any] | None:
        rb = await env.binding()
        items = {i["clusterName"]: i for i in (rb.get("status") or {}).get("aggregatedStatus") or []}
        job = ((items.get("member1") or {}).get("status") or {}).get("jobStatus") or {}
        obj = await env.job("member1")
        last = ((obj or {}).get("metadata", {}).get("annotations") or {}).get("sim.flotilla.io/last-checkpoint")
        return job if job.get("state") == "RUNNING" and last not in (None, "none") else None

    old_job = await eventually(checkpointed, what="the job RUNNING in member1 with a checkpoint")
    stop = asyncio.Event()
    watcher = asyncio.create_task(env.watch_member2_before_done(stop))
    try:
        await env.evict_member1()

        async def suspended() -> dict[str, Any] | None:
            job = manifest(await env.work("member1")).get("spec", {}).get("job", {})
            return job if job.get("state") == "suspended" else None

        job_spec = await eventually(suspended, what="member1's Work stopping the job with a savepoint")
        assert job_spec["upgradeMode"] == "savepoint"

        async def done() -> dict[str, Any] | None:
            move = await env.move()
            return move if move and move["phase"] == "Done" else None

        move = await eventually(done, what="the move's savepoint recorded")
    finally:
        stop.set()
        await watcher
    assert env.seen == []
    assert (move["fromCluster"], move["toCluster"], move["trigger"]) == ("member1", "member2", "ClusterTaint")
    annotations = (await env.binding())["metadata"]["annotations"]
    assert json.loads(annotations[MOVE_SAVEPOINT_ANNOTATION])["path"] == move["path"]
    restore = json.loads(annotations[RESTORE_ANNOTATION])
    assert (restore["cluster"], restore["outcome"], restore["kind"], restore["path"], restore["jobId"]) == (
        "member2", "Restored", "savepoint", move["path"], old_job["jobId"])

    async def restored() -> dict[str, Any] | None:
        obj = await env.job("member2")
        ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        state = ((obj or {}).get("status") or {}).get("jobStatus", {}).get("state")
        return obj if state == "RUNNING" and ann.get("sim.flotilla.io/restored-from") == move["path"] else None

    obj = await eventually(restored, what="the job RUNNING in member2 from the savepoint")
    assert obj["spec"]["job"]["initialSavepointPath"] == move["path"]
    assert await env.work("member1") is None and await env.job("member1") is None
    assert [e["reason"] for e in await events_by_reason(env.cp, "SavepointTaken")] == ["SavepointTaken"]
    assert await events_by_reason(env.cp, "PlannedMoveStarted")

    async def completed() -> dict[str, Any] | None:
        move = await env.move()
        return move if move and move.get("completedAt") else None

    await eventually(completed, what="the move completed once member2 is Healthy")
    assert await events_by_reason(env.cp, "PlannedMoveCompleted")


async def test_d21_a_job_that_cannot_take_a_savepoint_times_out_and_fails_over_as_usual(env: Env) -> None:
    await env.start(move_savepoint_timeout=2.0)
    template = await env.cp.create(FLINK, flink(image="fake/flink:broken"))  # never runs: no savepoint possible
    await env.running_in_member1(template)

    async def reflected() -> bool:
        items = (await env.binding()).get("status", {}).get("aggregatedStatus") or []
        return any(i.get("clusterName") == "member1" and i.get("status") for i in items)

    await eventually(reflected, what="member1's status on the binding")
    await env.evict_member1()

    async def failed() -> dict[str, Any] | None:
        move = await env.move()
        return move if move and move["phase"] == "Failed" else None

    move = await eventually(failed, what="the move failing on its savepoint timeout")
    assert "--move-savepoint-timeout" in move["reason"], move
    (event,) = await events_by_reason(env.cp, "PlannedMoveFailed")
    assert event["type"] == "Warning"

    async def moved() -> bool:
        return await env.work("member2") is not None and await env.work("member1") is None

    await eventually(moved, what="the ordinary failover: member1's Work deleted, member2's written")
    assert "initialSavepointPath" not in manifest(await env.work("member2")).get("spec", {}).get("job", {})


async def test_d21_a_placement_change_that_drops_the_cluster_moves_the_job_with_a_savepoint(env: Env) -> None:
    await env.start()
    template = await env.cp.create(FLINK, flink())
    await env.running_in_member1(template)

    async def running() -> bool:
        obj = await env.job("member1")
        items = (await env.binding()).get("status", {}).get("aggregatedStatus") or []
        state = ((obj or {}).get("status") or {}).get("jobStatus", {}).get("state")
        return state == "RUNNING" and any(i.get("clusterName") == "member1" for i in items)

    await eventually(running, what="the job RUNNING in member1")
    # what the scheduler writes after a policy edit or a WorkloadRebalancer: another cluster, no eviction task
    await env.cp.patch(RESOURCE_BINDINGS, BINDING, {"spec": {"clusters": [{"name": "member2", "replicas": 1}]}},
                       namespace="default")
    await env.scheduled()

    async def restored() -> dict[str, Any] | None:
        move = await env.move()
        obj = await env.job("member2")
        ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        if move is None or move["phase"] != "Done" or ann.get("sim.flotilla.io/restored-from") != move["path"]:
            return None
        return move

    move = await eventually(restored, what="the job restored in member2 from the move's savepoint")
    assert (move["fromCluster"], move["toCluster"], move["trigger"]) == ("member1", "member2", "PlacementChange")
    assert await env.work("member1") is None
