"""Native restore (D20): when a restore is needed, which snapshot, the continuity guard, failures, the record."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flotilla.checkpoints.layout import Snapshot
from flotilla.failover.restore import (
    CONDITION_STATE_RESTORED,
    CREDENTIALS_SECRET_ANNOTATION,
    EVENT_STATE_RESTORE_FAILED,
    EVENT_STATE_RESTORE_TIMED_OUT,
    EVENT_STATE_RESTORED,
    MAX_CHECKPOINT_AGE_ANNOTATION,
    MOVE_SAVEPOINT_ANNOTATION,
    NATIVE_ANNOTATION,
    RESTORE_ANNOTATION,
    Found,
    RestoreFailure,
    RestoreNeed,
    RestoreRecord,
    RestoreSettings,
    applied_restore,
    decide_restore,
    failure_of,
    held_targets,
    lookup_plan,
    move_savepoint,
    parse_restore_record,
    policy_restore_annotations,
    preserved_job_id,
    record_resolves,
    restore_needs,
    restore_nonce,
    restore_patch,
    restore_settings,
    validate_restore_annotations,
)
from flotilla.failover.state import StatePreservationRule, parse_injected_state_record, plan_injection

JOB = "a" * 32
JOB2 = "b" * 32
LABEL = "failover.flink.io/job-id"
T0 = datetime(2026, 12, 7, 6, 0, 0, tzinfo=UTC)
FAULT = T0 + timedelta(seconds=60)


def Snap(path: str, kind: str = "checkpoint", job_id: str | None = JOB, checkpoint_id: int | None = None,  # noqa: N802
         completed_at: datetime | None = None) -> Snapshot:
    return Snapshot(path, kind, job_id, checkpoint_id, completed_at)  # type: ignore[arg-type]


def chk(n: int, at: float, job: str = JOB) -> Snap:
    return Snap(f"s3://b/ck/{job}/chk-{n}", "checkpoint", job, n, T0 + timedelta(seconds=at))


def binding(*, clusters: list[str] | None = None, from_cluster: str = "member1", state: dict[str, str] | None = None,
            annotations: dict[str, str] | None = None, purge: str = "Directly",
            before: list[str] | None = None) -> dict[str, Any]:
    task = {"fromCluster": from_cluster, "purgeMode": purge, "producer": "TaintManager", "reason": "TaintUntolerated",
            "preservedLabelState": {LABEL: JOB} if state is None else state,
            "clustersBeforeFailover": before if before is not None else [from_cluster],
            "creationTimestamp": "2026-12-07T06:01:00Z"}
    return {"kind": "ResourceBinding",
            "metadata": {"name": "wc-flinkdeployment", "namespace": "default", "annotations": annotations or {}},
            "spec": {"clusters": [{"name": c} for c in (clusters or ["member2"])],
                     "failover": {"cluster": {"purgeMode": purge, "statePreservation": {"rules": [
                         {"aliasLabelName": LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}},
                     "gracefulEvictionTasks": [task]}}


def needs_of(b: dict[str, Any], **kw: Any) -> dict[str, RestoreNeed]:
    plan = plan_injection(b["spec"], parse_injected_state_record(b), T0)
    return restore_needs(b, plan, hook_enabled=kw.pop("hook_enabled", True), **kw)


NEED = RestoreNeed("member2", "member1", JOB, FAULT, {LABEL: JOB})


# ------------------------------------------------------------------------------------------------ when


def test_d20_fresh_injection_of_a_restorable_kind_needs_a_restore() -> None:
    needs = needs_of(binding())
    assert list(needs) == ["member2"]
    need = needs["member2"]
    assert (need.from_cluster, need.job_id, need.fault_at) == ("member1", JOB, FAULT)


def test_d20_no_restore_without_the_hook_or_when_turned_off_or_gate_off() -> None:
    assert needs_of(binding(), hook_enabled=False) == {}
    assert needs_of(binding(annotations={NATIVE_ANNOTATION: "false"})) == {}
    assert needs_of(binding(), gate=False) == {}


def test_d20_no_restore_for_gracefully_multi_cluster_or_surviving_copy() -> None:
    assert needs_of(binding(purge="Gracefully")) == {}
    assert needs_of(binding(clusters=["member2", "member3"])) == {}
    assert needs_of(binding(before=["member1", "member2"])) == {}


def test_d20_a_kept_injection_is_not_a_new_restore() -> None:
    b = binding()
    b["spec"]["gracefulEvictionTasks"] = []
    b["metadata"]["annotations"]["failover.flotilla.io/injected-state"] = json.dumps(
        {"cluster": "member2", "labels": {LABEL: JOB}, "fromCluster": "member1", "at": "2026-12-07T06:01:00Z"})
    assert needs_of(b) == {}


def test_d20_preserved_job_id_from_the_job_id_rule_else_a_job_id_value() -> None:
    rules = [StatePreservationRule("x", "{.replicas}"), StatePreservationRule("jid", "{ .jobStatus.jobId }")]
    assert preserved_job_id({"x": "3", "jid": JOB}, rules) == JOB
    assert preserved_job_id({"x": "3", "other": JOB2}) == JOB2
    assert preserved_job_id({"only": "whatever"}) == "whatever"
    assert preserved_job_id({"x": "3", "y": "4"}) is None


# ------------------------------------------------------------------------------------------------ the record


def test_d20_record_round_trips_and_damaged_records_are_ignored() -> None:
    rec = RestoreRecord("member2", "member1", JOB, "Restored", "newest complete checkpoint", "s3://b/ck/x/chk-4",
                        "checkpoint", 4, T0, FAULT, 60.0, FAULT, existed=True)
    text = rec.to_json()
    doc = json.loads(text)
    assert doc["outcome"] == "Restored" and doc["checkpointId"] == 4 and doc["ageAtFault"] == 60.0
    assert doc["completedAt"] == "2026-12-07T06:00:00Z" and doc["faultAt"] == "2026-12-07T06:01:00Z"
    assert parse_restore_record({"metadata": {"annotations": {RESTORE_ANNOTATION: text}}}) == rec
    assert parse_restore_record("{not json") is None
    assert parse_restore_record(json.dumps({"cluster": "m", "outcome": "Restored"})) is None  # no path
    assert parse_restore_record(json.dumps({"cluster": "m", "outcome": "Maybe"})) is None
    patch = restore_patch(rec, "42")
    assert patch == {"metadata": {"resourceVersion": "42", "annotations": {RESTORE_ANNOTATION: text}}}


def test_d20_a_resolved_record_for_the_same_failover_releases_the_work() -> None:
    rec = RestoreRecord("member2", "member1", JOB, "Restored", "r", "p", "checkpoint", 1, T0, FAULT)
    assert record_resolves(rec, NEED)
    assert held_targets({"member2": NEED}, rec) == set()
    holding = RestoreRecord("member2", "member1", JOB, "Holding", "r")
    assert held_targets({"member2": NEED}, holding) == {"member2"}
    other_fault = RestoreRecord("member2", "member1", JOB, "Fresh", "r", fault_at=T0)
    assert not record_resolves(other_fault, NEED)
    other_job = RestoreRecord("member2", "member1", JOB2, "Fresh", "r")
    assert not record_resolves(other_job, NEED)
    assert held_targets({"member2": NEED}, None) == {"member2"}


def test_d20_restored_record_applies_on_every_render_until_superseded() -> None:
    rec = RestoreRecord("member2", "member1", JOB, "Restored", "r", "s3://b/ck/x/chk-4", "checkpoint", 4,
                        resolved_at=FAULT)
    spec = {"clusters": [{"name": "member2"}]}
    applied = applied_restore(spec, rec, "member2")
    assert applied == {"path": "s3://b/ck/x/chk-4", "kind": "checkpoint", "jobId": JOB, "checkpointId": 4,
                       "existed": False, "nonce": restore_nonce(rec)}
    assert applied_restore(spec, rec, "member2") == applied  # stable nonce
    assert applied_restore(spec, rec, "member3") is None
    assert applied_restore({"clusters": [{"name": "member3"}]}, rec, "member2") is None
    gone = {"clusters": [{"name": "member2"}], "gracefulEvictionTasks": [{"fromCluster": "member2"}]}
    assert applied_restore(gone, rec, "member2") is None
    fresh = RestoreRecord("member2", "member1", JOB, "Fresh", "r")
    assert applied_restore(spec, fresh, "member2") is None


def test_d20_nonce_differs_between_restores() -> None:
    a = RestoreRecord("member2", "member1", JOB, "Restored", "r", "p1", resolved_at=FAULT)
    b = RestoreRecord("member2", "member1", JOB, "Restored", "r", "p2", resolved_at=FAULT)
    assert restore_nonce(a) != restore_nonce(b) and restore_nonce(a) > 0


# ------------------------------------------------------------------------------------------------ which snapshot


def test_d20_newest_complete_checkpoint_is_restored_with_its_age_at_fault() -> None:
    found = Found([chk(3, 10), chk(5, 50), chk(4, 30)], location="s3://b/ck")
    d = decide_restore(NEED, found, now=FAULT)
    assert d.record.outcome == "Restored" and d.record.path.endswith("chk-5") and d.record.checkpoint_id == 5
    assert d.age == pytest.approx(10.0) and d.record.age_at_fault == pytest.approx(10.0)
    assert d.event.type == "Normal" and d.event.reason == EVENT_STATE_RESTORED
    assert "checkpoint 5" in d.event.message and "10s" in d.event.message
    assert d.condition["type"] == CONDITION_STATE_RESTORED and d.condition["status"] == "True"
    assert d.outcome == "Restored" and d.failure is None


def test_d20_savepoint_newer_than_checkpoints_wins() -> None:
    sp = Snap("s3://b/sp/savepoint-aaaaaa-0123456789ab", "savepoint", JOB, None, T0 + timedelta(seconds=55))
    d = decide_restore(NEED, Found([chk(5, 50), sp]), now=FAULT)
    assert d.record.kind == "savepoint" and d.record.path == sp.path


def test_d20_planned_move_savepoint_is_used_for_its_target_only() -> None:
    ann = {MOVE_SAVEPOINT_ANNOTATION: json.dumps({"fromCluster": "member1", "toCluster": "member2",
                                                  "path": "s3://b/sp/x", "at": "2026-12-07T06:00:59Z"})}
    b = {"metadata": {"annotations": ann}}
    assert move_savepoint(b, NEED) == "s3://b/sp/x"
    assert move_savepoint(b, RestoreNeed("member3", "member1", JOB, FAULT)) is None
    plan = lookup_plan(NEED, None, "s3://b/sp/x")
    assert plan.savepoint == "s3://b/sp/x" and plan.carry_over is None
    d = decide_restore(NEED, Found([Snap("s3://b/sp/x", "savepoint", JOB, None, FAULT)], "savepoint"), now=FAULT)
    assert d.record.outcome == "Restored" and "planned move" in d.record.reason


def test_d20_carry_over_the_path_the_failed_copy_started_from() -> None:
    # member2's copy (new job id JOB2) was restored from JOB's chk-5 and failed before its first checkpoint
    previous = RestoreRecord("member2", "member1", JOB, "Restored", "r", "s3://b/ck/a/chk-5", "checkpoint", 5)
    need = RestoreNeed("member1", "member2", JOB2, FAULT)
    assert lookup_plan(need, previous).carry_over == "s3://b/ck/a/chk-5"
    # D5 carried forward: the same job id again
    need_same = RestoreNeed("member3", "member2", JOB, FAULT)
    assert lookup_plan(need_same, previous).carry_over == "s3://b/ck/a/chk-5"
    # a record about another copy and job is not carried
    unrelated = RestoreRecord("member3", "member1", JOB, "Restored", "r", "p")
    assert lookup_plan(need, unrelated).carry_over is None
    d = decide_restore(need, Found([chk(5, 50)], "carry-over"), now=FAULT)
    assert d.record.outcome == "Restored" and d.record.job_id == JOB2 and "started from" in d.record.reason


# ------------------------------------------------------------------------------------------------ guard, failures


def test_d20_continuity_guard_refuses_a_checkpoint_too_old() -> None:
    settings = RestoreSettings(max_checkpoint_age=30.0)
    d = decide_restore(NEED, Found([chk(2, 10)]), now=FAULT, settings=settings)  # 50 s old at the fault
    assert d.failure is RestoreFailure.CHECKPOINT_TOO_OLD and d.record.outcome == "Holding"
    assert MAX_CHECKPOINT_AGE_ANNOTATION in d.event.message and d.event.type == "Warning"
    ok = decide_restore(NEED, Found([chk(4, 40)]), now=FAULT, settings=settings)
    assert ok.record.outcome == "Restored"


def test_d20_failure_holds_then_starts_fresh_after_the_hold_timeout() -> None:
    found = Found(failure=RestoreFailure.STORAGE_UNREACHABLE, message="s3://b/ck (endpoint http://x): unreachable")
    first = decide_restore(NEED, found, now=FAULT, hold_timeout=60)
    assert first.record.outcome == "Holding" and first.record.holding_since == FAULT
    assert first.event.reason == EVENT_STATE_RESTORE_FAILED and first.condition["reason"] == "StorageUnreachable"
    assert first.retry_after == pytest.approx(60.0)
    later = decide_restore(NEED, found, now=FAULT + timedelta(seconds=30), previous=first.record, hold_timeout=60)
    assert later.record.holding_since == FAULT and later.retry_after == pytest.approx(30.0)
    assert later.record.to_json() == first.record.to_json()  # nothing to rewrite while holding
    done = decide_restore(NEED, found, now=FAULT + timedelta(seconds=61), previous=later.record, hold_timeout=60)
    assert done.record.outcome == "Fresh" and done.event.reason == EVENT_STATE_RESTORE_TIMED_OUT
    assert "empty state" in done.event.message and done.condition["reason"] == "StateRestoreTimedOut"
    assert done.record.resolved and done.outcome == "Fresh"


def test_d20_hold_forever_with_zero_timeout_and_fresh_at_once_when_chosen() -> None:
    found = Found(failure=RestoreFailure.NO_CHECKPOINT, message="none")
    held = decide_restore(NEED, found, now=FAULT + timedelta(days=9), hold_timeout=0,
                          previous=RestoreRecord("member2", "member1", JOB, "Holding", "x", holding_since=FAULT))
    assert held.record.outcome == "Holding" and held.retry_after is None
    fresh = decide_restore(NEED, found, now=FAULT, missing="fresh")
    assert fresh.record.outcome == "Fresh" and "--restore-missing=fresh" in fresh.event.message
    assert fresh.event.reason == EVENT_STATE_RESTORE_FAILED


def test_d20_no_snapshot_and_no_job_id_are_failures() -> None:
    d = decide_restore(NEED, Found((), location="file:///ck"), now=FAULT)
    assert d.failure is RestoreFailure.NO_CHECKPOINT and "file:///ck" in d.event.message
    no_id = RestoreNeed("member2", "member1", None, FAULT)
    assert decide_restore(no_id, Found([chk(1, 1)]), now=FAULT).failure is RestoreFailure.NO_JOB_ID


def test_d20_storage_error_reasons_map_to_failures() -> None:
    assert failure_of("unreachable") is RestoreFailure.STORAGE_UNREACHABLE
    assert failure_of("denied") is RestoreFailure.CREDENTIALS_REFUSED
    assert failure_of("invalid") is RestoreFailure.STORAGE_NOT_CONFIGURED


# ------------------------------------------------------------------------------------------------ policy knobs


def test_d20_policy_annotations_parse_and_validate() -> None:
    ann = {NATIVE_ANNOTATION: "false", MAX_CHECKPOINT_AGE_ANNOTATION: "10m", CREDENTIALS_SECRET_ANNOTATION: "s3-creds"}
    assert validate_restore_annotations(ann) == []
    s = restore_settings({"metadata": {"annotations": ann}})
    assert s == RestoreSettings(False, 600.0, "s3-creds")
    assert restore_settings({}) == RestoreSettings()
    bad = validate_restore_annotations({NATIVE_ANNOTATION: "nope", MAX_CHECKPOINT_AGE_ANNOTATION: "ten minutes",
                                        CREDENTIALS_SECRET_ANNOTATION: "Bad_Name",
                                        "restore.flotilla.io/typo": "x"})
    assert [k for k, _ in bad] == [NATIVE_ANNOTATION, MAX_CHECKPOINT_AGE_ANNOTATION, CREDENTIALS_SECRET_ANNOTATION,
                                   "restore.flotilla.io/typo"]
    assert validate_restore_annotations({MAX_CHECKPOINT_AGE_ANNOTATION: "0s"})
    policy = {"metadata": {"annotations": {**ann, "other": "x"}}}
    assert policy_restore_annotations(policy) == ann


def test_d20_no_checkpoint_storage_named_stands_aside_at_once_whatever_the_choice() -> None:
    found = Found(failure=RestoreFailure.NO_STORAGE, message="no checkpoint directory")
    d = decide_restore(NEED, found, now=FAULT, missing="hold")
    assert d.record.outcome == "Fresh" and d.record.failure == "NoCheckpointStorage"
    assert "labels only" in d.event.message and d.event.type == "Warning"


def test_d20_restore_waits_while_a_planned_move_takes_its_savepoint() -> None:
    from flotilla.failover.restore import MOVE_ANNOTATION, move_in_progress

    def b(phase: str, to: str = "member2") -> dict[str, Any]:
        return {"metadata": {"annotations": {MOVE_ANNOTATION: json.dumps(
            {"fromCluster": "member1", "toCluster": to, "phase": phase})}}}

    assert move_in_progress(b("Savepointing"), "member2")
    assert not move_in_progress(b("Done"), "member2") and not move_in_progress(b("Failed"), "member2")
    assert not move_in_progress(b("Savepointing", "member3"), "member2")
    assert not move_in_progress({"metadata": {"annotations": {MOVE_ANNOTATION: "{broken"}}}, "member2")


def test_d20_restore_events_are_never_dropped() -> None:
    from flotilla.failover.events import FAILOVER_EVENT_REASONS

    assert {EVENT_STATE_RESTORED, EVENT_STATE_RESTORE_FAILED, EVENT_STATE_RESTORE_TIMED_OUT} <= FAILOVER_EVENT_REASONS


def test_d21_savepoint_on_move_is_a_known_policy_annotation_and_must_be_a_boolean() -> None:
    on_move = "restore.flotilla.io/savepoint-on-move"
    assert validate_restore_annotations({on_move: "false"}) == []
    assert validate_restore_annotations({on_move: "True"}) == []
    assert [k for k, _ in validate_restore_annotations({on_move: "later"})] == [on_move]
    (_, problem), = validate_restore_annotations({"restore.flotilla.io/typo": "x"})
    assert on_move in problem  # the message lists every known annotation
