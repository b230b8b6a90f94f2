"""State preservation: extraction, injection, D4 (state stays), D5 (consecutive failovers),
D6 (failures that surface), D7 (label-safe values), D9 (clustersBeforeFailover for cluster failover)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flotilla.failover.state import (
    CONDITION_STATE_PRESERVED,
    EVENT_STATE_CARRIED_FORWARD,
    EVENT_STATE_PRESERVATION_FAILED,
    EVENT_STATE_PRESERVATION_TIMED_OUT,
    INJECTED_STATE_ANNOTATION,
    REASON_STATE_PRESERVATION_FAILED,
    REASON_STATE_PRESERVATION_TIMED_OUT,
    STATE_PRESERVATION_FAILING_SINCE_ANNOTATION,
    ExtractionFailure,
    InjectedStateRecord,
    StateExtractionError,
    StatePreservationRule,
    carry_forward,
    clear_failing_since,
    clusters_before_failover,
    current_record,
    decide_injection,
    extract_rule,
    extract_state,
    failing_since,
    inject_labels,
    injected_copy_health_pending,
    injected_state_patch,
    injected_state_record,
    observe_injected_copy_health,
    on_extraction_failure,
    on_extraction_success,
    parse_injected_state_record,
    plan_injection,
    preserve_state_for_eviction,
    previous_injection,
    record_failing_since,
    reflected_status,
    rules_of,
    should_inject,
    similar_keys,
    state_preservation_deadline,
)
from flotilla.kube.validation import label_value_errors

T0 = datetime(2024, 12, 17, 19, 8, 11, tzinfo=UTC)

# What Karmada's FlinkDeployment interpreter keeps in ReflectStatus: the rules see this, not the object.
FLINK_STATUS: dict[str, Any] = {
    "jobManagerDeploymentStatus": "READY",
    "lifecycleState": "STABLE",
    "jobStatus": {
        "jobId": "cafebabe0123456789abcdef01234567",
        "jobName": "orders",
        "state": "RUNNING",
        "startTime": "1734462400000",
        "checkpointInfo": {"lastCheckpoint": {"timeStamp": 1734462491693, "triggerType": "PERIODIC"}},
    },
}

JOB_ID = {"aliasLabelName": "flink.apache.org/job-id", "jsonPath": "{.jobStatus.jobId}"}
CHECKPOINT = {"aliasLabelName": "flink.apache.org/checkpoint-ts",
              "jsonPath": "{.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}"}


def _spec(clusters: list[str], tasks: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusters": [{"name": c} for c in clusters], **extra}
    if tasks is not None:
        spec["gracefulEvictionTasks"] = tasks
    return spec


def _task(from_cluster: str, mode: str = "Directly", state: dict[str, str] | None = None,
          before: list[str] | None = None) -> dict[str, Any]:
    task: dict[str, Any] = {"fromCluster": from_cluster, "purgeMode": mode, "reason": "TaintUntolerated",
                            "producer": "TaintManager"}
    if state is not None:
        task["preservedLabelState"] = state
    if before is not None:
        task["clustersBeforeFailover"] = before
    return task


# ============================================================================================ extraction


def test_rules_are_evaluated_on_the_reflected_status_not_the_object() -> None:
    assert extract_state([JOB_ID, CHECKPOINT], FLINK_STATUS) == {
        "flink.apache.org/job-id": "cafebabe0123456789abcdef01234567",
        "flink.apache.org/checkpoint-ts": "1734462491693",
    }
    with pytest.raises(StateExtractionError) as caught:
        extract_state([{"aliasLabelName": "a", "jsonPath": "{.status.jobStatus.jobId}"}], FLINK_STATUS)
    assert caught.value.reason == "status is not found"


def test_the_whole_json_path_is_a_template() -> None:
    rules = [{"aliasLabelName": "a", "jsonPath": "{.jobStatus.state}-{.lifecycleState}"},
             {"aliasLabelName": "b", "jsonPath": "v1"},
             {"aliasLabelName": "c", "jsonPath": "{ .jobStatus.jobName }"}]
    assert extract_state(rules, FLINK_STATUS) == {"a": "RUNNING-STABLE", "b": "v1", "c": "orders"}
    # without braces the text is literal, and ".replicas" is no label value (D7 says why)
    with pytest.raises(StateExtractionError, match=r"printed as literal text; write \{\.replicas\}"):
        extract_state([{"aliasLabelName": "r", "jsonPath": ".replicas"}], {"replicas": 2})


def test_no_rules_extract_nothing_even_without_a_status() -> None:
    assert extract_state([], None) == {}


def test_rules_of_each_trigger_do_not_fall_back_to_the_other() -> None:
    failover = {"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [JOB_ID]}},
                "application": {"purgeMode": "Directly"}}
    assert rules_of(failover, "cluster") == [StatePreservationRule("flink.apache.org/job-id", "{.jobStatus.jobId}")]
    assert rules_of(failover, "application") == []
    assert rules_of(None, "cluster") == []


def test_reflected_status_comes_from_the_failed_clusters_aggregated_item() -> None:
    binding = {"status": {"aggregatedStatus": [
        {"clusterName": "member1", "status": FLINK_STATUS, "applied": True, "health": "Healthy"},
        {"clusterName": "member2", "applied": False, "health": "Unknown"}]}}
    assert reflected_status(binding, "member1") is FLINK_STATUS
    assert reflected_status(binding["status"]["aggregatedStatus"], "member2") is None
    assert reflected_status(binding, "member3") is None


def test_d6_status_not_collected_fails_with_karmadas_message() -> None:
    with pytest.raises(StateExtractionError) as caught:
        extract_state([JOB_ID], None, cluster="member1")
    error = caught.value
    assert error.failure is ExtractionFailure.STATUS_NOT_COLLECTED
    assert str(error) == "the application status has not yet been collected from Cluster(member1)"
    assert (error.rule_alias, error.json_path) == ("flink.apache.org/job-id", "{.jobStatus.jobId}")


def test_d6_missing_key_error_names_the_rule_and_the_key() -> None:
    rule = {"aliasLabelName": "flink.apache.org/job-id", "jsonPath": "{.jobStatus.jobID}"}
    with pytest.raises(StateExtractionError) as caught:
        extract_state([rule], FLINK_STATUS)
    error = caught.value
    assert error.failure is ExtractionFailure.MISSING_KEY
    assert (error.rule_alias, error.json_path, error.reason) == (
        "flink.apache.org/job-id", "{.jobStatus.jobID}", "jobID is not found")
    assert error.missing_key == "jobID"
    assert "flink.apache.org/job-id" in str(error) and "jobID is not found" in str(error)


def test_d6_omitted_zero_field_is_not_found_strictly() -> None:
    deployment_status = {"replicas": 2, "updatedReplicas": 2}  # readyReplicas: 0 is omitted
    with pytest.raises(StateExtractionError, match="readyReplicas is not found"):
        extract_state([{"aliasLabelName": "ready", "jsonPath": "{.readyReplicas}"}], deployment_status)


def test_any_failing_rule_fails_the_whole_extraction() -> None:
    rules = [JOB_ID, {"aliasLabelName": "sp", "jsonPath": "{.jobStatus.savepointInfo.location}"}]
    with pytest.raises(StateExtractionError) as caught:
        extract_state(rules, FLINK_STATUS)
    assert caught.value.rule_alias == "sp"


def test_duplicate_alias_the_last_rule_wins() -> None:
    rules = [{"aliasLabelName": "x", "jsonPath": "{.jobStatus.state}"},
             {"aliasLabelName": "x", "jsonPath": "{.lifecycleState}"}]
    assert extract_state(rules, FLINK_STATUS) == {"x": "STABLE"}


def test_syntax_and_evaluation_errors_are_structured() -> None:
    with pytest.raises(StateExtractionError) as caught:
        extract_rule({"aliasLabelName": "a", "jsonPath": "{ %health }"}, FLINK_STATUS)
    assert caught.value.failure is ExtractionFailure.SYNTAX
    with pytest.raises(StateExtractionError) as caught:
        extract_rule({"aliasLabelName": "a", "jsonPath": "{.items[5]}"}, {"items": [1, 2]})
    assert caught.value.failure is ExtractionFailure.EVALUATION
    assert caught.value.reason == "array index out of bounds: index 5, length 2"


def test_invalid_alias_is_an_error_not_a_rejected_work() -> None:
    with pytest.raises(StateExtractionError) as caught:
        extract_rule({"aliasLabelName": "bad key!", "jsonPath": "{.lifecycleState}"}, FLINK_STATUS)
    assert caught.value.failure is ExtractionFailure.INVALID_ALIAS


def test_d7_integral_numbers_print_as_integers() -> None:
    status = {"a": 1734462491693, "b": 1734462491693.0, "c": 1000000.0, "d": 2.5}
    rules = [{"aliasLabelName": k, "jsonPath": f"{{.{k}}}"} for k in "abcd"]
    assert extract_state(rules, status) == {"a": "1734462491693", "b": "1734462491693", "c": "1000000", "d": "2.5"}


@pytest.mark.parametrize(
    ("status", "json_path", "value", "why"),
    [
        ({"jobs": [{"id": "a"}, {"id": "b"}]}, "{.jobs[*].id}", "a b", "selects 2 values"),
        ({"info": {"k": "v"}}, "{.info}", '{"k":"v"}', "selects an object"),
        ({"ids": ["a"]}, "{.ids}", '["a"]', "selects a list"),
        ({"path": "s3://bucket/savepoints/sp-1"}, "{.path}", "s3://bucket/savepoints/sp-1", "valid label"),
        ({"x": "a" * 64}, "{.x}", "a" * 64, "no more than 63 characters"),
        ({"x": -3.5}, "{.x}", "-3.5", "start and end with an alphanumeric"),
    ],
)
def test_d7_invalid_label_value_names_the_rule_the_value_and_why(
    status: dict[str, Any], json_path: str, value: str, why: str
) -> None:
    with pytest.raises(StateExtractionError) as caught:
        extract_state([{"aliasLabelName": "my-rule", "jsonPath": json_path}], status)
    error = caught.value
    assert error.failure is ExtractionFailure.INVALID_VALUE
    assert error.value == value
    assert error.rule_alias == "my-rule"
    assert why in error.reason
    assert json.dumps(value)[:60].rstrip('"') in str(error)


def test_d7_empty_value_is_a_valid_label_value() -> None:
    assert extract_state([{"aliasLabelName": "a", "jsonPath": "{.items[*].id}"}], {"items": []}) == {"a": ""}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=80),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)


@given(json_values)
def test_d7_whatever_is_extracted_is_a_valid_label_value(value: Any) -> None:
    try:
        state = extract_state([{"aliasLabelName": "v", "jsonPath": "{.v}"}], {"v": value})
    except StateExtractionError as error:
        assert error.failure is ExtractionFailure.INVALID_VALUE
        assert error.value is not None and label_value_errors(error.value)
    else:
        assert label_value_errors(state["v"]) == []


def test_similar_keys_finds_other_case_first() -> None:
    assert similar_keys("jobID", FLINK_STATUS)[0] == ("jobId", ".jobStatus.jobId")
    assert ("checkpointInfo", ".jobStatus.checkpointInfo") in similar_keys("checkpointinfo", FLINK_STATUS)


# ============================================================================================ injection


def test_should_inject_karmadas_conditions() -> None:
    state = {"job": "cafe"}
    ok_spec = _spec(["m2"], [_task("m1", state=state)])
    assert should_inject(ok_spec, "m2")[0] is True
    assert should_inject(ok_spec, "m2", gate=False) == (
        False, "the feature gate StatefulFailoverInjection is disabled")
    two = _spec(["m2", "m3"], [_task("m1", state=state)])
    assert should_inject(two, "m2")[0] is False and "2 clusters" in should_inject(two, "m2")[1]
    required_by = _spec(["m2"], [_task("m1", state=state)], requiredBy=[{"name": "x", "clusters": [{"name": "m3"}]}])
    assert should_inject(required_by, "m2")[0] is False
    assert should_inject(_spec(["m2"]), "m2") == (False, "the binding has no graceful eviction task")
    graceful = _spec(["m2"], [_task("m1", "Gracefully", state)])
    assert should_inject(graceful, "m2")[0] is False and "purgeMode Gracefully" in should_inject(graceful, "m2")[1]
    before = _spec(["m2"], [_task("m1", state=state, before=["m1", "m2"])])
    assert should_inject(before, "m2")[0] is False and "clustersBeforeFailover" in should_inject(before, "m2")[1]


def test_should_inject_only_the_last_task_counts() -> None:
    spec = _spec(["m3"], [_task("m1", "Directly", {"a": "1"}), _task("m2", "Gracefully", {"a": "2"})])
    ok, reason = should_inject(spec, "m3")
    assert not ok and "from cluster m2" in reason
    spec = _spec(["m3"], [_task("m1", "Gracefully", {"a": "1"}), _task("m2", "Directly", {"a": "2"})])
    assert should_inject(spec, "m3")[0] is True


def test_d9_state_is_not_injected_into_a_copy_already_running_in_the_surviving_cluster() -> None:
    # Duplicated over [m1, m2]; cluster failover evicts m1 and records clustersBeforeFailover (D9).
    before = clusters_before_failover(_spec(["m1", "m2"]))
    assert before == ["m1", "m2"]
    spec = _spec(["m2"], [_task("m1", state={"job": "cafe"}, before=before)])
    ok, reason = should_inject(spec, "m2")
    assert not ok and "already ran the workload" in reason
    # Karmada's taint-manager task has no clustersBeforeFailover: it would inject into m2's running copy.
    assert should_inject(_spec(["m2"], [_task("m1", state={"job": "cafe"})]), "m2")[0] is True


def test_inject_labels_overwrites_the_same_keys_and_leaves_the_input_alone() -> None:
    manifest = {"metadata": {"name": "orders", "labels": {"app": "orders", "job": "old"}}}
    out = inject_labels(manifest, {"job": "new", "ts": "1"})
    assert out["metadata"]["labels"] == {"app": "orders", "job": "new", "ts": "1"}
    assert manifest["metadata"]["labels"] == {"app": "orders", "job": "old"}
    assert inject_labels({"kind": "X"}, {"a": "b"})["metadata"] == {"labels": {"a": "b"}}
    assert inject_labels(manifest, {}) == manifest


# ============================================================================================ D4


def test_d4_record_is_the_json_of_cluster_labels_from_cluster_and_time() -> None:
    value = injected_state_record("m2", {"job": "cafe"}, "m1", T0)
    assert json.loads(value) == {"cluster": "m2", "labels": {"job": "cafe"}, "fromCluster": "m1",
                                 "at": "2024-12-17T19:08:11Z"}
    record = parse_injected_state_record({"metadata": {"annotations": {INJECTED_STATE_ANNOTATION: value}}})
    assert record == InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    assert parse_injected_state_record(record.to_json()) == record


@pytest.mark.parametrize("value", [None, "", "not json", "[]", '{"cluster":"m2"}',
                                   '{"cluster":"m2","labels":{"a":1},"fromCluster":"m1","at":"2024-12-17T19:08:11Z"}',
                                   '{"cluster":"m2","labels":{},"fromCluster":"m1","at":"yesterday"}'])
def test_d4_damaged_record_is_ignored(value: str | None) -> None:
    assert parse_injected_state_record(value) is None


def test_d4_injection_is_recorded_then_kept_after_the_task_is_removed() -> None:
    state = {"flink.apache.org/job-id": "cafe"}
    during = _spec(["m2"], [_task("m1", state=state)])
    first = decide_injection(during, "m2", None, T0)
    assert (first.labels, first.source, first.record_changed) == (state, "task", True)
    assert first.record == InjectedStateRecord("m2", state, "m1", T0)
    # re-renders while the task exists do not rewrite the annotation
    again = decide_injection(during, "m2", first.record, T0 + timedelta(minutes=1))
    assert (again.labels, again.record, again.record_changed) == (state, first.record, False)
    # Karmada drops the labels once the graceful-eviction controller removes the task; Flotilla keeps them
    after = decide_injection(_spec(["m2"], []), "m2", first.record, T0 + timedelta(minutes=5))
    assert (after.labels, after.source, after.record_changed) == (state, "record", False)
    assert "until a later failover replaces it" in after.reason


def test_d4_a_later_failover_replaces_the_labels() -> None:
    old = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    later = _spec(["m3"], [_task("m2", state={"job": "beef"})])
    decision = decide_injection(later, "m3", old, T0 + timedelta(hours=1))
    assert decision.labels == {"job": "beef"}
    assert decision.record == InjectedStateRecord("m3", {"job": "beef"}, "m2", T0 + timedelta(hours=1))


def test_d4_record_is_dropped_when_its_copy_is_evicted_or_moved() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    # an eviction from m2 that does not inject (Gracefully): m3 gets nothing, the record goes
    graceful = _spec(["m3"], [_task("m2", "Gracefully", {"job": "beef"})])
    decision = decide_injection(graceful, "m3", record, T0)
    assert (decision.labels, decision.record, decision.record_changed) == ({}, None, True)
    assert current_record(_spec(["m2"], [_task("m2", "Gracefully")]), record) is None
    assert current_record(_spec(["m3"]), record) is None  # no longer a target
    assert current_record(_spec(["m2"]), record) is record
    # another target cluster of the binding never gets the recorded labels
    assert decide_injection(_spec(["m2", "m4"]), "m4", record, T0).labels == {}
    assert decide_injection(_spec(["m2", "m4"]), "m2", record, T0).labels == {"job": "cafe"}


def test_d4_gate_off_injects_nothing_and_keeps_the_record() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    decision = decide_injection(_spec(["m2"], [_task("m1", state={"job": "cafe"})]), "m2", record, T0, gate=False)
    assert (decision.labels, decision.record, decision.record_changed) == ({}, record, False)


def test_d4_plan_injection_records_a_fresh_injection_once() -> None:
    spec = _spec(["m2"], [_task("m1", state={"job": "cafe"}, before=["m1"])])
    plan = plan_injection(spec, None, T0)
    assert plan.labels == {"m2": {"job": "cafe"}}
    assert plan.record == InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0) and plan.record_changed
    assert plan.decisions["m2"].source == "task"
    # the same injection seen again (healthyAt stamped meanwhile): nothing to write
    stamped = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0, healthy_at=T0 + timedelta(minutes=1))
    again = plan_injection(spec, stamped, T0 + timedelta(minutes=2))
    assert (again.labels, again.record, again.record_changed) == ({"m2": {"job": "cafe"}}, stamped, False)


def test_d4_plan_injection_keeps_the_record_in_its_cluster_only() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    plan = plan_injection(_spec(["m2", "m4"]), record, T0 + timedelta(hours=1))
    assert (plan.labels, plan.record, plan.record_changed) == ({"m2": {"job": "cafe"}}, record, False)
    assert plan.decisions["m2"].source == "record" and plan.decisions["m4"].source is None


def test_d4_plan_injection_drops_a_superseded_record_even_without_targets() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    evicting = plan_injection(_spec([], [_task("m2", state={"job": "beef"}, before=["m2"])]), record, T0)
    assert (evicting.labels, evicting.record, evicting.record_changed) == ({}, None, True)
    moved = plan_injection(_spec(["m3"]), record, T0)
    assert (moved.labels, moved.record, moved.record_changed) == ({}, None, True)
    assert plan_injection(_spec([]), None, T0).record_changed is False
    replaced = plan_injection(_spec(["m3"], [_task("m2", state={"job": "beef"}, before=["m2"])]), record, T0)
    assert replaced.labels == {"m3": {"job": "beef"}} and replaced.record_changed
    assert replaced.record == InjectedStateRecord("m3", {"job": "beef"}, "m2", T0)


def test_d4_plan_injection_gate_off_injects_nothing_and_keeps_the_record() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    spec = _spec(["m3"], [_task("m2", state={"job": "beef"})])
    plan = plan_injection(spec, record, T0, gate=False)
    assert (plan.labels, plan.record, plan.record_changed) == ({}, record, False)


def test_d4_injected_state_patch_writes_or_removes_the_annotation_under_the_resource_version() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    patch = injected_state_patch(record, "17")
    assert patch["metadata"]["resourceVersion"] == "17"
    assert parse_injected_state_record(patch["metadata"]["annotations"][INJECTED_STATE_ANNOTATION]) == record
    assert injected_state_patch(None, "18") == {
        "metadata": {"resourceVersion": "18", "annotations": {INJECTED_STATE_ANNOTATION: None}}}


# ============================================================================================ D5


def test_d5_state_is_carried_forward_when_the_copy_never_became_healthy() -> None:
    previous = InjectedStateRecord("m2", {"job": "cafe", "ckpt": "1734462491693"}, "m1", T0)
    fresh = {"job": "0000", "ckpt": "0"}  # a new Flink job: new id, no checkpoint
    result = carry_forward(previous, False, fresh, failed_cluster="m2")
    assert result.carried_forward and result.state == {"job": "cafe", "ckpt": "1734462491693"}
    assert result.event is not None and result.event.reason == EVENT_STATE_CARRIED_FORWARD
    assert "never became Healthy" in result.reason


def test_d5_state_is_carried_forward_even_when_the_unhealthy_copy_fails_extraction() -> None:
    previous = _task("m1", state={"job": "cafe"})
    error = StateExtractionError("job", "{.jobStatus.jobId}", "jobStatus is not found",
                                 failure=ExtractionFailure.MISSING_KEY)
    result = carry_forward(previous, "Unhealthy", error, failed_cluster="m2")
    assert result.carried_forward and result.state == {"job": "cafe"} and result.error is None


def test_d5_new_state_once_the_copy_became_healthy() -> None:
    previous = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0, healthy_at=T0 + timedelta(minutes=2))
    result = carry_forward(previous, True, {"job": "beef"}, failed_cluster="m2")
    assert not result.carried_forward and result.state == {"job": "beef"}
    assert carry_forward(previous, "Healthy", {"job": "beef"}).state == {"job": "beef"}
    error = StateExtractionError("job", "{.x}", "x is not found", failure=ExtractionFailure.MISSING_KEY)
    assert carry_forward(previous, True, error).error is error
    assert carry_forward(None, False, {"job": "beef"}).state == {"job": "beef"}
    other = InjectedStateRecord("m3", {"job": "cafe"}, "m1", T0)
    assert carry_forward(other, False, {"job": "beef"}, failed_cluster="m2").state == {"job": "beef"}


def test_d5_previous_injection_from_the_record_or_the_last_directly_task() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    assert previous_injection(_spec(["m2"]), record, "m2") == (record, False)
    healthy = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0, healthy_at=T0)
    assert previous_injection(_spec(["m2"]), healthy, "m2") == (healthy, True)
    task = _task("m1", state={"job": "cafe"})
    assert previous_injection(_spec(["m2"], [task]), None, "m2") == (task, False)
    assert previous_injection(_spec(["m2"], [_task("m1", "Gracefully", {"job": "cafe"})]), None, "m2") == (None, False)
    assert previous_injection(_spec(["m2"], [_task("m1", state={"j": "c"}, before=["m1", "m2"])]), None, "m2") \
        == (None, False)


def test_d5_health_of_the_injected_copy_is_stamped_once() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    unhealthy = [{"clusterName": "m2", "health": "Unhealthy"}]
    assert observe_injected_copy_health(record, unhealthy, T0) is record
    healthy = {"status": {"aggregatedStatus": [{"clusterName": "m2", "health": "Healthy"}]}}
    stamped = observe_injected_copy_health(record, healthy, T0 + timedelta(minutes=3))
    assert stamped is not None and stamped.healthy_at == T0 + timedelta(minutes=3)
    assert json.loads(stamped.to_json())["healthyAt"] == "2024-12-17T19:11:11Z"
    assert parse_injected_state_record(stamped.to_json()) == stamped
    assert observe_injected_copy_health(stamped, healthy, T0 + timedelta(hours=1)) is stamped


def test_d5_previous_injection_ignores_a_task_that_injected_nothing_into_the_failed_cluster() -> None:
    task = _task("m1", state={"job": "cafe"}, before=["m1"])
    assert previous_injection(_spec(["m2", "m3"], [task]), None, "m3") == (None, False)  # two targets
    assert previous_injection(_spec(["m2"], [task]), None, "m1") == (None, False)  # its own source
    assert previous_injection(_spec(["m2"], [_task("m1", before=["m1"])]), None, "m2") == (None, False)


def test_d5_health_is_awaited_for_a_new_record_not_yet_stamped() -> None:
    def binding(record: InjectedStateRecord | None) -> dict[str, Any]:
        annotations = {} if record is None else {INJECTED_STATE_ANNOTATION: record.to_json()}
        return {"metadata": {"name": "b", "annotations": annotations}}

    fresh = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    stamped = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0, healthy_at=T0)
    assert injected_copy_health_pending(None, binding(fresh))
    assert injected_copy_health_pending(binding(None), binding(fresh))
    assert not injected_copy_health_pending(binding(fresh), binding(fresh))  # unchanged
    assert not injected_copy_health_pending(binding(fresh), binding(stamped))  # stamped already
    assert not injected_copy_health_pending(binding(fresh), binding(None))  # dropped
    assert not injected_copy_health_pending(None, {"metadata": {"annotations": {INJECTED_STATE_ANNOTATION: "{"}}})
    assert not injected_copy_health_pending(None, {"metadata": "garbage"})


def test_d5_consecutive_failovers_keep_the_original_job_state() -> None:
    """A -> B (B's copy never becomes Healthy) -> C: C gets A's job id, not B's fresh one (Karmada #6232)."""
    rules = [JOB_ID]
    # A fails: state from A's status goes into a Directly task; B is rendered with it.
    state_a = extract_state(rules, FLINK_STATUS, cluster="A")
    spec = _spec(["B"], [_task("A", state=state_a, before=["A"])])
    render_b = decide_injection(spec, "B", None, T0)
    assert render_b.labels == state_a
    record = render_b.record
    # B's copy restarts from scratch and stays unhealthy; its status has a new job id.
    b_status = {**FLINK_STATUS, "jobStatus": {"jobId": "0000fresh", "state": "CREATED"}}
    record = observe_injected_copy_health(record, [{"clusterName": "B", "health": "Unhealthy"}], T0)
    previous, healthy = previous_injection(spec, record, "B")
    result = carry_forward(previous, healthy, extract_state(rules, b_status, cluster="B"), failed_cluster="B")
    assert result.state == state_a
    # B is evicted with the carried state; C is rendered with A's job id.
    assert result.state is not None
    spec_c = _spec(["C"], [*spec["gracefulEvictionTasks"], _task("B", state=dict(result.state), before=["B"])])
    render_c = decide_injection(spec_c, "C", record, T0 + timedelta(minutes=10))
    assert render_c.labels == state_a and render_c.record is not None and render_c.record.cluster == "C"


# ============================================================================================ D6


def test_d6_deadline_zero_waits_forever() -> None:
    assert state_preservation_deadline(T0, 0) is None
    assert state_preservation_deadline(T0, 300) == T0 + timedelta(minutes=5)
    assert state_preservation_deadline(T0, timedelta(seconds=30)) == T0 + timedelta(seconds=30)


def test_d6_every_failed_attempt_surfaces_and_the_eviction_waits() -> None:
    error = StateExtractionError("flink.apache.org/job-id", "{.jobStatus.jobID}", "jobID is not found",
                                 failure=ExtractionFailure.MISSING_KEY)
    outcome = on_extraction_failure(error, cluster="member1", first_failure_at=None, now=T0)
    assert not outcome.proceed_without_state and outcome.retry_after is None
    assert (outcome.event.type, outcome.event.reason) == ("Warning", EVENT_STATE_PRESERVATION_FAILED)
    assert "flink.apache.org/job-id" in outcome.event.message and "jobID is not found" in outcome.event.message
    assert "member1" in outcome.event.message
    assert outcome.condition["type"] == CONDITION_STATE_PRESERVED
    assert (outcome.condition["status"], outcome.condition["reason"]) == ("False", REASON_STATE_PRESERVATION_FAILED)
    assert outcome.metric_labels == {"failure": "MissingKey"}
    with_timeout = on_extraction_failure(error, cluster="member1", first_failure_at=T0,
                                         now=T0 + timedelta(seconds=100), timeout=300)
    assert not with_timeout.proceed_without_state and with_timeout.retry_after == 200
    assert "2024-12-17T19:13:11Z" in with_timeout.event.message


def test_d6_eviction_proceeds_without_state_after_the_timeout() -> None:
    error = StateExtractionError("job", "{.x}", "the application status has not yet been collected from Cluster(m1)",
                                 failure=ExtractionFailure.STATUS_NOT_COLLECTED)
    outcome = on_extraction_failure(error, cluster="m1", first_failure_at=T0, now=T0 + timedelta(minutes=5),
                                    timeout=300)
    assert outcome.proceed_without_state
    assert (outcome.event.type, outcome.event.reason) == ("Warning", EVENT_STATE_PRESERVATION_TIMED_OUT)
    assert "without preserved state" in outcome.event.message and "5m0s" in outcome.event.message
    assert outcome.condition["reason"] == REASON_STATE_PRESERVATION_TIMED_OUT
    # never with the default timeout 0
    assert not on_extraction_failure(error, cluster="m1", first_failure_at=T0, now=T0 + timedelta(days=30)
                                     ).proceed_without_state


def test_d6_success_condition() -> None:
    condition = on_extraction_success({"b": "1", "a": "2"}, cluster="m1")
    assert (condition["type"], condition["status"]) == (CONDITION_STATE_PRESERVED, "True")
    assert "a, b" in condition["message"]


def _binding(status: Any, spec: dict[str, Any]) -> dict[str, Any]:
    items = [{"clusterName": "m2", "status": status}] if status is not None else []
    return {"spec": spec, "status": {"aggregatedStatus": items}}


def test_preserve_state_for_eviction_extracts_from_the_failed_clusters_status() -> None:
    kept = preserve_state_for_eviction([JOB_ID], _binding(FLINK_STATUS, _spec(["m2"])), "m2", record=None,
                                       first_failure_at=None, now=T0)
    assert kept.proceed and kept.failure is None and kept.carried is None and kept.retry_after is None
    assert kept.state == {"flink.apache.org/job-id": "cafebabe0123456789abcdef01234567"}
    assert kept.condition == on_extraction_success(kept.state, cluster="m2")


def test_preserve_state_for_eviction_carries_the_previous_state_forward() -> None:
    record = InjectedStateRecord("m2", {"job": "cafe"}, "m1", T0)
    kept = preserve_state_for_eviction([JOB_ID], _binding(None, _spec(["m2"])), "m2", record=record,
                                       first_failure_at=None, now=T0)
    assert kept.proceed and kept.state == {"job": "cafe"} and kept.failure is None
    assert kept.carried is not None and kept.carried.reason == EVENT_STATE_CARRIED_FORWARD
    assert kept.condition == on_extraction_success({"job": "cafe"}, cluster="m2", carried_forward=True)


def test_preserve_state_for_eviction_waits_on_a_failure_until_the_timeout() -> None:
    binding = _binding({"jobStatus": {}}, _spec(["m2"]))
    kept = preserve_state_for_eviction([JOB_ID], binding, "m2", record=None, first_failure_at=T0,
                                       now=T0 + timedelta(seconds=100), timeout=300)
    assert not kept.proceed and kept.state is None and kept.retry_after == 200
    assert kept.failure is not None and kept.failure.event.reason == EVENT_STATE_PRESERVATION_FAILED
    assert kept.condition == kept.failure.condition and kept.condition["reason"] == REASON_STATE_PRESERVATION_FAILED
    late = preserve_state_for_eviction([JOB_ID], binding, "m2", record=None, first_failure_at=T0,
                                       now=T0 + timedelta(seconds=300), timeout=300)
    assert late.proceed and late.state is None and late.retry_after is None
    assert late.condition["reason"] == REASON_STATE_PRESERVATION_TIMED_OUT


def test_d6_first_failure_time_is_persisted_per_cluster() -> None:
    value = record_failing_since(None, "m1", T0)
    assert failing_since(value) == {"m1": T0}
    value = record_failing_since({STATE_PRESERVATION_FAILING_SINCE_ANNOTATION: value}, "m1", T0 + timedelta(hours=1))
    assert failing_since(value) == {"m1": T0}  # the first failure stays
    value = record_failing_since(value, "m2", T0 + timedelta(hours=1))
    assert set(failing_since(value)) == {"m1", "m2"}
    remaining = clear_failing_since(value, "m1")
    assert remaining is not None and set(failing_since(remaining)) == {"m2"}
    assert clear_failing_since(remaining, "m2") is None
    assert failing_since("garbage") == {}


def test_injected_state_stamp_patches_healthy_at_once_the_bindings_own_status_reports_the_copy_healthy() -> None:
    from flotilla.failover.state import INJECTED_STATE_ANNOTATION, injected_state_record, injected_state_stamp

    at = datetime(2025, 1, 1, tzinfo=UTC)
    now = at + timedelta(seconds=5)
    record = injected_state_record("m2", {"job": "cafe"}, "m1", at)

    def binding(health: str, record_value: str | None = record, deleting: bool = False) -> dict[str, Any]:
        md: dict[str, Any] = {"annotations": {INJECTED_STATE_ANNOTATION: record_value} if record_value else {}}
        if deleting:
            md["deletionTimestamp"] = "2025-01-01T00:00:09Z"
        return {"metadata": md, "status": {"aggregatedStatus": [{"clusterName": "m2", "health": health}]}}

    patch = injected_state_stamp(binding("Healthy"), now)
    assert patch is not None
    stamped = json.loads(patch[INJECTED_STATE_ANNOTATION])
    assert stamped["healthyAt"] == "2025-01-01T00:00:05Z" and stamped["cluster"] == "m2"
    assert injected_state_stamp(binding("Unknown"), now) is None
    assert injected_state_stamp(binding("Healthy", None), now) is None
    assert injected_state_stamp(binding("Healthy", deleting=True), now) is None
    assert injected_state_stamp(binding("Healthy", patch[INJECTED_STATE_ANNOTATION]), now) is None  # once


def test_injected_state_for_schedule_is_the_record_the_render_of_the_new_clusters_writes() -> None:
    from flotilla.failover.state import injected_state_for_schedule

    now = datetime(2025, 1, 1, tzinfo=UTC)
    task = {"fromCluster": "m1", "purgeMode": "Directly", "clustersBeforeFailover": ["m1"],
            "preservedLabelState": {"job": "cafe"}}
    binding = {"metadata": {"annotations": {}}, "spec": {"gracefulEvictionTasks": [task]}}
    value = injected_state_for_schedule(binding, [{"name": "m2", "replicas": 1}], now)
    assert value is not None
    assert json.loads(value) == {"cluster": "m2", "labels": {"job": "cafe"}, "fromCluster": "m1",
                                 "at": "2025-01-01T00:00:00Z"}
    assert injected_state_for_schedule(binding, [{"name": "m2", "replicas": 1}], now, gate=False) is None
    assert injected_state_for_schedule(binding, [], now) is None  # nothing rendered: nothing to record
    two = [{"name": "m2", "replicas": 1}, {"name": "m3", "replicas": 1}]
    assert injected_state_for_schedule(binding, two, now) is None  # Karmada injects into one target only
    back = [{"name": "m1", "replicas": 1}]
    assert injected_state_for_schedule(binding, back, now) is None  # clustersBeforeFailover (D9)
    recorded = {"metadata": {"annotations": {"failover.flotilla.io/injected-state": value}},
                "spec": binding["spec"]}
    assert injected_state_for_schedule(recorded, [{"name": "m2", "replicas": 1}], now) is None  # already so


def test_a_remembered_injected_state_record_is_a_fresh_record_each_time() -> None:
    text = InjectedStateRecord("m2", {"b": "2", "a": "1"}, "m1", datetime(2026, 1, 1, tzinfo=UTC)).to_json()
    first = parse_injected_state_record(text)
    assert first is not None
    first.labels["c"] = "3"  # type: ignore[index]  # a caller's change stays in its own record
    second = parse_injected_state_record(text)
    assert second is not None and second is not first
    assert list(second.labels.items()) == [("a", "1"), ("b", "2")] and type(second.labels) is dict
    assert (second.cluster, second.from_cluster, second.at, second.healthy_at) == (
        "m2", "m1", datetime(2026, 1, 1, tzinfo=UTC), None)
    for bad in ("{", '{"cluster":"m","labels":{"a":1},"at":"2026-01-01T00:00:00Z"}', "[]"):
        assert parse_injected_state_record(bad) is None
        assert parse_injected_state_record(bad) is None
