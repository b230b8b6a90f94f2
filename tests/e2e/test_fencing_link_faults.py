"""Automatic fencing under faults of a Pull member's link and agent: one-way partitions, an agent killed for good,
an agent frozen, a partition that heals before the bound. Real processes, the real kubectl, ``flotilla sim``.

One ``flotilla up --guard --members 7 --pull-members 4`` serves every case: member4..member7 are guarded Pull
members, member1..member3 Push members where moved jobs land, and up to three members are faulted at once so
that the control plane always sees a strict majority (4 of 7) live. Each case places its own guarded job
(FlinkDeployment, ``purgeMode: Directly``, job id preserved) on the member it faults, and every case ends by
checking from the members' running history that no job ever ran in two members at once. The timings and their
slack are in :mod:`tests.support.fencing`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from tests.support.fencing import (
    BOUND,
    FAILOVER,
    FENCE_AFTER,
    FENCE_LATE,
    HEAL_AT,
    PERMIT_HOLD,
    RENEW_INTERVAL,
    THAW_AT,
    Stack,
    condition,
    heal_and_unfence,
    start,
    stop,
    wait_for_renewal,
)
from tests.support.fencing_watch import Watch

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("link-faults") / "flotilla"
    try:
        yield start(root, members=7, pull_members=4)
    finally:
        stop(root)


def _stale_copy_gone_without_running_again(stack: Stack, job: str, stopped_at: float) -> None:
    home = stack.jobs[job]
    stack.eventually(lambda: _none(stack.job_state(home, job)), f"the stale copy of {job} deleted in {home}",
                     timeout=60)
    again = [iv for iv in stack.runs(job) if iv.member == home and iv.start > stopped_at]
    assert again == [], f"the stale copy of {job} ran again in {home}: {again}"


def _none(got: object) -> None:
    assert got is None, f"still there: {got!r}"


def _fenced_moved(stack: Stack, watch: Watch, job: str, latest_fence: float) -> float:
    """The job's home is fenced (LeaseExpired) no later than ``latest_fence`` after the fault, the job runs
    elsewhere, and its home copy stopped (the guard, or the fault itself) before the fence: returns when (wall
    clock) its last run in its home ended."""
    home = stack.jobs[job]
    assert home in watch.fenced, f"{home} not fenced: {watch.summary()}"
    assert watch.fenced[home] <= latest_fence, f"{home} fenced too late: {watch.summary()}"
    assert job in watch.moved, f"{job} not moved: {watch.summary()}"
    cond = condition(stack.clusters()[home], "Fenced")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "LeaseExpired"), cond
    home_runs = [iv for iv in stack.runs(job) if iv.member == home]
    assert home_runs and all(iv.end is not None for iv in home_runs), home_runs
    return max(iv.end for iv in home_runs if iv.end is not None)


def test_one_way_partitions_and_an_agent_killed_for_good_are_fenced_and_moved_never_running_twice(
        stack: Stack) -> None:
    """member4: the control plane's answers to its agent are lost (its requests still arrive); member5: its agent's
    requests are lost; member6: its agent is killed with SIGKILL and not started again. Each is fenced by the
    control plane within its bound (plus one renewal that may still land after a one-way cut) and its job moves;
    after the faults are undone the stale copies are deleted without running again."""
    cases = {"to-member": "member4", "from-member": "member5", "agent-killed": "member6"}
    stack.place_jobs(cases)
    watch = Watch(stack)
    stack.fault("member4", "partition-to-member")
    stack.fault("member5", "partition-from-member")
    killed = stack.agent("member6", "kill")
    assert killed["state"] == "killed" and killed["pid"] is None, killed
    latest_fence = RENEW_INTERVAL + BOUND + FENCE_LATE
    watch.until(list(cases), latest_fence + FAILOVER, done=list(cases))
    print(f"one-way partitions, agent killed: {watch.summary()} (bound {BOUND:g}s)")
    assert stack.agent("member6", "kill")["state"] == "killed", "the killed agent was started again"
    stopped = {job: _fenced_moved(stack, watch, job, latest_fence) for job in cases}
    for job in cases:  # a job whose home is fenced moves no sooner than the fence
        assert watch.moved[job][1] >= watch.fenced[cases[job]] - 1.0, watch.summary()
    assert watch.fenced.keys() == set(cases.values()), f"other clusters fenced: {watch.summary()}"
    stack.assert_never_twice(cases)

    stack.fault("member4", "recover")
    stack.fault("member5", "recover")
    assert stack.agent("member6", "start")["state"] == "running"
    # an agent that ran through the fault sees the Works deleted: the stale copies go before any unfence
    for job in ("to-member", "from-member"):
        _stale_copy_gone_without_running_again(stack, job, stopped[job])
    # a restarted agent never saw them go: it purges the stale copy (before renewing the permit) once its cluster
    # is unfenced, and the guard keeps it stopped until then
    heal_and_unfence(stack, cases.values())
    _stale_copy_gone_without_running_again(stack, "agent-killed", stopped["agent-killed"])
    stack.assert_never_twice(cases)
    for job in cases:
        assert stack.where_running(job) == [watch.moved[job][0]], job
    stack.rehome(watch)


def test_a_freeze_or_a_partition_undone_before_the_bound_moves_nothing_a_freeze_past_it_fences(
        stack: Stack) -> None:
    """member4's agent is frozen (SIGSTOP) right after a Lease renewal and thawed THAW_AT later; member5's link
    loses its agent's requests, right after a renewal, until HEAL_AT later (its permit has lapsed by then): neither
    is fenced, nothing moves, and their jobs run at home again. member7's agent is frozen and thawed only after it was fenced: its job
    moves, and the thawed agent deletes the stale copy before anything runs again."""
    cases = {"freeze-short": "member4", "heal-in-time": "member5", "freeze-long": "member7"}
    stack.place_jobs(cases)
    watch = Watch(stack)
    assert stack.agent("member7", "freeze")["state"] == "frozen"
    actions: list[tuple[float, Callable[[], object]]] = []
    timed: dict[str, float] = {}
    for _ in range(2):  # whichever of the two renews first is faulted first
        renewed = wait_for_renewal(stack, [m for m in ("member4", "member5") if m not in timed])
        timed[renewed] = time.monotonic()
        if renewed == "member4":
            stack.admin("/members/member4/agent", {"mode": "freeze"})
            actions.append((timed[renewed] + THAW_AT, lambda: stack.admin("/members/member4/agent", {"mode": "thaw"})))
        else:
            stack.admin("/members/member5/fault", {"mode": "partition-from-member"})
            actions.append((timed[renewed] + HEAL_AT, lambda: stack.admin("/members/member5/fault", {"mode": "recover"})))
    last = max(timed.values()) - watch.t0
    watch.until(list(cases), max(last + BOUND + FENCE_LATE, BOUND + FENCE_LATE + FAILOVER),
                done=["freeze-long"], actions=actions)
    watch.until(list(cases), last + BOUND + FENCE_LATE)  # the short faults' windows, in full
    print(f"short faults and a long freeze: {watch.summary()} (bound {BOUND:g}s)")
    assert watch.fenced.keys() == {"member7"}, f"fenced: {watch.summary()}"
    assert not {"freeze-short", "heal-in-time"} & watch.moved.keys(), watch.summary()
    stopped_at = _fenced_moved(stack, watch, "freeze-long", BOUND + FENCE_LATE)
    # a frozen agent renews no permit: its guard stopped the job fence-after later, long before the fence
    assert watch.stopped["freeze-long"] <= PERMIT_HOLD + FENCE_AFTER + FENCE_LATE, watch.summary()
    for job in ("freeze-short", "heal-in-time"):
        stack.eventually(lambda job=job: _in(stack.where_running(job), [cases[job]]),
                         f"{job} RUNNING in {cases[job]} again", timeout=30)
    stack.assert_never_twice(cases)

    assert stack.agent("member7", "thaw")["state"] == "running"
    _stale_copy_gone_without_running_again(stack, "freeze-long", stopped_at)
    heal_and_unfence(stack, ["member7"])
    stack.assert_never_twice(cases)
    assert stack.where_running("freeze-long") == [watch.moved["freeze-long"][0]]
    stack.rehome(watch)


def _in(got: object, want: object) -> None:
    assert got == want, f"{got!r}, want {want!r}"

