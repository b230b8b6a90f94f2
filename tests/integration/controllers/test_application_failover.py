"""The application-failover controller against a control plane: bindings written by the test (D8: timers persisted
on the binding).

No member cluster and no other controller: the test writes ``spec.failover.application`` (as the detector
copies it from the policy) and ``status.aggregatedStatus`` (as the binding-status controller reports it).
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
from flotilla.failover.application import UNHEALTHY_SINCE_ANNOTATION
from flotilla.kube.resources import EVENTS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, control_plane

NAME = "flink-job"


eventually = Eventually(timeout=10.0)


@dataclass
class Env:
    cp: Client
    manager: ControllerManager | None = None

    async def start(self, **options: Any) -> ControllerManager:
        self.manager = await ControllerManager(self.cp, ControllerOptions(**options),
                                               controllers=["application-failover"]).start()
        return self.manager

    async def stop(self) -> None:
        if self.manager is not None:
            await self.manager.stop()
            self.manager = None

    async def binding(self) -> dict[str, Any]:
        return await self.cp.get(RESOURCE_BINDINGS, NAME, "default")

    async def create_binding(self, application: dict[str, Any], health: dict[str, str],
                             status: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        rb = await self.cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": NAME, "namespace": "default"},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                  "name": "flink"},
                     "replicas": 2, "propagateDeps": True,
                     "clusters": [{"name": c, "replicas": 1} for c in health],
                     "failover": {"application": application}},
        })
        await self.set_health(health, status)
        return rb

    async def set_health(self, health: dict[str, str], status: dict[str, dict[str, Any]] | None = None) -> None:
        items = []
        for cluster, h in health.items():
            item: dict[str, Any] = {"clusterName": cluster, "applied": True, "health": h}
            if status and cluster in status:
                item["status"] = status[cluster]
            items.append(item)
        await self.cp.patch(RESOURCE_BINDINGS, NAME, {"status": {"aggregatedStatus": items}},
                            namespace="default", subresource="status")

    async def evicted(self) -> dict[str, Any] | None:
        rb = await self.binding()
        return rb if rb["spec"].get("gracefulEvictionTasks") else None

    async def record(self) -> dict[str, str]:
        rb = await self.binding()
        raw = (rb["metadata"].get("annotations") or {}).get(UNHEALTHY_SINCE_ANNOTATION)
        return json.loads(raw) if raw else {}


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with control_plane(tmp_path) as (_, cp):
        env = Env(cp)
        try:
            yield env
        finally:
            await env.stop()


def application(toleration: int, purge_mode: str = "Gracefully", **extra: Any) -> dict[str, Any]:
    return {"decisionConditions": {"tolerationSeconds": toleration}, "purgeMode": purge_mode, **extra}


async def test_unhealthy_for_toleration_seconds_is_evicted(env: Env) -> None:
    await env.create_binding(application(1, gracePeriodSeconds=30),
                             {"member1": "Unhealthy", "member2": "Healthy"})
    loop = asyncio.get_running_loop()
    started = loop.time()
    await env.start()
    record = await eventually(env.record, what="first-seen Unhealthy recorded on the binding")
    assert list(record) == ["member1"]
    assert (await env.binding())["spec"].get("gracefulEvictionTasks") is None  # tolerated for now
    rb = await eventually(env.evicted, what="eviction after tolerationSeconds")
    elapsed = loop.time() - started
    assert 0.8 <= elapsed < 4.0
    assert [c["name"] for c in rb["spec"]["clusters"]] == ["member2"]
    (t,) = rb["spec"]["gracefulEvictionTasks"]
    assert t["fromCluster"] == "member1" and t["reason"] == "ApplicationFailure"
    assert t["producer"] == "resource-binding-application-failover-controller"
    assert t["purgeMode"] == "Gracefully" and t["gracePeriodSeconds"] == 30 and t["replicas"] == 1
    assert UNHEALTHY_SINCE_ANNOTATION not in (rb["metadata"].get("annotations") or {})  # record cleared


async def test_toleration_zero_evicts_at_once_never_suppresses_deletion(env: Env) -> None:
    await env.create_binding(application(0, "Never"), {"member1": "Healthy", "member2": "Unhealthy"})
    await env.start()
    rb = await eventually(env.evicted, timeout=3.0, what="eviction at once")
    (t,) = rb["spec"]["gracefulEvictionTasks"]
    assert t["fromCluster"] == "member2" and t["reason"] == "ApplicationFailure"
    assert t["purgeMode"] == "Never" and t["suppressDeletion"] is True
    assert [c["name"] for c in rb["spec"]["clusters"]] == ["member1"]


async def test_directly_with_state_preservation(env: Env) -> None:
    app = application(0, "Directly", statePreservation={"rules": [
        {"aliasLabelName": "failover.example.io/job-id", "jsonPath": "{.jobStatus.jobID}"}]})
    await env.create_binding(app, {"member1": "Unhealthy", "member2": "Healthy"},
                             status={"member1": {"jobStatus": {"jobID": "abc123"}}})
    await env.start()
    rb = await eventually(env.evicted, timeout=3.0, what="eviction at once")
    (t,) = rb["spec"]["gracefulEvictionTasks"]
    assert t["purgeMode"] == "Directly" and "gracePeriodSeconds" not in t and "suppressDeletion" not in t
    assert t["preservedLabelState"] == {"failover.example.io/job-id": "abc123"}
    assert t["clustersBeforeFailover"] == ["member1", "member2"]


async def test_recovery_forgets_the_timer(env: Env) -> None:
    await env.create_binding(application(30), {"member1": "Unhealthy", "member2": "Healthy"})
    await env.start()
    await eventually(env.record, what="record")
    await env.set_health({"member1": "Healthy", "member2": "Healthy"})

    async def forgotten() -> bool:
        return not await env.record()

    await eventually(forgotten, what="record cleared once Healthy")
    assert (await env.binding())["spec"].get("gracefulEvictionTasks") is None


async def test_d8_timer_survives_controller_manager_restart(env: Env) -> None:
    await env.create_binding(application(2), {"member1": "Unhealthy", "member2": "Healthy"})
    await env.start()
    record = await eventually(env.record, what="first-seen Unhealthy recorded")
    await env.stop()  # restart in the middle of the toleration
    await asyncio.sleep(2.2)  # the toleration runs out while no controller runs
    assert await env.record() == record
    assert (await env.binding())["spec"].get("gracefulEvictionTasks") is None
    loop = asyncio.get_running_loop()
    restarted = loop.time()
    await env.start()
    rb = await eventually(env.evicted, timeout=5.0, what="eviction after the restart")
    # the timer was not restarted: the eviction comes at once, not tolerationSeconds after the restart
    assert loop.time() - restarted < 1.5
    assert rb["spec"]["gracefulEvictionTasks"][0]["fromCluster"] == "member1"


async def test_failed_state_extraction_blocks_the_eviction_until_the_status_arrives(env: Env) -> None:
    app = application(0, "Directly", statePreservation={"rules": [
        {"aliasLabelName": "failover.example.io/job-id", "jsonPath": "{.jobStatus.jobID}"}]})
    await env.create_binding(app, {"member1": "Unhealthy", "member2": "Healthy"},
                             status={"member1": {"jobStatus": {}}})
    await env.start()

    async def failed_events() -> list[dict[str, Any]]:
        found = await env.cp.list(EVENTS, None)
        return [e for e in found.get("items") or [] if e.get("reason") == "StatePreservationFailed"]

    events = await eventually(failed_events, what="StatePreservationFailed event (D6)")
    assert events[0]["type"] == "Warning" and "jobID" in events[0]["message"]
    rb = await env.binding()
    assert rb["spec"].get("gracefulEvictionTasks") is None
    assert "member1" in rb["metadata"]["annotations"]["failover.flotilla.io/state-preservation-failing-since"]
    await env.set_health({"member1": "Unhealthy", "member2": "Healthy"},
                         status={"member1": {"jobStatus": {"jobID": "j-7"}}})
    rb = await eventually(env.evicted, what="eviction once the state can be extracted")
    assert rb["spec"]["gracefulEvictionTasks"][0]["preservedLabelState"] == {"failover.example.io/job-id": "j-7"}
    assert "failover.flotilla.io/state-preservation-failing-since" not in (rb["metadata"].get("annotations") or {})
    # the metrics say the same: blocked attempts, failed extractions, then one eviction
    assert env.manager is not None and env.manager.ctx is not None
    m = env.manager.ctx.metrics.failover
    assert m.state_preservation_failures.value("application") >= 1
    assert m.evictions.value("application", "ApplicationFailure", "blocked") >= 1
    assert m.evictions.value("application", "ApplicationFailure", "success") == 1
    assert m.state_preservation_timeouts.value("application") == 0
