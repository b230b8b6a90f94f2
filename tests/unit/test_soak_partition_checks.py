"""The pure parts of ``flotilla soak partition``: the history checks on hand-made histories, and the trial plans."""

from __future__ import annotations

import pytest

from flotilla.member.history import Interval
from flotilla.reliability.partition import (
    FAULTS,
    PartitionParams,
    Timings,
    parse_faults,
    plan_trials,
    validate,
)
from flotilla.reliability.trial_checks import (
    WorkloadOutcome,
    loss_problems,
    trial_problems,
    workload_timeline,
)

JOB = "failover.flink.io/job-id"
NS = "soak"


def job(*, clusters: list[str] | None = None, objects: dict[str, dict[str, str]] | None = None,
        restored: dict[str, str] | None = None, expected: str | None = "abc123", name: str = "t1-w1"
        ) -> WorkloadOutcome:
    return WorkloadOutcome(kind="FlinkDeployment", namespace=NS, name=name, home="member1", state_label=JOB,
                           expected_state=expected, clusters=["member2"] if clusters is None else clusters,
                           objects={"member2": {JOB: "abc123"}} if objects is None else objects,
                           restored_from={"member2": "/ckpt/abc123/chk-4"} if restored is None else restored)


def run(member: str, start: float, end: float | None, *, uid: str = "", name: str = "t1-w1",
        kind: str = "FlinkDeployment") -> Interval:
    return Interval(kind=kind, namespace=NS, name=name, member=member, uid=uid or f"uid-{member}", start=start,
                    end=end)


def test_a_clean_move_with_its_job_id_and_a_restore_has_no_problem() -> None:
    history = [run("member1", 10.0, 20.0), run("member2", 21.0, None)]
    assert trial_problems([job()], history) == []


def test_two_copies_running_at_once_are_flagged() -> None:
    history = [run("member1", 10.0, 25.0), run("member2", 21.0, None)]
    problems = trial_problems([job()], history)
    assert len(problems) == 1 and "two copies ran at once" in problems[0], problems
    assert "member1 [10.00, 25.00]" in problems[0] and "member2 [21.00, running]" in problems[0]


def test_an_old_copy_never_closed_overlaps_the_new_one() -> None:
    history = [run("member1", 10.0, None), run("member2", 21.0, None)]
    assert any("two copies ran at once" in p for p in trial_problems([job()], history))


def test_an_overlap_long_before_the_end_is_still_flagged() -> None:
    # member2 ran briefly during the partition, stopped, and the workload is fine at the end: still a violation
    history = [run("member1", 10.0, 20.0), run("member2", 15.0, 16.0, uid="early"), run("member2", 21.0, None)]
    problems = trial_problems([job()], history)
    assert len(problems) == 1 and "member2 [15.00, 16.00]" in problems[0], problems


def test_touching_intervals_and_one_copy_stopped_and_resumed_are_not_overlaps() -> None:
    history = [run("member1", 10.0, 14.0), run("member1", 14.0, 20.0),  # the guard stopped it, it resumed
               run("member1", 19.0, 20.0),  # the same copy (member, uid): not two copies
               run("member2", 20.0, None)]  # starts exactly when the old one ended
    assert trial_problems([job()], history) == []


def test_other_workloads_overlapping_do_not_count_for_this_one() -> None:
    history = [run("member1", 10.0, 20.0), run("member2", 21.0, None),
               run("member1", 10.0, None, name="other"), run("member2", 12.0, None, name="other")]
    assert trial_problems([job()], history) == []
    other = job(name="other", clusters=["member2"])
    assert any("two copies ran at once" in p for p in trial_problems([other], history))


def test_a_binding_without_a_cluster_is_a_lost_workload() -> None:
    w = job(clusters=[], objects={})
    problems = trial_problems([w], [run("member1", 10.0, 20.0)])
    assert problems == ["FlinkDeployment soak/t1-w1: lost: its binding targets no cluster, not exactly one"]
    assert loss_problems([w], []) == problems


def test_a_workload_whose_copy_does_not_run_is_lost() -> None:
    problems = trial_problems([job()], [run("member1", 10.0, 20.0), run("member2", 21.0, 30.0)])
    assert problems == ["FlinkDeployment soak/t1-w1: lost: not running in member2, where its binding places it"]


def test_a_stale_copy_left_in_the_old_member_is_flagged() -> None:
    w = job(objects={"member1": {JOB: "abc123"}, "member2": {JOB: "abc123"}})
    problems = trial_problems([w], [run("member1", 10.0, 20.0), run("member2", 21.0, None)])
    assert problems == ["FlinkDeployment soak/t1-w1: copies in ['member1', 'member2'], expected only in member2"]


def test_a_moved_job_without_its_job_id_or_without_a_restore_is_flagged() -> None:
    history = [run("member1", 10.0, 20.0), run("member2", 21.0, None)]
    no_id = job(objects={"member2": {}})
    assert trial_problems([no_id], history) == [
        "FlinkDeployment soak/t1-w1: moved member1 -> member2 without its state: "
        "failover.flink.io/job-id=None, the first copy reported 'abc123'"]
    other_id = job(objects={"member2": {JOB: "ffff"}})
    assert len(trial_problems([other_id], history)) == 1
    fresh = job(restored={"member2": "none"})
    assert trial_problems([fresh], history) == [
        "FlinkDeployment soak/t1-w1: moved member1 -> member2 but its job did not restore from a snapshot "
        "(restored-from 'none')"]
    unseen = job(expected=None)
    assert "its state was never seen" in trial_problems([unseen], history)[0]


def test_a_statefulset_that_stayed_home_needs_no_preserved_label() -> None:
    w = WorkloadOutcome(kind="StatefulSet", namespace=NS, name="kv", home="member1",
                        state_label="failover.example.io/last-replicas", expected_state="1", clusters=["member1"],
                        objects={"member1": {}})
    history = [run("member1", 10.0, 14.0, name="kv", kind="StatefulSet"),
               run("member1", 18.0, None, name="kv", kind="StatefulSet")]
    assert trial_problems([w], history) == []
    moved = WorkloadOutcome(kind="StatefulSet", namespace=NS, name="kv", home="member1",
                            state_label="failover.example.io/last-replicas", expected_state="1",
                            clusters=["member3"], objects={"member3": {}})
    history.append(run("member3", 30.0, None, name="kv", kind="StatefulSet"))
    problems = trial_problems([moved], history)
    assert any("without its state" in p for p in problems), problems
    assert any("two copies ran at once" in p for p in problems), problems  # member1's copy still runs


def test_the_timeline_reads_the_stop_and_the_new_start_after_the_cut() -> None:
    history = [run("member1", 1.0, 113.5), run("member2", 119.25, None)]
    assert workload_timeline(job(), history, cut=100.0) == {"stopped_s": 13.5, "running_elsewhere_s": 19.25}
    assert workload_timeline(job(), [run("member1", 1.0, None)], cut=100.0) == {
        "stopped_s": None, "running_elsewhere_s": None}


MEMBERS = ["member1", "member2", "member3"]


def test_the_same_seed_gives_the_same_plan_and_another_seed_another() -> None:
    t = Timings()
    a = plan_trials(7, 20, MEMBERS, FAULTS, t)
    assert a == plan_trials(7, 20, MEMBERS, FAULTS, t)
    assert a != plan_trials(8, 20, MEMBERS, FAULTS, t)
    assert [p.index for p in a] == list(range(1, 21))


def test_every_plan_leaves_a_member_unfaulted_and_uses_one_or_two_faults() -> None:
    plans = plan_trials(3, 200, MEMBERS, FAULTS, Timings())
    counts = set()
    for plan in plans:
        targets = plan.targets
        assert len(targets) == len(set(targets)) <= len(MEMBERS) - 1, plan
        counts.add(len(plan.faults))
    assert counts == {1, 2}
    assert {f.fault for p in plans for f in p.faults} == set(FAULTS)


def test_as_many_trials_as_faults_try_every_fault() -> None:
    for seed in range(1, 6):
        plans = plan_trials(seed, len(FAULTS), MEMBERS, FAULTS, Timings())
        assert {p.faults[0].fault for p in plans} == set(FAULTS), seed


def test_hold_times_follow_each_fault_rule() -> None:
    t = Timings(fence_after=4, permit_hold=12, fence_margin=4)
    for plan in plan_trials(5, 300, MEMBERS, FAULTS, t):
        for f in plan.faults:
            if f.fault == "partition-near-bound":  # heals on both sides of the moment the fence is due
                assert t.bound - t.renew_interval - 0.1 <= f.hold <= t.bound + t.monitor_period + 2.1, f
            if f.fault == "partition":
                assert f.hold == pytest.approx(t.move_deadline, abs=0.1)
            assert f.hold > 0


def test_a_restricted_fault_list_is_all_a_plan_draws_from() -> None:
    only = {n: FAULTS[n] for n in parse_faults("agent-kill, partition")}
    plans = plan_trials(1, 50, MEMBERS, only, Timings())
    assert {f.fault for p in plans for f in p.faults} == {"agent-kill", "partition"}


def test_bad_parameters_are_usage_errors_that_say_what_to_fix() -> None:
    with pytest.raises(ValueError, match="unknown fault nope; choose from partition"):
        parse_faults("partition,nope")
    assert any("--members must be at least 3" in e for e in validate(PartitionParams(members=2)))
    assert any("renew interval" in e for e in validate(PartitionParams(permit_hold=5)))
    assert validate(PartitionParams()) == []
    assert validate(PartitionParams(members=3, faults=["partition-two"])) == []
