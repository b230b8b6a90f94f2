"""The promises a converged failover must keep, judged from end-state snapshots (flotilla.reliability.invariants)."""

from __future__ import annotations

from flotilla.failover.graceful import EVENT_TASK_REMOVED, Removal, RemovalReason, removal_event
from flotilla.reliability.crash import kill_moments
from flotilla.reliability.invariants import WorkloadEnd, converged_problems, timed_out_tasks

LABEL = "failover.flink.io/job-id"


def _good(name: str = "w1-flinkdeployment", target: str = "member2") -> WorkloadEnd:
    return WorkloadEnd(binding=name, clusters=[target], healthy_on=[target], works_in=[target],
                       objects_in={target: {LABEL: "job-1"}}, state_label=LABEL, expected_state="job-1")


def _check(*ends: WorkloadEnd, max_copies: int = 1, duplicates: dict | None = None, expected: int | None = None):
    return converged_problems(list(ends), failed="member1", allowed=["member2", "member3"],
                              expected=len(ends) if expected is None else expected, max_copies=max_copies,
                              duplicate_tasks=duplicates or {})


def test_a_clean_end_state_has_no_problem() -> None:
    assert _check(_good(), _good("w2-deployment", "member3")) == []


def test_a_copy_left_in_the_failed_member_is_a_leak() -> None:
    w = _good()
    w.objects_in["member1"] = {LABEL: "job-1"}
    assert _check(w) == ["w1-flinkdeployment: copies in ['member1', 'member2'], expected only in member2"]


def test_a_work_left_for_the_failed_member_is_a_leak() -> None:
    w = _good()
    w.works_in = ["member1", "member2"]
    assert _check(w) == ["w1-flinkdeployment: Works for ['member1', 'member2'], expected one for member2"]


def test_staying_on_the_failed_member_or_an_unlisted_one_is_not_allowed() -> None:
    on_failed = _good(target="member1")
    elsewhere = _good("w3-statefulset", target="member9")
    problems = _check(on_failed, elsewhere)
    assert "w1-flinkdeployment: placed on member1, which is not allowed" in problems
    assert "w3-statefulset: placed on member9, which is not allowed" in problems


def test_two_targets_or_none_are_not_one_copy() -> None:
    two = _good()
    two.clusters = ["member2", "member3"]
    none = _good("w4-deployment")
    none.clusters, none.objects_in, none.works_in = [], {}, []
    problems = _check(two, none)
    assert "w1-flinkdeployment: targets ['member2', 'member3'], not exactly one" in problems
    assert "w4-deployment: targets no cluster, not exactly one" in problems


def test_a_copy_that_is_not_healthy_is_not_recovered() -> None:
    w = _good()
    w.healthy_on = []
    assert _check(w) == ["w1-flinkdeployment: not Healthy on member2"]


def test_injected_state_must_equal_what_the_previous_copy_reported() -> None:
    wrong, missing = _good(), _good("w5-flinkdeployment")
    wrong.objects_in["member2"][LABEL] = "job-0"
    missing.objects_in["member2"] = {}
    problems = _check(wrong, missing)
    assert problems == [
        "w1-flinkdeployment: injected failover.flink.io/job-id='job-0', the previous copy reported 'job-1'",
        "w5-flinkdeployment: injected failover.flink.io/job-id=None, the previous copy reported 'job-1'",
    ]


def test_state_is_not_judged_when_none_was_expected() -> None:
    w = _good()
    w.expected_state, w.objects_in["member2"] = None, {}
    assert _check(w) == []


def test_tasks_left_duplicated_tasks_and_two_running_copies_are_reported() -> None:
    w = _good()
    w.tasks = ["member1"]
    problems = _check(w, max_copies=2, duplicates={"w1-flinkdeployment": ["member1", "member1"]})
    assert problems == [
        "w1-flinkdeployment: graceful eviction tasks left for ['member1']",
        "w1-flinkdeployment: graceful eviction task from ['member1'] duplicated",
        "2 copies of one workload ran at the same time",
    ]


def test_a_lost_binding_is_reported() -> None:
    assert _check(_good(), expected=2) == ["1 of 2 workloads have a binding"]


def test_kill_moments_are_reproducible_from_the_seed_and_inside_the_window() -> None:
    first = kill_moments(7, 10, 5.0)
    assert first == kill_moments(7, 10, 5.0)
    assert first != kill_moments(8, 10, 5.0)
    assert len(first) == 10 and all(0.0 <= t < 5.0 for t in first)


def _removed(kind: str, name: str, reason: RemovalReason, cluster: str = "member1") -> dict:
    type_, message = removal_event(Removal(cluster, reason), {"gracePeriodSeconds": 120}, 600.0)
    return {"reason": EVENT_TASK_REMOVED, "type": type_, "message": message,
            "involvedObject": {"kind": kind, "name": name, "namespace": "bench"}}


def test_a_task_removed_by_its_timeout_is_a_broken_promise() -> None:
    """The graceful-eviction controller's Events tell how each task went: removed because the new copy became
    Healthy is the promise kept; removed by its timeout (the Warning) is not, even though the end state is clean
    once the task is gone."""
    events = [
        _removed("ResourceBinding", "w1-flinkdeployment", RemovalReason.TIMEOUT),
        _removed("FlinkDeployment", "w1", RemovalReason.TIMEOUT),  # the same, on the template
        _removed("ResourceBinding", "w1-flinkdeployment", RemovalReason.TIMEOUT),  # seen twice: reported once
        _removed("ResourceBinding", "w2-deployment", RemovalReason.HEALTHY),
        _removed("ResourceBinding", "w3-statefulset", RemovalReason.SUPPRESSION_LIFTED),
        {**_removed("ResourceBinding", "w4-deployment", RemovalReason.TIMEOUT), "reason": "SomethingElse"},
        {"reason": EVENT_TASK_REMOVED, "type": "Warning", "message": None, "involvedObject": None},
    ]
    timed_out = timed_out_tasks(events)
    assert timed_out == {"w1-flinkdeployment": ["member1"]}
    problems = converged_problems([_good(), _good("w2-deployment", "member3")], failed="member1",
                                  allowed=["member2", "member3"], expected=2, max_copies=1, duplicate_tasks={},
                                  timed_out=timed_out)
    assert problems == ["w1-flinkdeployment: graceful eviction task from ['member1'] removed by its timeout, not "
                        "because the new copy became Healthy"]
    assert _check(_good(), _good("w2-deployment", "member3")) == []  # no Events read: nothing said
