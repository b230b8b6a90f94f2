"""When the scheduler schedules a binding, and what it writes."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.kube.conditions import set_condition
from flotilla.kube.patch import PatchError, apply_json_patch, apply_merge_patch
from flotilla.kube.times import format_time
from flotilla.scheduler.triggers import (
    REASON_CLUSTER_TERMINATING,
    REASON_DUPLICATED,
    REASON_PLACEMENT_CHANGED,
    REASON_REPLICAS_CHANGED,
    REASON_RESCHEDULE_TRIGGERED,
    ClusterChange,
    affected_by_cluster,
    applied_placement,
    cluster_update_matters,
    clusters_patch,
    confirmation_patch,
    considered,
    guarded_clusters_patch,
    guarded_status_patch,
    held_status_due,
    observed_generation_patch,
    pass_status_patch,
    placement_changed,
    replicas_changed,
    schedule_reason,
    scheduled_status,
    scheduled_status_patch,
    status_patch,
)

DIVIDED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}}


def binding(placement: dict[str, Any] | None = None, *, replicas: int = 3, clusters: list[dict[str, Any]] | None = None,
            applied: dict[str, Any] | str | None = None, generation: int = 2, observed: int = 1,
            status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    placement = DIVIDED if placement is None else placement
    annotations = {}
    if applied is not None:
        annotations[L.POLICY_PLACEMENT_ANNOTATION] = applied if isinstance(applied, str) else json.dumps(applied)
    body: dict[str, Any] = {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                         "name": "web"}, "placement": placement, **spec}
    if replicas:
        body["replicas"] = replicas
    if clusters is not None:
        body["clusters"] = clusters
    st = {"schedulerObservedGeneration": observed, **(status or {})}
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": "web-deployment", "namespace": "default", "generation": generation,
                         "resourceVersion": "9", "labels": {L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: "id"},
                         "annotations": annotations},
            "spec": body, "status": st}


def cluster(name: str, labels: dict[str, str] | None = None, *, generation: int = 1,
            deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}, "generation": generation}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": meta, "spec": {}}


# ----------------------------------------------------------------------------------- considered


def test_considered_bindings() -> None:
    b = binding()
    assert considered(b)
    assert not considered(b, "other-scheduler")
    other = copy.deepcopy(b)
    other["spec"]["schedulerName"] = "other-scheduler"
    assert considered(other, "other-scheduler") and not considered(other)
    suspended = copy.deepcopy(b)
    suspended["spec"]["suspension"] = {"scheduling": True}
    assert not considered(suspended)
    released = copy.deepcopy(b)
    released["metadata"]["labels"] = {}
    assert not considered(released)  # its policy was deleted
    released["metadata"]["labels"] = {L.BINDING_MANAGED_BY_LABEL: "some-tool"}
    assert considered(released)
    attached = copy.deepcopy(b)
    del attached["spec"]["placement"]
    assert not considered(attached)  # a dependency's binding: follows requiredBy, never scheduled


# ----------------------------------------------------------------------------------- placement


def test_placement_changed() -> None:
    p = {"clusterAffinity": {"clusterNames": ["m1"]}, **DIVIDED}
    assert placement_changed(p, None)
    assert placement_changed(p, "")
    assert not placement_changed(p, "not json")
    assert not placement_changed(p, json.dumps(p))
    assert placement_changed(p, json.dumps({**p, "clusterAffinity": {"clusterNames": ["m2"]}}))
    assert placement_changed(p, json.dumps(DIVIDED))
    assert placement_changed({**p, "clusterTolerations": [{"key": "k", "operator": "Exists"}]}, json.dumps(p))
    # without an observed clusterAffinities term any difference counts
    assert placement_changed({**p, "workloadAffinity": {}}, json.dumps(p))


def test_cluster_affinities_change_counts_only_for_the_observed_term() -> None:
    terms = [{"affinityName": "a", "clusterNames": ["m1"]}, {"affinityName": "b", "clusterNames": ["m2"]}]
    p = {"clusterAffinities": terms}
    other_term_changed = {"clusterAffinities": [terms[0], {"affinityName": "b", "clusterNames": ["m3"]}]}
    assert not placement_changed(other_term_changed, json.dumps(p), "a")
    assert placement_changed(other_term_changed, json.dumps(p), "b")
    assert placement_changed(other_term_changed, json.dumps(p), "")
    assert placement_changed({"clusterAffinities": [terms[1]]}, json.dumps(p), "a")
    assert not placement_changed({**p, "workloadAffinity": {}}, json.dumps(p), "a")


def test_replicas_changed() -> None:
    assert not replicas_changed(binding({}, clusters=[{"name": "m1", "replicas": 1}])["spec"])  # no replicaScheduling
    dup = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    assert not replicas_changed(binding(dup, clusters=[{"name": "m1", "replicas": 3}])["spec"])
    assert replicas_changed(binding(dup, clusters=[{"name": "m1", "replicas": 3}, {"name": "m2", "replicas": 2}])["spec"])
    assert not replicas_changed(binding(clusters=[{"name": "m1", "replicas": 1}, {"name": "m2", "replicas": 2}])["spec"])
    assert replicas_changed(binding(clusters=[{"name": "m2", "replicas": 2}])["spec"])  # m1 was evicted
    assert replicas_changed(binding(replicas=4, clusters=[{"name": "m1", "replicas": 3}])["spec"])


def test_schedule_reasons_in_order() -> None:
    clusters = [cluster("m1"), cluster("m2")]
    targets = [{"name": "m1", "replicas": 3}]
    assert schedule_reason(binding(), clusters) == REASON_PLACEMENT_CHANGED
    assert schedule_reason(binding(applied=DIVIDED, clusters=targets, replicas=5), clusters) == REASON_REPLICAS_CHANGED
    triggered = binding(applied=DIVIDED, clusters=targets, rescheduleTriggeredAt="2024-01-02T00:00:00Z",
                        status={"lastScheduledTime": "2024-01-01T00:00:00Z"})
    assert schedule_reason(triggered, clusters) == REASON_RESCHEDULE_TRIGGERED
    old_trigger = binding(applied=DIVIDED, clusters=targets, rescheduleTriggeredAt="2023-01-01T00:00:00Z",
                          status={"lastScheduledTime": "2024-01-01T00:00:00Z"})
    assert schedule_reason(old_trigger, clusters) is None
    assert schedule_reason(binding({}, applied={}, clusters=targets), clusters) == REASON_DUPLICATED
    assert schedule_reason(binding(applied=DIVIDED, replicas=0, clusters=[{"name": "m1"}]), clusters) == \
        REASON_DUPLICATED  # not a workload
    assert schedule_reason(binding(applied=DIVIDED, clusters=targets), clusters) is None
    assert schedule_reason(binding(applied=DIVIDED, clusters=targets),
                           [cluster("m1", deleting=True)]) == REASON_CLUSTER_TERMINATING
    assert schedule_reason(binding(applied=DIVIDED, clusters=targets), [cluster("m2", deleting=True)]) is None


def test_unreadable_reschedule_times_count_as_unset() -> None:
    targets = [{"name": "m1", "replicas": 3}]
    for triggered, last in (("garbage", "2024-01-01T00:00:00Z"), ("2024-01-02T00:00:00Z", "later"), (7, None)):
        b = binding(applied=DIVIDED, clusters=targets, rescheduleTriggeredAt=triggered,
                    status={"lastScheduledTime": last})
        assert schedule_reason(b, [cluster("m1")]) is None


def test_observed_generation_is_confirmed_when_nothing_is_scheduled() -> None:
    assert observed_generation_patch(binding(generation=4, observed=3)) == {
        "status": {"schedulerObservedGeneration": 4}, "metadata": {"resourceVersion": "9"}}
    assert observed_generation_patch(binding(generation=3, observed=3)) is None


# ----------------------------------------------------------------------------------- clusters


def test_which_cluster_updates_matter() -> None:
    assert not cluster_update_matters(cluster("m1"), cluster("m1"))  # status only (Ready flips)
    assert cluster_update_matters(cluster("m1"), cluster("m1", {"region": "eu"}))
    assert cluster_update_matters(cluster("m1"), cluster("m1", generation=2))  # a taint
    assert cluster_update_matters(cluster("m1"), cluster("m1", deleting=True))
    assert not cluster_update_matters(cluster("m1", deleting=True), cluster("m1", deleting=True))


def test_affected_bindings() -> None:
    m1 = cluster("m1", {"env": "prod"})
    assert affected_by_cluster(binding({}), m1)  # no affinity: every cluster matters
    by_label = binding({"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}}})
    assert affected_by_cluster(by_label, m1)
    assert not affected_by_cluster(by_label, cluster("m1", {"env": "dev"}))
    terms = {"clusterAffinities": [{"affinityName": "a", "clusterNames": ["m2"]},
                                   {"affinityName": "b", "clusterNames": ["m1"]}]}
    assert affected_by_cluster(binding(terms, generation=2, observed=1), m1)  # not caught up yet
    assert not affected_by_cluster(binding(terms, generation=1, observed=1), m1)  # term "a" (first) used
    assert affected_by_cluster(binding(terms, generation=1, observed=1,
                                       status={"schedulerObservingAffinityName": "b"}), m1)
    assert not affected_by_cluster({"spec": {}}, m1)


def _affinity_bindings() -> list[dict[str, Any]]:
    terms = {"clusterAffinities": [{"affinityName": "a", "clusterNames": ["m2"]},
                                   {"affinityName": "b", "clusterNames": ["m1"]}]}
    return [
        binding({}),
        binding({"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}}}),
        binding({"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "dev"}}}}),
        binding({"clusterAffinity": {"clusterNames": ["m1"], "exclude": ["m1"]}}),
        binding({"clusterAffinity": {"fieldSelector": {"matchExpressions": [
            {"key": "region", "operator": "In", "values": ["eu"]}]}}}),
        binding({"clusterAffinity": {"labelSelector": {"matchExpressions": [
            {"key": "env", "operator": "Bogus", "values": ["x"]}]}}}),  # malformed: matches nothing
        binding({"clusterAffinity": "not a mapping"}),
        binding(terms, generation=2, observed=1),
        binding(terms, generation=1, observed=1),
        binding(terms, generation=1, observed=1, status={"schedulerObservingAffinityName": "b"}),
        binding(terms, generation=1, observed=1, status={"schedulerObservingAffinityName": "gone"}),
        {"spec": {}},
        {"spec": {"placement": "not a mapping"}},
    ]


def _cluster_versions() -> list[dict[str, Any]]:
    prod = cluster("m1", {"env": "prod"})
    eu = copy.deepcopy(prod)
    eu["spec"] = {"region": "eu", "taints": [{"key": "k", "effect": "NoExecute"}]}
    bad_spec = copy.deepcopy(prod)
    bad_spec["spec"] = {"zones": "not a list"}
    bad_status = copy.deepcopy(prod)
    bad_status["status"] = {"apiEnablements": "not a list", "resourceSummary": 7}
    return [prod, cluster("m1", {"env": "dev"}), eu, bad_spec, bad_status, cluster("m2"), cluster("m1", deleting=True)]


def test_a_cluster_change_affects_the_bindings_either_version_affects() -> None:
    versions = _cluster_versions()
    for old in versions:
        for new in versions:
            change = ClusterChange(old, new)
            for b in _affinity_bindings() * 2:  # twice: the second answer of an affinity comes from the memo
                assert change.affects(b) == (affected_by_cluster(b, old) or affected_by_cluster(b, new)), (b, old, new)


def test_an_affinity_is_tested_against_the_cluster_without_its_status() -> None:
    # a malformed status (API enablements, resource summary) does not change what the cluster's identity matches
    bad_status = _cluster_versions()[4]
    assert affected_by_cluster(_affinity_bindings()[1], bad_status)
    assert ClusterChange(bad_status, bad_status).affects(_affinity_bindings()[1])


# ----------------------------------------------------------------------------------- writes


def test_clusters_patch() -> None:
    b = binding({})
    patch = clusters_patch(b, [{"name": "m1", "replicas": 3}, {"name": "m2", "replicas": 0}])
    assert patch == {"metadata": {"annotations": {L.POLICY_PLACEMENT_ANNOTATION: "{}"}, "resourceVersion": "9"},
                     "spec": {"clusters": [{"name": "m1", "replicas": 3}, {"name": "m2"}]}}
    done = apply_merge_patch(b, patch)
    assert clusters_patch(done, [{"name": "m1", "replicas": 3}, {"name": "m2", "replicas": 0}]) is None
    cleared = clusters_patch(done, [])
    assert cleared == {"spec": {"clusters": None}, "metadata": {"resourceVersion": "9"}}
    assert "clusters" not in apply_merge_patch(done, cleared)["spec"]
    assert applied_placement({"a": [1]}) == '{"a":[1]}'


def test_set_condition_keeps_the_transition_time_while_the_status_holds() -> None:
    first = set_condition([], {"type": "Scheduled", "status": "False", "reason": "NoClusterFit", "message": "x"}, "t1")
    assert first == [{"type": "Scheduled", "status": "False", "reason": "NoClusterFit", "message": "x",
                      "lastTransitionTime": "t1"}]
    again = set_condition(first, {"type": "Scheduled", "status": "False", "reason": "SchedulerError", "message": "y"},
                          "t2")
    assert again[0]["lastTransitionTime"] == "t1" and again[0]["reason"] == "SchedulerError"
    flipped = set_condition(again + [{"type": "FullyApplied", "status": "True"}],
                            {"type": "Scheduled", "status": "True", "reason": "Success", "message": "ok"}, "t3")
    assert flipped[0]["lastTransitionTime"] == "t3"
    assert flipped[1] == {"type": "FullyApplied", "status": "True"}


NOW = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
SUCCESS = {"type": "Scheduled", "status": "True", "reason": "Success", "message": "ok"}
FAILED = {"type": "Scheduled", "status": "False", "reason": "NoClusterFit", "message": "0/2 clusters"}


def test_status_after_success_and_failure() -> None:
    b = binding(generation=5, observed=3, status={"conditions": [{"type": "FullyApplied", "status": "True"}],
                                                  "aggregatedStatus": [{"clusterName": "m1"}]})
    ok = scheduled_status(b, SUCCESS, NOW, affinity_name="a", generation=4)
    assert ok["schedulerObservedGeneration"] == 4
    assert ok["lastScheduledTime"] == "2024-05-06T07:08:09Z"
    assert ok["schedulerObservingAffinityName"] == "a"
    assert ok["aggregatedStatus"] == [{"clusterName": "m1"}]
    assert [c["type"] for c in ok["conditions"]] == ["FullyApplied", "Scheduled"]
    failed = scheduled_status(b, FAILED, NOW)
    assert failed["schedulerObservedGeneration"] == 3 and "lastScheduledTime" not in failed
    assert "schedulerObservingAffinityName" not in failed
    patch = status_patch(b, failed)
    assert patch is not None and patch["metadata"] == {"resourceVersion": "9"}
    assert set(patch["status"]) == {"conditions"}
    assert status_patch(b, b["status"]) is None
    assert scheduled_status(b, SUCCESS, NOW)["schedulerObservedGeneration"] == 5


@pytest.mark.parametrize("value", [datetime(2024, 5, 6, 7, 8, 9), datetime(2024, 5, 6, 7, 8, 9, 500, tzinfo=UTC)])
def test_format_time(value: datetime) -> None:
    assert format_time(value) == "2024-05-06T07:08:09Z"


def test_scheduled_status_patch_is_status_patch_of_scheduled_status() -> None:
    fully = {"type": "FullyApplied", "status": "True"}
    for b in (binding(generation=5, observed=3, status={"conditions": [fully], "aggregatedStatus": [{"x": 1}]}),
              binding(generation=5, observed=5, status={"lastScheduledTime": "2024-05-06T07:08:09Z",
                                                        "schedulerObservingAffinityName": "a",
                                                        "conditions": [fully, {**SUCCESS, "lastTransitionTime": "t"}]}),
              binding()):
        for cond, kw in ((SUCCESS, {"affinity_name": "a", "generation": 4}), (SUCCESS, {}), (FAILED, {})):
            expected = status_patch(b, scheduled_status(b, cond, NOW, **kw))  # type: ignore[arg-type]
            assert scheduled_status_patch(b, cond, NOW, **kw) == expected  # type: ignore[arg-type]


GUARDED_STATUS = {"schedulerObservingAffinityName": "primary", "lastScheduledTime": "2024-05-06T07:00:00Z"}


def test_guarded_clusters_patch_tests_what_the_decision_read() -> None:
    b = binding({}, clusters=[{"name": "m1", "replicas": 3}], status=GUARDED_STATUS)
    b["metadata"]["uid"] = "u1"
    patch = clusters_patch(b, [{"name": "m2", "replicas": 3}])
    assert patch is not None
    ops = guarded_clusters_patch(b, patch)
    assert ops is not None
    assert [(o["op"], o["path"]) for o in ops] == [
        ("test", "/metadata/uid"), ("test", "/metadata/generation"), ("test", "/metadata/labels"),
        ("test", "/status/schedulerObservingAffinityName"), ("test", "/status/lastScheduledTime"),
        ("add", "/metadata/annotations/policy.karmada.io~1applied-placement"), ("add", "/spec/clusters")]
    done = apply_json_patch(b, ops)
    assert done == apply_merge_patch(b, {k: v for k, v in patch.items() if k != "metadata"} | {
        "metadata": {"annotations": patch["metadata"]["annotations"]}})
    # a status write of another controller meanwhile is no conflict; a spec change, a new claim or another
    # scheduling status is
    assert apply_json_patch({**b, "status": {**b["status"], "aggregatedStatus": [{"x": 1}]}}, ops)["spec"] == done["spec"]
    for path, value in ((("metadata", "generation"), 3), (("metadata", "labels"), {}), (("metadata", "uid"), "u2"),
                        (("status", "schedulerObservingAffinityName"), "fallback")):
        moved = copy.deepcopy(b)
        moved[path[0]][path[1]] = value
        with pytest.raises(PatchError):
            apply_json_patch(moved, ops)
    # clearing the clusters removes the field
    cleared = clusters_patch(done, [])
    assert cleared is not None
    ops = guarded_clusters_patch(done, cleared)
    assert ops is not None and ops[-1] == {"op": "remove", "path": "/spec/clusters"}
    assert "clusters" not in apply_json_patch(done, ops)["spec"]


def test_guarded_clusters_patch_falls_back_when_a_guard_cannot_be_tested() -> None:
    b = binding({}, status=GUARDED_STATUS)
    b["metadata"]["uid"] = "u1"
    patch = clusters_patch(b, [{"name": "m2", "replicas": 3}])
    assert patch is not None and guarded_clusters_patch(b, patch) is not None
    for drop in (("metadata", "uid"), ("metadata", "annotations"), ("status", "lastScheduledTime"),
                 ("status", "schedulerObservingAffinityName")):
        partial = copy.deepcopy(b)
        del partial[drop[0]][drop[1]]
        assert guarded_clusters_patch(partial, patch) is None, drop


def test_guarded_status_patch_only_for_the_schedulers_own_fields() -> None:
    b = binding(generation=5, observed=4, status={**GUARDED_STATUS, "conditions": [{**SUCCESS, "lastTransitionTime": "t"}]})
    b["metadata"]["uid"] = "u1"
    patch = scheduled_status_patch(b, SUCCESS, NOW, affinity_name="fallback", generation=5)
    assert patch is not None and "conditions" not in patch["status"]
    ops = guarded_status_patch(b, patch)
    assert ops is not None and ops[0] == {"op": "test", "path": "/metadata/uid", "value": "u1"}
    assert apply_json_patch(b, ops)["status"] == apply_merge_patch(b, patch)["status"]
    with pytest.raises(PatchError):
        apply_json_patch({**b, "metadata": {**b["metadata"], "uid": "u2"}}, ops)
    flipped = scheduled_status_patch(b, FAILED, NOW)
    assert flipped is not None and "conditions" in flipped["status"]
    assert guarded_status_patch(b, flipped) is None


# ----------------------------------------------------------------------------------- held-back status writes


def test_a_held_back_status_write_is_due_only_while_the_binding_still_waits_for_it() -> None:
    """The scheduler's status write held back under load confirms one generation: it is made while the binding
    is at that generation and not yet confirmed, and dropped when the binding went, is being deleted, moved on
    (the pass its change queues writes its own status) or a later pass confirmed it already."""
    assert held_status_due(binding(generation=2, observed=1), 2)
    assert not held_status_due(None, 2)
    deleting = binding(generation=2, observed=1)
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert not held_status_due(deleting, 2)
    assert not held_status_due(binding(generation=3, observed=1), 2)
    assert not held_status_due(binding(generation=2, observed=2), 2)
    assert not held_status_due(binding(generation=2, observed=3), 2)  # a newer one recorded: never backwards
    assert not held_status_due(binding(generation=2, observed=1), -1)  # no generation to confirm


def test_a_held_write_for_generation_4_is_dropped_on_a_binding_that_records_5() -> None:
    """The held write is decided again on the binding as re-read: a pass (of this scheduler or of the other
    replica) that recorded schedulerObservedGeneration 5 meanwhile wins over a held result for 4, whether the
    binding's spec moved on or only its status says so; a write made in a pass never moves it back either."""
    moved_on = binding(generation=5, observed=5)
    assert pass_status_patch(moved_on, SUCCESS, NOW, affinity_name=None, observed=4, held=True) is None
    assert pass_status_patch(moved_on, SUCCESS, NOW, affinity_name=None, observed=4) is None
    recorded = binding(generation=4, observed=5)  # the generation it confirms, but a newer one recorded
    assert pass_status_patch(recorded, SUCCESS, NOW, affinity_name=None, observed=4, held=True) is None
    assert pass_status_patch(recorded, SUCCESS, NOW, affinity_name=None, observed=4) is None
    due = binding(generation=4, observed=3)
    patch = pass_status_patch(due, SUCCESS, NOW, affinity_name="primary", observed=4, held=True)
    assert patch is not None and patch["status"]["schedulerObservedGeneration"] == 4
    assert patch == scheduled_status_patch(due, SUCCESS, NOW, affinity_name="primary", generation=4)
    # a pass's write confirms its generation on a binding whose spec moved on, until a newer one is recorded
    ahead = binding(generation=5, observed=3)
    assert pass_status_patch(ahead, SUCCESS, NOW, affinity_name=None, observed=4, held=True) is None
    in_pass = pass_status_patch(ahead, SUCCESS, NOW, affinity_name=None, observed=4)
    assert in_pass is not None and in_pass["status"]["schedulerObservedGeneration"] == 4
    failed = pass_status_patch(ahead, FAILED, NOW, affinity_name=None, observed=-1)
    assert failed is not None and "schedulerObservedGeneration" not in failed["status"]


def test_the_guarded_status_write_fails_once_another_pass_recorded_a_generation() -> None:
    """The JSON patch of the scheduler's own fields tests the generation and schedulerObservedGeneration it was
    decided on: applied after another pass moved either of them, it fails (422) instead of moving them back."""
    b = binding(generation=4, observed=3, status={**GUARDED_STATUS, "conditions": [{**SUCCESS, "lastTransitionTime": "t"}]})
    b["metadata"]["uid"] = "u1"
    patch = scheduled_status_patch(b, SUCCESS, NOW, generation=4)
    assert patch is not None and "conditions" not in patch["status"]
    ops = guarded_status_patch(b, patch)
    assert ops is not None
    assert apply_json_patch(b, ops)["status"]["schedulerObservedGeneration"] == 4
    newer = copy.deepcopy(b)
    newer["metadata"]["generation"] = 5
    newer["status"]["schedulerObservedGeneration"] = 5
    with pytest.raises(PatchError):
        apply_json_patch(newer, ops)
    recorded = copy.deepcopy(b)
    recorded["status"]["schedulerObservedGeneration"] = 5
    with pytest.raises(PatchError):
        apply_json_patch(recorded, ops)
    unobserved = copy.deepcopy(b)
    del unobserved["status"]["schedulerObservedGeneration"]
    ops = guarded_status_patch(unobserved, patch)  # nothing to test there: the generation still is
    assert ops is not None and {"op": "test", "path": "/metadata/generation", "value": 4} in ops


def test_a_pass_with_nothing_to_schedule_confirms_with_the_held_result() -> None:
    """A pass that only confirms the generation writes the result of a pass whose status write is still held
    (its Scheduled condition, time and affinity) with the binding's generation now, and the generation alone
    without one."""
    ok = {"type": "Scheduled", "status": "True", "reason": "Success", "message": "Binding has been scheduled successfully."}
    b = binding(generation=3, observed=1)
    assert confirmation_patch(b) == observed_generation_patch(b)
    patch = confirmation_patch(b, (ok, NOW, "primary"))
    assert patch is not None
    status = apply_merge_patch(b, patch)["status"]
    assert status["schedulerObservedGeneration"] == 3
    assert status["schedulerObservingAffinityName"] == "primary"
    assert status["lastScheduledTime"] == format_time(NOW)
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Scheduled"] == ["Success"]
    done = apply_merge_patch(b, patch)
    assert confirmation_patch(done, (ok, NOW, "primary")) is None  # written already: nothing to change
    no_generation = binding(generation=3, observed=1)
    del no_generation["metadata"]["generation"]
    assert confirmation_patch(no_generation, (ok, NOW, "primary")) == observed_generation_patch(no_generation)


def test_a_confirmation_leaves_out_a_held_result_older_than_the_one_recorded() -> None:
    """A held result is written with a confirmation only while nothing later was recorded: once a later pass
    (of the other replica) wrote its own lastScheduledTime, the confirmation writes the generation alone."""
    ok = {"type": "Scheduled", "status": "True", "reason": "Success", "message": "Binding has been scheduled successfully."}
    later = binding(generation=3, observed=2, status={"lastScheduledTime": format_time(NOW.replace(minute=9))})
    assert confirmation_patch(later, (ok, NOW, "primary")) == observed_generation_patch(later)
    same = binding(generation=3, observed=2, status={"lastScheduledTime": format_time(NOW)})
    patch = confirmation_patch(same, (ok, NOW.replace(tzinfo=None), "primary"))  # a naive time is UTC
    assert patch is not None and patch["status"]["schedulerObservingAffinityName"] == "primary"
