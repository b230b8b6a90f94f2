"""The taint manager on a real control plane (D5 state carry-over, D6 reported failures, D9 clustersBeforeFailover,
D10 eviction pacing).

Clusters are created directly with a written Ready condition; a ResourceBinding for a FlinkDeployment is created
directly, as the scheduler would leave it (``spec.clusters`` and the applied-placement annotation), with a
reflected FlinkDeployment status for its cluster in ``status.aggregatedStatus``. Only the taint manager runs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flotilla.api.resources import CLUSTERS, RESOURCE_BINDINGS
from flotilla.controllers.taint_manager import TaintManager, eviction_key
from flotilla.failover.ratelimit import EvictionMode
from flotilla.kube.resources import EVENTS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import (
    FLINK_BINDING,
    FLINK_JOB_ALIAS,
    STAMP,
    ControlPlane,
    Eventually,
    create_flink_binding,
    plane_with_clusters,
)

NS = "default"
RB = FLINK_BINDING
ALIAS = FLINK_JOB_ALIAS
NOT_READY = {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}


def stamp(t: datetime | None = None) -> str:
    return (t or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def reflected_flink_status(job_id: str | None = "c0ffee42") -> dict[str, Any]:
    job: dict[str, Any] = {"state": "RUNNING", "checkpointInfo": {"lastCheckpoint": {"timeStamp": 1734462491693}}}
    if job_id is not None:
        job["jobId"] = job_id
    return {"jobStatus": job, "lifecycleState": "STABLE"}


eventually = Eventually(interval=0.03, retry_on=())


@dataclass
class Plane(ControlPlane):
    async def taint_manager(self, **options: Any) -> TaintManager:
        m = await ControllerManager(self.client, ControllerOptions(**options), controllers=["taint-manager"]).start()
        self.managers.append(m)
        tm = m.controllers[0]
        assert isinstance(tm, TaintManager)
        return tm

    async def taint(self, name: str, *taints: dict[str, Any]) -> None:
        await self.client.patch(CLUSTERS, name, {"spec": {"taints": list(taints)}})

    async def binding(self, *, tolerations: list[dict[str, Any]] | None = None,
                      status: dict[str, Any] | None = None, rules: bool = True) -> dict[str, Any]:
        return await create_flink_binding(self.client, reflected_flink_status() if status is None else status,
                                          namespace=NS, tolerations=tolerations, rules=rules)

    async def get_binding(self) -> dict[str, Any]:
        return dict(await self.client.get(RESOURCE_BINDINGS, RB, NS))

    async def evicted(self) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            rb = await self.get_binding()
            return rb if rb["spec"].get("gracefulEvictionTasks") else None

        result: dict[str, Any] = await eventually(check)
        return result

    async def stays_on_m1(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rb = await self.get_binding()
            assert [c["name"] for c in rb["spec"].get("clusters") or []] == ["m1"]
            assert not rb["spec"].get("gracefulEvictionTasks")
            await asyncio.sleep(0.05)

    async def events(self, name: str, reason: str) -> list[dict[str, Any]]:
        items = (await self.client.list(EVENTS, NS)).get("items") or []
        return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    async with plane_with_clusters(tmp_path, Plane, "m1", "m2") as p:
        yield p


def condition(rb: dict[str, Any], type_: str = "StatePreserved") -> dict[str, Any] | None:
    return next((c for c in (rb.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


# ---------------------------------------------------------------------------------------------- evictions


async def test_untolerated_noexecute_taint_evicts_with_preserved_state(plane: Plane) -> None:
    tm = await plane.taint_manager()
    await plane.binding()
    await plane.stays_on_m1(0.2)  # no NoExecute taint: nothing happens

    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    rb = await plane.evicted()
    assert not rb["spec"].get("clusters")
    assert rb["spec"]["gracefulEvictionTasks"] == [{
        "fromCluster": "m1", "purgeMode": "Directly", "replicas": 1, "reason": "TaintUntolerated",
        "producer": "TaintManager", "preservedLabelState": {ALIAS: "c0ffee42"},
        "clustersBeforeFailover": ["m1"],  # D9
    }]
    cond = await eventually(lambda: _condition_of(plane))
    assert cond["status"] == "True" and cond["reason"] == "StatePreserved"
    assert tm.evicted[eviction_key("m1", f"{NS}/{RB}")] == 1
    # Karmada emits no success Event at eviction time (the graceful-eviction controller does when done)
    assert await plane.events(RB, "EvictWorkloadFromClusterFailed") == []


async def _condition_of(plane: Plane) -> dict[str, Any] | None:
    return condition(await plane.get_binding())


async def test_purge_mode_comes_from_the_flag_without_failover_cluster(plane: Plane) -> None:
    await plane.taint_manager(no_execute_taint_eviction_purge_mode="Directly")
    await plane.binding()
    await plane.client.patch(RESOURCE_BINDINGS, RB, {"spec": {"failover": None}}, namespace=NS)
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    rb = await plane.evicted()
    assert rb["spec"]["gracefulEvictionTasks"] == [{
        "fromCluster": "m1", "purgeMode": "Directly", "replicas": 1, "reason": "TaintUntolerated",
        "producer": "TaintManager"}]


async def test_with_the_graceful_eviction_controller_the_task_is_written_stamped(plane: Plane) -> None:
    m = await ControllerManager(plane.client, ControllerOptions(),
                                controllers=["taint-manager", "graceful-eviction"]).start()
    plane.managers.append(m)
    await plane.binding()
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    rb = await plane.evicted()
    (task,) = rb["spec"]["gracefulEvictionTasks"]
    assert task["creationTimestamp"]  # in the eviction's own write: the first pass would have stamped it
    generation = rb["metadata"]["generation"]
    await asyncio.sleep(0.3)
    after = await plane.get_binding()
    assert after["metadata"]["generation"] == generation  # no second write for the stamp
    assert after["spec"]["gracefulEvictionTasks"] == [task]


async def test_toleration_seconds_delay_the_eviction(plane: Plane) -> None:
    tm = await plane.taint_manager()
    await plane.binding(tolerations=[{"key": NOT_READY["key"], "operator": "Exists", "effect": "NoExecute",
                                      "tolerationSeconds": 2}])
    # timeAdded has whole seconds: start just after a second boundary so that the deadline is ~2 s away
    await asyncio.sleep(1.02 - (time.time() % 1.0))
    start = time.monotonic()
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    await plane.stays_on_m1(1.5)
    rb = await plane.evicted()
    assert 1.5 <= time.monotonic() - start <= 4.0
    assert rb["spec"]["gracefulEvictionTasks"][0]["fromCluster"] == "m1"
    assert tm.queued[eviction_key("m1", f"{NS}/{RB}")] >= 1


async def test_removing_the_taint_before_expiry_cancels_the_eviction(plane: Plane) -> None:
    await plane.taint_manager()
    await plane.binding(tolerations=[{"operator": "Exists", "tolerationSeconds": 1}])
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    await plane.taint("m1")
    await plane.stays_on_m1(2.2)


async def test_d10_toleration_without_seconds_never_evicts_and_is_never_queued(plane: Plane) -> None:
    tm = await plane.taint_manager()
    await plane.binding(tolerations=[{"key": NOT_READY["key"], "operator": "Exists", "effect": "NoExecute"}])
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    await plane.stays_on_m1(0.5)
    assert sum(tm.queued.values()) == 0
    assert tm.queue.depth == 0 and tm.queue.waiting == 0 and tm.queue.adds == 0


async def test_disabled_flag_never_evicts(plane: Plane) -> None:
    tm = await plane.taint_manager(enable_no_execute_taint_eviction=False)
    await plane.binding()
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    await plane.stays_on_m1(0.3)
    assert tm.queue.adds == 0


async def _set_ready(plane: Plane, name: str, status: str) -> None:
    await plane.client.patch(CLUSTERS, name, {"status": {"conditions": [
        {"type": "Ready", "status": status, "reason": "Test", "message": "", "lastTransitionTime": STAMP}]}},
        subresource="status")


async def _every_cluster_unhealthy(plane: Plane) -> TaintManager:
    """m1 and m2 not Ready, m1 tainted: the brake halts the eviction from m1."""
    tm = await plane.taint_manager()
    await plane.binding()
    for name in ("m1", "m2"):
        await _set_ready(plane, name, "False")
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    await plane.stays_on_m1(0.4)
    return tm


async def test_every_cluster_unhealthy_halts_evictions(plane: Plane) -> None:
    tm = await _every_cluster_unhealthy(plane)
    assert tm.limiter.mode is EvictionMode.HALTED


async def test_halted_evictions_resume_when_a_cluster_is_ready_again(plane: Plane) -> None:
    # the brake counts the clusters' Ready conditions as they are now, not as they were at the last eviction
    tm = await _every_cluster_unhealthy(plane)
    assert tm.limiter.mode is EvictionMode.HALTED
    await _set_ready(plane, "m2", "True")
    await plane.evicted()


# ---------------------------------------------------------------------------------------------- D6


async def test_d6_missing_key_blocks_the_eviction_with_a_warning(plane: Plane) -> None:
    await plane.taint_manager()
    await plane.binding(status=reflected_flink_status(job_id=None))
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})

    async def warned() -> list[dict[str, Any]]:
        # the first attempt may still see the binding without its status in the informer ("not yet collected"):
        # wait for the attempt that names the missing key
        found = await plane.events(RB, "StatePreservationFailed")
        return [e for e in found if "jobId is not found" in e["message"]]

    events = await eventually(warned)
    assert events[0]["type"] == "Warning"
    assert ALIAS in events[0]["message"] and "jobId is not found" in events[0]["message"]
    await eventually(lambda: plane.events("flink-job", "StatePreservationFailed"))  # and on the template
    await plane.stays_on_m1(0.6)
    rb = await plane.get_binding()
    cond = condition(rb)
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "StatePreservationFailed"
    assert "m1" in json.loads(rb["metadata"]["annotations"]["failover.flotilla.io/state-preservation-failing-since"])

    # the status gets the key: the retry extracts it and evicts
    item = {"clusterName": "m1", "applied": True, "health": "Healthy", "status": reflected_flink_status("b0b")}
    await plane.client.patch(RESOURCE_BINDINGS, RB, {"status": {"aggregatedStatus": [item]}}, namespace=NS,
                             subresource="status")
    rb = await plane.evicted()
    assert rb["spec"]["gracefulEvictionTasks"][0]["preservedLabelState"] == {ALIAS: "b0b"}
    assert "failover.flotilla.io/state-preservation-failing-since" not in (rb["metadata"].get("annotations") or {})


async def test_d6_state_preservation_timeout_evicts_without_state(plane: Plane) -> None:
    await plane.taint_manager(state_preservation_timeout=1.0)
    await plane.binding(status=reflected_flink_status(job_id=None))
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    await eventually(lambda: plane.events(RB, "StatePreservationFailed"))
    rb = await plane.evicted()
    assert rb["spec"]["gracefulEvictionTasks"] == [{
        "fromCluster": "m1", "purgeMode": "Directly", "replicas": 1, "reason": "TaintUntolerated",
        "producer": "TaintManager"}]
    timed_out = await eventually(lambda: plane.events(RB, "StatePreservationTimedOut"))
    assert timed_out[0]["type"] == "Warning" and "without preserved state" in timed_out[0]["message"]

    async def timed_out_condition() -> dict[str, Any] | None:
        cond = await _condition_of(plane)
        return cond if cond and cond["reason"] == "StatePreservationTimedOut" else None

    cond = await eventually(timed_out_condition)
    assert cond["status"] == "False"


# ---------------------------------------------------------------------------------------------- events and metrics


async def _both(plane: Plane, reason: str) -> list[dict[str, Any]] | None:
    """The events with ``reason`` once there is one on the binding and one on its template."""
    on_binding, on_template = await plane.events(RB, reason), await plane.events("flink-job", reason)
    return on_binding + on_template if on_binding and on_template else None


async def test_eviction_queued_and_performed_events_on_the_binding_and_its_template(plane: Plane) -> None:
    await plane.taint_manager()
    await plane.binding()
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    queued = await eventually(lambda: _both(plane, "EvictionQueued"))
    assert {e["involvedObject"]["kind"] for e in queued} == {"ResourceBinding", "FlinkDeployment"}
    assert all(e["type"] == "Normal" and "Cluster m1" in e["message"] and "not tolerated" in e["message"]
               for e in queued)
    performed = await eventually(lambda: _both(plane, "EvictionPerformed"))
    assert all(e["type"] == "Normal" for e in performed)
    assert all(e["message"] == "Evicted from cluster m1 (NoExecute taint cluster.karmada.io/not-ready:NoExecute): "
               "graceful-eviction task added, purgeMode Directly, with preserved state." for e in performed)


async def test_eviction_queued_event_names_the_toleration_deadline(plane: Plane) -> None:
    tm = await plane.taint_manager()
    await plane.binding(tolerations=[{"key": NOT_READY["key"], "operator": "Exists", "effect": "NoExecute",
                                      "tolerationSeconds": 300}])
    added = datetime.now(UTC).replace(microsecond=0)
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp(added)})
    queued = await eventually(lambda: _both(plane, "EvictionQueued"))
    deadline = stamp(added + timedelta(seconds=300))
    assert all(f"is tolerated until {deadline}: eviction queued for then." in e["message"] for e in queued)
    families = tm.ctx.metrics.failover
    assert families.evictions.value("cluster_taint", "TaintUntolerated", "success") == 0
    tm.collect_metrics()  # the key waits for its deadline: counted in the queue, not ready
    assert families.eviction_kind_total.value("m1", "ResourceBinding") == 1
    assert families.eviction_queue_depth.value("taint-manager") == 0


async def test_halted_evictions_emit_a_warning_on_the_binding_and_its_template(plane: Plane) -> None:
    await plane.taint_manager()
    await plane.binding()
    for name in ("m1", "m2"):
        await _set_ready(plane, name, "False")
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    halted = await eventually(lambda: _both(plane, "EvictionHalted"))
    assert all(e["type"] == "Warning" and "every cluster (2/2) is unhealthy" in e["message"] for e in halted)
    assert await plane.events(RB, "EvictionPerformed") == []


async def test_unreadable_applied_placement_emits_evict_failed_and_counts_an_error(plane: Plane) -> None:
    tm = await plane.taint_manager()
    await plane.binding()
    await plane.client.patch(RESOURCE_BINDINGS, RB, {"metadata": {"annotations": {
        "policy.karmada.io/applied-placement": "{not json"}}}, namespace=NS)
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    failed = await eventually(lambda: _both(plane, "EvictWorkloadFromClusterFailed"))
    assert all(e["type"] == "Warning" and e["message"].startswith("Evict from cluster m1 failed. ") for e in failed)

    async def queued_unreadable() -> bool:  # once the handler sees the annotation (informers race each other)
        return any("the applied placement cannot be read" in e["message"]
                   for e in await plane.events(RB, "EvictionQueued"))

    await eventually(queued_unreadable)
    metrics = tm.ctx.metrics.failover
    assert metrics.evictions.value("cluster_taint", "TaintUntolerated", "error") >= 1
    assert metrics.eviction_processing_total.value("taint-manager", "error") >= 1
    await plane.stays_on_m1(0.3)


async def test_with_the_binding_status_controller_state_preserved_is_written_by_it(
        plane: Plane, monkeypatch: pytest.MonkeyPatch) -> None:
    """The StatePreserved condition of a successful extraction is handed to the binding-status controller of
    the same controller-manager, which writes it with the status write the eviction leads to."""
    from flotilla.controllers import taint_manager as tm_module

    handed: list[bool] = []
    real = tm_module.hand_off_conditions

    def spy(*args: Any) -> bool:
        handed.append(real(*args))
        return handed[-1]

    monkeypatch.setattr(tm_module, "hand_off_conditions", spy)
    m = await ControllerManager(plane.client, ControllerOptions(),
                                controllers=["taint-manager", "binding-status"]).start()
    plane.managers.append(m)
    await plane.binding()
    await plane.taint("m1", {**NOT_READY, "timeAdded": stamp()})
    await plane.evicted()
    cond = await eventually(lambda: _condition_of(plane))
    assert cond["status"] == "True" and cond["reason"] == "StatePreserved"
    assert "extracted from cluster m1" in cond["message"]
    assert handed == [True]
