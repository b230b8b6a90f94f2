"""Graceful-eviction tasks for cluster and application failover (flotilla.failover.eviction)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.failover.eviction import (
    EVENT_EVICT_FAILED,
    EVENT_EVICT_SUCCEEDED,
    GRACEFUL_EVICTION_GATE_ERROR,
    PRODUCER_CRB_APPLICATION_FAILOVER,
    PRODUCER_RB_APPLICATION_FAILOVER,
    PRODUCER_TAINT_MANAGER,
    REASON_APPLICATION_FAILURE,
    REASON_TAINT_UNTOLERATED,
    EvictionPatch,
    TaskBuildError,
    TaskOptions,
    application_failover_producer,
    application_failover_task_options,
    build_task,
    cluster_failover_task_options,
    cluster_in_eviction_tasks,
    cluster_names,
    evict_failed_message,
    evict_succeeded_message,
    graceful_evict_cluster,
    graceful_evict_clusters,
    resolve_cluster_purge_mode,
)
from flotilla.kube.times import format_time as format_timestamp

NOW = datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)
TAINT_OPTS = TaskOptions(producer=PRODUCER_TAINT_MANAGER, reason=REASON_TAINT_UNTOLERATED, purge_mode="Gracefully")


def spec(clusters: list[tuple[str, int]], tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"clusters": [{"name": n, "replicas": r} for n, r in clusters]}
    if tasks is not None:
        out["gracefulEvictionTasks"] = tasks
    return out


def test_exact_names() -> None:
    assert PRODUCER_TAINT_MANAGER == "TaintManager"
    assert PRODUCER_RB_APPLICATION_FAILOVER == "resource-binding-application-failover-controller"
    assert PRODUCER_CRB_APPLICATION_FAILOVER == "cluster-resource-binding-application-failover-controller"
    assert REASON_TAINT_UNTOLERATED == "TaintUntolerated"
    assert REASON_APPLICATION_FAILURE == "ApplicationFailure"
    assert EVENT_EVICT_FAILED == "EvictWorkloadFromClusterFailed"
    assert EVENT_EVICT_SUCCEEDED == "EvictWorkloadFromClusterSucceed"
    assert evict_failed_message("m1") == "Evict from cluster m1 failed."
    assert evict_succeeded_message("m1") == "Evict from cluster m1 succeed."
    assert application_failover_producer("ResourceBinding") == PRODUCER_RB_APPLICATION_FAILOVER
    assert application_failover_producer("ClusterResourceBinding") == PRODUCER_CRB_APPLICATION_FAILOVER


# ------------------------------------------------------------------------------------------------
# purge mode resolution (cluster failover)
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failover", "flag", "expected"),
    [
        (None, "Gracefully", "Gracefully"),
        (None, "Directly", "Directly"),
        (None, "", "Gracefully"),
        (None, "Never", "Gracefully"),  # anything but Directly from the flag is Gracefully
        (None, "directly", "Gracefully"),
        ({}, "Directly", "Directly"),
        ({"application": {"purgeMode": "Never"}}, "Directly", "Directly"),  # only failover.cluster counts
        ({"cluster": {}}, "Directly", "Gracefully"),  # failover.cluster set: the flag is ignored
        ({"cluster": {"purgeMode": ""}}, "Directly", "Gracefully"),
        ({"cluster": {"purgeMode": "Directly"}}, "Gracefully", "Directly"),
        ({"cluster": {"purgeMode": "Gracefully"}}, "Directly", "Gracefully"),
        ({"cluster": None}, "Directly", "Directly"),  # null is not set
    ],
)
def test_resolve_cluster_purge_mode(failover: dict[str, Any] | None, flag: str, expected: str) -> None:
    assert resolve_cluster_purge_mode(failover, flag) == expected


def test_cluster_failover_task_options_without_state() -> None:
    opts = cluster_failover_task_options({"cluster": {"purgeMode": "Directly"}}, default_purge_mode="Gracefully",
                                         clusters_before_failover=["m1", "m2"])
    assert opts == TaskOptions(producer="TaintManager", reason="TaintUntolerated", purge_mode="Directly")
    task = build_task("m1", 3, opts)
    assert task == {"fromCluster": "m1", "purgeMode": "Directly", "replicas": 3, "reason": "TaintUntolerated",
                    "producer": "TaintManager"}
    assert "gracePeriodSeconds" not in task and "suppressDeletion" not in task


def test_d9_cluster_failover_records_clusters_before_failover() -> None:
    """Karmada's taint manager stores no clustersBeforeFailover; Flotilla records it with the state."""
    before = cluster_names(spec([("m1", 1), ("m2", 1)]))
    opts = cluster_failover_task_options({"cluster": {"purgeMode": "Directly"}}, preserved_label_state={"a": "1"},
                                         clusters_before_failover=before)
    patch = graceful_evict_cluster(spec([("m1", 1), ("m2", 1)]), "m1", opts)
    assert patch.tasks == [{
        "fromCluster": "m1", "purgeMode": "Directly", "replicas": 1, "reason": "TaintUntolerated",
        "producer": "TaintManager", "preservedLabelState": {"a": "1"}, "clustersBeforeFailover": ["m1", "m2"],
    }]
    # the surviving cluster m2 is in the list, so state is never injected into its existing copy
    assert "m2" in patch.tasks[0]["clustersBeforeFailover"]


def test_d9_cluster_failover_without_flag_default() -> None:
    opts = cluster_failover_task_options(None, default_purge_mode="Directly", preserved_label_state={},
                                         clusters_before_failover=["m1"])
    task = build_task("m1", 0, opts)
    # an empty state is left out (omitempty), but the clusters are recorded
    assert task == {"fromCluster": "m1", "purgeMode": "Directly", "reason": "TaintUntolerated",
                    "producer": "TaintManager", "clustersBeforeFailover": ["m1"]}


# ------------------------------------------------------------------------------------------------
# application failover options (Karmada's buildTaskOptions)
# ------------------------------------------------------------------------------------------------


def test_application_gracefully_copies_grace_period() -> None:
    opts = application_failover_task_options({"purgeMode": "Gracefully", "gracePeriodSeconds": 600})
    assert opts == TaskOptions(producer=PRODUCER_RB_APPLICATION_FAILOVER, reason="ApplicationFailure",
                               purge_mode="Gracefully", grace_period_seconds=600)


def test_application_gracefully_without_grace_period_leaves_it_unset() -> None:
    opts = application_failover_task_options({"purgeMode": "Gracefully"})
    assert opts.grace_period_seconds is None


def test_application_gracefully_needs_the_gate() -> None:
    with pytest.raises(TaskBuildError, match="^" + GRACEFUL_EVICTION_GATE_ERROR + "$"):
        application_failover_task_options({"purgeMode": "Gracefully", "gracePeriodSeconds": 1},
                                          graceful_eviction_enabled=False)
    # other modes do not need it
    application_failover_task_options({"purgeMode": "Directly"}, graceful_eviction_enabled=False)


def test_application_never_suppresses_deletion() -> None:
    opts = application_failover_task_options({"purgeMode": "Never", "gracePeriodSeconds": 9},
                                             binding_kind="ClusterResourceBinding")
    assert opts.suppress_deletion is True and opts.grace_period_seconds is None
    assert opts.producer == PRODUCER_CRB_APPLICATION_FAILOVER
    assert build_task("m1", 2, opts)["suppressDeletion"] is True


@pytest.mark.parametrize("mode", ["Directly", "", "Immediately", "Bogus"])
def test_application_other_modes_add_nothing(mode: str) -> None:
    opts = application_failover_task_options({"purgeMode": mode, "gracePeriodSeconds": 5})
    assert opts.purge_mode == mode  # copied verbatim
    assert opts.grace_period_seconds is None and opts.suppress_deletion is None
    task = build_task("m1", 0, opts)
    assert ("purgeMode" in task) is bool(mode)


def test_application_state_records_clusters_before_failover_only_with_state() -> None:
    with_state = application_failover_task_options({"purgeMode": "Directly"}, preserved_label_state={"k": "v"},
                                                   clusters_before_failover=["m1", "m2"])
    assert with_state.preserved_label_state == {"k": "v"}
    assert with_state.clusters_before_failover == ("m1", "m2")
    without = application_failover_task_options({"purgeMode": "Directly"}, clusters_before_failover=["m1"])
    assert without.preserved_label_state is None and without.clusters_before_failover == ()


# ------------------------------------------------------------------------------------------------
# build_task
# ------------------------------------------------------------------------------------------------


def test_build_task_full_and_field_order() -> None:
    opts = TaskOptions(producer="p", reason="r", purge_mode="Gracefully", message="m", grace_period_seconds=30,
                       suppress_deletion=False, preserved_label_state={"a": "b"}, clusters_before_failover=("x",),
                       creation_timestamp=NOW)
    task = build_task("m1", 4, opts)
    assert list(task) == ["fromCluster", "purgeMode", "replicas", "reason", "message", "producer",
                          "gracePeriodSeconds", "suppressDeletion", "preservedLabelState", "creationTimestamp",
                          "clustersBeforeFailover"]
    assert task["creationTimestamp"] == "2026-01-01T12:00:00Z"
    assert task["suppressDeletion"] is False


@pytest.mark.parametrize("replicas", [0, -1])
def test_build_task_replicas_only_when_positive(replicas: int) -> None:
    assert "replicas" not in build_task("m1", replicas, TAINT_OPTS)


def test_format_timestamp() -> None:
    assert format_timestamp(datetime(2026, 5, 6, 7, 8, 9, 999999)) == "2026-05-06T07:08:09Z"


# ------------------------------------------------------------------------------------------------
# GracefulEvictCluster
# ------------------------------------------------------------------------------------------------


def test_evict_removes_cluster_and_appends_task() -> None:
    s = spec([("m1", 2), ("m2", 3)])
    original = copy.deepcopy(s)
    patch = graceful_evict_cluster(s, "m1", TAINT_OPTS)
    assert s == original  # input untouched
    assert patch.clusters == [{"name": "m2", "replicas": 3}]
    assert patch.tasks == [build_task("m1", 2, TAINT_OPTS)]
    assert patch.removed == ["m1"] and patch.added == ["m1"] and patch.changed
    assert patch.spec_patch() == {"spec": {"clusters": [{"name": "m2", "replicas": 3}],
                                           "gracefulEvictionTasks": [build_task("m1", 2, TAINT_OPTS)]}}


def test_evict_absent_cluster_changes_nothing_at_all() -> None:
    s = spec([("m2", 1)], tasks=[])
    patch = graceful_evict_cluster(s, "m1", TAINT_OPTS)
    assert not patch.changed and patch.tasks == [] and patch.clusters == [{"name": "m2", "replicas": 1}]


def test_evict_cluster_with_existing_task_only_removes_it() -> None:
    """Dedupe rule: the cluster is removed, no second task, and the old task is left untouched."""
    old = {"fromCluster": "m1", "purgeMode": "Never", "reason": "ApplicationFailure", "producer": "x",
           "suppressDeletion": True}
    s = spec([("m1", 1), ("m2", 1)], tasks=[old])
    patch = graceful_evict_cluster(s, "m1", TAINT_OPTS)
    assert patch.clusters == [{"name": "m2", "replicas": 1}]
    assert patch.tasks == [old]
    assert patch.removed == ["m1"] and patch.added == []


def test_evict_last_cluster_patch_removes_the_list() -> None:
    patch = graceful_evict_cluster(spec([("m1", 0)]), "m1", TAINT_OPTS)
    assert patch.spec_patch("42") == {"metadata": {"resourceVersion": "42"},
                                      "spec": {"clusters": None, "gracefulEvictionTasks": [build_task("m1", 0, TAINT_OPTS)]}}
    binding: dict[str, Any] = {"metadata": {"name": "b"},
                               "spec": {"clusters": [{"name": "m1"}], "resource": {"kind": "Deployment"}}}
    applied = patch.apply(binding)
    assert "clusters" not in applied["spec"] and applied["spec"]["resource"] == {"kind": "Deployment"}
    assert applied["spec"]["gracefulEvictionTasks"] == [build_task("m1", 0, TAINT_OPTS)]
    assert binding["spec"]["clusters"] == [{"name": "m1"}]


def test_evict_several_clusters_in_one_batch() -> None:
    s = spec([("m1", 1), ("m2", 2), ("m3", 3)])
    before = cluster_names(s)
    opts = application_failover_task_options({"purgeMode": "Directly"}, preserved_label_state={"a": "1"},
                                             clusters_before_failover=before)
    patch = graceful_evict_clusters(s, [("m1", opts), ("m3", opts), ("m1", opts), ("m9", opts)])
    assert patch.clusters == [{"name": "m2", "replicas": 2}]
    assert [t["fromCluster"] for t in patch.tasks] == ["m1", "m3"]
    # clustersBeforeFailover was computed once, before any removal
    assert all(t["clustersBeforeFailover"] == ["m1", "m2", "m3"] for t in patch.tasks)
    assert patch.removed == ["m1", "m3"] and patch.added == ["m1", "m3"]


def test_cluster_in_eviction_tasks() -> None:
    s = spec([], tasks=[{"fromCluster": "m1"}])
    assert cluster_in_eviction_tasks(s, "m1") and not cluster_in_eviction_tasks(s, "m2")
    assert not cluster_in_eviction_tasks({}, "m1")


def test_malformed_entries_are_ignored() -> None:
    s = {"clusters": [{"name": "m1", "replicas": "x"}, "junk"], "gracefulEvictionTasks": ["junk"]}
    patch = graceful_evict_cluster(s, "m1", TAINT_OPTS)
    assert patch.clusters == [] and patch.tasks == [build_task("m1", 0, TAINT_OPTS)]


def test_patch_type() -> None:
    assert isinstance(graceful_evict_cluster({}, "m1", TAINT_OPTS), EvictionPatch)


# ------------------------------------------------------------------------------------------------
# properties
# ------------------------------------------------------------------------------------------------

NAMES = st.sampled_from(["m1", "m2", "m3", "m4"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(NAMES, st.integers(min_value=0, max_value=5)), max_size=5, unique_by=lambda t: t[0]),
    st.lists(NAMES, max_size=3, unique=True),
    st.lists(NAMES, max_size=6),
)
def test_property_one_task_per_cluster_and_clusters_only_shrink(
    clusters: list[tuple[str, int]], tasked: list[str], evict: list[str]
) -> None:
    s = spec(clusters, tasks=[{"fromCluster": c, "reason": "r", "producer": "p"} for c in tasked])
    patch = graceful_evict_clusters(s, [(c, TAINT_OPTS) for c in evict])
    names_after = [c["name"] for c in patch.clusters]
    from_clusters = [t["fromCluster"] for t in patch.tasks]
    assert len(from_clusters) == len(set(from_clusters))  # never two tasks for one cluster
    assert patch.tasks[: len(tasked)] == s["gracefulEvictionTasks"]  # old tasks untouched, new ones appended
    assert names_after == [n for n, _ in clusters if n not in evict]
    for name, replicas in clusters:
        if name in evict and name not in tasked:
            task = next(t for t in patch.tasks if t["fromCluster"] == name)
            assert task.get("replicas") == (replicas if replicas > 0 else None)
    assert set(patch.added) == {n for n, _ in clusters if n in evict} - set(tasked)
