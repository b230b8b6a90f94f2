"""Application failover decisions and the persisted unhealthy-since record (flotilla.failover.application)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.failover.application import (
    DEFAULT_TOLERATION_SECONDS,
    UNHEALTHY_SINCE_ANNOTATION,
    ApplicationFailoverDecision,
    application_failover_applies,
    decide_for_binding,
    detect_application_failure,
    format_unhealthy_since,
    parse_unhealthy_since,
    record_patch,
    toleration_seconds,
)
from flotilla.failover.eviction import (
    application_failover_task_options,
    cluster_names,
    graceful_evict_clusters,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def items(**health: str) -> list[dict[str, Any]]:
    return [{"clusterName": c, "applied": True, "health": h} for c, h in sorted(health.items())]


def detect(health: dict[str, str], record: dict[str, datetime] | None = None, *, clusters: Sequence[str] | None = None,
           evicting: Sequence[str] = (), tol: int = 300, now: datetime = NOW,
           unknown_resets: bool = True) -> ApplicationFailoverDecision:
    return detect_application_failure(
        clusters=sorted(health) if clusters is None else clusters, aggregated_status=items(**health),
        evicting=set(evicting), record=record or {}, tolerance=tol, now=now, unknown_resets=unknown_resets)


def binding(health: dict[str, str], *, record: dict[str, str] | None = None, propagate_deps: bool = True,
            application: dict[str, Any] | None = None, tasks: list[dict[str, Any]] | None = None,
            clusters: list[str] | None = None) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if record is not None:
        annotations[UNHEALTHY_SINCE_ANNOTATION] = json.dumps(record)
    app = application if application is not None else {
        "decisionConditions": {"tolerationSeconds": 30}, "purgeMode": "Directly"}
    spec: dict[str, Any] = {
        "propagateDeps": propagate_deps,
        "clusters": [{"name": c, "replicas": 1} for c in (sorted(health) if clusters is None else clusters)],
        "failover": {"application": app},
    }
    if tasks is not None:
        spec["gracefulEvictionTasks"] = tasks
    return {"kind": "ResourceBinding",
            "metadata": {"name": "b", "namespace": "ns", "generation": 2, "annotations": annotations},
            "spec": spec, "status": {"aggregatedStatus": items(**health)}}


# ------------------------------------------------------------------------------------------------
# the filter (which bindings application failover looks at)
# ------------------------------------------------------------------------------------------------


def test_filter() -> None:
    b = binding({"m1": "Unhealthy"})
    assert application_failover_applies(b, health_interpretable=True)
    assert not application_failover_applies(b, health_interpretable=False)
    assert not application_failover_applies(binding({"m1": "Unhealthy"}, propagate_deps=False),
                                            health_interpretable=True)
    no_status = binding({})
    assert not application_failover_applies(no_status, health_interpretable=True)
    no_app = binding({"m1": "Unhealthy"})
    no_app["spec"]["failover"] = {"cluster": {"purgeMode": "Directly"}}
    assert not application_failover_applies(no_app, health_interpretable=True)
    null_app = binding({"m1": "Unhealthy"})
    null_app["spec"]["failover"]["application"] = None
    assert not application_failover_applies(null_app, health_interpretable=True)


def test_propagate_deps_required_for_cluster_resource_bindings_too() -> None:
    """Karmada's CRB controller skips the check; Flotilla requires propagateDeps for both kinds."""
    crb = binding({"m1": "Unhealthy"}, propagate_deps=False)
    crb["kind"] = "ClusterResourceBinding"
    del crb["metadata"]["namespace"]
    assert not application_failover_applies(crb, health_interpretable=True)


def test_toleration_seconds() -> None:
    assert toleration_seconds({"decisionConditions": {"tolerationSeconds": 0}}) == 0
    assert toleration_seconds({"decisionConditions": {"tolerationSeconds": 45}}) == 45
    assert toleration_seconds({"decisionConditions": {}}) == DEFAULT_TOLERATION_SECONDS == 300
    assert toleration_seconds({}) == 300
    assert toleration_seconds({"decisionConditions": {"tolerationSeconds": -5}}) == 0
    assert toleration_seconds({"decisionConditions": {"tolerationSeconds": True}}) == 300


# ------------------------------------------------------------------------------------------------
# the timer (D8: persisted, and tolerationSeconds 0 evicts at once)
# ------------------------------------------------------------------------------------------------


def test_first_sight_records_now_and_checks_again_after_tolerance() -> None:
    d = detect({"m1": "Unhealthy", "m2": "Healthy"})
    assert d.evict == [] and d.unhealthy == ["m1"]
    assert d.record == {"m1": NOW}
    assert d.next_check == NOW + timedelta(seconds=300) and d.requeue_after(NOW) == 300.0


def test_evicts_once_tolerance_has_passed() -> None:
    d = detect({"m1": "Unhealthy", "m2": "Healthy"}, {"m1": ago(301)})
    assert d.evict == ["m1"] and d.next_check is None
    assert d.unhealthy_since == {} and d.record == {"m1": ago(301)}


def test_not_yet_due_reports_the_exact_remaining_time() -> None:
    d = detect({"m1": "Unhealthy"}, {"m1": ago(100.5)})
    assert d.evict == [] and d.next_check == ago(100.5) + timedelta(seconds=300)
    assert d.requeue_after(NOW) == 199.5


def test_d8_boundary_evicts_instead_of_stalling() -> None:
    """Karmada compares strictly after and then computes 0 remaining seconds, so it never requeues."""
    d = detect({"m1": "Unhealthy"}, {"m1": ago(300)})
    assert d.evict == ["m1"]


def test_d8_toleration_seconds_zero_evicts_at_once() -> None:
    d = detect({"m1": "Unhealthy", "m2": "Healthy"}, tol=0)
    assert d.evict == ["m1"] and d.next_check is None and d.unhealthy_since == {}


def test_d8_timers_survive_a_restart() -> None:
    """The record is on the binding: a new controller process continues the same timer."""
    first = decide_for_binding(binding({"m1": "Unhealthy", "m2": "Healthy"}), NOW, health_interpretable=True)
    assert first.evict == []
    patch = record_patch({}, first.unhealthy_since)
    assert patch is not None
    persisted = patch["metadata"]["annotations"]
    # ... process restarts; 31 s later the binding still carries the record
    b = binding({"m1": "Unhealthy", "m2": "Healthy"})
    b["metadata"]["annotations"] = persisted
    second = decide_for_binding(b, NOW + timedelta(seconds=31), health_interpretable=True)
    assert second.evict == ["m1"]


def test_healthy_resets_the_timer() -> None:
    d = detect({"m1": "Healthy"}, {"m1": ago(299)})
    assert d.record == {} and d.evict == []


def test_unknown_resets_the_timer_as_karmada_does() -> None:
    d = detect({"m1": "Unknown"}, {"m1": ago(299)})
    assert d.record == {} and d.unhealthy == []


def test_unknown_never_starts_a_timer() -> None:
    d = detect({"m1": "Unknown"})
    assert d.record == {} and d.next_check is None


def test_unknown_can_leave_the_timer_alone_when_asked() -> None:
    d = detect({"m1": "Unknown"}, {"m1": ago(299)}, unknown_resets=False)
    assert d.record == {"m1": ago(299)} and d.evict == []


def test_cluster_without_status_item_keeps_its_time() -> None:
    d = detect({"m2": "Healthy"}, {"m1": ago(10)}, clusters=["m1", "m2"])
    assert d.record == {"m1": ago(10)}


def test_cluster_no_longer_targeted_is_forgotten() -> None:
    d = detect({"m2": "Healthy"}, {"m1": ago(10)}, clusters=["m2"])
    assert d.record == {}


def test_cluster_under_eviction_is_not_counted_and_keeps_its_time() -> None:
    d = detect({"m1": "Unhealthy"}, {"m1": ago(1000)}, evicting=["m1"])
    assert d.evict == [] and d.unhealthy == [] and d.record == {"m1": ago(1000)}


def test_unhealthy_item_outside_spec_clusters_is_ignored() -> None:
    """Karmada's eviction would do nothing for it (and then write an empty update)."""
    d = detect({"m1": "Unhealthy", "m2": "Healthy"}, {"m1": ago(1000)}, clusters=["m2"], tol=0)
    assert d.evict == [] and d.record == {}


def test_several_clusters_order_and_earliest_next_check() -> None:
    d = detect({"a": "Unhealthy", "b": "Unhealthy", "c": "Unhealthy", "d": "Unhealthy"},
               {"b": ago(400), "c": ago(250), "d": ago(10)})
    assert d.evict == ["b"]
    assert d.next_check == ago(250) + timedelta(seconds=300)
    assert d.unhealthy_since == {"a": NOW, "c": ago(250), "d": ago(10)}
    assert d.record_after(()) == {"a": NOW, "b": ago(400), "c": ago(250), "d": ago(10)}


def test_future_record_is_taken_as_now() -> None:
    d = detect({"m1": "Unhealthy"}, {"m1": NOW + timedelta(days=365)}, tol=10)
    assert d.record == {"m1": NOW} and d.next_check == NOW + timedelta(seconds=10)


def test_duplicate_items_count_once() -> None:
    d = detect_application_failure(clusters=["m1"], aggregated_status=items(m1="Unhealthy") * 2, evicting=set(),
                                   record={}, tolerance=0, now=NOW)
    assert d.evict == ["m1"]


def test_naive_now_is_utc() -> None:
    d = detect({"m1": "Unhealthy"}, now=datetime(2026, 1, 1, 12))
    assert d.record == {"m1": NOW}


# ------------------------------------------------------------------------------------------------
# the record (annotation)
# ------------------------------------------------------------------------------------------------


def test_format_and_parse_round_trip() -> None:
    record = {"m2": NOW, "m1": NOW + timedelta(microseconds=250)}
    raw = format_unhealthy_since(record)
    assert raw == '{"m1":"2026-01-01T12:00:00.000250Z","m2":"2026-01-01T12:00:00Z"}'
    assert parse_unhealthy_since({UNHEALTHY_SINCE_ANNOTATION: raw}) == record
    assert format_unhealthy_since({}) is None


@pytest.mark.parametrize("raw", ["", "x", "[]", "null", '{"m1": 5}', '{"m1": "soon"}', '{"": "2026-01-01T00:00:00Z"}'])
def test_bad_records_are_ignored(raw: str) -> None:
    assert parse_unhealthy_since({UNHEALTHY_SINCE_ANNOTATION: raw}) == {}


def test_partially_bad_record_keeps_good_entries() -> None:
    raw = json.dumps({"m1": "2026-01-01T11:00:00+01:00", "m2": "nope"})
    assert parse_unhealthy_since({UNHEALTHY_SINCE_ANNOTATION: raw}) == {"m1": datetime(2026, 1, 1, 10, tzinfo=UTC)}
    assert parse_unhealthy_since(None) == {}


def test_record_patch() -> None:
    assert record_patch({}, {}) is None
    assert record_patch(None, {}) is None
    set_ = record_patch({}, {"m1": NOW})
    assert set_ == {"metadata": {"annotations": {UNHEALTHY_SINCE_ANNOTATION: '{"m1":"2026-01-01T12:00:00Z"}'}}}
    current = set_["metadata"]["annotations"]
    assert record_patch(current, {"m1": NOW}) is None
    assert record_patch(current, {}) == {"metadata": {"annotations": {UNHEALTHY_SINCE_ANNOTATION: None}}}
    # a non-canonical spelling of the same record is rewritten once
    assert record_patch({UNHEALTHY_SINCE_ANNOTATION: '{"m1": "2026-01-01T12:00:00+00:00"}'}, {"m1": NOW}) is not None


# ------------------------------------------------------------------------------------------------
# the whole binding, and the eviction it leads to
# ------------------------------------------------------------------------------------------------


def test_decide_for_binding_filter_failure_clears_the_record() -> None:
    b = binding({"m1": "Unhealthy"}, record={"m1": "2026-01-01T11:00:00Z"}, propagate_deps=False)
    d = decide_for_binding(b, NOW, health_interpretable=True)
    assert d.evict == [] and d.record == {}
    assert record_patch(b["metadata"]["annotations"], d.unhealthy_since) == {
        "metadata": {"annotations": {UNHEALTHY_SINCE_ANNOTATION: None}}}


def test_decide_for_binding_reads_tasks_and_tolerance() -> None:
    b = binding({"m1": "Unhealthy", "m2": "Unhealthy"}, record={"m1": "2026-01-01T11:00:00Z",
                                                              "m2": "2026-01-01T11:00:00Z"},
                tasks=[{"fromCluster": "m2", "reason": "r", "producer": "p"}])
    d = decide_for_binding(b, NOW, health_interpretable=True)
    assert d.evict == ["m1"]
    assert d.unhealthy_since == {"m2": datetime(2026, 1, 1, 11, tzinfo=UTC)}


def test_end_to_end_eviction_builds_tasks_once_for_the_batch() -> None:
    b = binding({"m1": "Unhealthy", "m2": "Unhealthy", "m3": "Healthy"},
                record={"m1": "2026-01-01T11:00:00Z", "m2": "2026-01-01T11:00:00Z"},
                application={"decisionConditions": {"tolerationSeconds": 30}, "purgeMode": "Never"})
    d = decide_for_binding(b, NOW, health_interpretable=True)
    assert d.evict == ["m1", "m2"]
    before = cluster_names(b["spec"])
    opts = application_failover_task_options(b["spec"]["failover"]["application"], preserved_label_state={"k": "v"},
                                             clusters_before_failover=before)
    patch = graceful_evict_clusters(b["spec"], [(c, opts) for c in d.evict])
    assert [c["name"] for c in patch.clusters] == ["m3"]
    assert all(t["suppressDeletion"] is True and t["clustersBeforeFailover"] == ["m1", "m2", "m3"]
               for t in patch.tasks)
    assert record_patch(b["metadata"]["annotations"], d.unhealthy_since) == {
        "metadata": {"annotations": {UNHEALTHY_SINCE_ANNOTATION: None}}}


# ------------------------------------------------------------------------------------------------
# properties
# ------------------------------------------------------------------------------------------------

CLUSTERS = ["m1", "m2", "m3"]
health_st = st.dictionaries(st.sampled_from(CLUSTERS), st.sampled_from(["Healthy", "Unhealthy", "Unknown"]))
record_st = st.dictionaries(st.sampled_from(CLUSTERS), st.integers(min_value=0, max_value=1000).map(ago))


@settings(max_examples=400, deadline=None)
@given(health_st, record_st, st.integers(min_value=0, max_value=600), st.lists(st.sampled_from(CLUSTERS), max_size=2),
       st.booleans())
def test_property_decision_invariants(health: dict[str, str], record: dict[str, datetime], tol: int,
                                      evicting: list[str], unknown_resets: bool) -> None:
    d = detect(health, record, clusters=CLUSTERS, evicting=evicting, tol=tol, unknown_resets=unknown_resets)
    for cluster in d.evict:
        assert health[cluster] == "Unhealthy" and cluster not in evicting
        since = record.get(cluster, NOW)
        assert NOW >= since + timedelta(seconds=tol)
    if tol == 0:  # D8: nothing Unhealthy survives a pass
        assert d.evict == d.unhealthy and d.next_check is None
    if d.next_check is not None:
        assert d.next_check > NOW
        # nothing is due before next_check: a pass then evicts something
        later = detect(health, d.record, clusters=CLUSTERS, evicting=evicting, tol=tol,
                       now=d.next_check, unknown_resets=unknown_resets)
        assert set(later.evict) >= {c for c in d.unhealthy if c not in d.evict
                                    and d.record[c] + timedelta(seconds=tol) == d.next_check}
    for cluster, since in d.unhealthy_since.items():
        assert cluster not in d.evict
        assert health.get(cluster) != "Healthy"
        if unknown_resets:
            assert health.get(cluster) != "Unknown"
        assert since <= NOW
    # only Unhealthy clusters start a timer
    for cluster in set(d.record) - set(record):
        assert health[cluster] == "Unhealthy"


@settings(max_examples=200, deadline=None)
@given(record_st)
def test_property_record_round_trips_through_the_annotation(record: dict[str, datetime]) -> None:
    raw = format_unhealthy_since(record)
    annotations = {} if raw is None else {UNHEALTHY_SINCE_ANNOTATION: raw}
    assert parse_unhealthy_since(annotations) == record
    assert record_patch(annotations, record) is None
