"""Graceful-eviction assessment (flotilla.failover.graceful)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.failover.eviction import EVENT_EVICT_SUCCEEDED
from flotilla.failover.graceful import (
    Assessment,
    EvictionEvent,
    Removal,
    RemovalReason,
    all_targets_healthy,
    assess_binding,
    assess_eviction_tasks,
    has_scheduled,
    next_retry,
    task_timeout,
)
from flotilla.failover.purge import directly_pending_clusters

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
STAMP = "2026-01-01T12:00:00Z"


def ts(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def task(cluster: str = "m1", *, age: float | None = 10, mode: str = "Gracefully", grace: int | None = None,
         suppress: bool | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"fromCluster": cluster, "purgeMode": mode, "reason": "TaintUntolerated",
                         "producer": "TaintManager"}
    if grace is not None:
        t["gracePeriodSeconds"] = grace
    if suppress is not None:
        t["suppressDeletion"] = suppress
    if age is not None:
        t["creationTimestamp"] = ts(age)
    return t


def status(**health: str) -> list[dict[str, Any]]:
    return [{"clusterName": c, "applied": True, "health": h} for c, h in sorted(health.items())]


def assess(tasks: list[dict[str, Any]], *, clusters: list[str] | None = None,
           aggregated: list[dict[str, Any]] | None = None, scheduled: bool = True, timeout: float = 600,
           pending: tuple[str, ...] = ()) -> Assessment:
    return assess_eviction_tasks(tasks, clusters=["m2"] if clusters is None else clusters,
                                 aggregated_status=status(m2="Unhealthy") if aggregated is None else aggregated,
                                 scheduled=scheduled, now=NOW, default_timeout=timeout, directly_pending=pending)


# ------------------------------------------------------------------------------------------------
# the rules, one by one
# ------------------------------------------------------------------------------------------------


def test_new_task_is_stamped_and_kept_unassessed() -> None:
    tasks = [task(age=None, suppress=False)]  # even suppressDeletion=false waits for the next pass
    a = assess(tasks, aggregated=status(m2="Healthy"))
    assert a.changed and a.stamped == ["m1"] and a.removed == []
    assert a.tasks == [{**tasks[0], "creationTimestamp": STAMP}]
    assert tasks[0].get("creationTimestamp") is None  # input untouched
    assert a.spec_patch() == {"spec": {"gracefulEvictionTasks": a.tasks}}


def test_stamp_truncates_to_seconds() -> None:
    a = assess_eviction_tasks([task(age=None)], clusters=[], aggregated_status=[], scheduled=False,
                              now=NOW + timedelta(microseconds=700000))
    assert a.tasks[0]["creationTimestamp"] == STAMP


def test_suppress_deletion_true_keeps_forever() -> None:
    a = assess([task(age=10**6, suppress=True, mode="Never")], aggregated=status(m2="Healthy"))
    assert not a.changed and a.removed == [] and a.requeue_after is None and a.spec_patch() is None


def test_suppress_deletion_false_removes_at_once() -> None:
    a = assess([task(age=1, suppress=False)])
    assert a.tasks == [] and a.removed == [Removal("m1", RemovalReason.SUPPRESSION_LIFTED)]
    assert a.spec_patch() == {"spec": {"gracefulEvictionTasks": None}}


def test_timeout_is_strictly_after() -> None:
    assert assess([task(age=600)]).removed == []
    assert assess([task(age=601)]).removed == [Removal("m1", RemovalReason.TIMEOUT)]


def test_grace_period_overrides_global_timeout_per_task() -> None:
    """Each task gets its own timeout; a previous task's gracePeriodSeconds does not leak (fix 808d7cc88)."""
    tasks = [task("a", age=40, grace=30), task("b", age=40), task("c", age=700)]
    a = assess(tasks)
    assert [r.cluster for r in a.removed] == ["a", "c"]
    assert [t["fromCluster"] for t in a.tasks] == ["b"]


def test_grace_period_zero_removes_on_the_next_pass() -> None:
    assert assess([task(age=1, grace=0)]).removed == [Removal("m1", RemovalReason.TIMEOUT)]
    assert task_timeout({"gracePeriodSeconds": True}, 7.0) == 7.0  # a bool is not a number


def test_all_healthy_after_scheduler_caught_up_removes() -> None:
    a = assess([task()], clusters=["m2", "m3"], aggregated=status(m2="Healthy", m3="Healthy"))
    assert a.removed == [Removal("m1", RemovalReason.HEALTHY)]


def test_all_healthy_but_scheduler_behind_keeps() -> None:
    a = assess([task()], clusters=["m2"], aggregated=status(m2="Healthy"), scheduled=False)
    assert a.removed == [] and not a.changed


@pytest.mark.parametrize("health", ["Unhealthy", "Unknown", "", None])
def test_unknown_health_counts_as_not_healthy(health: str | None) -> None:
    aggregated: list[dict[str, Any]] = [{"clusterName": "m2", "health": "Healthy"},
                                        {"clusterName": "m3", "health": health}]
    assert assess([task()], clusters=["m2", "m3"], aggregated=aggregated).removed == []


def test_missing_status_item_is_not_healthy() -> None:
    assert assess([task()], clusters=["m2", "m3"], aggregated=status(m2="Healthy")).removed == []


def test_only_spec_clusters_are_checked() -> None:
    """The evicted cluster's own (old) item and other clusters' items do not matter."""
    a = assess([task("m1")], clusters=["m2"], aggregated=status(m1="Unhealthy", m2="Healthy", m9="Unknown"))
    assert a.removed == [Removal("m1", RemovalReason.HEALTHY)]


def test_empty_schedule_is_vacuously_healthy_once_scheduled() -> None:
    assert assess([task()], clusters=[], aggregated=[]).removed == [Removal("m1", RemovalReason.HEALTHY)]
    assert assess([task()], clusters=[], aggregated=[], scheduled=False).removed == []


def test_first_item_per_cluster_wins() -> None:
    aggregated = [{"clusterName": "m2", "health": "Unhealthy"}, {"clusterName": "m2", "health": "Healthy"}]
    assert not all_targets_healthy(["m2"], aggregated)
    assert all_targets_healthy([], [])


@pytest.mark.parametrize("mode", ["Directly", "Gracefully", "Never", "", "Immediately"])
def test_purge_mode_is_not_consulted(mode: str) -> None:
    a = assess([task(mode=mode)], aggregated=status(m2="Healthy"))
    assert a.removed == [Removal("m1", RemovalReason.HEALTHY)]


def test_order_is_kept_and_events_follow_removals() -> None:
    tasks = [task("a", age=None), task("b", age=5), task("c", age=1000), task("d", suppress=False)]
    a = assess(tasks)
    assert [t["fromCluster"] for t in a.tasks] == ["a", "b"]
    assert a.events == [
        EvictionEvent("Normal", EVENT_EVICT_SUCCEEDED, "Evict from cluster c succeed.", "c"),
        EvictionEvent("Normal", EVENT_EVICT_SUCCEEDED, "Evict from cluster d succeed.", "d"),
    ]


def test_unparseable_creation_timestamp_is_restamped() -> None:
    t = task()
    t["creationTimestamp"] = "yesterday"
    a = assess([t])
    assert a.stamped == ["m1"] and a.tasks[0]["creationTimestamp"] == STAMP


def test_spec_patch_with_optimistic_lock() -> None:
    a = assess([task(age=None)])
    patch = a.spec_patch("17")
    assert patch is not None and patch["metadata"] == {"resourceVersion": "17"}


# ------------------------------------------------------------------------------------------------
# requeue (nextRetry)
# ------------------------------------------------------------------------------------------------


def test_requeue_is_earliest_timeout_of_kept_tasks_without_suppress_deletion() -> None:
    tasks = [task("a", age=100), task("b", age=10, grace=60), task("c", suppress=True, age=10**5)]
    assert assess(tasks).requeue_after == 50.0
    assert next_retry([], 600, NOW) is None


def test_requeue_for_a_freshly_stamped_task_is_the_whole_timeout() -> None:
    assert assess([task(age=None)], timeout=300).requeue_after == 300.0


def test_no_requeue_when_only_suppressed_tasks_remain() -> None:
    assert assess([task(suppress=True)]).requeue_after is None


def test_requeue_at_the_exact_expiry_is_immediate() -> None:
    """Karmada does not requeue when the remaining time is exactly 0; Flotilla looks again at once."""
    a = assess([task(age=600)])
    assert a.removed == [] and a.requeue_after == 0.0


# ------------------------------------------------------------------------------------------------
# the whole binding
# ------------------------------------------------------------------------------------------------


def binding(generation: int, observed: int | None, tasks: list[dict[str, Any]], clusters: list[str],
            aggregated: list[dict[str, Any]]) -> dict[str, Any]:
    st_: dict[str, Any] = {"aggregatedStatus": aggregated}
    if observed is not None:
        st_["schedulerObservedGeneration"] = observed
    return {"metadata": {"name": "b", "namespace": "ns", "generation": generation},
            "spec": {"clusters": [{"name": c, "replicas": 1} for c in clusters], "gracefulEvictionTasks": tasks},
            "status": st_}


def test_assess_binding_reads_generation_and_status() -> None:
    b = binding(3, 3, [task()], ["m2"], status(m2="Healthy"))
    assert has_scheduled(b)
    assert assess_binding(b, NOW).removed == [Removal("m1", RemovalReason.HEALTHY)]
    behind = binding(4, 3, [task()], ["m2"], status(m2="Healthy"))
    assert not has_scheduled(behind)
    assert assess_binding(behind, NOW).removed == []
    assert not has_scheduled(binding(1, None, [], [], []))
    assert assess_binding({}, NOW).tasks == []


def test_assess_binding_timeout_option() -> None:
    b = binding(1, 1, [task(age=100)], ["m2"], status(m2="Unhealthy"))
    assert assess_binding(b, NOW, default_timeout=60).removed == [Removal("m1", RemovalReason.TIMEOUT)]


# ------------------------------------------------------------------------------------------------
# D2: Directly tasks are held while the old Work exists
# ------------------------------------------------------------------------------------------------


def test_d2_directly_task_held_past_timeout_while_old_work_exists() -> None:
    a = assess([task("m1", age=10_000, mode="Directly")], pending=("m1",))
    assert a.removed == [] and a.held == ["m1"] and not a.changed
    assert a.requeue_after == 10.0


def test_d2_directly_task_held_even_if_targets_healthy() -> None:
    a = assess([task("m1", mode="Directly")], aggregated=status(m2="Healthy"), pending=("m1",))
    assert a.removed == [] and a.held == ["m1"]


def test_d2_hold_released_once_work_gone() -> None:
    a = assess([task("m1", age=10_000, mode="Directly")], pending=())
    assert a.removed == [Removal("m1", RemovalReason.TIMEOUT)] and a.held == []


def test_d2_explicit_suppress_deletion_false_still_removes() -> None:
    a = assess([task("m1", mode="Directly", suppress=False)], pending=("m1",))
    assert a.removed == [Removal("m1", RemovalReason.SUPPRESSION_LIFTED)]


def test_d2_only_directly_tasks_are_held() -> None:
    a = assess([task("m1", age=10_000, mode="Gracefully")], pending=("m1",))
    assert a.removed == [Removal("m1", RemovalReason.TIMEOUT)]


def test_d2_hold_does_not_mask_other_timers() -> None:
    a = assess([task("m1", age=10_000, mode="Directly"), task("m3", age=597)], pending=("m1",))
    assert a.held == ["m1"] and a.requeue_after == 3.0


def test_d2_pending_clusters_come_from_purge() -> None:
    spec = {"clusters": [{"name": "m2"}], "gracefulEvictionTasks": [task("m1", age=10_000, mode="Directly")]}
    works = [{"metadata": {"namespace": "karmada-es-m1", "name": "w", "deletionTimestamp": STAMP}}]
    pending = directly_pending_clusters(works, spec)
    assert pending == {"m1"}
    a = assess_eviction_tasks(spec["gracefulEvictionTasks"], clusters=["m2"], aggregated_status=[], scheduled=True,
                              now=NOW, directly_pending=pending)
    assert a.held == ["m1"]


# ------------------------------------------------------------------------------------------------
# properties
# ------------------------------------------------------------------------------------------------

task_st = st.builds(
    task,
    st.sampled_from(["a", "b", "c", "d"]),
    age=st.one_of(st.none(), st.integers(min_value=0, max_value=2000)),
    mode=st.sampled_from(["Directly", "Gracefully", "Never", ""]),
    grace=st.one_of(st.none(), st.integers(min_value=0, max_value=1000)),
    suppress=st.one_of(st.none(), st.booleans()),
)
health_st = st.sampled_from(["Healthy", "Unhealthy", "Unknown"])


@settings(max_examples=300, deadline=None)
@given(st.lists(task_st, max_size=5, unique_by=lambda t: t["fromCluster"]),
       st.dictionaries(st.sampled_from(["m2", "m3"]), health_st),
       st.booleans(), st.lists(st.sampled_from(["a", "b", "c"]), max_size=3))
def test_property_assessment_invariants(tasks: list[dict[str, Any]], health: dict[str, str], scheduled: bool,
                                        pending: list[str]) -> None:
    original = copy.deepcopy(tasks)
    a = assess_eviction_tasks(tasks, clusters=sorted(health), aggregated_status=status(**health),
                              scheduled=scheduled, now=NOW, default_timeout=600, directly_pending=pending)
    assert tasks == original
    removed = {r.cluster for r in a.removed}
    # every task is either kept or removed, and the kept ones stay in order
    assert len(a.tasks) + len(a.removed) == len(tasks)
    assert [t["fromCluster"] for t in a.tasks] == [t["fromCluster"] for t in tasks if t["fromCluster"] not in removed]
    for t in tasks:
        if "creationTimestamp" not in t:  # stamped, never assessed
            assert t["fromCluster"] in a.stamped and t["fromCluster"] not in removed
        elif t.get("suppressDeletion") is True:
            assert t in a.tasks
        elif t.get("suppressDeletion") is False:
            assert t["fromCluster"] in removed
        if t["fromCluster"] in a.held:
            assert t["purgeMode"] == "Directly" and t["fromCluster"] in pending
    assert all("creationTimestamp" in t for t in a.tasks)
    assert a.changed is (a.tasks != tasks)
    if a.requeue_after is not None:
        assert a.requeue_after >= 0
    # without the D2 hold, held tasks would have been removed
    plain = assess_eviction_tasks(tasks, clusters=sorted(health), aggregated_status=status(**health),
                                  scheduled=scheduled, now=NOW, default_timeout=600)
    assert {r.cluster for r in plain.removed} == removed | set(a.held)
