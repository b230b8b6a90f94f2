"""Toleration matching and the taint manager's NoExecute timers (flotilla.failover.tolerations)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flotilla.failover.tolerations import (
    APPLIED_PLACEMENT_ANNOTATION,
    APPLIED_PLACEMENT_EMPTY_MESSAGE,
    MAX_TIME,
    AppliedPlacementError,
    Eviction,
    EvictionDecision,
    applied_cluster_tolerations,
    binding_eviction_decision,
    enqueue_decision,
    eviction_deadlines,
    no_execute_eviction,
    parse_taints,
    parse_tolerations,
    should_queue,
    toleration_deadline,
)
from flotilla.kube.taints import first_untolerated_taint, matching_tolerations, no_execute_taints, tolerates
from flotilla.scheduler.errors import ModelError
from flotilla.scheduler.model import Taint, Toleration

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
NE = "NoExecute"
NS = "NoSchedule"


def taint(key: str = "k", value: str = "", effect: str = NE, added: datetime | None = NOW) -> Taint:
    return Taint(key=key, value=value, effect=effect, time_added=added)


def tol(key: str = "", operator: str = "", value: str = "", effect: str = "", seconds: int | None = None) -> Toleration:
    return Toleration(key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds)


# ------------------------------------------------------------------------------------------------
# matching (ToleratesTaint without the comparison operators)
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "the_taint", "expected"),
    [
        # effect
        (tol("k", "Exists", effect=NE), taint("k", effect=NE), True),
        (tol("k", "Exists", effect=NS), taint("k", effect=NE), False),
        (tol("k", "Exists"), taint("k", effect=NS), True),  # empty effect matches all effects
        (tol("k", "Exists"), taint("k", effect="PreferNoSchedule"), True),
        # key
        (tol("other", "Exists"), taint("k"), False),
        (tol("", "Exists"), taint("anything"), True),  # empty key + Exists matches every taint
        (tol("", "Exists", effect=NS), taint("anything", effect=NE), False),
        # Equal / "" compare values
        (tol("k", "Equal", "v"), taint("k", "v"), True),
        (tol("k", "Equal", "v"), taint("k", "w"), False),
        (tol("k", "", "v"), taint("k", "v"), True),
        (tol("k", "", ""), taint("k", ""), True),
        (tol("k", "", ""), taint("k", "v"), False),
        (tol("", "Equal", "v"), taint("any", "v"), True),  # empty key with Equal still compares value only
        (tol("", "Equal", "v"), taint("any", "w"), False),
        # Exists ignores the value
        (tol("k", "Exists", "ignored"), taint("k", "v"), True),
        # comparison operators are disabled; unknown operators never tolerate
        (tol("k", "Lt", "5"), taint("k", "3"), False),
        (tol("k", "Gt", "1"), taint("k", "3"), False),
        (tol("k", "exists"), taint("k"), False),  # case-sensitive
        (tol("k", "Bogus", ""), taint("k", ""), False),
    ],
)
def test_tolerates_exactly_as_section_1_6(toleration: Toleration, the_taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, the_taint) is expected


def test_toleration_seconds_play_no_part_in_matching() -> None:
    t = taint("k")
    for seconds in (None, -5, 0, 1, 10**9):
        assert tolerates(tol("k", "Exists", seconds=seconds), t)


def test_no_execute_taints_keeps_order_and_only_no_execute() -> None:
    taints = [taint("a", effect=NS), taint("b"), taint("c", effect="PreferNoSchedule"), taint("d")]
    assert [t.key for t in no_execute_taints(taints)] == ["b", "d"]


def test_matching_tolerations_edge_cases() -> None:
    assert matching_tolerations([], []) == (True, [])
    assert matching_tolerations([], [tol("x", "Exists")]) == (True, [])
    assert matching_tolerations([taint("a")], []) == (False, [])
    a, b = tol("a", "Exists"), tol("", "Exists")
    # first tolerating toleration per taint, in taint order, duplicates allowed
    ok, used = matching_tolerations([taint("a"), taint("z"), taint("a", "v2")], [a, b])
    assert ok and used == [a, b, a]
    ok, used = matching_tolerations([taint("a"), taint("z")], [a])
    assert (ok, used) == (False, [])


def test_first_untolerated_taint() -> None:
    taints = [taint("a"), taint("b"), taint("c")]
    assert first_untolerated_taint(taints, [tol("a", "Exists")]) == taints[1]
    assert first_untolerated_taint(taints, [tol("", "Exists")]) is None


# ------------------------------------------------------------------------------------------------
# the timer (timeAdded + tolerationSeconds, the earliest over the pairs)
# ------------------------------------------------------------------------------------------------


def test_no_taints_or_disabled_is_never() -> None:
    assert no_execute_eviction([], [], NOW).action is Eviction.NEVER
    assert no_execute_eviction([taint("a", effect=NS)], [], NOW).action is Eviction.NEVER
    assert no_execute_eviction([taint("a")], [], NOW, enabled=False).action is Eviction.NEVER


def test_untolerated_taint_evicts_now_and_names_it() -> None:
    d = no_execute_eviction([taint("a"), taint("b")], [tol("a", "Exists", seconds=100)], NOW)
    assert d.action is Eviction.NOW
    assert d.taint is not None and d.taint.key == "b"
    assert d.at is None


def test_no_toleration_at_all_evicts_now() -> None:
    assert no_execute_eviction([taint("a")], [], NOW).action is Eviction.NOW


def test_no_schedule_taints_do_not_count_for_eviction() -> None:
    d = no_execute_eviction([taint("a", effect=NS), taint("b")], [tol("b", "Exists")], NOW)
    assert d.action is Eviction.NEVER


def test_toleration_without_seconds_is_forever() -> None:
    d = no_execute_eviction([taint("a")], [tol("a", "Exists")], NOW)
    assert d == EvictionDecision(Eviction.NEVER)
    assert not should_queue(d)


def test_timer_runs_from_time_added() -> None:
    added = NOW - timedelta(seconds=30)
    d = no_execute_eviction([taint("a", added=added)], [tol("a", "Exists", seconds=100)], NOW)
    assert d.action is Eviction.AT
    assert d.at == added + timedelta(seconds=100)
    assert d.delay(NOW) == 70.0
    assert d.when(NOW) == d.at


def test_expired_timer_evicts_now() -> None:
    added = NOW - timedelta(seconds=300)
    d = no_execute_eviction([taint("a", added=added)], [tol("a", "Exists", seconds=100)], NOW)
    assert d.action is Eviction.NOW
    assert d.at == added + timedelta(seconds=100)
    assert d.delay(NOW) == 0.0


def test_deadline_exactly_now_evicts() -> None:
    added = NOW - timedelta(seconds=100)
    d = no_execute_eviction([taint("a", added=added)], [tol("a", "Exists", seconds=100)], NOW)
    assert d.action is Eviction.NOW


@pytest.mark.parametrize("seconds", [0, -1, -3600])
def test_non_positive_toleration_seconds_evict_now(seconds: int) -> None:
    d = no_execute_eviction([taint("a", added=NOW)], [tol("a", "Exists", seconds=seconds)], NOW)
    assert d.action is Eviction.NOW


def test_non_positive_toleration_seconds_evict_now_even_with_a_future_time_added() -> None:
    """A controller clock behind the API server's cannot postpone an immediate eviction."""
    future = NOW + timedelta(seconds=60)
    d = no_execute_eviction([taint("a", added=future)], [tol("a", "Exists", seconds=0)], NOW)
    assert d.action is Eviction.NOW


def test_taint_without_time_added_gives_no_deadline() -> None:
    d = no_execute_eviction([taint("a", added=None)], [tol("a", "Exists", seconds=5)], NOW)
    assert d.action is Eviction.NEVER


def test_min_over_cross_product_of_used_tolerations_and_taints() -> None:
    """One used toleration pairs with every taint it tolerates, not only the one it was chosen for."""
    t1 = taint("a", added=NOW - timedelta(seconds=10))
    t2 = taint("b", added=NOW - timedelta(seconds=50))
    wide = tol("", "Exists", seconds=200)  # used for b only (a has an earlier match), tolerates both
    narrow = tol("a", "Exists", seconds=1000)
    d = no_execute_eviction([t1, t2], [narrow, wide], NOW)
    # pairs: narrow x a -> -10+1000 ; wide x a -> -10+200 ; wide x b -> -50+200 = earliest
    assert d.action is Eviction.AT
    assert d.at == NOW + timedelta(seconds=150)
    assert d.taint == t2


def test_forever_toleration_does_not_hide_a_timed_one() -> None:
    t1, t2 = taint("a"), taint("b")
    d = no_execute_eviction([t1, t2], [tol("a", "Exists"), tol("b", "Exists", seconds=30)], NOW)
    assert d.action is Eviction.AT and d.at == NOW + timedelta(seconds=30)


def test_unused_later_toleration_is_ignored() -> None:
    """Only the first tolerating toleration of each taint is used; a later, shorter one is not."""
    t = taint("a")
    d = no_execute_eviction([t], [tol("a", "Exists"), tol("a", "Exists", seconds=0)], NOW)
    assert d.action is Eviction.NEVER


def test_huge_toleration_seconds_clamp_instead_of_overflowing() -> None:
    d = no_execute_eviction([taint("a")], [tol("a", "Exists", seconds=10**18)], NOW)
    assert d.action is Eviction.AT and d.at == MAX_TIME


def test_naive_time_added_is_utc() -> None:
    naive = datetime(2026, 1, 1, 11, 59, 0)
    d = no_execute_eviction([taint("a", added=naive)], [tol("a", "Exists", seconds=120)], NOW)
    assert d.at == datetime(2026, 1, 1, 12, 1, 0, tzinfo=UTC)


def test_toleration_deadline_function() -> None:
    assert toleration_deadline([taint("a")], [tol("a", "Exists")]) is None
    assert toleration_deadline([taint("a")], [tol("a", "Exists", seconds=5)]) == NOW + timedelta(seconds=5)


def test_e2e_scenario_toleration_of_two_seconds() -> None:
    """Karmada's e2e scenario 1: `not-ready` Exists NoExecute for 2 s: evicted two seconds after the taint appears."""
    t = taint("cluster.karmada.io/not-ready", added=NOW)
    tolerations = [tol("cluster.karmada.io/not-ready", "Exists", effect=NE, seconds=2)]
    assert no_execute_eviction([t], tolerations, NOW).action is Eviction.AT
    assert no_execute_eviction([t], tolerations, NOW + timedelta(seconds=2)).action is Eviction.NOW


# ------------------------------------------------------------------------------------------------
# D10: bindings that tolerate forever are never queued
# ------------------------------------------------------------------------------------------------


def test_d10_tolerated_forever_bindings_are_never_queued() -> None:
    forever = no_execute_eviction([taint("a")], [tol("a", "Exists")], NOW)
    timed = no_execute_eviction([taint("a")], [tol("a", "Exists", seconds=10)], NOW)
    now = no_execute_eviction([taint("a")], [], NOW)
    assert not should_queue(forever) and forever.when(NOW) is None and forever.delay(NOW) is None
    assert should_queue(timed) and should_queue(now)
    deadlines = eviction_deadlines(
        [("ns/forever", "m1"), ("ns/timed", "m1"), ("ns/now", "m1")],
        {"ns/forever": [tol("a", "Exists")], "ns/timed": [tol("a", "Exists", seconds=10)], "ns/now": []},
        {"m1": [taint("a")]},
        NOW,
    )
    assert deadlines == {("ns/timed", "m1"): NOW + timedelta(seconds=10), ("ns/now", "m1"): NOW}


def test_eviction_deadlines_keep_the_earliest_and_skip_untainted_clusters() -> None:
    deadlines = eviction_deadlines(
        [("b", "m1"), ("b", "m2"), ("b", "m1"), ("c", "m3")],
        {"b": [tol("a", "Exists", seconds=60)], "c": []},
        {"m1": [taint("a", added=NOW - timedelta(seconds=30))], "m2": [taint("a")], "m3": [taint("x", effect=NS)]},
        NOW,
    )
    assert deadlines == {("b", "m1"): NOW + timedelta(seconds=30), ("b", "m2"): NOW + timedelta(seconds=60)}


def test_eviction_deadlines_unreadable_placement_is_queued_now_and_disabled_is_empty() -> None:
    assert eviction_deadlines([("b", "m1")], {"b": None}, {"m1": [taint("a")]}, NOW) == {("b", "m1"): NOW}
    assert eviction_deadlines([("b", "m1")], {}, {"m1": [taint("a")]}, NOW) == {("b", "m1"): NOW}
    assert eviction_deadlines([("b", "m1")], {"b": []}, {"m1": [taint("a")]}, NOW, enabled=False) == {}


# ------------------------------------------------------------------------------------------------
# applied placement and the binding-level decisions
# ------------------------------------------------------------------------------------------------


def placement_annotation(tolerations: list[dict[str, Any]] | None) -> dict[str, str]:
    placement: dict[str, Any] = {"clusterAffinity": {"clusterNames": ["m1"]}}
    if tolerations is not None:
        placement["clusterTolerations"] = tolerations
    return {APPLIED_PLACEMENT_ANNOTATION: json.dumps(placement)}


def test_applied_cluster_tolerations() -> None:
    tols = applied_cluster_tolerations(placement_annotation(
        [{"key": "a", "operator": "Exists", "effect": NE, "tolerationSeconds": 5}]))
    assert tols == (Toleration("a", "Exists", "", NE, 5),)
    assert applied_cluster_tolerations(placement_annotation(None)) == ()
    assert applied_cluster_tolerations({APPLIED_PLACEMENT_ANNOTATION: "null"}) == ()


@pytest.mark.parametrize("annotations", [None, {}, {APPLIED_PLACEMENT_ANNOTATION: ""}])
def test_missing_applied_placement_is_karmadas_error(annotations: dict[str, str] | None) -> None:
    with pytest.raises(AppliedPlacementError, match="^" + APPLIED_PLACEMENT_EMPTY_MESSAGE + "$"):
        applied_cluster_tolerations(annotations)


@pytest.mark.parametrize("raw", ["{", "[]", '{"clusterTolerations": 3}', '{"clusterTolerations": [{"key": 1}]}'])
def test_invalid_applied_placement(raw: str) -> None:
    with pytest.raises(AppliedPlacementError):
        applied_cluster_tolerations({APPLIED_PLACEMENT_ANNOTATION: raw})


def test_enqueue_decision_is_fail_safe_on_missing_placement() -> None:
    d = enqueue_decision({}, [taint("a")], NOW)
    assert d.action is Eviction.NOW and d.error == APPLIED_PLACEMENT_EMPTY_MESSAGE
    assert enqueue_decision({}, [taint("a", effect=NS)], NOW).action is Eviction.NEVER
    assert enqueue_decision({}, [taint("a")], NOW, enabled=False).action is Eviction.NEVER
    ok = enqueue_decision(placement_annotation([{"key": "a", "operator": "Exists"}]), [taint("a")], NOW)
    assert ok.action is Eviction.NEVER


def binding(clusters: list[str], annotations: dict[str, str], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "b", "namespace": "ns", "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"clusters": [{"name": c, "replicas": 1} for c in clusters]}}


def test_binding_eviction_decision() -> None:
    ann = placement_annotation([{"key": "a", "operator": "Exists", "tolerationSeconds": 10}])
    b = binding(["m1"], ann)
    assert binding_eviction_decision(b, "m1", [taint("a")], NOW).action is Eviction.AT
    assert binding_eviction_decision(b, "m2", [taint("a")], NOW).action is Eviction.NEVER  # not a target
    assert binding_eviction_decision(b, "m1", None, NOW).action is Eviction.NEVER  # cluster gone
    assert binding_eviction_decision(binding(["m1"], ann, deleting=True), "m1", [taint("a")], NOW).action \
        is Eviction.NEVER
    assert binding_eviction_decision(b, "m1", [], NOW).action is Eviction.NEVER  # taint removed: cancelled
    with pytest.raises(AppliedPlacementError):
        binding_eviction_decision(binding(["m1"], {}), "m1", [taint("a")], NOW)


def test_parse_taints_and_tolerations() -> None:
    cluster: dict[str, Any] = {"metadata": {"name": "m1"}, "spec": {"taints": [
        {"key": "a", "effect": NE, "timeAdded": "2026-01-01T11:00:00Z"}, {"key": "b", "value": "v", "effect": NS}]}}
    taints = parse_taints(cluster)
    assert taints == (taint("a", added=datetime(2026, 1, 1, 11, tzinfo=UTC)), taint("b", "v", NS, None))
    assert parse_taints(cluster["spec"]["taints"]) == taints
    assert parse_taints({"metadata": {"name": "m"}}) == ()
    assert parse_taints(None) == ()
    assert parse_tolerations(None) == ()
    with pytest.raises(ModelError):
        parse_taints({"spec": {"taints": "x"}})
    with pytest.raises(ModelError):
        parse_tolerations({"key": "a"})


# ------------------------------------------------------------------------------------------------
# properties
# ------------------------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])
VALUES = st.sampled_from(["", "x", "y"])
EFFECTS = st.sampled_from([NE, NE, NS])
SECONDS = st.one_of(st.none(), st.integers(min_value=-10, max_value=10_000))
ADDED = st.one_of(st.none(), st.integers(min_value=-5_000, max_value=0).map(lambda s: NOW + timedelta(seconds=s)))

taints_st = st.lists(st.builds(taint, KEYS, VALUES, EFFECTS, ADDED), max_size=4)
tols_st = st.lists(
    st.builds(tol, st.one_of(st.just(""), KEYS), st.sampled_from(["", "Equal", "Exists", "Lt"]), VALUES,
              st.sampled_from(["", NE, NS]), SECONDS),
    max_size=4,
)


def reference(taints: list[Taint], tolerations: list[Toleration], now: datetime) -> tuple[str, datetime | None]:
    """Karmada's needEviction written out step by step, for comparison."""
    ne = [t for t in taints if t.effect == NE]
    if not ne:
        return "never", None
    used = []
    for t in ne:
        match = [x for x in tolerations if tolerates(x, t)]
        if not match:
            return "now", None
        used.append(match[0])
    triggers = [t.time_added + timedelta(seconds=u.toleration_seconds) for u in used
                if u.toleration_seconds is not None for t in ne if t.time_added is not None and tolerates(u, t)]
    if not triggers:
        return "never", None
    deadline = min(triggers)
    return ("now" if deadline <= now else "at"), deadline


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(taints_st, tols_st)
def test_property_matches_the_reference_algorithm(taints: list[Taint], tolerations: list[Toleration]) -> None:
    d = no_execute_eviction(taints, tolerations, NOW)
    kind, deadline = reference(taints, tolerations, NOW)
    assert d.action.value.lower() == kind
    if kind != "never" and deadline is not None:
        assert d.at == deadline


@settings(max_examples=300, deadline=None)
@given(taints_st, tols_st)
def test_property_evict_time_is_min_over_matching_pairs(taints: list[Taint], tolerations: list[Toleration]) -> None:
    d = no_execute_eviction(taints, tolerations, NOW)
    if d.action is not Eviction.AT:
        return
    ne = no_execute_taints(taints)
    ok, used = matching_tolerations(ne, tolerations)
    assert ok
    pairs = [t.time_added + timedelta(seconds=u.toleration_seconds) for u in used for t in ne
             if u.toleration_seconds is not None and t.time_added is not None and tolerates(u, t)]
    assert d.at == min(pairs) and d.at > NOW


@settings(max_examples=300, deadline=None)
@given(taints_st.filter(lambda ts: any(t.effect == NE for t in ts)), tols_st)
def test_property_never_tolerated_is_immediate(taints: list[Taint], tolerations: list[Toleration]) -> None:
    ne = no_execute_taints(taints)
    untolerated = first_untolerated_taint(ne, tolerations)
    if untolerated is None:
        return
    d = no_execute_eviction(taints, tolerations, NOW)
    assert d.action is Eviction.NOW and d.taint == untolerated


@settings(max_examples=300, deadline=None)
@given(taints_st, tols_st, st.builds(tol, st.just("zzz"), st.sampled_from(["", "Equal", "Exists"]), VALUES,
                                      st.sampled_from(["", NE]), SECONDS), st.integers(min_value=0, max_value=4))
def test_property_adding_a_non_matching_toleration_never_changes_the_result(
    taints: list[Taint], tolerations: list[Toleration], extra: Toleration, position: int
) -> None:
    assert not any(tolerates(extra, t) for t in taints)
    changed = list(tolerations)
    changed.insert(min(position, len(changed)), extra)
    assert no_execute_eviction(taints, changed, NOW) == no_execute_eviction(taints, tolerations, NOW)


@settings(max_examples=300, deadline=None)
@given(taints_st, tols_st, st.builds(tol, KEYS, st.sampled_from(["", "Exists"]), VALUES, st.just(""), SECONDS))
def test_property_appending_a_toleration_never_changes_an_all_tolerated_result(
    taints: list[Taint], tolerations: list[Toleration], extra: Toleration
) -> None:
    """The first tolerating toleration of each taint is used, so a later one cannot matter."""
    if first_untolerated_taint(no_execute_taints(taints), tolerations) is not None:
        return
    assert no_execute_eviction(taints, [*tolerations, extra], NOW) == no_execute_eviction(taints, tolerations, NOW)


@settings(max_examples=300, deadline=None)
@given(taints_st, tols_st, st.integers(min_value=0, max_value=20_000))
def test_property_time_only_moves_towards_eviction(
    taints: list[Taint], tolerations: list[Toleration], later: int
) -> None:
    """NOW stays NOW, NEVER stays NEVER, AT becomes NOW exactly at its deadline."""
    before = no_execute_eviction(taints, tolerations, NOW)
    after = no_execute_eviction(taints, tolerations, NOW + timedelta(seconds=later))
    if before.action is Eviction.AT:
        assert before.at is not None
        expected = Eviction.NOW if NOW + timedelta(seconds=later) >= before.at else Eviction.AT
        assert after.action is expected
    else:
        assert after.action is before.action


@settings(max_examples=200, deadline=None)
@given(taints_st, tols_st)
def test_property_d10_queued_iff_not_never(taints: list[Taint], tolerations: list[Toleration]) -> None:
    d = no_execute_eviction(taints, tolerations, NOW)
    deadlines = eviction_deadlines([("b", "m")], {"b": tolerations}, {"m": taints}, NOW)
    assert (("b", "m") in deadlines) is should_queue(d)
    if should_queue(d):
        assert deadlines[("b", "m")] == d.when(NOW)
