"""D22: the failover history's rules (flotilla.failover.history)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.failover.history import (
    HISTORY_ANNOTATION,
    MAX_ENTRIES,
    MOVE_ANNOTATION,
    PHASE_COMPLETED,
    PHASE_IN_PROGRESS,
    PHASE_SUPERSEDED,
    RESTORE_ANNOTATION,
    completed_message,
    copy_running,
    history_unreadable,
    job_progress,
    ongoing_failovers,
    parse_history,
    plan_history,
    safe_uri,
    trigger_of_task,
)

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
STAMP = "2026-01-01T12:00:00Z"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def taint_task(cluster: str = "member1", **extra: Any) -> dict[str, Any]:
    return {"fromCluster": cluster, "purgeMode": "Directly", "reason": "TaintUntolerated",
            "producer": "TaintManager", "creationTimestamp": STAMP, "preservedLabelState": {"jobid": "abc"},
            "clustersBeforeFailover": [cluster], **extra}


def flink_item(cluster: str, health: str = "Healthy", state: str = "RUNNING", **info: str) -> dict[str, Any]:
    return {"clusterName": cluster, "applied": True, "health": health,
            "status": {"jobStatus": {"state": state}, "clusterInfo": dict(info)}}


def binding(*, tasks: list[dict[str, Any]] | None = None, clusters: tuple[str, ...] = ("member2",),
            items: list[dict[str, Any]] | None = None, annotations: dict[str, str] | None = None,
            caught_up: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": "job", "namespace": "default", "generation": 3, "resourceVersion": "7",
                         "annotations": dict(annotations or {})},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                  "name": "job"},
                     "clusters": [{"name": c} for c in clusters], "gracefulEvictionTasks": tasks or []},
            "status": {"schedulerObservedGeneration": 3 if caught_up else 2, "aggregatedStatus": items or []}}


def with_history(b: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    b["metadata"]["annotations"][HISTORY_ANNOTATION] = json.dumps(entries)
    return b


def restore(**fields: Any) -> str:
    record = {"cluster": "member2", "fromCluster": "member1", "jobId": "abc", "outcome": "Restored",
              "reason": "newest complete checkpoint", "path": "s3://bucket/ck/abc/chk-42",
              "kind": "checkpoint", "checkpointId": 42, "completedAt": "2026-01-01T11:59:48Z",
              "faultAt": STAMP, "ageAtFault": 12.5,
              "resolvedAt": "2026-01-01T12:00:02Z"}
    record.update(fields)
    return json.dumps(record)


# ----------------------------------------------------------------------------------------------- triggers


def test_d22_trigger_follows_the_task_reason_and_producer() -> None:
    assert trigger_of_task({"producer": "TaintManager", "reason": "TaintUntolerated"}) == "ClusterTaint"
    assert trigger_of_task({"producer": "resource-binding-application-failover-controller",
                            "reason": "ApplicationFailure"}) == "ApplicationFailure"
    assert trigger_of_task({"producer": "cluster-resource-binding-application-failover-controller",
                            "reason": ""}) == "ApplicationFailure"
    assert trigger_of_task({"producer": "someone", "reason": "PlannedMove"}) == "PlannedMove"
    assert trigger_of_task({"producer": "kubectl", "reason": "Manual"}) == "Other"


def test_d22_an_unstamped_task_is_not_a_failover_yet() -> None:
    task = taint_task()
    del task["creationTimestamp"]
    assert ongoing_failovers(binding(tasks=[task])) == []


def test_d22_a_move_annotation_is_a_planned_move_and_its_task_joins_it() -> None:
    move = json.dumps({"fromCluster": "member1", "toCluster": "member3", "phase": "Savepointing",
                       "startedAt": "2026-01-01T11:59:50Z", "nonce": 1})
    alone = ongoing_failovers(binding(annotations={MOVE_ANNOTATION: move}))
    assert [(f.from_cluster, f.at, f.trigger, f.to_hint) for f in alone] == [
        ("member1", "2026-01-01T11:59:50Z", "PlannedMove", "member3")]
    joined = ongoing_failovers(binding(tasks=[taint_task()], annotations={MOVE_ANNOTATION: move}))
    assert [(f.at, f.evicted_at, f.trigger) for f in joined] == [
        ("2026-01-01T11:59:50Z", STAMP, "PlannedMove")]


# ------------------------------------------------------------------------------------------ start and finish


def test_d22_a_planned_move_waits_for_its_savepoint_then_completes_with_zero_reprocessed() -> None:
    move = {"fromCluster": "member1", "toCluster": "member3", "phase": "Savepointing",
            "startedAt": "2026-01-01T11:59:50Z", "nonce": 1}
    old = flink_item("member1", state="FINISHED", **{"sim.flotilla.io/records-processed": "7000"})
    saving = binding(clusters=("member3",), items=[old], annotations={MOVE_ANNOTATION: json.dumps(move)})
    [entry] = plan_history(saving, at(1)).entries
    assert (entry["trigger"], entry["at"], entry["to"]) == ("PlannedMove", "2026-01-01T11:59:50Z", "member3")
    assert entry["stateGap"]["recordsAtFault"] == 7000

    waiting = binding(clusters=("member2",), items=[old], annotations={MOVE_ANNOTATION: json.dumps(move)})
    assert plan_history(waiting, at(1)).entries[0]["to"] is None, "the move's target is not placed yet"

    done = {**move, "phase": "Done", "path": "s3://bucket/sp/savepoint-abc123-1"}
    new = flink_item("member3", **{"sim.flotilla.io/restored-offset": "7000"})
    record = restore(cluster="member3", kind="savepoint", path=done["path"], ageAtFault=0.0,
                     faultAt="2026-01-01T11:59:55Z")
    after = with_history(binding(clusters=("member3",), items=[new],
                                 annotations={MOVE_ANNOTATION: json.dumps(done), RESTORE_ANNOTATION: record}),
                         [entry])
    [entry] = plan_history(after, at(12)).entries
    assert entry["phase"] == PHASE_COMPLETED and entry["restoredPath"] == done["path"]
    assert entry["stateGap"]["recordsReprocessed"] == 0 and entry["timeToRunning"] == 22.0


def test_d22_a_taint_failover_is_recorded_in_progress_then_completed_with_every_field() -> None:
    b = binding(tasks=[taint_task()], items=[flink_item("member2", state="CREATED", health="Unhealthy")])
    started = plan_history(b, at(3))
    assert started.changed and len(started.started) == 1 and not started.completed
    [entry] = started.entries
    assert entry["phase"] == PHASE_IN_PROGRESS and entry["runningAt"] is None
    assert (entry["from"], entry["to"], entry["trigger"], entry["purgeMode"]) == (
        "member1", "member2", "ClusterTaint", "Directly")
    assert entry["preservedState"] == {"jobid": "abc"}

    b = with_history(binding(tasks=[taint_task()], items=[flink_item("member2")],
                             annotations={RESTORE_ANNOTATION: restore()}), started.entries)
    done = plan_history(b, at(31.24))
    assert [e["from"] for e in done.completed] == ["member1"]
    [entry] = done.entries
    assert entry["phase"] == PHASE_COMPLETED
    assert entry["runningAt"] == "2026-01-01T12:00:31Z" and entry["timeToRunning"] == 31.2
    assert entry["restoredPath"] == "s3://bucket/ck/abc/chk-42" and entry["restoreOutcome"] == "Restored"
    assert entry["stateGap"]["ageAtFault"] == 12.5
    again = plan_history(with_history(b, done.entries), at(40))
    assert not again.changed, "a completed failover whose task lingers is not recorded twice"


def test_d22_the_new_copy_runs_only_when_healthy_and_its_job_running() -> None:
    assert copy_running(flink_item("m", "Healthy", "RUNNING"))
    assert not copy_running(flink_item("m", "Healthy", "FAILED")), "a terminal state is Healthy, not running"
    assert not copy_running(flink_item("m", "Unknown", "RUNNING"))
    assert copy_running({"clusterName": "m", "health": "Healthy", "status": {"readyReplicas": 2}})
    assert not copy_running(None)


def test_d22_a_holding_restore_keeps_the_failover_in_progress() -> None:
    b = binding(tasks=[taint_task()], items=[flink_item("member2")],
                annotations={RESTORE_ANNOTATION: restore(outcome="Holding", path=None)})
    [entry] = plan_history(b, at(5)).entries
    assert entry["phase"] == PHASE_IN_PROGRESS and entry["restoreOutcome"] == "Holding"


def test_d22_a_fresh_restore_has_no_path_and_no_checkpoint_age() -> None:
    b = binding(tasks=[taint_task()], items=[flink_item("member2")],
                annotations={RESTORE_ANNOTATION: restore(outcome="Fresh", path=None, ageAtFault=None)})
    [entry] = plan_history(b, at(5)).entries
    assert entry["phase"] == PHASE_COMPLETED and entry["restoreOutcome"] == "Fresh"
    assert entry["restoredPath"] is None and entry["stateGap"]["ageAtFault"] is None
    assert "no checkpoint" in completed_message(entry)


def test_d22_a_restore_record_of_an_earlier_failover_is_not_taken() -> None:
    b = binding(tasks=[taint_task()], items=[flink_item("member2")],
                annotations={RESTORE_ANNOTATION: restore(faultAt="2026-01-01T11:00:00Z")})
    [entry] = plan_history(b, at(5)).entries
    assert entry["restoredPath"] is None and entry["restoreOutcome"] is None


def test_d22_to_waits_for_the_scheduler_and_skips_the_survivors() -> None:
    task = taint_task()
    del task["clustersBeforeFailover"]
    # the taint manager's write: member1 gone, the scheduler not caught up; member3 survived
    first = plan_history(binding(tasks=[task], clusters=("member3",), caught_up=False), at(1))
    assert first.entries[0]["to"] is None
    later = with_history(binding(tasks=[task], clusters=("member2", "member3")), first.entries)
    assert plan_history(later, at(2)).entries[0]["to"] == "member2"


def test_d22_without_a_new_cluster_the_survivors_take_over() -> None:
    task = taint_task(clustersBeforeFailover=["member1", "member3"])
    [entry] = plan_history(binding(tasks=[task], clusters=("member3",)), at(1)).entries
    assert entry["to"] == "member3"


def test_d22_records_reprocessed_from_the_simulated_jobs_progress() -> None:
    # the old copy's item is gone already: the offset the controller saw last is taken
    started = plan_history(binding(tasks=[taint_task()]), at(1), progress={"member1": 5100})
    assert started.entries[0]["stateGap"]["recordsAtFault"] == 5100
    # the old copy still runs until its Work goes, and reports further: raised while in progress
    old = flink_item("member1", **{"sim.flotilla.io/records-processed": "5300"})
    raised = plan_history(with_history(binding(tasks=[taint_task()], items=[old]), started.entries), at(2))
    assert raised.changed and raised.entries[0]["stateGap"]["recordsAtFault"] == 5300
    new = flink_item("member2", **{"sim.flotilla.io/restored-offset": "4000",
                                   "sim.flotilla.io/records-processed": "4100"})
    done = plan_history(with_history(binding(tasks=[taint_task()], items=[new]), raised.entries), at(9),
                        progress={"member1": 5300})
    assert done.entries[0]["stateGap"]["recordsReprocessed"] == 1300
    assert "1300 records reprocessed" in completed_message(done.entries[0])


def test_d22_records_reprocessed_is_unknown_for_a_real_job() -> None:
    b = binding(tasks=[taint_task()], items=[flink_item("member1")])
    started = plan_history(b, at(1))
    done = plan_history(with_history(binding(tasks=[taint_task()], items=[flink_item("member2")]),
                                     started.entries), at(9))
    assert done.entries[0]["stateGap"]["recordsReprocessed"] is None
    assert job_progress({"clusterInfo": {"flink-version": "1.20"}}) == (None, None)


# ---------------------------------------------------------------------------------------- durability, bounds


def test_d22_a_pass_on_the_same_binding_changes_nothing() -> None:
    b = binding(tasks=[taint_task()])
    first = plan_history(b, at(1))
    second = plan_history(with_history(binding(tasks=[taint_task()]), first.entries), at(100))
    assert not second.changed and second.annotation_patch("7") is None


def test_d22_the_eleventh_entry_drops_the_oldest() -> None:
    old = [{"at": f"2025-12-{d:02d}T00:00:00Z", "from": "member9", "to": "member8", "trigger": "ClusterTaint",
            "phase": PHASE_COMPLETED} for d in range(20, 10, -1)]
    assert len(old) == MAX_ENTRIES
    update = plan_history(with_history(binding(tasks=[taint_task()]), old), at(1))
    assert len(update.entries) == MAX_ENTRIES
    assert update.entries[0]["from"] == "member1" and update.entries[0]["phase"] == PHASE_IN_PROGRESS
    assert update.entries[-1]["at"] == "2025-12-12T00:00:00Z", "the oldest (12-11) went"


def test_d22_a_failover_from_the_copy_that_never_ran_supersedes_its_entry() -> None:
    first = plan_history(binding(tasks=[taint_task()]), at(1)).entries
    second_task = taint_task("member2", creationTimestamp="2026-01-01T12:01:00Z",
                             clustersBeforeFailover=["member2"])
    update = plan_history(with_history(binding(tasks=[second_task], clusters=("member3",)), first), at(61))
    assert [e["phase"] for e in update.entries] == [PHASE_IN_PROGRESS, PHASE_SUPERSEDED]
    assert [e["from"] for e in update.superseded] == ["member1"]


def test_d22_an_unreadable_history_is_read_as_empty() -> None:
    assert parse_history({HISTORY_ANNOTATION: "{not json"}) == []
    assert history_unreadable({HISTORY_ANNOTATION: "{not json"}) and history_unreadable({HISTORY_ANNOTATION: "{}"})
    assert not history_unreadable({HISTORY_ANNOTATION: "[]"}) and not history_unreadable({})
    assert parse_history({HISTORY_ANNOTATION: json.dumps([1, "x", {"from": "a"}])}) == [{"from": "a"}]
    assert parse_history(None) == []


def test_d22_credentials_in_a_path_never_reach_the_history() -> None:
    assert safe_uri("s3://AKIA:secret@bucket/ck/abc/chk-1") == "s3://bucket/ck/abc/chk-1"
    b = binding(tasks=[taint_task()], items=[flink_item("member2")],
                annotations={RESTORE_ANNOTATION: restore(path="s3://AKIA:secret@bucket/ck/abc/chk-42")})
    update = plan_history(b, at(5))
    assert "secret" not in json.dumps(update.entries) and "secret" not in completed_message(update.entries[0])


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=3), max_leaves=12)
_fields = st.sampled_from(["at", "from", "to", "phase", "stateGap", "fromCluster", "cluster", "outcome", "path",
                           "faultAt", "ageAtFault", "toCluster", "startedAt", "creationTimestamp", "health",
                           "clusterName", "status", "toHint", "before", "restoredPath"])
_objects = st.dictionaries(_fields, _json | st.sampled_from(["member1", "member2", STAMP, "Healthy", "InProgress"]),
                           max_size=8)


@settings(max_examples=200, deadline=None)
@given(history=st.lists(_objects, max_size=4) | _json, restore_record=_objects | _json, move=_objects | _json,
       tasks=st.lists(_objects, max_size=3), items=st.lists(_objects, max_size=3))
def test_d22_bad_input_never_crashes_the_rules(history: Any, restore_record: Any, move: Any, tasks: Any,
                                                items: Any) -> None:
    b = binding(tasks=tasks, items=items, annotations={
        HISTORY_ANNOTATION: json.dumps(history), RESTORE_ANNOTATION: json.dumps(restore_record),
        MOVE_ANNOTATION: json.dumps(move)})
    update = plan_history(b, at(5), progress={"member1": 3})
    assert len(update.entries) <= MAX_ENTRIES
    patch = update.annotation_patch("1")
    if patch is not None:
        json.loads(patch["metadata"]["annotations"][HISTORY_ANNOTATION])
    for entry in update.completed:
        completed_message(entry)


def test_d22_a_taint_seen_before_its_moves_record_becomes_the_planned_move() -> None:
    first = plan_history(binding(tasks=[taint_task()]), at(1)).entries
    assert [e["trigger"] for e in first] == ["ClusterTaint"]
    move = {"fromCluster": "member1", "toCluster": "member3", "phase": "Savepointing", "trigger": "ClusterTaint",
            "startedAt": "2026-01-01T11:59:50Z", "nonce": 1}
    later = binding(tasks=[taint_task()], annotations={MOVE_ANNOTATION: json.dumps(move),
                                                       HISTORY_ANNOTATION: json.dumps(first)})
    [entry] = plan_history(later, at(2)).entries
    assert (entry["trigger"], entry["toHint"]) == ("PlannedMove", "member3")


@pytest.mark.parametrize("phase", ["Skipped", "Failed"])
def test_d22_a_taints_move_not_carried_out_stays_a_cluster_taint_failover(phase: str) -> None:
    move = {"fromCluster": "member1", "toCluster": "member3", "phase": phase, "trigger": "ClusterTaint",
            "startedAt": "2026-01-01T11:59:50Z", "nonce": 1}
    found = ongoing_failovers(binding(tasks=[taint_task()], annotations={MOVE_ANNOTATION: json.dumps(move)}))
    assert [(f.trigger, f.at) for f in found] == [("ClusterTaint", STAMP)]
    asked = dict(move, trigger="PlannedMove")  # one a person asked for stays a planned move
    found = ongoing_failovers(binding(tasks=[taint_task()], annotations={MOVE_ANNOTATION: json.dumps(asked)}))
    assert [f.trigger for f in found] == ["PlannedMove"]
