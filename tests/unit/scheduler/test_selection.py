"""Candidate ordering and cluster selection by spread constraints (cluster and region)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flotilla.scheduler.errors import SchedulerError
from flotilla.scheduler.model import Placement, parse_binding_spec, parse_cluster, parse_placement
from flotilla.scheduler.selection import (
    NO_MATCH_OVERFLOW_ORDER,
    Candidate,
    GroupInfo,
    build_candidates,
    group_score,
    overflow_order,
    select_clusters,
    select_groups,
)

from .builders import aggregated, binding, cluster, divided_dynamic, divided_static


def cand(name: str, available: int = 0, score: int = 0, region: str = "", order: int = 0) -> Candidate:
    return Candidate(
        cluster=parse_cluster(cluster(name, region=region)),
        score=score,
        overflow_order=order,
        available_replicas=available,
        allocatable_replicas=available,
    )


def names(cs: list[Candidate]) -> list[str]:
    return [c.name for c in cs]


def spread(*constraints: dict[str, Any], base: dict[str, Any] | None = None) -> Placement:
    return parse_placement({**(base or {}), "spreadConstraints": list(constraints)})


def by_cluster(max_groups: int, min_groups: int = 1) -> dict[str, Any]:
    return {"spreadByField": "cluster", "maxGroups": max_groups, "minGroups": min_groups}


def by_region(max_groups: int, min_groups: int = 1) -> dict[str, Any]:
    return {"spreadByField": "region", "maxGroups": max_groups, "minGroups": min_groups}


# -- ordering --------------------------------------------------------------------------------------


def test_candidates_order_by_score_then_available_then_name() -> None:
    rb = binding(divided_dynamic(), replicas=4, clusters={"m3": 1})
    spec = parse_binding_spec(rb["spec"])
    clusters = [parse_cluster(cluster(n)) for n in ("m1", "m2", "m3", "m4")]
    scores = {"m1": 0, "m2": 0, "m3": 100, "m4": 0}
    allocatable = {"m1": 5, "m2": 9, "m3": 0, "m4": 5}
    got = build_candidates(clusters, spec, "", scores, allocatable)
    assert names(got) == ["m3", "m2", "m1", "m4"]
    assert [(c.allocatable_replicas, c.available_replicas) for c in got] == [(0, 1), (9, 9), (5, 5), (5, 5)]


def test_overflow_order_comes_first() -> None:
    placement = {
        "clusterAffinities": [
            {
                "affinityName": "a",
                "clusterNames": ["m1"],
                "overflowAffinities": [{"clusterNames": ["m2"]}, {}],
            },
        ]
    }
    spec = parse_binding_spec(binding(placement)["spec"])
    m1, m2, m3 = (parse_cluster(cluster(n)) for n in ("m1", "m2", "m3"))
    assert [overflow_order(spec, "a", c) for c in (m1, m2, m3)] == [0, 1, 2]
    assert overflow_order(spec, "unknown", m1) == NO_MATCH_OVERFLOW_ORDER
    got = build_candidates(
        [m3, m2, m1], spec, "a", {"m1": 0, "m2": 100, "m3": 100}, {"m1": 1, "m2": 9, "m3": 9}
    )
    assert names(got) == ["m1", "m2", "m3"]


def test_overflow_order_is_zero_without_cluster_affinities() -> None:
    spec = parse_binding_spec(binding({"clusterAffinity": {"clusterNames": ["m1"]}})["spec"])
    assert overflow_order(spec, "", parse_cluster(cluster("m9"))) == 0


@given(
    data=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), min_size=1, max_size=8),
    seed=st.integers(),
)
def test_property_candidate_order_does_not_depend_on_input_order(
    data: list[tuple[int, int]], seed: int
) -> None:
    spec = parse_binding_spec(binding({}, replicas=3)["spec"])
    clusters = [parse_cluster(cluster(f"m{i}")) for i in range(len(data))]
    scores = {f"m{i}": 100 * s for i, (s, _) in enumerate(data)}
    allocatable = {f"m{i}": a for i, (_, a) in enumerate(data)}
    shuffled = list(clusters)
    random.Random(seed).shuffle(shuffled)
    assert build_candidates(shuffled, spec, "", scores, allocatable) == build_candidates(
        clusters, spec, "", scores, allocatable
    )


# -- when spread constraints do not apply -----------------------------------------------------------


def test_without_spread_constraints_every_candidate_is_selected() -> None:
    cands = [cand("m1"), cand("m2")]
    assert select_clusters(parse_placement({}), cands, 3) == cands


def test_static_weights_ignore_spread_constraints() -> None:
    cands = [cand("m1"), cand("m2"), cand("m3")]
    assert names(select_clusters(spread(by_cluster(1), base=divided_static({"m1": 1})), cands, 3)) == [
        "m1",
        "m2",
        "m3",
    ]
    assert names(select_clusters(spread(by_cluster(1), base=divided_static()), cands, 3)) == [
        "m1",
        "m2",
        "m3",
    ]


def test_empty_weight_preference_does_not_ignore_spread_constraints() -> None:
    placement = {"replicaScheduling": {"replicaSchedulingType": "Divided", "weightPreference": {}}}
    cands = [cand("m1", 5), cand("m2", 5)]
    assert names(select_clusters(spread(by_cluster(1), base=placement), cands, 3)) == ["m1"]


# -- by cluster --------------------------------------------------------------------------------------


def test_duplicated_max_groups_one_takes_the_best_candidate() -> None:
    cands = [cand("m2", 0, score=100), cand("m1", 50)]
    assert names(select_clusters(spread(by_cluster(1)), cands, 3)) == ["m2"]


def test_duplicated_ignores_capacity() -> None:
    cands = [cand("m1", 0), cand("m2", 0)]
    assert names(select_clusters(spread(by_cluster(2)), cands, 100)) == ["m1", "m2"]


def test_max_groups_larger_than_candidates_takes_all() -> None:
    cands = [cand("m1"), cand("m2")]
    assert names(select_clusters(spread(by_cluster(5)), cands, 1)) == ["m1", "m2"]


def test_fewer_candidates_than_min_groups_is_an_error() -> None:
    with pytest.raises(
        SchedulerError, match="the number of feasible clusters is less than spreadConstraint.MinGroups"
    ):
        select_clusters(spread(by_cluster(3, 2)), [cand("m1")], 1)


def test_d12_cluster_spread_with_zero_max_groups_fails_loudly() -> None:
    with pytest.raises(SchedulerError, match="maxGroups 0"):
        select_clusters(spread({"spreadByField": "cluster"}), [cand("m1"), cand("m2")], 1)


def test_divided_selection_swaps_in_bigger_clusters_until_replicas_fit() -> None:
    # The first two by order (score) have 1 and 2; need 9: the last chosen (2) is swapped for the
    # biggest (5), then the first (1) for the biggest left bigger than it (4).
    cands = [cand("a", 1, score=100), cand("b", 2, score=100), cand("c", 5), cand("d", 4)]
    assert names(select_clusters(spread(by_cluster(2), base=divided_dynamic()), cands, 9)) == ["d", "c"]


def test_divided_selection_keeps_the_order_when_enough() -> None:
    cands = [cand("a", 1, score=100), cand("b", 8), cand("c", 5)]
    assert names(select_clusters(spread(by_cluster(2), base=aggregated()), cands, 9)) == ["a", "b"]


def test_swapped_out_cluster_can_come_back_at_an_earlier_position() -> None:
    cands = [cand("a", 1, score=100), cand("b", 3, score=100), cand("c", 5), cand("d", 2)]
    # b(3) is swapped for c(5); then a(1) is swapped for the biggest left: b(3).
    assert names(select_clusters(spread(by_cluster(2), base=divided_dynamic()), cands, 8)) == ["b", "c"]


def test_divided_selection_without_enough_resource_is_an_error() -> None:
    cands = [cand("a", 1), cand("b", 1), cand("c", 1)]
    with pytest.raises(SchedulerError, match="no enough resource when selecting 2 clusters"):
        select_clusters(spread(by_cluster(2), base=divided_dynamic()), cands, 5)


def test_only_zone_or_label_constraints_are_not_supported() -> None:
    with pytest.raises(SchedulerError, match="just support cluster and region spread constraint"):
        select_clusters(spread({"spreadByField": "zone", "maxGroups": 1}), [cand("m1")], 1)
    with pytest.raises(SchedulerError, match="just support cluster and region spread constraint"):
        select_clusters(spread({"spreadByLabel": "team", "maxGroups": 1}), [cand("m1")], 1)


def test_zone_with_cluster_constraint_selects_by_cluster() -> None:
    placement = spread({"spreadByField": "zone", "maxGroups": 3}, by_cluster(1))
    assert names(select_clusters(placement, [cand("m1"), cand("m2")], 1)) == ["m1"]


def test_later_constraint_on_the_same_field_wins() -> None:
    placement = spread(by_cluster(1), by_cluster(2))
    assert names(select_clusters(placement, [cand("m1"), cand("m2"), cand("m3")], 1)) == ["m1", "m2"]


def test_spread_constraint_defaults() -> None:
    placement = parse_placement({"spreadConstraints": [{"maxGroups": 2}, {"spreadByLabel": "x"}]})
    assert placement.spread_constraints[0].spread_by_field == "cluster"
    assert placement.spread_constraints[0].min_groups == 1
    assert placement.spread_constraints[1].spread_by_field == ""


# -- by region ---------------------------------------------------------------------------------------


def test_region_duplicated_picks_the_region_with_most_clusters_able_to_run_it() -> None:
    cands = [
        cand("e1", 10, region="eu"),
        cand("e2", 10, region="eu"),
        cand("u1", 10, region="us"),
        cand("u2", 0, region="us"),
    ]
    placement = spread(by_region(1), by_cluster(2))
    assert names(select_clusters(placement, cands, 5)) == ["e1", "e2"]


def test_region_one_top_cluster_per_region_then_fill_by_order() -> None:
    cands = [
        cand("e1", 10, score=100, region="eu"),
        cand("a1", 9, region="ap"),
        cand("e2", 8, region="eu"),
        cand("u1", 7, region="us"),
        cand("a2", 6, region="ap"),
    ]
    placement = spread(by_region(2, 2), by_cluster(3))
    # Duplicated scores: eu 2 valid -> 2050, ap 2000, us 1000; eu+ap chosen; e1, a1 first, then e2.
    assert names(select_clusters(placement, cands, 5)) == ["e1", "a1", "e2"]


def test_region_without_cluster_constraint_takes_one_cluster_per_region() -> None:
    cands = [cand("e1", 10, region="eu"), cand("e2", 10, region="eu"), cand("u1", 10, region="us")]
    assert names(select_clusters(spread(by_region(2, 2)), cands, 1)) == ["e1", "u1"]


def test_region_more_regions_chosen_than_cluster_max_groups_keeps_one_per_region() -> None:
    cands = [cand("e1", 10, region="eu"), cand("u1", 10, region="us")]
    assert names(select_clusters(spread(by_region(2, 2), by_cluster(1)), cands, 1)) == ["e1", "u1"]


def test_region_fewer_regions_than_min_groups_is_an_error() -> None:
    with pytest.raises(
        SchedulerError, match="the number of feasible region is less than spreadConstraint.MinGroups"
    ):
        select_clusters(spread(by_region(3, 2), by_cluster(3)), [cand("e1", region="eu")], 1)


def test_region_not_enough_clusters_for_cluster_min_groups_is_an_error() -> None:
    cands = [cand("e1", region="eu"), cand("u1", region="us")]
    with pytest.raises(
        SchedulerError, match="the number of clusters is less than the cluster spreadConstraint"
    ):
        select_clusters(spread(by_region(1), by_cluster(3, 2)), cands, 1)


def test_region_selection_stateful_single_cluster() -> None:
    cands = [cand("u1", 3, region="us"), cand("e1", 3, score=100, region="eu"), cand("e2", 3, region="eu")]
    placement = spread(by_region(1), by_cluster(1))
    assert names(select_clusters(placement, cands, 1)) == ["e1"]


def test_clusters_without_region_are_not_selected_by_region() -> None:
    cands = [cand("x", 100), cand("e1", 1, region="eu")]
    assert names(select_clusters(spread(by_region(1), by_cluster(2)), cands, 1)) == ["e1"]


# -- group scores ------------------------------------------------------------------------------------


def test_group_score_duplicated_counts_clusters_able_to_hold_all_replicas() -> None:
    placement = parse_placement({})
    members = [cand("a", 5, score=100), cand("b", 5), cand("c", 4, score=100)]
    assert group_score(members, placement, 5, 1, 1) == 2 * 1000 + 100 // 2
    assert group_score(members, placement, 6, 1, 1) == 0


def test_group_score_divided_enough_replicas() -> None:
    placement = parse_placement(divided_dynamic())
    members = [cand("a", 4, score=100), cand("b", 4), cand("c", 4)]
    # target = ceil(10 / 2) = 5, reached after two clusters: 5 * 1000 + 100 // 2.
    assert group_score(members, placement, 10, 2, 1) == 5050
    # The cluster minGroups (3) makes the walk take all three: 5 * 1000 + 100 // 3.
    assert group_score(members, placement, 10, 2, 3) == 5033


def test_group_score_divided_short_of_replicas() -> None:
    placement = parse_placement(divided_dynamic())
    members = [cand("a", 1, score=100), cand("b", 2)]
    assert group_score(members, placement, 10, 1, 1) == 3 * 1000 + 100 // 2


# -- select_groups (the region DFS) -------------------------------------------------------------------


def group_names(groups: list[GroupInfo]) -> list[str]:
    return [g.name for g in groups]


def test_select_groups_empty_or_infeasible() -> None:
    assert select_groups([], 1, 2, 1) == []
    assert select_groups([GroupInfo("R1", 1, 80)], 2, 3, 1) == []
    assert select_groups([GroupInfo("R1", 1, 80), GroupInfo("R2", 2, 30)], 2, 3, 4) == []


def test_select_groups_highest_total_weight() -> None:
    groups = [
        GroupInfo(n, v, w)
        for n, v, w in [("A", 1, 60), ("B", 1, 50), ("C", 1, 40), ("D", 3, 30), ("E", 3, 20)]
    ]
    # Need 6 clusters with at most 3 regions: A+D+E (110) beats B+D+E (100), C+D+E (90).
    assert group_names(select_groups(groups, 1, 3, 6)) == ["A", "D", "E"]


def test_select_groups_prefers_a_feasible_prefix_of_the_best_path() -> None:
    groups = [GroupInfo(n, v, w) for n, v, w in [("A", 1, 80), ("B", 4, 40), ("C", 1, 30), ("D", 3, 30)]]
    # Best is A+B+D (weight 150, 8 clusters), but A+B alone is feasible and is its prefix: it wins.
    assert group_names(select_groups(groups, 2, 4, 5)) == ["A", "B"]


def test_select_groups_equal_weight_prefers_more_clusters() -> None:
    groups = [GroupInfo("A", 2, 50), GroupInfo("B", 5, 50)]
    assert group_names(select_groups(groups, 1, 1, 1)) == ["B"]


def test_select_groups_exactly_min_groups_takes_all() -> None:
    groups = [GroupInfo("A", 1, 10), GroupInfo("B", 1, 90)]
    assert group_names(select_groups(groups, 2, 2, 2)) == ["B", "A"]
    assert select_groups(groups, 2, 2, 3) == []


def test_select_groups_does_not_depend_on_input_order() -> None:
    groups = [GroupInfo(n, v, w) for n, v, w in [("R1", 1, 60), ("R2", 2, 50), ("R3", 3, 40), ("R4", 4, 30)]]
    expected = group_names(select_groups(groups, 1, 2, 5))
    assert expected == ["R1", "R4"]
    for seed in range(10):
        shuffled = list(groups)
        random.Random(seed).shuffle(shuffled)
        assert group_names(select_groups(shuffled, 1, 2, 5)) == expected
