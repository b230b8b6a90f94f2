"""Filter plugins and their runner: ClusterAffinity, TaintToleration (+ D11: an expired toleration no longer
tolerates), APIEnablement, SpreadConstraint, ClusterEviction."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flotilla.scheduler.affinity import cluster_matches
from flotilla.scheduler.errors import FilterFailure, FitError
from flotilla.scheduler.framework import FilterContext, run_filters
from flotilla.scheduler.model import (
    ClusterAffinity,
    Taint,
    Toleration,
    parse_binding_spec,
    parse_cluster,
)
from flotilla.scheduler.plugins import (
    FILTER_PLUGINS,
    APIEnablementPlugin,
    ClusterAffinityPlugin,
    ClusterEvictionPlugin,
    SpreadConstraintPlugin,
    TaintTolerationPlugin,
)
from flotilla.scheduler.plugins.taint_toleration import expired_no_execute_taint, find_untolerated_taint

from .builders import NOW, ago, binding, cluster, eviction_task, taint

filter_api_enablement = APIEnablementPlugin().filter
filter_cluster_affinity = ClusterAffinityPlugin().filter
filter_cluster_eviction = ClusterEvictionPlugin().filter
filter_spread_constraint = SpreadConstraintPlugin().filter
filter_taint_toleration = TaintTolerationPlugin().filter


def ctx_for(rb: dict[str, Any], affinity_name: str = "", now: Any = NOW) -> FilterContext:
    return FilterContext(spec=parse_binding_spec(rb["spec"]), now=now, affinity_name=affinity_name)


def matches(affinity: dict[str, Any], **cluster_kw: Any) -> bool:
    name = cluster_kw.pop("name", "m1")
    return cluster_matches(parse_cluster(cluster(name, **cluster_kw)), ClusterAffinity.from_dict(affinity))


# -- ClusterMatches ------------------------------------------------------------------------------


def test_empty_affinity_matches_every_cluster() -> None:
    assert matches({})


def test_exclude_wins_over_every_other_rule() -> None:
    assert not matches({"clusterNames": ["m1"], "exclude": ["m1"]})


def test_cluster_names_restrict_to_the_listed_clusters() -> None:
    assert matches({"clusterNames": ["m1", "m2"]}, name="m2")
    assert not matches({"clusterNames": ["m1"]}, name="m3")


def test_label_selector_matches_cluster_labels() -> None:
    affinity = {"labelSelector": {"matchLabels": {"env": "prod"}}}
    assert matches(affinity, labels={"env": "prod"})
    assert not matches(affinity, labels={"env": "dev"})
    assert not matches(affinity)


def test_empty_label_selector_matches_everything() -> None:
    assert matches({"labelSelector": {}})


def test_label_selector_match_expressions() -> None:
    affinity = {
        "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["edge"]}]}
    }
    assert matches(affinity, labels={"tier": "core"})
    assert matches(affinity)  # NotIn matches a missing label
    assert not matches(affinity, labels={"tier": "edge"})


def test_invalid_label_selector_matches_no_cluster() -> None:
    affinity = {"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]}}
    assert not matches(affinity, labels={"tier": "core"})


def test_all_parts_of_an_affinity_must_hold() -> None:
    affinity = {"labelSelector": {"matchLabels": {"env": "prod"}}, "clusterNames": ["m1"]}
    assert matches(affinity, labels={"env": "prod"})
    assert not matches(affinity, name="m2", labels={"env": "prod"})


def fields(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"fieldSelector": {"matchExpressions": list(exprs)}}


def test_field_selector_region_in() -> None:
    affinity = fields({"key": "region", "operator": "In", "values": ["eu"]})
    assert matches(affinity, region="eu")
    assert not matches(affinity, region="us")
    assert not matches(affinity)


def test_field_selector_not_in_matches_an_empty_field() -> None:
    affinity = fields({"key": "provider", "operator": "NotIn", "values": ["aws"]})
    assert matches(affinity)
    assert matches(affinity, provider="gcp")
    assert not matches(affinity, provider="aws")


def test_field_selector_zone_operators() -> None:
    zone_in = fields({"key": "zone", "operator": "In", "values": ["z1"]})
    assert matches(zone_in, zones=["z0", "z1"])
    assert not matches(zone_in, zones=["z2"])
    assert not matches(zone_in)
    zone_not_in = fields({"key": "zone", "operator": "NotIn", "values": ["z1"]})
    assert matches(zone_not_in)
    assert not matches(zone_not_in, zones=["z0", "z1"])
    assert matches(fields({"key": "zone", "operator": "Exists"}), zones=["z1"])
    assert not matches(fields({"key": "zone", "operator": "Exists"}))
    assert matches(fields({"key": "zone", "operator": "DoesNotExist"}))
    assert not matches(fields({"key": "zone", "operator": "Gt", "values": ["1"]}), zones=["1"])


def test_deprecated_spec_zone_is_read_as_zones() -> None:
    obj = cluster("m1")
    obj["spec"]["zone"] = "z1"
    c = parse_cluster(obj)
    assert c.zones == ("z1",)
    assert cluster_matches(
        c, ClusterAffinity.from_dict(fields({"key": "zone", "operator": "In", "values": ["z1"]}))
    )


def test_field_selector_with_invalid_operator_matches_no_cluster() -> None:
    assert not matches(fields({"key": "region", "operator": "Near", "values": ["eu"]}), region="eu")
    assert not matches(fields({"key": "region", "operator": "In", "values": []}), region="eu")


def test_field_selector_all_expressions_must_hold() -> None:
    affinity = fields(
        {"key": "region", "operator": "In", "values": ["eu"]},
        {"key": "provider", "operator": "In", "values": ["aws"]},
        {"key": "zone", "operator": "Exists"},
    )
    assert matches(affinity, region="eu", provider="aws", zones=["z"])
    assert not matches(affinity, region="eu", provider="aws")
    assert not matches(affinity, region="eu", provider="gcp", zones=["z"])


# -- ClusterAffinity filter ------------------------------------------------------------------------


def test_affinity_filter_reason() -> None:
    rb = binding({"clusterAffinity": {"clusterNames": ["m1"]}})
    assert filter_cluster_affinity(ctx_for(rb), parse_cluster(cluster("m1"))) is None
    assert (
        filter_cluster_affinity(ctx_for(rb), parse_cluster(cluster("m2")))
        == "cluster(s) did not match the placement cluster affinity constraint"
    )


def test_cluster_affinities_only_the_term_being_tried_counts() -> None:
    rb = binding(
        {
            "clusterAffinities": [
                {"affinityName": "primary", "clusterNames": ["m1"]},
                {"affinityName": "backup", "clusterNames": ["m2"]},
            ]
        }
    )
    m1, m2 = parse_cluster(cluster("m1")), parse_cluster(cluster("m2"))
    assert filter_cluster_affinity(ctx_for(rb, "primary"), m1) is None
    assert filter_cluster_affinity(ctx_for(rb, "primary"), m2) is not None
    assert filter_cluster_affinity(ctx_for(rb, "backup"), m1) is not None
    assert filter_cluster_affinity(ctx_for(rb, "backup"), m2) is None


def test_overflow_affinities_count_for_workloads_only() -> None:
    placement = {
        "clusterAffinities": [
            {"affinityName": "main", "clusterNames": ["m1"], "overflowAffinities": [{"clusterNames": ["m2"]}]}
        ]
    }
    m2 = parse_cluster(cluster("m2"))
    assert filter_cluster_affinity(ctx_for(binding(placement, replicas=3), "main"), m2) is None
    config_map = binding(placement, replicas=0, kind="ConfigMap", api_version="v1")
    assert filter_cluster_affinity(ctx_for(config_map, "main"), m2) is not None


# -- Tolerations and taints ----------------------------------------------------------------------

T_NO_SCHEDULE = Taint("dedicated", "NoSchedule", "gpu")
T_NO_EXECUTE = Taint("cluster.karmada.io/not-ready", "NoExecute")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (
            Toleration(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule"),
            T_NO_SCHEDULE,
            True,
        ),
        (
            Toleration(key="dedicated", value="gpu"),
            T_NO_SCHEDULE,
            True,
        ),  # "" operator is Equal, "" effect all
        (Toleration(key="dedicated", operator="Equal", value="cpu"), T_NO_SCHEDULE, False),
        (Toleration(key="dedicated", operator="Exists"), T_NO_SCHEDULE, True),
        (Toleration(key="other", operator="Exists"), T_NO_SCHEDULE, False),
        (Toleration(operator="Exists"), T_NO_EXECUTE, True),  # empty key + Exists tolerates everything
        (Toleration(operator="Exists", effect="NoSchedule"), T_NO_EXECUTE, False),
        (Toleration(key="dedicated", operator="Lt", value="5"), T_NO_SCHEDULE, False),
        (Toleration(key="dedicated", operator="Gt", value="1"), T_NO_SCHEDULE, False),
    ],
)
def test_toleration_matching(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert toleration.tolerates(taint) is expected


def test_prefer_no_schedule_taints_are_ignored() -> None:
    assert find_untolerated_taint([Taint("soft", "PreferNoSchedule")], []) is None


def test_first_untolerated_taint_is_reported() -> None:
    taints = [Taint("a", "NoSchedule"), Taint("b", "NoExecute", "x"), Taint("c", "NoSchedule")]
    assert find_untolerated_taint(taints, [Toleration(key="a", operator="Exists")]) == taints[1]


def test_taint_filter_reason_names_the_taint() -> None:
    rb = binding({})
    no_value = parse_cluster(cluster("m1", taints=[taint("cluster.karmada.io/not-ready", "NoSchedule")]))
    with_value = parse_cluster(cluster("m1", taints=[taint("dedicated", "NoExecute", "gpu")]))
    assert filter_taint_toleration(ctx_for(rb), no_value) == (
        "cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}"
    )
    assert (
        filter_taint_toleration(ctx_for(rb), with_value)
        == "cluster(s) had untolerated taint {dedicated=gpu:NoExecute}"
    )


def test_tolerated_taint_passes() -> None:
    rb = binding({"clusterTolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]})
    c = parse_cluster(cluster("m1", taints=[taint("dedicated", "NoSchedule", "gpu")]))
    assert filter_taint_toleration(ctx_for(rb), c) is None


def test_cluster_already_targeted_passes_the_taint_filter() -> None:
    """NoSchedule (and even NoExecute) taints only keep new placements away; eviction is not the filter's job."""
    rb = binding({}, clusters={"m1": 1})
    c = parse_cluster(
        cluster("m1", taints=[taint("cluster.karmada.io/not-ready", "NoExecute", added=ago(10))])
    )
    assert filter_taint_toleration(ctx_for(rb), c) is None


# -- D11 ------------------------------------------------------------------------------------------

NOT_READY_FOR_300 = {
    "clusterTolerations": [
        {
            "key": "cluster.karmada.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        }
    ]
}


def not_ready_since(seconds: float) -> Any:
    return parse_cluster(
        cluster("m1", taints=[taint("cluster.karmada.io/not-ready", "NoExecute", added=ago(seconds))])
    )


def test_d11_expired_toleration_is_untolerated() -> None:
    reason = filter_taint_toleration(ctx_for(binding(NOT_READY_FOR_300)), not_ready_since(301))
    assert (
        reason
        == "cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoExecute} (toleration expired)"
    )


def test_d11_toleration_still_running_is_tolerated() -> None:
    assert filter_taint_toleration(ctx_for(binding(NOT_READY_FOR_300)), not_ready_since(299)) is None


def test_d11_toleration_expires_exactly_at_its_deadline() -> None:
    """The taint manager evicts when ``timeAdded + tolerationSeconds`` is not after now."""
    assert filter_taint_toleration(ctx_for(binding(NOT_READY_FOR_300)), not_ready_since(300)) is not None


def test_d11_uses_the_now_argument() -> None:
    c = not_ready_since(0)
    rb = binding(NOT_READY_FOR_300)
    assert filter_taint_toleration(ctx_for(rb, now=NOW), c) is None
    assert filter_taint_toleration(ctx_for(rb, now=NOW + timedelta(seconds=300)), c) is not None


def test_d11_zero_toleration_seconds_is_expired_at_once() -> None:
    placement = {
        "clusterTolerations": [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]
    }
    assert filter_taint_toleration(ctx_for(binding(placement)), not_ready_since(0)) is not None


def test_d11_toleration_without_seconds_never_expires() -> None:
    placement = {"clusterTolerations": [{"key": "cluster.karmada.io/not-ready", "operator": "Exists"}]}
    assert filter_taint_toleration(ctx_for(binding(placement)), not_ready_since(10**6)) is None


def test_d11_taint_without_time_added_never_expires() -> None:
    c = parse_cluster(cluster("m1", taints=[taint("cluster.karmada.io/not-ready", "NoExecute")]))
    assert filter_taint_toleration(ctx_for(binding(NOT_READY_FOR_300)), c) is None


def test_d11_only_no_execute_taints_expire() -> None:
    placement = {"clusterTolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 1}]}
    c = parse_cluster(cluster("m1", taints=[taint("k", "NoSchedule", added=ago(3600))]))
    assert filter_taint_toleration(ctx_for(binding(placement)), c) is None


def test_d11_first_matching_toleration_decides_like_the_taint_manager() -> None:
    """The taint manager uses, per taint, the first toleration that tolerates it."""
    forever_first = [
        Toleration(operator="Exists"),
        Toleration(key="k", operator="Exists", toleration_seconds=5),
    ]
    timed_first = list(reversed(forever_first))
    taints = [Taint("k", "NoExecute", time_added=NOW - timedelta(hours=1))]
    assert expired_no_execute_taint(taints, forever_first, NOW) is None
    assert expired_no_execute_taint(taints, timed_first, NOW) == taints[0]


def test_d11_earliest_deadline_over_all_taints_counts() -> None:
    tolerations = [Toleration(operator="Exists", effect="NoExecute", toleration_seconds=300)]
    old = Taint("b", "NoExecute", time_added=NOW - timedelta(seconds=400))
    new = Taint("a", "NoExecute", time_added=NOW - timedelta(seconds=10))
    assert expired_no_execute_taint([new, old], tolerations, NOW) == old


def test_d11_does_not_apply_to_clusters_already_targeted() -> None:
    rb = binding(NOT_READY_FOR_300, clusters={"m1": 1})
    assert filter_taint_toleration(ctx_for(rb), not_ready_since(3600)) is None


# -- APIEnablement ---------------------------------------------------------------------------------


def test_api_enabled_cluster_passes() -> None:
    assert filter_api_enablement(ctx_for(binding({})), parse_cluster(cluster("m1"))) is None


def test_missing_api_fails_when_the_list_is_complete() -> None:
    c = parse_cluster(cluster("m1", apis=[("v1", "ConfigMap")]))
    assert filter_api_enablement(ctx_for(binding({})), c) == "cluster(s) did not have the API resource"


def test_missing_api_fails_when_the_list_is_incomplete() -> None:
    """``APIUnknown`` is not ``APIEnabled``: the cluster is not used."""
    c = parse_cluster(cluster("m1", apis=[("v1", "ConfigMap")], complete=False))
    assert filter_api_enablement(ctx_for(binding({})), c) is not None


def test_core_group_version_is_matched() -> None:
    rb = binding({}, kind="ConfigMap", api_version="v1", replicas=0)
    assert filter_api_enablement(ctx_for(rb), parse_cluster(cluster("m1"))) is None
    assert (
        filter_api_enablement(ctx_for(rb), parse_cluster(cluster("m1", apis=[("apps/v1", "Deployment")])))
        is not None
    )


def test_same_kind_in_another_group_version_does_not_count() -> None:
    c = parse_cluster(cluster("m1", apis=[("apps/v1beta1", "Deployment")]))
    assert filter_api_enablement(ctx_for(binding({})), c) is not None


def test_cluster_already_targeted_passes_the_api_filter() -> None:
    c = parse_cluster(cluster("m1", apis=[], complete=False))
    assert filter_api_enablement(ctx_for(binding({}, clusters={"m1": 1})), c) is None


# -- SpreadConstraint filter ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        ("provider", "cluster(s) did not have provider property"),
        ("region", "cluster(s) did not have region property"),
        ("zone", "cluster(s) did not have zones property"),
    ],
)
def test_spread_by_field_needs_the_field(field: str, reason: str) -> None:
    rb = binding(
        {"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2}, {"spreadByField": field}]}
    )
    assert filter_spread_constraint(ctx_for(rb), parse_cluster(cluster("m1"))) == reason
    full = parse_cluster(cluster("m1", provider="aws", region="eu", zones=["z1"]))
    assert filter_spread_constraint(ctx_for(rb), full) is None


def test_spread_by_cluster_or_label_needs_nothing() -> None:
    rb = binding(
        {"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1}, {"spreadByLabel": "team"}]}
    )
    assert filter_spread_constraint(ctx_for(rb), parse_cluster(cluster("m1"))) is None


# -- ClusterEviction ---------------------------------------------------------------------------------


@pytest.mark.parametrize("purge_mode", ["Directly", "Gracefully", "Never"])
def test_cluster_with_eviction_task_is_skipped_whatever_the_purge_mode(purge_mode: str) -> None:
    rb = binding({}, tasks=[eviction_task("m1", purge_mode)])
    assert (
        filter_cluster_eviction(ctx_for(rb), parse_cluster(cluster("m1")))
        == "cluster(s) is in the process of eviction"
    )
    assert filter_cluster_eviction(ctx_for(rb), parse_cluster(cluster("m2"))) is None


# -- run_filters and FitError -------------------------------------------------------------------------


def test_filter_order_is_fixed() -> None:
    assert [plugin.name for plugin in FILTER_PLUGINS] == [
        "ClusterAffinity",
        "SpreadConstraint",
        "APIEnablement",
        "TaintToleration",
        "ClusterEviction",
    ]


def test_first_failing_filter_is_reported() -> None:
    rb = binding({"clusterAffinity": {"clusterNames": ["m2"]}}, tasks=[eviction_task("m1")])
    c = parse_cluster(cluster("m1", taints=[taint("x", "NoSchedule")]))
    assert run_filters(ctx_for(rb), c) == FilterFailure(
        "ClusterAffinity", "cluster(s) did not match the placement cluster affinity constraint"
    )
    rb = binding({}, tasks=[eviction_task("m1")])
    assert run_filters(ctx_for(rb), c) == FilterFailure(
        "TaintToleration", "cluster(s) had untolerated taint {x:NoSchedule}"
    )
    assert run_filters(ctx_for(rb), parse_cluster(cluster("m1"))) == FilterFailure(
        "ClusterEviction", "cluster(s) is in the process of eviction"
    )
    assert run_filters(ctx_for(rb), parse_cluster(cluster("m2"))) is None


def test_filter_failures_are_shared_values_and_their_memo_stays_bounded() -> None:
    import flotilla.scheduler.framework as framework

    rb = binding({})
    first = run_filters(ctx_for(rb), parse_cluster(cluster("m1", taints=[taint("x", "NoSchedule")])))
    again = run_filters(ctx_for(rb), parse_cluster(cluster("m2", taints=[taint("x", "NoSchedule")])))
    assert first is again  # one value for every cluster failing the same way
    for i in range(framework._FAILURES_KEPT + 50):  # a reason per taint: a fleet with ever new taints
        failure = run_filters(ctx_for(rb), parse_cluster(cluster("m1", taints=[taint(f"k{i}", "NoSchedule")])))
        assert failure == FilterFailure("TaintToleration", f"cluster(s) had untolerated taint {{k{i}:NoSchedule}}")
    assert len(framework._FAILURES) <= framework._FAILURES_KEPT


def test_fit_error_message_counts_reasons_sorted() -> None:
    err = FitError(
        3,
        {
            "m1": FilterFailure(
                "TaintToleration",
                "cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}",
            ),
            "m2": FilterFailure(
                "ClusterAffinity", "cluster(s) did not match the placement cluster affinity constraint"
            ),
            "m3": FilterFailure(
                "ClusterAffinity", "cluster(s) did not match the placement cluster affinity constraint"
            ),
        },
    )
    assert err.message == (
        "0/3 clusters are available: 1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}, "
        "2 cluster(s) did not match the placement cluster affinity constraint."
    )
    assert err.reason == "NoClusterFit"


def test_fit_error_without_clusters_says_no_cluster_exists() -> None:
    assert FitError(0, {}).message == "0/0 clusters are available: no cluster exists."
    assert FitError(2, {}).message == "0/2 clusters are available: no cluster exists."
