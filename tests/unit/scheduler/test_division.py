"""Replica division: Webster, Duplicated, static weights, dynamic weights, Aggregated, overflow tiers."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.scheduler.division import (
    assign_replicas,
    fnv32a,
    merge_target_clusters,
    static_weights,
    tie_break_descending,
    webster,
)
from flotilla.scheduler.errors import SchedulerError, UnschedulableError
from flotilla.scheduler.model import BindingSpec, TargetCluster, parse_binding_spec, parse_cluster
from flotilla.scheduler.selection import Candidate

from .builders import aggregated, binding, cluster, divided_dynamic, divided_static, duplicated

ODD_UID = "d43fdeeb-d750-4e2b-bee3-64eb94534f4c"  # FNV-32a hash is odd: ties go to the later name
EVEN_UID = "4858ca61-3ff8-4095-8267-f3d059d8074c"  # even: ties go to the earlier name


def seats(result: list[TargetCluster]) -> dict[str, int]:
    return {t.name: t.replicas for t in result}


def spec_of(placement: dict[str, Any], **kw: Any) -> BindingSpec:
    return parse_binding_spec(binding(placement, **kw)["spec"])


def candidates(
    allocatable: dict[str, int], spec: BindingSpec | None = None, **scores: int
) -> list[Candidate]:
    """Candidates in the given order; available = allocatable + what ``spec`` already assigns."""
    out = []
    for name, alloc in allocatable.items():
        assigned = spec.assigned_replicas(name) if spec is not None else 0
        out.append(
            Candidate(
                cluster=parse_cluster(cluster(name)),
                score=scores.get(name, 0),
                available_replicas=alloc + assigned,
                allocatable_replicas=alloc,
            )
        )
    return out


# -- Webster: Karmada's reference vectors --------------------------------------------------------


def test_webster_9_seats_votes_1_3() -> None:
    assert seats(webster(9, {"A": 1, "B": 3})) == {"A": 2, "B": 7}


def test_webster_12_seats_votes_6_12_18() -> None:
    assert seats(webster(12, {"A": 6, "B": 12, "C": 18})) == {"A": 2, "B": 4, "C": 6}


def test_webster_5_seats_votes_170_110_60() -> None:
    assert seats(webster(5, {"A": 170, "B": 110, "C": 60})) == {"A": 2, "B": 2, "C": 1}


def test_webster_tie_goes_to_later_name_when_uid_hash_is_odd() -> None:
    assert fnv32a(ODD_UID.encode()) % 2 == 1
    assert seats(webster(5, {"A": 1, "B": 1}, uid=ODD_UID)) == {"A": 2, "B": 3}


def test_webster_tie_goes_to_earlier_name_when_uid_hash_is_even() -> None:
    assert fnv32a(EVEN_UID.encode()) % 2 == 0
    assert seats(webster(5, {"A": 1, "B": 1}, uid=EVEN_UID)) == {"A": 3, "B": 2}


def test_webster_tie_goes_to_earlier_name_without_uid() -> None:
    assert not tie_break_descending("")
    assert seats(webster(5, {"A": 1, "B": 1})) == {"A": 3, "B": 2}


def test_fnv32a_known_values() -> None:
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C


# -- Webster: details -----------------------------------------------------------------------------


def test_webster_equal_priority_goes_to_fewer_seats_before_name() -> None:
    # After A:1 (votes 3) and B:0 (votes 1), priorities are 3/3 == 1/1: B (0 seats) wins though A < B.
    assert seats(webster(2, {"A": 3, "B": 1})) == {"A": 1, "B": 1}


def test_webster_lists_every_party_sorted_by_name_even_without_seats() -> None:
    result = webster(1, {"c": 1, "a": 0, "b": 5})
    assert [t.name for t in result] == ["a", "b", "c"]
    assert seats(result) == {"a": 0, "b": 1, "c": 0}


def test_webster_initial_seats_count() -> None:
    # A starts with 2 seats, so B (same votes) wins the next two seats.
    assert seats(webster(2, {"A": 1, "B": 1}, {"A": 2})) == {"A": 2, "B": 2}
    # A party only in the initial assignment has no votes and keeps its seats.
    assert seats(webster(1, {"B": 1}, {"A": 3})) == {"A": 3, "B": 1}


def test_webster_without_parties_is_empty() -> None:
    assert webster(3, {}) == []


def test_webster_zero_seats() -> None:
    assert seats(webster(0, {"A": 1, "B": 2})) == {"A": 0, "B": 0}


votes_strategy = st.dictionaries(
    st.text(alphabet="abcdefgh", min_size=1, max_size=3), st.integers(0, 10_000), min_size=1, max_size=7
)


@given(votes=votes_strategy, n=st.integers(0, 500), uid=st.sampled_from(["", ODD_UID, EVEN_UID]))
def test_property_webster_assigns_exactly_the_seats(votes: dict[str, int], n: int, uid: str) -> None:
    result = webster(n, votes, uid=uid)
    assert sum(t.replicas for t in result) == n
    assert [t.name for t in result] == sorted(votes)


@given(
    votes=votes_strategy,
    n=st.integers(0, 300),
    uid=st.sampled_from(["", ODD_UID, EVEN_UID]),
    seed=st.integers(),
)
def test_property_webster_is_stable_under_permutation(
    votes: dict[str, int], n: int, uid: str, seed: int
) -> None:
    items = list(votes.items())
    random.Random(seed).shuffle(items)
    assert webster(n, dict(items), uid=uid) == webster(n, votes, uid=uid)


@given(votes=votes_strategy, n=st.integers(1, 300))
def test_property_webster_is_a_divisor_method(votes: dict[str, int], n: int) -> None:
    """Every next-seat priority is at most every last-seat priority (the Sainte-Laguë invariant)."""
    if sum(votes.values()) == 0:
        return
    got = seats(webster(n, votes))
    next_seat = max(Fraction(v, 2 * got[p] + 1) for p, v in votes.items())
    last_seats = [Fraction(v, 2 * got[p] - 1) for p, v in votes.items() if got[p] > 0]
    assert next_seat <= min(last_seats)


@given(votes=votes_strategy, n=st.integers(0, 300))
def test_property_webster_is_house_monotone(votes: dict[str, int], n: int) -> None:
    before, after = seats(webster(n, votes)), seats(webster(n + 1, votes))
    assert all(after[p] >= before[p] for p in votes)


@given(a=st.integers(1, 1000), b=st.integers(0, 1000), n=st.integers(0, 500))
def test_property_webster_two_parties_within_one_of_quota(a: int, b: int, n: int) -> None:
    got = seats(webster(n, {"A": a, "B": b}))
    for party, v in (("A", a), ("B", b)):
        assert abs(got[party] - Fraction(n * v, a + b)) < 1


def test_webster_can_leave_the_quota_by_more_than_one_with_three_or_more_parties() -> None:
    """A property of Sainte-Laguë itself (and so of Karmada): 'proportional within 1' is not guaranteed."""
    got = seats(webster(34, {"a": 2, "b": 2, "c": 2, "d": 42}))
    assert got == {"a": 1, "b": 1, "c": 1, "d": 31}
    assert got["d"] - Fraction(34 * 42, 48) > 1


# -- Duplicated and non-workloads ------------------------------------------------------------------


def test_duplicated_every_cluster_gets_all_replicas_in_candidate_order() -> None:
    spec = spec_of(duplicated(), replicas=3)
    assert assign_replicas(candidates({"m2": 0, "m1": 0}), spec) == [
        TargetCluster("m2", 3),
        TargetCluster("m1", 3),
    ]


def test_duplicated_with_zero_replicas_and_requests_drops_every_cluster() -> None:
    spec = spec_of(duplicated(), replicas=0, requests={"cpu": "100m"})
    assert assign_replicas(candidates({"m1": 0, "m2": 0}), spec) == []


def test_non_workload_gets_every_cluster_with_zero_replicas() -> None:
    spec = spec_of(divided_dynamic(), replicas=0, kind="ConfigMap", api_version="v1")
    assert assign_replicas(candidates({"m1": 5, "m2": 0}), spec) == [
        TargetCluster("m1", 0),
        TargetCluster("m2", 0),
    ]


def test_no_candidates_is_an_error() -> None:
    with pytest.raises(SchedulerError, match="no clusters available to schedule"):
        assign_replicas([], spec_of(duplicated()))


# -- Static weights -------------------------------------------------------------------------------


def test_static_weights_3_2_1() -> None:
    spec = spec_of(divided_static({"m1": 3, "m2": 2, "m3": 1}), replicas=12)
    assert seats(assign_replicas(candidates({"m1": 0, "m2": 0, "m3": 0}), spec)) == {
        "m1": 6,
        "m2": 4,
        "m3": 2,
    }


def test_static_weights_default_to_equal_without_weight_preference() -> None:
    spec = spec_of(divided_static(), replicas=12)
    assert seats(assign_replicas(candidates({"m1": 0, "m2": 0, "m3": 0}), spec)) == {
        "m1": 4,
        "m2": 4,
        "m3": 4,
    }


def test_static_weights_cluster_without_a_rule_gets_nothing() -> None:
    spec = spec_of(divided_static({"m1": 1, "m2": 1}), replicas=4)
    assert seats(assign_replicas(candidates({"m1": 0, "m2": 0, "m3": 0}), spec)) == {"m1": 2, "m2": 2}


def test_static_weights_everyone_weighs_one_when_no_rule_matches() -> None:
    spec = spec_of(divided_static({"gone": 5}), replicas=4)
    assert seats(assign_replicas(candidates({"m1": 0, "m2": 0}), spec)) == {"m1": 2, "m2": 2}


def test_static_weight_is_the_largest_matching_rule() -> None:
    placement = {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "weightPreference": {
                "staticWeightList": [
                    {"targetCluster": {"clusterNames": ["m1", "m2"]}, "weight": 1},
                    {"targetCluster": {"clusterNames": ["m1"]}, "weight": 3},
                ]
            },
        }
    }
    spec = spec_of(placement, replicas=8)
    cands = candidates({"m1": 0, "m2": 0})
    assert static_weights(cands, spec) == {"m1": 3, "m2": 1}
    assert seats(assign_replicas(cands, spec)) == {"m1": 6, "m2": 2}


def test_static_weights_ignore_capacity_and_previous_result() -> None:
    spec = spec_of(divided_static({"m1": 1, "m2": 1}), replicas=4, clusters={"m1": 4})
    assert seats(assign_replicas(candidates({"m1": 0, "m2": 0}), spec)) == {"m1": 2, "m2": 2}


def test_static_weight_results_are_sorted_by_name_and_zeros_dropped() -> None:
    spec = spec_of(divided_static({"b": 1, "a": 1, "c": 100}), replicas=2)
    assert assign_replicas(candidates({"c": 0, "b": 0, "a": 0}), spec) == [TargetCluster("c", 2)]


@given(
    weights=st.dictionaries(st.sampled_from(["m1", "m2", "m3", "m4", "m5"]), st.integers(0, 50), min_size=1),
    replicas=st.integers(1, 200),
)
def test_property_static_division_assigns_all_replicas(weights: dict[str, int], replicas: int) -> None:
    spec = spec_of(divided_static(weights), replicas=replicas)
    result = seats(assign_replicas(candidates(dict.fromkeys(weights, 0)), spec))
    assert sum(result.values()) == replicas
    if any(weights.values()):
        assert all(weights[name] > 0 for name in result)


@given(n_clusters=st.integers(1, 8), replicas=st.integers(1, 200))
def test_property_equal_static_weights_differ_by_at_most_one(n_clusters: int, replicas: int) -> None:
    names = [f"m{i}" for i in range(n_clusters)]
    spec = spec_of(divided_static(dict.fromkeys(names, 1)), replicas=replicas)
    got = seats(assign_replicas(candidates(dict.fromkeys(names, 0)), spec))
    counts = [got.get(n, 0) for n in names]
    assert max(counts) - min(counts) <= 1


@given(w1=st.integers(1, 100), w2=st.integers(1, 100), replicas=st.integers(1, 300))
def test_property_two_static_weights_proportional_within_one(w1: int, w2: int, replicas: int) -> None:
    spec = spec_of(divided_static({"m1": w1, "m2": w2}), replicas=replicas)
    got = seats(assign_replicas(candidates({"m1": 0, "m2": 0}), spec))
    assert abs(got.get("m1", 0) - Fraction(replicas * w1, w1 + w2)) < 1
    assert abs(got.get("m2", 0) - Fraction(replicas * w2, w1 + w2)) < 1


# -- Dynamic weights ----------------------------------------------------------------------------------


def test_dynamic_first_schedule_divides_by_allocatable() -> None:
    spec = spec_of(divided_dynamic(), replicas=12)
    assert seats(assign_replicas(candidates({"m1": 6, "m2": 12, "m3": 18}), spec)) == {
        "m1": 2,
        "m2": 4,
        "m3": 6,
    }


def test_dynamic_steady_keeps_the_previous_result() -> None:
    spec = spec_of(divided_dynamic(), replicas=6, clusters={"m1": 5, "m2": 1})
    assert seats(assign_replicas(candidates({"m1": 1, "m2": 100}, spec), spec)) == {"m1": 5, "m2": 1}


def test_dynamic_scale_up_adds_onto_the_previous_result() -> None:
    spec = spec_of(divided_dynamic(), replicas=10, clusters={"m1": 2, "m2": 2})
    # 6 new replicas over allocatable 1:2:3 -> 1:2:3, added to 2:2:0.
    got = seats(assign_replicas(candidates({"m1": 1, "m2": 2, "m3": 3}, spec), spec))
    assert got == {"m1": 3, "m2": 4, "m3": 3}


def test_dynamic_scale_down_shrinks_proportionally() -> None:
    spec = spec_of(divided_dynamic(), replicas=6, clusters={"m1": 8, "m2": 4})
    assert seats(assign_replicas(candidates({"m1": 100, "m2": 0}, spec), spec)) == {"m1": 4, "m2": 2}


def test_dynamic_replicas_on_clusters_no_longer_candidates_are_re_placed() -> None:
    """An evicted (or now infeasible) cluster's replicas count as a scale up onto the rest."""
    spec = spec_of(divided_dynamic(), replicas=4, clusters={"m1": 2, "m2": 2})
    got = seats(assign_replicas(candidates({"m2": 10, "m3": 10}, spec), spec))
    assert got == {"m2": 3, "m3": 1}


def test_dynamic_not_enough_available_replicas_is_unschedulable() -> None:
    spec = spec_of(divided_dynamic(), replicas=10, clusters={"m1": 2})
    with pytest.raises(UnschedulableError) as err:
        assign_replicas(candidates({"m1": 3, "m2": 4}, spec), spec)
    assert (
        err.value.message == "failed to scale up: Clusters available replicas 7 are not enough to schedule."
    )
    assert err.value.reason == "Unschedulable"


def test_dynamic_fresh_mode_recomputes_from_scratch() -> None:
    spec = spec_of(divided_dynamic(), replicas=6, clusters={"m1": 6})
    # Fresh weights: allocatable + current = m1: 0 + 6, m2: 6.
    got = seats(assign_replicas(candidates({"m1": 0, "m2": 6}, spec), spec, fresh=True))
    assert got == {"m1": 3, "m2": 3}
    # Steady keeps everything where it is.
    assert seats(assign_replicas(candidates({"m1": 0, "m2": 6}, spec), spec)) == {"m1": 6}


def test_dynamic_fresh_mode_not_enough_is_unschedulable() -> None:
    spec = spec_of(divided_dynamic(), replicas=6)
    with pytest.raises(UnschedulableError, match="^failed to do fresh scale: Clusters available replicas 5"):
        assign_replicas(candidates({"m1": 5}), spec, fresh=True)


@given(
    allocatable=st.dictionaries(st.sampled_from(["m1", "m2", "m3", "m4"]), st.integers(0, 40), min_size=1),
    previous=st.dictionaries(st.sampled_from(["m1", "m2", "m3", "m5"]), st.integers(1, 20)),
    replicas=st.integers(1, 60),
    strategy=st.sampled_from(["dynamic", "aggregated"]),
    fresh=st.booleans(),
)
@settings(max_examples=300)
def test_property_dynamic_division_assigns_all_replicas_or_is_unschedulable(
    allocatable: dict[str, int], previous: dict[str, int], replicas: int, strategy: str, fresh: bool
) -> None:
    placement = divided_dynamic() if strategy == "dynamic" else aggregated()
    spec = spec_of(placement, replicas=replicas, clusters=previous)
    kept = {n: r for n, r in previous.items() if n in allocatable}
    try:
        got = seats(assign_replicas(candidates(allocatable, spec), spec, fresh=fresh))
    except UnschedulableError:
        return
    assert sum(got.values()) == replicas
    assert set(got) <= set(allocatable)
    assert all(r > 0 for r in got.values())
    if not fresh and sum(kept.values()) <= replicas:
        # Scale up (or steady) never takes replicas away from a cluster that keeps its place.
        assert all(got.get(n, 0) >= r for n, r in kept.items())
    if not fresh and sum(kept.values()) >= replicas:
        # Scale down never adds replicas anywhere.
        assert all(got.get(n, 0) <= kept.get(n, 0) for n in got)


# -- Aggregated ---------------------------------------------------------------------------------------


def test_aggregated_appendix_a_12_to_24_with_cluster2_gone() -> None:
    """Karmada's case: 12 -> 24, previous {m1:4, m2:8}, m2 gone, allocatable m1:4 m3:8 m4:12 -> m1:7 m3:7 m4:10."""
    spec = spec_of(aggregated(), replicas=24, clusters={"m1": 4, "m2": 8})
    got = seats(assign_replicas(candidates({"m1": 4, "m3": 8, "m4": 12}, spec), spec))
    assert got == {"m1": 7, "m3": 7, "m4": 10}


def test_aggregated_scale_up_prefers_clusters_already_used() -> None:
    """12 -> 24 with {m1:4, m2:8} and allocatable 6:6:20: m1 and m2 cover the 12 new ones, m3 stays unused."""
    spec = spec_of(aggregated(), replicas=24, clusters={"m1": 4, "m2": 8})
    got = seats(assign_replicas(candidates({"m1": 6, "m2": 6, "m3": 20}, spec), spec))
    assert got == {"m1": 10, "m2": 14}


def test_aggregated_scale_up_spills_over_when_used_clusters_are_full() -> None:
    spec = spec_of(aggregated(), replicas=24, clusters={"m1": 4, "m2": 8})
    got = seats(assign_replicas(candidates({"m1": 4, "m2": 6, "m3": 8}, spec), spec))
    assert got == {"m1": 7, "m2": 12, "m3": 5}


def test_aggregated_scale_down_keeps_the_fewest_clusters() -> None:
    spec = spec_of(aggregated(), replicas=6, clusters={"m1": 4, "m2": 8})
    assert seats(assign_replicas(candidates({"m1": 1, "m2": 1, "m3": 1}, spec), spec)) == {"m2": 6}


def test_aggregated_first_schedule_uses_the_largest_clusters() -> None:
    spec = spec_of(aggregated(), replicas=12)
    got = seats(assign_replicas(candidates({"m1": 6, "m2": 8, "m3": 10}, spec), spec))
    assert got == {"m2": 5, "m3": 7}


def test_aggregated_single_cluster_is_enough() -> None:
    spec = spec_of(aggregated(), replicas=12)
    assert seats(assign_replicas(candidates({"m1": 12, "m2": 8, "m3": 10}, spec), spec)) == {"m1": 12}


def test_aggregated_not_enough_is_unschedulable() -> None:
    spec = spec_of(aggregated(), replicas=24, clusters={"m1": 4, "m2": 8})
    with pytest.raises(UnschedulableError):
        assign_replicas(candidates({"m1": 1, "m2": 1, "m3": 1}, spec), spec)


def test_aggregated_ties_keep_candidate_order() -> None:
    """Equal weights keep the candidate (score/available/name) order, as Go's insertion sort does."""
    spec = spec_of(aggregated(), replicas=5)
    assert seats(assign_replicas(candidates({"m2": 5, "m1": 5}, spec), spec)) == {"m2": 5}


# -- Overflow tiers -----------------------------------------------------------------------------------


def overflow_spec(replicas: int, **kw: Any) -> BindingSpec:
    placement = divided_dynamic(
        clusterAffinities=[
            {
                "affinityName": "main",
                "clusterNames": ["m1", "m2"],
                "overflowAffinities": [{"affinityName": "burst", "clusterNames": ["b1"]}],
            }
        ]
    )
    return spec_of(placement, replicas=replicas, **kw)


def tiered(allocatable: dict[str, int], tiers: dict[str, int], spec: BindingSpec) -> list[Candidate]:
    return [
        Candidate(
            cluster=c.cluster,
            overflow_order=tiers[c.name],
            available_replicas=c.available_replicas,
            allocatable_replicas=c.allocatable_replicas,
        )
        for c in candidates(allocatable, spec)
    ]


def test_overflow_fills_the_primary_tier_first() -> None:
    spec = overflow_spec(6)
    cands = tiered({"m1": 3, "m2": 3, "b1": 100}, {"m1": 0, "m2": 0, "b1": 1}, spec)
    assert seats(assign_replicas(cands, spec, affinity_name="main")) == {"m1": 3, "m2": 3}


def test_overflow_spills_into_the_next_tier() -> None:
    spec = overflow_spec(10)
    cands = tiered({"m1": 3, "m2": 3, "b1": 100}, {"m1": 0, "m2": 0, "b1": 1}, spec)
    assert seats(assign_replicas(cands, spec, affinity_name="main")) == {"m1": 3, "m2": 3, "b1": 4}


def test_overflow_not_enough_in_all_tiers_is_unschedulable() -> None:
    spec = overflow_spec(10)
    cands = tiered({"m1": 3, "m2": 3, "b1": 1}, {"m1": 0, "m2": 0, "b1": 1}, spec)
    with pytest.raises(UnschedulableError, match="Clusters available replicas are not enough to schedule."):
        assign_replicas(cands, spec, affinity_name="main")


def test_overflow_needs_the_term_name() -> None:
    spec = overflow_spec(6)
    cands = tiered({"m1": 3, "m2": 3, "b1": 100}, {"m1": 0, "m2": 0, "b1": 1}, spec)
    assert seats(assign_replicas(cands, spec)) == {"b1": 6}  # no tiers: one Webster over 100:3:3


# -- merge ------------------------------------------------------------------------------------------


def test_merge_adds_per_cluster_and_appends_old_only_clusters() -> None:
    old = [TargetCluster("x", 1), TargetCluster("a", 2)]
    new = [TargetCluster("a", 3), TargetCluster("b", 0)]
    assert merge_target_clusters(old, new) == [
        TargetCluster("a", 5),
        TargetCluster("b", 0),
        TargetCluster("x", 1),
    ]
    assert merge_target_clusters([], new) == new
    assert merge_target_clusters(old, []) == old
