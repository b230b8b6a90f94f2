"""Purge modes as decisions (flotilla.failover.purge)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.failover.purge import (
    DIRECTLY_PURGE_REQUEUE_SECONDS,
    OldCopy,
    PurgePlan,
    directly_pending_clusters,
    directly_purge_pending,
    directly_purged_clusters,
    is_purged_directly,
    kept_clusters,
    may_write_works,
    old_copy_rule,
    orphan_works,
    plan_purge,
    work_cluster,
)
from flotilla.propagation import works as propagation_works


def work(cluster: str | None, *, terminating: bool = False, name: str = "nginx-687f7fb96f") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": f"karmada-es-{cluster}" if cluster else "default"}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "metadata": meta}


def spec(clusters: Sequence[str], tasks: Sequence[tuple[str, str | None]] = (),
         required_by: Sequence[str] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"clusters": [{"name": c, "replicas": 1} for c in clusters]}
    if tasks:
        out["gracefulEvictionTasks"] = []
        for cluster, mode in tasks:
            t: dict[str, Any] = {"fromCluster": cluster, "reason": "r", "producer": "p"}
            if mode is not None:
                t["purgeMode"] = mode
            if mode == "Never":
                t["suppressDeletion"] = True
            out["gracefulEvictionTasks"].append(t)
    if required_by:
        out["requiredBy"] = [{"namespace": "ns", "name": "dep", "clusters": [{"name": c} for c in required_by]}]
    return out


# ------------------------------------------------------------------------------------------------
# the purge-mode table: what happens to the old copy for each task
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "rule"),
    [
        ({"purgeMode": "Directly"}, OldCopy.DELETE_FIRST),
        ({"purgeMode": "Gracefully"}, OldCopy.KEEP_UNTIL_TASK_REMOVED),
        ({"purgeMode": "Never", "suppressDeletion": True}, OldCopy.KEEP),
        ({"purgeMode": "Never"}, OldCopy.KEEP_UNTIL_TASK_REMOVED),  # a hand-made Never task without suppression
        ({"purgeMode": "Gracefully", "suppressDeletion": True}, OldCopy.KEEP),
        ({"purgeMode": "Never", "suppressDeletion": False}, OldCopy.KEEP_UNTIL_TASK_REMOVED),
        ({}, OldCopy.KEEP_UNTIL_TASK_REMOVED),
        ({"purgeMode": ""}, OldCopy.KEEP_UNTIL_TASK_REMOVED),
        ({"purgeMode": "Immediately"}, OldCopy.KEEP_UNTIL_TASK_REMOVED),  # removed in Karmada v1.19: not Directly
        ({"purgeMode": "Graciously"}, OldCopy.KEEP_UNTIL_TASK_REMOVED),
        ({"purgeMode": "directly"}, OldCopy.KEEP_UNTIL_TASK_REMOVED),
    ],
)
def test_old_copy_rule(task: dict[str, Any], rule: OldCopy) -> None:
    assert old_copy_rule(task) is rule
    assert is_purged_directly(task) is (rule is OldCopy.DELETE_FIRST)


def test_kept_clusters_are_targets_required_by_and_non_directly_tasks() -> None:
    s = spec(["m2"], tasks=[("m1", "Gracefully"), ("m3", "Directly"), ("m4", "Never"), ("m5", None)],
             required_by=["m6", "m2"])
    assert kept_clusters(s) == {"m1", "m2", "m4", "m5", "m6"}
    assert directly_purged_clusters(s) == {"m3"}
    assert kept_clusters({}) == set() and directly_purged_clusters({}) == set()


def test_work_cluster() -> None:
    assert work_cluster(work("m1")) == "m1"
    assert work_cluster(work(None)) is None
    assert work_cluster({"metadata": {"namespace": "karmada-es-"}}) is None
    assert work_cluster({}) is None


# ------------------------------------------------------------------------------------------------
# Directly: old Work deleted first, no new Work until it is gone
# ------------------------------------------------------------------------------------------------


def test_directly_old_work_is_an_orphan_and_blocks_new_works() -> None:
    s = spec(["m2"], tasks=[("m1", "Directly")])
    old, new = work("m1"), work("m2")
    plan = plan_purge([old, new], s)
    assert plan.delete == [old] and plan.orphans == [old]
    assert plan.pending_directly == [old]
    assert not plan.may_write and plan.requeue_after == DIRECTLY_PURGE_REQUEUE_SECONDS == 5.0
    assert not may_write_works([old, new], s)


def test_directly_terminating_work_still_blocks_but_is_not_deleted_again() -> None:
    s = spec(["m2"], tasks=[("m1", "Directly")])
    old = work("m1", terminating=True)
    plan = plan_purge([old], s)
    assert plan.delete == [] and plan.orphans == [old]
    assert plan.pending_directly == [old] and not plan.may_write
    assert directly_pending_clusters([old], s) == {"m1"}


def test_directly_barrier_lifts_once_the_work_is_gone() -> None:
    s = spec(["m2"], tasks=[("m1", "Directly")])
    plan = plan_purge([work("m2")], s)
    assert plan.delete == [] and plan.may_write and plan.requeue_after is None
    assert may_write_works([], s)


def test_directly_barrier_counts_any_directly_task() -> None:
    """A Gracefully task's Work does not block, a Directly one does, whichever task is last."""
    s = spec(["m3"], tasks=[("m1", "Directly"), ("m2", "Gracefully")])
    assert not may_write_works([work("m1", terminating=True), work("m2")], s)
    assert may_write_works([work("m2"), work("m3")], s)


def test_directly_cluster_also_a_target_still_blocks() -> None:
    """Karmada blocks on every Work in a Directly cluster, even one that is a target again."""
    s = spec(["m1"], tasks=[("m1", "Directly")])
    assert directly_purge_pending([work("m1")], s) == [work("m1")]
    assert orphan_works([work("m1")], s) == []


# ------------------------------------------------------------------------------------------------
# Gracefully / Never: the old Work stays while the task exists
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["Gracefully", "Never", None, "Immediately"])
def test_non_directly_old_work_is_kept_and_does_not_block(mode: str | None) -> None:
    s = spec(["m2"], tasks=[("m1", mode)])
    plan = plan_purge([work("m1"), work("m2")], s)
    assert plan.delete == [] and plan.may_write
    assert "m1" in plan.kept_clusters


def test_gracefully_old_work_becomes_an_orphan_when_the_task_goes() -> None:
    with_task = spec(["m2"], tasks=[("m1", "Gracefully")])
    without = spec(["m2"])
    old = work("m1")
    assert orphan_works([old], with_task) == []
    assert orphan_works([old], without) == [old]


def test_works_outside_execution_spaces_are_orphans() -> None:
    stray = work(None)
    assert plan_purge([stray], spec(["m1"])).delete == [stray]


def test_plan_type() -> None:
    assert isinstance(plan_purge([], {}), PurgePlan)


# ------------------------------------------------------------------------------------------------
# the same answers as the binding controller's current helpers
# ------------------------------------------------------------------------------------------------

NAMES = st.sampled_from(["m1", "m2", "m3", "m4"])
MODES = st.sampled_from(["Directly", "Gracefully", "Never", None, "Immediately"])


@settings(max_examples=300, deadline=None)
@given(st.lists(NAMES, max_size=3, unique=True), st.lists(st.tuples(NAMES, MODES), max_size=3),
       st.lists(NAMES, max_size=2), st.lists(st.tuples(st.one_of(st.none(), NAMES), st.booleans()), max_size=5))
def test_property_agrees_with_propagation_works(clusters: list[str], tasks: list[tuple[str, str | None]],
                                               required: list[str], works: list[tuple[str | None, bool]]) -> None:
    s = spec(clusters, tasks=tasks, required_by=required)
    ws = [work(c, terminating=t, name=f"w{i}") for i, (c, t) in enumerate(works)]
    assert kept_clusters(s) == propagation_works.expected_clusters(s)
    assert directly_purged_clusters(s) == propagation_works.directly_purged_clusters(s)
    assert orphan_works(ws, s) == propagation_works.orphan_works(ws, s)
    assert directly_purge_pending(ws, s) == propagation_works.directly_purge_pending(ws, s)


@settings(max_examples=300, deadline=None)
@given(st.lists(NAMES, max_size=3, unique=True), st.lists(st.tuples(NAMES, MODES), max_size=3),
       st.lists(st.tuples(NAMES, st.booleans()), max_size=5))
def test_property_purge_invariants(clusters: list[str], tasks: list[tuple[str, str | None]],
                                   works: list[tuple[str, bool]]) -> None:
    s = spec(clusters, tasks=tasks)
    ws = [work(c, terminating=t, name=f"w{i}") for i, (c, t) in enumerate(works)]
    plan = plan_purge(ws, s)
    # a target's Work is never deleted; a Directly-only cluster's Work always is (unless already going)
    for w in plan.delete:
        assert work_cluster(w) not in clusters
        assert not w["metadata"].get("deletionTimestamp")
    directly_only = directly_purged_clusters(s) - kept_clusters(s)
    for w in ws:
        if work_cluster(w) in directly_only and not w["metadata"].get("deletionTimestamp"):
            assert w in plan.delete
    # no new Work while any Work of a Directly cluster is still there
    assert plan.may_write is (not any(work_cluster(w) in directly_purged_clusters(s) for w in ws))
