"""D22: the failover-history controller against a real in-process API server.

Only the ``failoverHistory`` controller runs; the test writes what the taint manager, the scheduler, the
restore step and the status controllers write during a taint failover, in their order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flotilla.api.resources import RESOURCE_BINDINGS
from flotilla.client import Client
from flotilla.failover.history import HISTORY_ANNOTATION, RESTORE_ANNOTATION
from flotilla.observability.metrics import ControllerMetrics
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, control_plane, events_by_reason

NAME = "orders-flinkdeployment"
eventually = Eventually(timeout=10.0)


@dataclass
class Env:
    cp: Client
    metrics: ControllerMetrics
    manager: ControllerManager | None = None

    async def start(self) -> None:
        self.manager = await ControllerManager(self.cp, ControllerOptions(), controllers=["failoverHistory"],
                                               metrics=self.metrics).start()

    async def stop(self) -> None:
        if self.manager is not None:
            await self.manager.stop()
            self.manager = None

    async def binding(self) -> dict[str, Any]:
        return await self.cp.get(RESOURCE_BINDINGS, NAME, "streaming")

    async def history(self) -> list[dict[str, Any]]:
        raw = ((await self.binding())["metadata"].get("annotations") or {}).get(HISTORY_ANNOTATION)
        return json.loads(raw) if raw else []

    async def create(self, annotations: dict[str, str] | None = None) -> None:
        await self.cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": NAME, "namespace": "streaming", "annotations": annotations or {}},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                  "namespace": "streaming", "name": "orders"},
                     "clusters": [{"name": "member1"}]},
        })
        await self.status({"member1": item("member1", processed=5150)})

    async def patch(self, patch: dict[str, Any]) -> None:
        await self.cp.patch(RESOURCE_BINDINGS, NAME, patch, namespace="streaming")

    async def status(self, items: dict[str, dict[str, Any]], caught_up: bool = True) -> None:
        generation = (await self.binding())["metadata"]["generation"]
        await self.cp.patch(RESOURCE_BINDINGS, NAME, {"status": {
            "schedulerObservedGeneration": generation if caught_up else generation - 1,
            "aggregatedStatus": list(items.values()) or None}}, namespace="streaming", subresource="status")

    async def taint_failover(self, when: str = "2026-01-01T12:00:00Z") -> None:
        """What the taint manager writes: the task (stamped) and member1 out of spec.clusters."""
        await self.patch({"spec": {"clusters": None, "gracefulEvictionTasks": [{
            "fromCluster": "member1", "purgeMode": "Directly", "reason": "TaintUntolerated",
            "producer": "TaintManager", "creationTimestamp": when,
            "preservedLabelState": {"failover.flink.io/job-id": "4f2c"},
            "clustersBeforeFailover": ["member1"]}]}})


def item(cluster: str, health: str = "Healthy", state: str = "RUNNING", processed: int | None = None,
         restored: int | None = None) -> dict[str, Any]:
    info = {}
    if processed is not None:
        info["sim.flotilla.io/records-processed"] = str(processed)
    if restored is not None:
        info["sim.flotilla.io/restored-offset"] = str(restored)
    return {"clusterName": cluster, "applied": True, "health": health,
            "status": {"jobStatus": {"state": state}, "clusterInfo": info}}


def restore_record() -> str:
    return json.dumps({"cluster": "member2", "fromCluster": "member1", "jobId": "4f2c", "outcome": "Restored",
                       "reason": "newest complete checkpoint", "path": "s3://ck/flink/4f2c/chk-25",
                       "kind": "checkpoint", "checkpointId": 25, "completedAt": "2026-01-01T11:59:58Z",
                       "faultAt": "2026-01-01T12:00:00Z", "ageAtFault": 2.0,
                       "resolvedAt": "2026-01-01T12:00:01Z"})


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with control_plane(tmp_path) as (_server, cp):
        from flotilla.kube.resources import NAMESPACES

        await cp.create(NAMESPACES, {"metadata": {"name": "streaming"}})
        e = Env(cp, ControllerMetrics())
        try:
            yield e
        finally:
            await e.stop()


async def in_progress(env: Env) -> list[dict[str, Any]] | None:
    h = await env.history()
    return h if h and h[0]["phase"] == "InProgress" else None


async def completed(env: Env) -> list[dict[str, Any]] | None:
    h = await env.history()
    return h if h and h[0]["phase"] == "Completed" else None


async def test_d22_a_taint_failover_records_one_entry_with_the_right_fields(env: Env) -> None:
    await env.create()
    await env.start()
    await asyncio.sleep(0.3)
    assert await env.history() == [], "no failover, no history"

    await env.taint_failover()
    [entry] = await eventually(lambda: in_progress(env), what="the failover recorded in progress")
    assert entry["runningAt"] is None and entry["to"] is None, "the scheduler has not placed it yet"
    assert entry["stateGap"]["recordsAtFault"] == 5150

    # the scheduler places it on member2; the restore step resolves the checkpoint; the new copy comes up
    await env.patch({"spec": {"clusters": [{"name": "member2"}]},
                     "metadata": {"annotations": {RESTORE_ANNOTATION: restore_record()}}})
    await env.status({"member2": item("member2", "Unhealthy", "CREATED", restored=5000)})
    await asyncio.sleep(0.3)
    [entry] = await env.history()
    assert entry["phase"] == "InProgress" and entry["to"] == "member2"
    await env.status({"member2": item("member2", processed=5010, restored=5000)})

    [entry] = await eventually(lambda: completed(env), what="the failover completed")
    assert (entry["from"], entry["to"], entry["trigger"], entry["purgeMode"]) == (
        "member1", "member2", "ClusterTaint", "Directly")
    assert entry["at"] == "2026-01-01T12:00:00Z" and entry["runningAt"]
    assert entry["preservedState"] == {"failover.flink.io/job-id": "4f2c"}
    assert entry["restoredPath"] == "s3://ck/flink/4f2c/chk-25" and entry["restoreOutcome"] == "Restored"
    assert entry["stateGap"]["ageAtFault"] == 2.0 and entry["stateGap"]["recordsReprocessed"] == 150
    assert entry["timeToRunning"] > 0

    events = await eventually(lambda: events_by_reason(env.cp, "FailoverCompleted"), what="FailoverCompleted")
    assert {e["involvedObject"]["kind"] for e in events} == {"ResourceBinding", "FlinkDeployment"}
    message = events[0]["message"]
    assert "from member1 to member2 (ClusterTaint)" in message and "checkpoint age at fault 2s" in message
    assert "150 records reprocessed" in message and all(e["type"] == "Normal" for e in events)
    assert env.metrics.registry.get("flotilla_failover_time_to_running_seconds").count(  # type: ignore[union-attr]
        "cluster_taint") == 1
    assert env.metrics.registry.get("flotilla_failover_state_gap_seconds").sum(  # type: ignore[union-attr]
        "cluster_taint") == 2.0

    # the task goes (every target Healthy); nothing more is recorded
    await env.patch({"spec": {"gracefulEvictionTasks": None}})
    await asyncio.sleep(0.5)
    assert len(await env.history()) == 1
    assert len(await events_by_reason(env.cp, "FailoverCompleted")) == len(events)


async def test_d22_a_restart_mid_failover_neither_loses_nor_repeats_it(env: Env) -> None:
    await env.create()
    await env.start()
    await env.taint_failover()
    await eventually(lambda: in_progress(env), what="the failover recorded in progress")
    await env.stop()

    # while the controller-manager is down: placed, restored, running, task removed
    await env.patch({"spec": {"clusters": [{"name": "member2"}], "gracefulEvictionTasks": None},
                     "metadata": {"annotations": {RESTORE_ANNOTATION: restore_record()}}})
    await env.status({"member2": item("member2", processed=5020, restored=5000)})

    await env.start()
    [entry] = await eventually(lambda: completed(env), what="the failover completed after the restart")
    assert entry["from"] == "member1" and entry["to"] == "member2" and entry["at"] == "2026-01-01T12:00:00Z"
    await env.stop()
    await env.start()  # and once more: the completed entry stays one entry
    await asyncio.sleep(0.5)
    assert len(await env.history()) == 1
    events = await events_by_reason(env.cp, "FailoverCompleted")
    assert len([e for e in events if e["involvedObject"]["kind"] == "ResourceBinding"]) == 1


async def test_d22_the_eleventh_failover_drops_the_oldest(env: Env) -> None:
    old = [{"at": f"2025-12-{day:02d}T00:00:00Z", "from": "member3", "to": "member1",
            "trigger": "ClusterTaint", "phase": "Completed", "timeToRunning": 10.0}
           for day in range(20, 10, -1)]
    await env.create({HISTORY_ANNOTATION: json.dumps(old)})
    await env.start()
    await env.taint_failover()
    history = await eventually(lambda: in_progress(env), what="the new failover recorded")
    assert len(history) == 10
    assert history[0]["from"] == "member1"
    assert [e["at"] for e in history[1:]] == [e["at"] for e in old[:9]], "the oldest one went"
