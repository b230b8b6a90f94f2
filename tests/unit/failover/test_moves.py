"""D21: the rules of planned moves with a savepoint (flotilla.failover.moves)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flotilla.failover.moves import (
    MOVE_ANNOTATION,
    MOVE_PRODUCER,
    MOVE_SAVEPOINT_ANNOTATION,
    PHASE_DONE,
    PHASE_FAILED,
    PHASE_SAVEPOINTING,
    RESTORE_ANNOTATION,
    SAVEPOINT_ON_MOVE_ANNOTATION,
    TRIGGER_CLUSTER_TAINT,
    TRIGGER_PLACEMENT_CHANGE,
    TRIGGER_PLANNED_MOVE,
    Move,
    MoveRequestError,
    apply_move_restore,
    failure_reason,
    move_candidate,
    move_savepoint_record,
    parse_move,
    plan_move_request,
    reflected_savepoint,
    render_rule,
    restore_record,
    savepoint_capable,
    savepoint_on_move_enabled,
    stop_with_savepoint,
)
from flotilla.interpreter import InterpreterError, ResourceInterpreter

T0 = datetime(2026, 12, 7, 8, 0, 0, tzinfo=UTC)
FLINK = {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "metadata": {"name": "wc"},
         "spec": {"job": {"jarURI": "local:///job.jar", "upgradeMode": "stateless", "state": "running"}}}


def cluster(name: str, ready: bool = True, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "reason": "ClusterReady" if ready else "ClusterNotReachable"}]}}


def clusters(*names: str, not_ready: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    return {n: cluster(n, n not in not_ready) for n in names}


def work(name_cluster: str, created: datetime = T0 - timedelta(hours=1), terminating: bool = False,
         manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "wc-flinkdeployment", "namespace": f"karmada-es-{name_cluster}",
                            "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if terminating:
        meta["deletionTimestamp"] = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "metadata": meta,
            "spec": {"workload": {"manifests": [manifest or FLINK]}}}


def binding(targets: list[str], tasks: list[dict[str, Any]] | None = None, move: Move | None = None,
            status: list[dict[str, Any]] | None = None, annotations: dict[str, str] | None = None,
            kind: str = "FlinkDeployment", api_version: str = "flink.apache.org/v1beta1") -> dict[str, Any]:
    ann = dict(annotations or {})
    if move is not None:
        ann[MOVE_ANNOTATION] = move.to_json()
    spec: dict[str, Any] = {"resource": {"apiVersion": api_version, "kind": kind, "name": "wc",
                                         "namespace": "default"},
                            "clusters": [{"name": t} for t in targets],
                            "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2", "member3"]},
                                          "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1,
                                                                 "minGroups": 1}]}}
    if tasks:
        spec["gracefulEvictionTasks"] = tasks
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": "wc-flinkdeployment", "namespace": "default", "annotations": ann,
                         "resourceVersion": "7"},
            "spec": spec, "status": {"aggregatedStatus": status or []}}


def task(source: str, producer: str = "TaintManager") -> dict[str, Any]:
    return {"fromCluster": source, "purgeMode": "Directly", "producer": producer, "reason": "TaintUntolerated"}


def suspended_status(source: str, path: str, at: datetime, state: str = "FINISHED") -> dict[str, Any]:
    ms = int(at.timestamp() * 1000)
    return {"clusterName": source, "applied": True, "health": "Healthy", "status": {
        "lifecycleState": "SUSPENDED", "jobManagerDeploymentStatus": "MISSING",
        "jobStatus": {"jobId": "a" * 32, "state": state, "upgradeSavepointPath": path,
                      "savepointInfo": {"lastSavepoint": {"timeStamp": ms, "location": path,
                                                          "triggerType": "UPGRADE", "formatType": "CANONICAL"}}}}}


# ------------------------------------------------------------------------------------------------ kinds, records


def test_d21_only_flinkdeployment_takes_a_savepoint_on_a_move() -> None:
    assert savepoint_capable(FLINK)
    assert savepoint_capable({"apiVersion": "flink.apache.org/v1", "kind": "FlinkDeployment"})
    assert not savepoint_capable({"apiVersion": "apps/v1", "kind": "Deployment"})
    assert not savepoint_capable({"apiVersion": "example.io/v1", "kind": "FlinkDeployment"})


def test_d21_the_policy_or_the_template_turns_savepoints_on_moves_off() -> None:
    off = {"metadata": {"annotations": {SAVEPOINT_ON_MOVE_ANNOTATION: "false"}}}
    assert savepoint_on_move_enabled(None, FLINK)
    assert not savepoint_on_move_enabled(off, FLINK)
    assert not savepoint_on_move_enabled(None, off)
    assert savepoint_on_move_enabled({"metadata": {"annotations": {SAVEPOINT_ON_MOVE_ANNOTATION: "true"}}})


def test_d21_stop_with_savepoint_suspends_the_job_in_savepoint_mode_on_a_copy() -> None:
    stopped = stop_with_savepoint(FLINK)
    assert stopped["spec"]["job"]["state"] == "suspended"
    assert stopped["spec"]["job"]["upgradeMode"] == "savepoint"
    assert stopped["spec"]["job"]["jarURI"] == "local:///job.jar"
    assert FLINK["spec"]["job"]["state"] == "running"


def test_d21_the_move_record_reads_back_and_bad_records_are_no_move() -> None:
    move = Move("member1", "member2", PHASE_SAVEPOINTING, T0, nonce=3, reason="r", trigger=TRIGGER_CLUSTER_TAINT)
    assert parse_move(binding([], move=move)) == move
    for raw in ("{", "[]", json.dumps({"fromCluster": "m1", "phase": "Sleeping", "startedAt": "2026-01-01T00:00:00Z"}),
                json.dumps({"fromCluster": "m1", "phase": "Done"})):
        assert parse_move(binding([], annotations={MOVE_ANNOTATION: raw})) is None


# ------------------------------------------------------------------------------------------------ candidates


def test_d21_a_taint_eviction_from_a_ready_cluster_starts_a_move() -> None:
    b = binding(["member2"], [task("member1")])
    found = move_candidate(b, [work("member1")], clusters("member1", "member2"))
    assert found is not None
    assert (found.from_cluster, found.to_cluster, found.trigger) == ("member1", "member2", TRIGGER_CLUSTER_TAINT)


def test_d21_a_move_starts_before_the_scheduler_chose_the_target() -> None:
    found = move_candidate(binding([], [task("member1")]), [work("member1")], clusters("member1", "member2"))
    assert found is not None and found.to_cluster is None


def test_d21_an_eviction_from_a_cluster_that_is_not_ready_is_no_planned_move() -> None:
    b = binding(["member2"], [task("member1")])
    assert move_candidate(b, [work("member1")], clusters("member1", "member2", not_ready=("member1",))) is None


def fenced(name: str) -> dict[str, Any]:
    c = cluster(name)
    c["spec"]["taints"] = [{"key": "cluster.flotilla.io/out-of-service", "effect": "NoExecute"}]
    return c


def fence_pending(name: str) -> dict[str, Any]:
    c = cluster(name)
    c["metadata"]["annotations"] = {"guard.flotilla.io/fence-pending": "2026-12-07T08:00:00Z"}
    return c


def test_d21_a_fenced_or_fence_pending_cluster_still_ready_is_no_planned_move() -> None:
    # a cut-off Pull cluster stays Ready until its grace period ends; the automatic fence comes first
    b = binding(["member2"], [task("member1")])
    for source in (fenced("member1"), fence_pending("member1")):
        assert move_candidate(b, [work("member1")], {"member1": source, "member2": cluster("member2")}) is None
        move = Move("member1", "member2", PHASE_SAVEPOINTING, T0)
        why = failure_reason(move, binding(["member2"], [task("member1")], move=move), [work("member1")],
                             {"member1": source, "member2": cluster("member2")}, T0, 120)
        assert why is not None and "fenced" in why


def test_d21_application_failures_and_other_kinds_are_no_planned_move() -> None:
    app = binding(["member2"], [task("member1", "resource-binding-application-failover-controller")])
    assert move_candidate(app, [work("member1")], clusters("member1", "member2")) is None
    dep = binding(["member2"], [task("member1")], kind="Deployment", api_version="apps/v1")
    assert move_candidate(dep, [work("member1")], clusters("member1", "member2")) is None


def test_d21_a_cluster_dropped_by_a_placement_change_starts_a_move() -> None:
    found = move_candidate(binding(["member2"]), [work("member1")], clusters("member1", "member2"))
    assert found is not None and found.trigger == TRIGGER_PLACEMENT_CHANGE
    assert move_candidate(binding([]), [work("member1")], clusters("member1", "member2")) is None


def test_d21_the_cli_request_is_a_planned_move_trigger() -> None:
    b = binding(["member2"], [task("member1", MOVE_PRODUCER)])
    found = move_candidate(b, [work("member1")], clusters("member1", "member2"))
    assert found is not None and found.trigger == TRIGGER_PLANNED_MOVE


def test_d21_a_move_already_recorded_for_the_copy_is_not_started_again() -> None:
    done = Move("member1", "member2", PHASE_DONE, T0)
    b = binding(["member2"], [task("member1")], move=done)
    assert move_candidate(b, [work("member1", created=T0 - timedelta(minutes=5))], clusters("member1", "member2")) \
        is None
    # a copy created in member1 after that move (it moved back since) is a new candidate
    assert move_candidate(b, [work("member1", created=T0 + timedelta(minutes=5))], clusters("member1", "member2")) \
        is not None


def test_d21_a_workload_in_two_clusters_or_a_terminating_copy_is_no_planned_move() -> None:
    b = binding(["member2"], [task("member1")])
    assert move_candidate(b, [work("member1"), work("member3")], clusters("member1", "member2", "member3")) is None
    assert move_candidate(b, [work("member1", terminating=True)], clusters("member1", "member2")) is None


# ------------------------------------------------------------------------------------------------ the render


def test_d21_while_savepointing_the_old_work_is_kept_and_stopped_and_nothing_else_written() -> None:
    move = Move("member1", "member2", PHASE_SAVEPOINTING, T0)
    b = binding(["member2"], [task("member1")], move=move)
    rule = render_rule(b, [work("member1")], clusters("member1", "member2"))
    assert rule.hold and rule.keep_clusters == {"member1"} and not rule.delete
    (updated,) = rule.update
    manifest = updated["spec"]["workload"]["manifests"][0]
    assert manifest["spec"]["job"]["state"] == "suspended" and manifest["spec"]["job"]["upgradeMode"] == "savepoint"
    # once the Work carries it, nothing more to write, still held
    again = render_rule(b, [updated], clusters("member1", "member2"))
    assert again.hold and again.update == []
    assert not render_rule(b, [work("member1")], clusters("member1", "member2"), pending=False).hold


def test_d21_between_the_eviction_and_the_record_the_render_holds_the_old_copy() -> None:
    rule = render_rule(binding(["member2"], [task("member1")]), [work("member1")], clusters("member1", "member2"))
    assert rule.hold and rule.keep_clusters == {"member1"} and rule.update == [] and rule.delete == []
    # without the plannedMove controller nothing would end the hold: Karmada's render
    assert not render_rule(binding(["member2"], [task("member1")]), [work("member1")], clusters("member1", "member2"),
                           pending=False).hold


def test_d21_once_done_the_old_copy_is_deleted_before_the_new_one_is_written() -> None:
    done = Move("member1", "member2", PHASE_DONE, T0, path="file:///ck/savepoints/savepoint-aaaaaa-1")
    b = binding(["member2"], [task("member1")], move=done)
    rule = render_rule(b, [work("member1")], clusters("member1", "member2"))
    assert rule.hold and [w["metadata"]["namespace"] for w in rule.delete] == ["karmada-es-member1"]
    terminating = render_rule(b, [work("member1", terminating=True)], clusters("member1", "member2"))
    assert terminating.hold and terminating.delete == []
    assert not render_rule(b, [], clusters("member1", "member2")).hold


def test_d21_a_failed_move_renders_as_an_ordinary_failover() -> None:
    failed = Move("member1", "member2", PHASE_FAILED, T0)
    b = binding(["member2"], [task("member1")], move=failed)
    assert not render_rule(b, [work("member1", created=T0 - timedelta(minutes=1))], clusters("member1", "member2")).hold


def test_d21_the_new_copy_gets_the_savepoint_as_initial_savepoint_path() -> None:
    path = "file:///ck/savepoints/savepoint-aaaaaa-1"
    done = Move("member1", "member2", PHASE_DONE, T0, nonce=2, path=path)
    b = binding(["member2"], move=done, annotations={
        MOVE_SAVEPOINT_ANNOTATION: move_savepoint_record(done, path, T0),
        RESTORE_ANNOTATION: restore_record(done, binding([], status=[suspended_status("member1", path, T0)]), path,
                                           T0, T0)})
    restored = apply_move_restore(FLINK, b, "member2", ResourceInterpreter())
    assert restored is not None
    assert restored["spec"]["job"]["initialSavepointPath"] == path
    assert restored["spec"]["job"]["upgradeMode"] == "savepoint"
    assert "savepointRedeployNonce" not in restored["spec"]["job"]
    assert apply_move_restore(restored, b, "member2", ResourceInterpreter()) is None  # already there
    assert apply_move_restore(FLINK, b, "member3", ResourceInterpreter()) is None  # not the move's target
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "wc"}, "spec": {}}
    assert apply_move_restore(deployment, b, "member2", ResourceInterpreter()) is None  # no RestoreState


def test_d21_a_session_cluster_cannot_be_restored_and_says_so() -> None:
    path = "s3://b/sp/savepoint-aaaaaa-1"
    done = Move("member1", "member2", PHASE_DONE, T0, nonce=4, path=path)
    b = binding(["member2"], move=done, annotations={MOVE_SAVEPOINT_ANNOTATION: move_savepoint_record(done, path, T0)})
    session = {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "metadata": {"name": "wc"},
               "spec": {"image": "flink:1.20"}}
    with pytest.raises(InterpreterError, match="spec.job"):
        apply_move_restore(session, b, "member2", ResourceInterpreter())


# ------------------------------------------------------------------------------------------------ the savepoint


def test_d21_the_savepoint_is_read_from_the_suspended_copys_reflected_status() -> None:
    path = "file:///ck/savepoints/savepoint-aaaaaa-1"
    b = binding(["member2"], status=[suspended_status("member1", path, T0 + timedelta(seconds=3))])
    assert reflected_savepoint(b, "member1", T0) == (path, T0 + timedelta(seconds=3))
    assert reflected_savepoint(b, "member2", T0) is None


def test_d21_an_older_savepoint_or_a_running_job_is_not_the_moves_savepoint() -> None:
    path = "file:///ck/savepoints/savepoint-aaaaaa-1"
    old = binding(["member2"], status=[suspended_status("member1", path, T0 - timedelta(minutes=5))])
    assert reflected_savepoint(old, "member1", T0) is None
    running = suspended_status("member1", path, T0 + timedelta(seconds=1))
    running["status"]["lifecycleState"] = "STABLE"
    running["status"]["jobStatus"]["state"] = "RUNNING"
    assert reflected_savepoint(binding(["member2"], status=[running]), "member1", T0) is None


def test_d21_without_a_savepoint_time_a_savepoint_other_than_the_one_before_the_move_counts() -> None:
    # operator 1.10+ may report upgradeSavepointPath only (savepointInfo is deprecated)
    item = suspended_status("member1", "s3://b/sp/savepoint-aaaaaa-2", T0)
    del item["status"]["jobStatus"]["savepointInfo"]
    b = binding(["member2"], status=[item])
    assert reflected_savepoint(b, "member1", T0, previous="s3://b/sp/savepoint-aaaaaa-1") == (
        "s3://b/sp/savepoint-aaaaaa-2", T0)
    assert reflected_savepoint(b, "member1", T0, previous="s3://b/sp/savepoint-aaaaaa-2") is None


def test_d21_a_move_fails_when_the_old_cluster_goes_the_copy_goes_or_time_runs_out() -> None:
    move = Move("member1", "member2", PHASE_SAVEPOINTING, T0)
    b = binding(["member2"], [task("member1")], move=move)
    ok = clusters("member1", "member2")
    assert failure_reason(move, b, [work("member1")], ok, T0 + timedelta(seconds=10), 120) is None
    why = failure_reason(move, b, [work("member1")], clusters("member1", "member2", not_ready=("member1",)),
                         T0, 120)
    assert why is not None and "not Ready" in why
    why = failure_reason(move, b, [], ok, T0, 120)
    assert why is not None and "gone" in why
    why = failure_reason(move, b, [work("member1")], ok, T0 + timedelta(seconds=121), 120)
    assert why is not None and "--move-savepoint-timeout" in why


def test_d21_the_restore_record_has_no_state_gap() -> None:
    path = "file:///ck/savepoints/savepoint-aaaaaa-1"
    move = Move("member1", "member2", PHASE_DONE, T0, path=path)
    b = binding(["member2"], status=[suspended_status("member1", path, T0 + timedelta(seconds=2))])
    record = json.loads(restore_record(move, b, path, T0 + timedelta(seconds=2), T0 + timedelta(seconds=3)))
    assert record["cluster"] == "member2" and record["outcome"] == "Restored" and record["kind"] == "savepoint"
    assert record["path"] == path and record["ageAtFault"] == 0.0 and record["jobId"] == "a" * 32


# ------------------------------------------------------------------------------------------------ the request


def cluster_list(*names: str, not_ready: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return list(clusters(*names, not_ready=not_ready).values())


def test_d21_a_move_request_evicts_the_old_cluster_targets_the_new_one_and_savepoints() -> None:
    b = binding(["member1"])
    request = plan_move_request(b, cluster_list("member1", "member2", "member3"), "member3", T0, template=FLINK,
                                preserved_label_state={"failover.flink.io/job-id": "a" * 32})
    assert (request.from_cluster, request.to_cluster, request.savepoint) == ("member1", "member3", True)
    spec = request.patch["spec"]
    assert spec["clusters"] == [{"name": "member3"}]
    (t,) = spec["gracefulEvictionTasks"]
    assert t["fromCluster"] == "member1" and t["purgeMode"] == "Directly" and t["producer"] == MOVE_PRODUCER
    assert t["preservedLabelState"] == {"failover.flink.io/job-id": "a" * 32}
    move = parse_move({"metadata": request.patch["metadata"]})
    assert move is not None and move.phase == PHASE_SAVEPOINTING and move.to_cluster == "member3"
    assert request.patch["metadata"]["resourceVersion"] == "7"


def test_d21_the_scheduler_keeps_the_requested_target_after_the_eviction_ends() -> None:
    # member2 sorts before member3: without the locality of the written target the scheduler would choose it
    b = binding(["member1"])
    request = plan_move_request(b, cluster_list("member1", "member2", "member3"), "member3", T0, template=FLINK)
    from flotilla.scheduler import schedule

    after = {**b["spec"], "clusters": request.patch["spec"]["clusters"]}
    result = schedule({"spec": after, "status": {}}, None, cluster_list("member1", "member2", "member3"), now=T0)
    assert [c.name for c in result.clusters] == ["member3"]
    fresh = {**b["spec"], "clusters": []}
    result = schedule({"spec": fresh, "status": {}}, None, cluster_list("member1", "member2", "member3"), now=T0)
    assert [c.name for c in result.clusters] != ["member3"]  # the baseline: the written target is what keeps it


@pytest.mark.parametrize(("targets", "to", "ready", "message"), [
    (["member1"], "member9", (), "no such cluster"),
    (["member1"], "member1", (), "already runs in member1"),
    (["member1", "member2"], "member3", (), "runs in 2 clusters"),
    ([], "member2", (), "not scheduled"),
    (["member1"], "member2", ("member2",), "not Ready"),
])
def test_d21_a_move_request_that_cannot_be_done_says_why(targets: list[str], to: str, ready: tuple[str, ...],
                                                         message: str) -> None:
    with pytest.raises(MoveRequestError, match=message):
        plan_move_request(binding(targets), cluster_list("member1", "member2", "member3", not_ready=ready), to, T0,
                          template=FLINK)


def test_d21_a_target_outside_the_placement_is_refused_with_the_schedulers_reason() -> None:
    b = binding(["member1"])
    b["spec"]["placement"]["clusterAffinity"]["clusterNames"] = ["member1", "member2"]
    with pytest.raises(MoveRequestError, match="member3"):
        plan_move_request(b, cluster_list("member1", "member2", "member3"), "member3", T0, template=FLINK)


def test_d21_without_a_savepoint_the_request_is_a_plain_move() -> None:
    dep = {"apiVersion": "apps/v1", "kind": "Deployment"}
    request = plan_move_request(binding(["member1"], kind="Deployment", api_version="apps/v1"),
                                cluster_list("member1", "member2"), "member2", T0, template=dep)
    assert not request.savepoint and "takes no savepoint" in request.why_no_savepoint
    assert "annotations" not in request.patch["metadata"]
    down = plan_move_request(binding(["member1"]), cluster_list("member1", "member2", not_ready=("member1",)),
                             "member2", T0, template=FLINK)
    assert not down.savepoint and "not Ready" in down.why_no_savepoint
    off = plan_move_request(binding(["member1"]), cluster_list("member1", "member2"), "member2", T0, template=FLINK,
                            policy={"metadata": {"annotations": {SAVEPOINT_ON_MOVE_ANNOTATION: "false"}}})
    assert not off.savepoint and SAVEPOINT_ON_MOVE_ANNOTATION in off.why_no_savepoint
