"""End-to-end scheduling decisions through ``schedule()``."""

from __future__ import annotations

import gc
import random
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.scheduler import FitError, ScheduleResult, schedule
from flotilla.scheduler.model import BindingStatus

from .builders import (
    NOT_READY_NO_SCHEDULE,
    NOW,
    aggregated,
    ago,
    as_map,
    binding,
    cluster,
    divided_dynamic,
    divided_static,
    duplicated,
    eviction_task,
    rfc3339,
    single_cluster,
    taint,
)

NOT_READY = "cluster.karmada.io/not-ready"


def run(rb: dict[str, Any], clusters: list[dict[str, Any]], **kw: Any) -> ScheduleResult:
    kw.setdefault("now", NOW)
    return schedule(rb, None, clusters, **kw)


def placed(result: ScheduleResult) -> dict[str, int]:
    assert result.ok, result.message
    return as_map(result.target_clusters)


# -- Duplicated ------------------------------------------------------------------------------------


def test_duplicated_every_feasible_cluster_gets_every_replica() -> None:
    result = run(binding(duplicated(), replicas=2), [cluster("m2"), cluster("m1"), cluster("m3")])
    assert result.target_clusters == [
        {"name": "m1", "replicas": 2},
        {"name": "m2", "replicas": 2},
        {"name": "m3", "replicas": 2},
    ]
    assert result.writes_clusters
    assert result.affinity_name is None
    assert result.condition() == {
        "type": "Scheduled",
        "status": "True",
        "reason": "Success",
        "message": "Binding has been scheduled successfully.",
    }
    assert result.event_message == "Binding has been scheduled successfully. Result: {m1:2, m2:2, m3:2}"


def test_duplicated_new_placement_avoids_a_not_ready_cluster() -> None:
    clusters = [cluster("m1", taints=[NOT_READY_NO_SCHEDULE]), cluster("m2")]
    assert placed(run(binding(duplicated(), replicas=1), clusters)) == {"m2": 1}


def test_duplicated_keeps_a_not_ready_cluster_it_already_uses() -> None:
    clusters = [cluster("m1", taints=[NOT_READY_NO_SCHEDULE]), cluster("m2")]
    assert placed(run(binding(duplicated(), replicas=1, clusters={"m1": 1, "m2": 1}), clusters)) == {
        "m1": 1,
        "m2": 1,
    }


def test_readiness_itself_is_not_a_filter() -> None:
    down = cluster("m1")
    down["status"]["conditions"][0]["status"] = "False"
    assert placed(run(binding(duplicated()), [down])) == {"m1": 1}


def test_cluster_affinity_restricts_the_clusters() -> None:
    rb = binding({"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}}}, replicas=1)
    clusters = [cluster("m1", labels={"env": "prod"}), cluster("m2", labels={"env": "dev"})]
    assert placed(run(rb, clusters)) == {"m1": 1}


def test_placement_argument_overrides_the_binding_placement() -> None:
    rb = binding({"clusterAffinity": {"clusterNames": ["m1"]}})
    result = schedule(
        rb, {"clusterAffinity": {"clusterNames": ["m2"]}}, [cluster("m1"), cluster("m2")], now=NOW
    )
    assert placed(result) == {"m2": 1}


def test_bare_spec_is_accepted() -> None:
    rb = binding(duplicated(), replicas=3)
    assert placed(schedule(rb["spec"], None, [cluster("m1")], now=NOW)) == {"m1": 3}


# -- static and dynamic weights ---------------------------------------------------------------------


def test_static_weights_divide_replicas() -> None:
    rb = binding(divided_static({"m1": 2, "m2": 1}), replicas=9)
    assert placed(run(rb, [cluster("m1"), cluster("m2"), cluster("m3")])) == {"m1": 6, "m2": 3}


def test_static_weights_recomputed_after_a_cluster_is_evicted() -> None:
    rb = binding(
        divided_static({"m1": 1, "m2": 1, "m3": 1}),
        replicas=6,
        clusters={"m2": 2, "m3": 2},
        tasks=[eviction_task("m1", replicas=2)],
    )
    assert placed(run(rb, [cluster("m1"), cluster("m2"), cluster("m3")])) == {"m2": 3, "m3": 3}


def test_dynamic_weights_follow_cpu_capacity() -> None:
    rb = binding(divided_dynamic(), replicas=6, requests={"cpu": "500m"})
    clusters = [
        cluster("m1", allocatable={"cpu": "1"}),  # 2 replicas fit
        cluster("m2", allocatable={"cpu": "2"}),  # 4
        cluster("m3", allocatable={"cpu": "4"}, allocated={"cpu": "1"}),  # 6
    ]
    assert placed(run(rb, clusters)) == {"m1": 1, "m2": 2, "m3": 3}


def test_dynamic_weights_not_enough_capacity_is_unschedulable() -> None:
    rb = binding(divided_dynamic(), replicas=10, requests={"cpu": "1"})
    result = run(rb, [cluster("m1", allocatable={"cpu": "2"}), cluster("m2", allocatable={"cpu": "1500m"})])
    assert result.reason == "Unschedulable"
    assert result.message == (
        "failed to assign replicas: failed to scale up: Clusters available replicas 3 are not enough to schedule."
    )
    assert not result.writes_clusters
    assert result.target_clusters == []


def test_dynamic_weights_scale_down_shrinks_in_place() -> None:
    rb = binding(divided_dynamic(), replicas=3, clusters={"m1": 4, "m2": 2})
    assert placed(run(rb, [cluster("m1"), cluster("m2"), cluster("m3")])) == {"m1": 2, "m2": 1}


def test_dynamic_fresh_reschedule_rebalances() -> None:
    status = {"lastScheduledTime": ago(60)}
    steady = binding(divided_dynamic(), replicas=4, clusters={"m1": 4}, status=status)
    clusters = [cluster("m1", pods=10), cluster("m2", pods=10)]
    assert placed(run(steady, clusters)) == {"m1": 4}
    fresh = binding(
        divided_dynamic(), replicas=4, clusters={"m1": 4}, status=status, reschedule_triggered_at=ago(1)
    )
    # Fresh weights: m1 10 + 4, m2 10.
    assert placed(run(fresh, clusters)) == {"m1": 2, "m2": 2}


def test_reschedule_needs_a_last_scheduled_time() -> None:
    rb = binding(divided_dynamic(), replicas=4, clusters={"m1": 4}, reschedule_triggered_at=ago(1))
    assert placed(run(rb, [cluster("m1", pods=10), cluster("m2", pods=10)])) == {"m1": 4}


def test_aggregated_appendix_a_vector_end_to_end() -> None:
    """Karmada's case: 12 -> 24 with cluster2 gone and allocatable m1:4, m3:8, m4:12 -> m1:7, m3:7, m4:10."""
    rb = binding(aggregated(), replicas=24, clusters={"m1": 4, "m2": 8}, requests={})
    clusters = [cluster("m1", pods=8, allocated_pods=4), cluster("m3", pods=8), cluster("m4", pods=12)]
    assert placed(run(rb, clusters)) == {"m1": 7, "m3": 7, "m4": 10}


def test_scale_to_zero_with_requests_empties_the_result() -> None:
    rb = binding(divided_dynamic(), replicas=0, clusters={"m1": 2}, requests={"cpu": "100m"})
    result = run(rb, [cluster("m1", allocatable={"cpu": "1"})])
    assert result.ok
    assert result.target_clusters == []


def test_zero_replicas_without_requests_is_propagated_like_a_non_workload() -> None:
    rb = binding(duplicated(), replicas=0)
    assert placed(run(rb, [cluster("m1"), cluster("m2")])) == {"m1": 0, "m2": 0}


def test_non_workload_goes_everywhere_with_zero_replicas() -> None:
    rb = binding(divided_dynamic(), replicas=0, kind="ConfigMap", api_version="v1")
    clusters = [
        cluster("m1", pods=None),
        cluster("m2", pods=None),
        cluster("m3", apis=[("apps/v1", "Deployment")]),
    ]
    assert placed(run(rb, clusters)) == {"m1": 0, "m2": 0}


def test_empty_workload_propagation_keeps_selected_clusters_with_zero() -> None:
    rb = binding(divided_static({"m1": 1}), replicas=2)
    result = run(rb, [cluster("m1"), cluster("m2")], enable_empty_workload_propagation=True)
    assert result.target_clusters == [{"name": "m1", "replicas": 2}, {"name": "m2", "replicas": 0}]


def test_extra_estimates_lower_the_capacity() -> None:
    rb = binding(divided_dynamic(), replicas=4)
    clusters = [cluster("m1", pods=10), cluster("m2", pods=10)]
    # m1: min(10, 2) = 2; m2: the -1 answer is ignored, 10 stays. Webster(4 over 10:2) = 3:1.
    assert placed(run(rb, clusters, extra_estimates={"m1": 2, "m2": -1})) == {"m1": 1, "m2": 3}


# -- spread constraints ------------------------------------------------------------------------------


def test_single_cluster_duplicated_picks_one_cluster() -> None:
    rb = binding(single_cluster(), replicas=3)
    assert placed(run(rb, [cluster("m2"), cluster("m1"), cluster("m3")])) == {"m1": 3}


def test_single_cluster_stays_where_it_is() -> None:
    rb = binding(single_cluster(), replicas=3, clusters={"m3": 3})
    assert placed(run(rb, [cluster("m1"), cluster("m2"), cluster("m3")])) == {"m3": 3}


def test_single_cluster_divided_picks_a_cluster_with_room() -> None:
    rb = binding(single_cluster(**aggregated()), replicas=5)
    clusters = [cluster("m1", pods=2), cluster("m2", pods=3), cluster("m3", pods=5)]
    assert placed(run(rb, clusters)) == {"m3": 5}


def test_single_cluster_divided_without_room_fails_to_select() -> None:
    rb = binding(single_cluster(**aggregated()), replicas=5)
    result = run(rb, [cluster("m1", pods=2), cluster("m2", pods=3)])
    assert result.reason == "SchedulerError"
    assert result.message == "failed to select clusters: no enough resource when selecting 1 clusters"
    assert not result.writes_clusters


def test_two_clusters_out_of_three() -> None:
    rb = binding(
        {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 2}]}, replicas=1
    )
    assert placed(run(rb, [cluster("m1"), cluster("m2"), cluster("m3")])) == {"m1": 1, "m2": 1}


def test_min_groups_not_met_is_a_scheduler_error() -> None:
    rb = binding({"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 3, "maxGroups": 3}]})
    result = run(rb, [cluster("m1"), cluster("m2", taints=[NOT_READY_NO_SCHEDULE])])
    assert result.reason == "SchedulerError"
    assert "MinGroups" in result.message


def test_d12_cluster_spread_without_max_groups_is_an_error_not_an_empty_schedule() -> None:
    rb = binding({"spreadConstraints": [{"spreadByField": "cluster"}]}, replicas=1, clusters={"m1": 1})
    result = run(rb, [cluster("m1"), cluster("m2")])
    assert not result.ok
    assert result.reason == "SchedulerError"
    assert "maxGroups" in result.message
    assert not result.writes_clusters  # the current placement is left alone


def test_region_spread_single_region_single_cluster() -> None:
    rb = binding(
        {
            "spreadConstraints": [
                {"spreadByField": "region", "minGroups": 1, "maxGroups": 1},
                {"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1},
            ]
        },
        replicas=2,
    )
    clusters = [
        cluster("a1", region="ap"),
        cluster("e1", region="eu"),
        cluster("e2", region="eu"),
        cluster("n1"),  # no region: filtered out by the SpreadConstraint filter
    ]
    assert placed(run(rb, clusters)) == {"e1": 2}


def test_region_spread_duplicated_prefers_a_region_with_more_clusters_over_the_current_one() -> None:
    """A Karmada property worth knowing: locality (score 100) weighs less than one more cluster (1000)."""
    rb = binding(
        {
            "spreadConstraints": [
                {"spreadByField": "region", "minGroups": 1, "maxGroups": 1},
                {"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1},
            ]
        },
        replicas=2,
        clusters={"a1": 2},
    )
    clusters = [cluster("a1", region="ap"), cluster("e1", region="eu"), cluster("e2", region="eu")]
    # Region scores (Duplicated): eu 2 clusters -> 2000, ap 1 cluster with score 100 -> 1000 + 100.
    assert placed(run(rb, clusters)) == {"e1": 2}


def test_region_spread_two_regions() -> None:
    rb = binding(
        {
            "spreadConstraints": [
                {"spreadByField": "region", "minGroups": 2, "maxGroups": 2},
                {"spreadByField": "cluster", "minGroups": 2, "maxGroups": 3},
            ]
        },
        replicas=1,
    )
    clusters = [
        cluster("a1", region="ap"),
        cluster("e1", region="eu"),
        cluster("e2", region="eu"),
        cluster("u1", region="us"),
    ]
    assert placed(run(rb, clusters)) == {"a1": 1, "e1": 1, "e2": 1}


# -- failover ----------------------------------------------------------------------------------------


def failed(name: str) -> dict[str, Any]:
    """A cluster the taint manager is evicting from: NoExecute taint (plus the automatic NoSchedule one)."""
    return cluster(name, taints=[NOT_READY_NO_SCHEDULE, taint(NOT_READY, "NoExecute", added=ago(30))])


def test_failover_single_cluster_moves_to_another_cluster() -> None:
    # The taint manager removed m1 from spec.clusters and recorded an eviction task for it.
    rb = binding(single_cluster(), replicas=1, tasks=[eviction_task("m1", "Directly", replicas=1)])
    result = run(rb, [failed("m1"), cluster("m2"), cluster("m3")])
    assert placed(result) == {"m2": 1}


def test_failover_tolerated_taint_is_still_kept_out_by_the_eviction_task() -> None:
    placement = single_cluster(clusterTolerations=[{"key": NOT_READY, "operator": "Exists"}])
    rb = binding(placement, replicas=1, tasks=[eviction_task("m1", "Gracefully", replicas=1)])
    assert placed(run(rb, [failed("m1"), cluster("m2")])) == {"m2": 1}


def test_failover_cluster_with_task_is_excluded_even_while_still_listed() -> None:
    rb = binding(duplicated(), replicas=1, clusters={"m1": 1}, tasks=[eviction_task("m1")])
    assert placed(run(rb, [failed("m1"), cluster("m2")])) == {"m2": 1}


def test_failover_divided_moves_the_evicted_replicas() -> None:
    rb = binding(
        divided_dynamic(),
        replicas=4,
        clusters={"m2": 2},
        tasks=[eviction_task("m1", "Gracefully", replicas=2)],
    )
    clusters = [failed("m1"), cluster("m2", pods=10, allocated_pods=2), cluster("m3", pods=10)]
    got = placed(run(rb, clusters))
    assert "m1" not in got
    assert sum(got.values()) == 4
    assert got == {"m2": 3, "m3": 1}


def test_failover_with_no_other_cluster_clears_the_placement() -> None:
    rb = binding(single_cluster(), replicas=1, tasks=[eviction_task("m1", "Directly", replicas=1)])
    result = run(rb, [failed("m1")])
    assert result.reason == "NoClusterFit"
    assert (
        result.message
        == "0/1 clusters are available: 1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}."
    )
    assert result.writes_clusters
    assert result.target_clusters == []


# -- D11 ----------------------------------------------------------------------------------------------

TOLERATE_NOT_READY_300 = [
    {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
]


def test_d11_expired_toleration_is_untolerated() -> None:
    rb = binding(single_cluster(clusterTolerations=TOLERATE_NOT_READY_300), replicas=1)
    clusters = [cluster("m1", taints=[taint(NOT_READY, "NoExecute", added=ago(301))]), cluster("m2")]
    assert placed(run(rb, clusters)) == {"m2": 1}
    result = run(rb, clusters[:1])
    assert result.reason == "NoClusterFit"
    assert result.message == (
        "0/1 clusters are available: 1 cluster(s) had untolerated taint "
        "{cluster.karmada.io/not-ready:NoExecute} (toleration expired)."
    )


def test_d11_toleration_still_running_lets_the_cluster_be_used() -> None:
    rb = binding(single_cluster(clusterTolerations=TOLERATE_NOT_READY_300), replicas=1)
    clusters = [cluster("m1", taints=[taint(NOT_READY, "NoExecute", added=ago(120))]), cluster("m2")]
    assert placed(run(rb, clusters)) == {"m1": 1}
    # The same cluster, 180 s later, is no longer acceptable for a new placement.
    assert placed(run(rb, clusters, now=NOW + timedelta(seconds=180))) == {"m2": 1}


def test_d11_no_ping_pong_after_the_eviction_task_is_gone() -> None:
    """After failover the task is removed; the cluster is still NoExecute-tainted past the toleration."""
    rb = binding(duplicated(clusterTolerations=TOLERATE_NOT_READY_300), replicas=1, clusters={"m2": 1})
    clusters = [cluster("m1", taints=[taint(NOT_READY, "NoExecute", added=ago(900))]), cluster("m2")]
    assert placed(run(rb, clusters)) == {"m2": 1}


# -- fit errors ---------------------------------------------------------------------------------------


def test_fit_error_lists_the_reasons_per_cluster() -> None:
    rb = binding({"clusterAffinity": {"clusterNames": ["m1"]}}, replicas=1, clusters={"m2": 1})
    result = run(rb, [cluster("m1", taints=[NOT_READY_NO_SCHEDULE]), cluster("m2"), cluster("m3")])
    assert result.message == (
        "0/3 clusters are available: 1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}, "
        "2 cluster(s) did not match the placement cluster affinity constraint."
    )
    assert isinstance(result.error, FitError)
    assert result.reason == "NoClusterFit"
    assert result.writes_clusters and result.target_clusters == []
    assert {name: f.plugin for name, f in result.failures.items()} == {
        "m1": "TaintToleration",
        "m2": "ClusterAffinity",
        "m3": "ClusterAffinity",
    }
    assert result.condition()["status"] == "False"


def test_no_cluster_at_all() -> None:
    result = run(binding(duplicated()), [])
    assert result.message == "0/0 clusters are available: no cluster exists."
    assert result.writes_clusters


def test_clusters_being_deleted_are_skipped_but_counted() -> None:
    result = run(
        binding(duplicated()), [cluster("m1", deleting=True), cluster("m2", taints=[NOT_READY_NO_SCHEDULE])]
    )
    assert result.message == (
        "0/2 clusters are available: 1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}."
    )
    assert run(binding(duplicated()), [cluster("m1", deleting=True)]).message == (
        "0/1 clusters are available: no cluster exists."
    )


def test_missing_api_is_a_fit_error() -> None:
    result = run(binding(duplicated()), [cluster("m1", apis=[("v1", "ConfigMap")])])
    assert result.message == "0/1 clusters are available: 1 cluster(s) did not have the API resource."


# -- clusterAffinities -------------------------------------------------------------------------------

TERMS = {
    "clusterAffinities": [
        {"affinityName": "primary", "clusterNames": ["m1"]},
        {"affinityName": "backup", "clusterNames": ["m2"]},
    ]
}


def test_cluster_affinities_first_feasible_term_wins() -> None:
    result = run(binding(TERMS), [cluster("m1"), cluster("m2")])
    assert placed(result) == {"m1": 1}
    assert result.affinity_name == "primary"
    assert result.attempts == ()


def test_cluster_affinities_fall_through_to_the_next_term() -> None:
    result = run(binding(TERMS), [cluster("m1", taints=[NOT_READY_NO_SCHEDULE]), cluster("m2")])
    assert placed(result) == {"m2": 1}
    assert result.affinity_name == "backup"
    assert [a.affinity_name for a in result.attempts] == ["primary"]
    assert isinstance(result.attempts[0].error, FitError)


def test_cluster_affinities_are_sticky_forward() -> None:
    rb = binding(TERMS, clusters={"m2": 1}, status={"schedulerObservingAffinityName": "backup"})
    result = run(rb, [cluster("m1"), cluster("m2")])
    assert placed(result) == {"m2": 1}
    assert result.affinity_name == "backup"


def test_cluster_affinities_explicit_reschedule_starts_over() -> None:
    rb = binding(
        TERMS,
        clusters={"m2": 1},
        status={"schedulerObservingAffinityName": "backup", "lastScheduledTime": ago(60)},
        reschedule_triggered_at=ago(5),
    )
    result = run(rb, [cluster("m1"), cluster("m2")])
    assert placed(result) == {"m1": 1}
    assert result.affinity_name == "primary"


def test_cluster_affinities_previous_argument_overrides_embedded_status() -> None:
    rb = binding(TERMS, status={"schedulerObservingAffinityName": "primary"})
    result = run(rb, [cluster("m1"), cluster("m2")], previous=BindingStatus(affinity_name="backup"))
    assert result.affinity_name == "backup"
    result = run(rb, [cluster("m1"), cluster("m2")], previous={"schedulerObservingAffinityName": "backup"})
    assert result.affinity_name == "backup"


def test_cluster_affinities_unknown_observed_name_starts_at_the_first_term() -> None:
    rb = binding(TERMS, status={"schedulerObservingAffinityName": "renamed"})
    assert run(rb, [cluster("m1"), cluster("m2")]).affinity_name == "primary"


def test_cluster_affinities_all_failing_report_the_first_tried_term() -> None:
    rb = binding(TERMS, status={"schedulerObservingAffinityName": "backup"})
    result = run(rb, [cluster("m1"), cluster("m2", taints=[NOT_READY_NO_SCHEDULE])])
    assert result.reason == "NoClusterFit"
    assert result.affinity_name is None
    assert result.writes_clusters
    assert result.message == (
        "0/2 clusters are available: 1 cluster(s) did not match the placement cluster affinity constraint, "
        "1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}."
    )
    assert [a.affinity_name for a in result.attempts] == ["backup"]


def test_cluster_affinities_first_error_not_a_fit_error_writes_nothing() -> None:
    placement = {
        "clusterAffinities": [
            {"affinityName": "one", "clusterNames": ["m1", "m2"]},
            {"affinityName": "two", "clusterNames": ["m3"]},
        ],
        "spreadConstraints": [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 2}],
    }
    result = run(binding(placement), [cluster("m1"), cluster("m2", taints=[NOT_READY_NO_SCHEDULE])])
    assert result.reason == "SchedulerError"
    assert not result.writes_clusters
    assert [a.affinity_name for a in result.attempts] == ["one", "two"]


def test_overflow_affinities_spill_over_when_the_primary_is_full() -> None:
    placement = divided_dynamic(
        clusterAffinities=[
            {
                "affinityName": "main",
                "clusterNames": ["m1"],
                "overflowAffinities": [{"clusterNames": ["burst"]}],
            }
        ]
    )
    rb = binding(placement, replicas=5)
    result = run(rb, [cluster("m1", pods=3), cluster("burst", pods=100)])
    assert placed(result) == {"m1": 3, "burst": 2}
    assert result.affinity_name == "main"


# -- determinism -------------------------------------------------------------------------------------


@given(
    seed=st.integers(), replicas=st.integers(1, 30), kind=st.sampled_from(["dup", "static", "dynamic", "agg"])
)
@settings(max_examples=60, deadline=None)
def test_property_result_does_not_depend_on_cluster_order(seed: int, replicas: int, kind: str) -> None:
    placement = {
        "dup": duplicated(),
        "static": divided_static(),
        "dynamic": divided_dynamic(),
        "agg": aggregated(),
    }[kind]
    rb = binding(placement, replicas=replicas, clusters={"m2": 1})
    clusters = [cluster(f"m{i}", pods=5 + 3 * i) for i in range(5)]
    expected = run(rb, clusters)
    shuffled = list(clusters)
    random.Random(seed).shuffle(shuffled)
    again = run(rb, shuffled)
    assert again.target_clusters == expected.target_clusters
    assert again.message == expected.message


def test_time_added_is_read_from_rfc3339() -> None:
    rb = binding(single_cluster(clusterTolerations=TOLERATE_NOT_READY_300), replicas=1)
    tainted = cluster(
        "m1", taints=[taint(NOT_READY, "NoExecute", added=rfc3339(NOW - timedelta(minutes=10)))]
    )
    assert run(rb, [tainted]).reason == "NoClusterFit"


def test_previous_assignment_can_be_passed_as_a_list() -> None:
    rb = binding(single_cluster(), replicas=1)
    result = run(rb, [cluster("m1"), cluster("m2")], previous=[{"name": "m2", "replicas": 1}])
    assert placed(result) == {"m2": 1}


def test_a_failed_affinity_term_leaves_no_reference_cycle_behind() -> None:
    """The failure of a term is kept on the result as a value: no traceback that holds the attempts in a cycle
    (every cluster's FilterFailure would wait for the garbage collector after each failover's scheduling)."""
    names = [f"m{i}" for i in range(10)]
    clusters = [cluster(n, taints=[taint("x", "NoSchedule")] if n == "m0" else []) for n in names]
    rb = {"spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "d", "name": "x"},
                   "replicas": 1,
                   "placement": {"clusterAffinities": [{"affinityName": "primary", "clusterNames": ["m0"]},
                                                       {"affinityName": "fallback", "clusterNames": names[1:]}],
                                 "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1,
                                                        "minGroups": 1}]}},
          "status": {}}
    schedule(rb, None, clusters, now=NOW)
    gc.collect()
    gc.disable()
    try:
        results = [schedule(rb, None, clusters, now=NOW) for _ in range(5)]
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert [(r.affinity_name, [a.affinity_name for a in r.attempts]) for r in results] == [("fallback", ["primary"])] * 5
    assert isinstance(results[0].attempts[0].error, FitError)
    assert unreachable == 0
