"""The application-failover controller's pure plan (flotilla.controllers.application_failover.plan_binding):
state preservation with D5 (state carried over consecutive failovers) and the StatefulFailoverInjection gate."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flotilla.failover.application_plan import plan_binding
from flotilla.failover.state import (
    EVENT_STATE_CARRIED_FORWARD,
    INJECTED_STATE_ANNOTATION,
    InjectedStateRecord,
)

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = "failover.example.io/job-id"


def binding(record: InjectedStateRecord | None = None, *, reported: dict[str, Any] | None = None,
            tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    annotations = {} if record is None else {INJECTED_STATE_ANNOTATION: record.to_json()}
    item: dict[str, Any] = {"clusterName": "m2", "applied": True, "health": "Unhealthy"}
    if reported is not None:
        item["status"] = reported
    return {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "job", "namespace": "default", "resourceVersion": "7", "annotations": annotations},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "job"},
                 "replicas": 1, "propagateDeps": True, "clusters": [{"name": "m2", "replicas": 1}],
                 "gracefulEvictionTasks": tasks or [],
                 "failover": {"application": {
                     "decisionConditions": {"tolerationSeconds": 0}, "purgeMode": "Directly",
                     "statePreservation": {"rules": [{"aliasLabelName": JOB, "jsonPath": "{.jobId}"}]}}}},
        "status": {"aggregatedStatus": [item]},
    }


def plan(b: dict[str, Any], **kw: Any) -> Any:
    return plan_binding(b, T0, binding_kind="ResourceBinding", health_interpretable=True, **kw)


def new_task(p: Any) -> dict[str, Any]:
    assert p.patch is not None and p.evicted == ["m2"]
    task: dict[str, Any] = p.patch["spec"]["gracefulEvictionTasks"][-1]
    assert task["fromCluster"] == "m2"
    return task


def test_d5_state_of_a_copy_that_never_became_healthy_is_carried_forward() -> None:
    record = InjectedStateRecord("m2", {JOB: "cafe"}, "m1", T0)
    p = plan(binding(record, reported={"jobId": "fresh"}))
    task = new_task(p)
    assert task["preservedLabelState"] == {JOB: "cafe"} and task["clustersBeforeFailover"] == ["m2"]
    assert [e.reason for e in p.events] == [EVENT_STATE_CARRIED_FORWARD]
    # even when the unhealthy copy reports nothing usable: no D6 block, the previous state goes on
    p = plan(binding(record, reported={}))
    assert new_task(p)["preservedLabelState"] == {JOB: "cafe"} and not p.blocked


def test_d5_a_copy_that_became_healthy_hands_on_its_own_state() -> None:
    record = InjectedStateRecord("m2", {JOB: "cafe"}, "m1", T0, healthy_at=T0)
    p = plan(binding(record, reported={"jobId": "beef"}))
    assert new_task(p)["preservedLabelState"] == {JOB: "beef"}
    assert p.events == []


def test_d5_without_a_record_the_injecting_task_still_present_counts_as_never_healthy() -> None:
    task = {"fromCluster": "m1", "purgeMode": "Directly", "reason": "TaintUntolerated", "producer": "TaintManager",
            "preservedLabelState": {JOB: "cafe"}, "clustersBeforeFailover": ["m1"]}
    p = plan(binding(reported={"jobId": "fresh"}, tasks=[task]))
    assert new_task(p)["preservedLabelState"] == {JOB: "cafe"}


def test_d5_carried_forward_event_only_when_the_eviction_is_written() -> None:
    record = InjectedStateRecord("m2", {JOB: "cafe"}, "m1", T0)
    b = binding(record, reported={"jobId": "fresh"})
    b["spec"]["failover"]["application"]["purgeMode"] = "Gracefully"
    p = plan(b, graceful_eviction_enabled=False)  # the task cannot be built: nothing is evicted
    assert p.evicted == [] and p.build_error is not None
    assert all(e.reason != EVENT_STATE_CARRIED_FORWARD for e in p.events)


def test_gate_off_preserves_no_state_and_records_no_clusters_before_failover() -> None:
    record = InjectedStateRecord("m2", {JOB: "cafe"}, "m1", T0)
    p = plan(binding(record, reported={}), state_preservation_enabled=False)
    task = new_task(p)
    assert "preservedLabelState" not in task and "clustersBeforeFailover" not in task
    assert p.events == [] and not p.blocked
