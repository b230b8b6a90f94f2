"""Which binding events wake the graceful-eviction controller (those after which a pass can act)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from flotilla.failover.graceful import binding_needs_assessment
from flotilla.failover.state import INJECTED_STATE_ANNOTATION, injected_state_record

NOW = datetime(2025, 1, 1, 0, 0, 5, tzinfo=UTC)
TASK = {"fromCluster": "m1", "purgeMode": "Directly", "reason": "TaintUntolerated",
        "creationTimestamp": "2025-01-01T00:00:00Z"}


def _binding(*, generation: int = 2, observed: int = 2, health: str | None = None,
             tasks: list[dict[str, Any]] | None = None, record: str | None = None) -> dict[str, Any]:
    annotations = {INJECTED_STATE_ANNOTATION: record} if record else {}
    status: dict[str, Any] = {"schedulerObservedGeneration": observed}
    if health is not None:
        status["aggregatedStatus"] = [{"clusterName": "m2", "applied": True, "health": health}]
    return {"metadata": {"name": "b", "namespace": "ns", "generation": generation, "annotations": annotations},
            "spec": {"clusters": [{"name": "m2", "replicas": 1}],
                     "gracefulEvictionTasks": [TASK] if tasks is None else tasks},
            "status": status}


def test_new_or_changed_tasks_always_wake_it() -> None:
    assert binding_needs_assessment(None, _binding())
    changed = _binding(tasks=[{**TASK, "suppressDeletion": False}])
    assert binding_needs_assessment(_binding(), changed)
    assert not binding_needs_assessment(_binding(), _binding(tasks=[]))  # no task left: nothing to assess


def test_a_status_step_that_cannot_allow_a_removal_does_not_wake_it() -> None:
    # the scheduler's spec write (not caught up) and a target not Healthy yet: no pass can remove the task
    assert not binding_needs_assessment(_binding(), _binding(generation=3, observed=2, health="Healthy"))
    assert not binding_needs_assessment(_binding(), _binding(health="Unknown"))
    assert not binding_needs_assessment(_binding(health="Unknown"), _binding(health="Unhealthy"))
    # an unchanged binding (e.g. a metadata-only write) does not either
    assert not binding_needs_assessment(_binding(health="Healthy"), copy.deepcopy(_binding(health="Healthy")))


def test_the_scheduler_caught_up_with_every_target_healthy_wakes_it() -> None:
    assert binding_needs_assessment(_binding(health="Unknown"), _binding(health="Healthy"))
    assert binding_needs_assessment(_binding(generation=3, observed=2, health="Healthy"),
                                    _binding(generation=3, observed=3, health="Healthy"))


def test_a_due_d5_stamp_wakes_it_when_it_stamps() -> None:
    record = injected_state_record("m2", {"job": "cafe"}, "m1", NOW)
    old = _binding(generation=3, observed=2, health="Unknown", record=record)
    new = _binding(generation=3, observed=2, health="Healthy", record=record)  # not caught up: no removal
    assert binding_needs_assessment(old, new, stamps_health=True, now=NOW)
    assert not binding_needs_assessment(old, new, stamps_health=False, now=NOW)
