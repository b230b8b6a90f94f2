"""Which binding events wake the binding-status controller."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from flotilla.controllers.binding_status import SPEC_CHANGE_SETTLE, BindingStatusController

DIRECTLY = {"fromCluster": "m1", "purgeMode": "Directly", "reason": "TaintUntolerated"}
GRACEFULLY = {"fromCluster": "m1", "purgeMode": "Gracefully", "reason": "TaintUntolerated"}


def _controller() -> tuple[BindingStatusController, list[tuple[str, float]]]:
    queued: list[tuple[str, float]] = []
    c = BindingStatusController.__new__(BindingStatusController)
    c.enqueue = lambda key, after=0.0, priority=0: queued.append((key, after))  # type: ignore[method-assign]
    c.options = SimpleNamespace(gate=lambda name: True)  # type: ignore[assignment]
    return c, queued


def _binding(generation: int, clusters: list[str], tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "b", "namespace": "ns", "generation": generation, "annotations": {}},
            "spec": {"resource": {"resourceVersion": "1"}, "clusters": [{"name": n} for n in clusters],
                     "gracefulEvictionTasks": tasks},
            "status": {"lastScheduledTime": "2025-01-01T00:00:00Z"}}


def test_a_spec_change_of_the_expected_clusters_is_looked_at_after_the_settle_time() -> None:
    c, queued = _controller()
    c._on_binding("rb", _binding(3, [], [DIRECTLY]), _binding(4, ["m2"], [DIRECTLY]))
    assert queued == [("rb|ns|b", SPEC_CHANGE_SETTLE)]


def test_removing_a_directly_task_leaves_the_expected_clusters_and_wakes_nothing() -> None:
    c, queued = _controller()
    c._on_binding("rb", _binding(4, ["m2"], [DIRECTLY]), _binding(5, ["m2"], []))
    assert queued == []


def test_removing_a_gracefully_task_changes_the_expected_clusters() -> None:
    c, queued = _controller()
    c._on_binding("rb", _binding(4, ["m2"], [GRACEFULLY]), _binding(5, ["m2"], []))
    assert queued == [("rb|ns|b", SPEC_CHANGE_SETTLE)]


def _fully_applied(binding: dict[str, Any]) -> dict[str, Any]:
    binding["status"]["conditions"] = [{"type": "FullyApplied", "status": "True"}]
    return binding


def test_a_cluster_gained_by_a_fully_applied_binding_is_looked_at_at_once() -> None:
    c, queued = _controller()
    c._on_binding("rb", _fully_applied(_binding(3, ["m1"], [])),
                  _fully_applied(_binding(4, ["m2"], [GRACEFULLY])))
    assert queued == [("rb|ns|b", 0.0)]


def test_a_cluster_removed_from_a_fully_applied_binding_waits_the_settle_time() -> None:
    c, queued = _controller()
    c._on_binding("rb", _fully_applied(_binding(4, ["m2"], [GRACEFULLY])), _fully_applied(_binding(5, ["m2"], [])))
    assert queued == [("rb|ns|b", SPEC_CHANGE_SETTLE)]
