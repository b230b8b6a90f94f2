"""Automatic fencing under faults of a whole member and of the control plane: a member's API down while its agent
runs, a member powered off (its agent with it), the controller-manager restarted while a fence is due, the control
plane's network cut from every member (the agents keep each other's permits), and a minority of members live. Real processes, the real kubectl,
``flotilla sim``.

One ``flotilla up --guard --members 5 --pull-members 3`` serves every case: member3..member5 are guarded Pull
members, member1 and member2 Push members where moved jobs land. Each case places guarded jobs (FlinkDeployment,
``purgeMode: Directly``, job id preserved) on the members it faults, and checks from the members' running history
that no job ever ran in two members at once. The timings and their slack are in :mod:`tests.support.fencing`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fencing import (
    BOUND,
    FAILOVER,
    FENCE_LATE,
    LOAD_SLACK,
    RENEW_INTERVAL,
    RESTART_AFTER,
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
    root = tmp_path_factory.mktemp("member-cp-faults") / "flotilla"
    try:
        yield start(root, members=5, pull_members=3)
    finally:
        stop(root)


def _is(got: object, want: object) -> None:
    assert got == want, f"{got!r}, want {want!r}"


def _home_runs_ended(stack: Stack, job: str) -> float:
    home = stack.jobs[job]
    runs = [iv for iv in stack.runs(job) if iv.member == home]
    assert runs and all(iv.end is not None for iv in runs), runs
    return max(iv.end for iv in runs if iv.end is not None)


def _stale_copy_gone_without_running_again(stack: Stack, job: str, stopped_at: float) -> None:
    home = stack.jobs[job]
    stack.eventually(lambda: _is(stack.job_state(home, job), None), f"the stale copy of {job} deleted in {home}",
                     timeout=60)
    again = [iv for iv in stack.runs(job) if iv.member == home and iv.start > stopped_at]
    assert again == [], f"the stale copy of {job} ran again in {home}: {again}"


def test_member_api_down_moves_nothing_power_off_moves_and_a_controller_restart_postpones_a_fence(
        stack: Stack) -> None:
    """member3's API goes down while its agent keeps renewing: never fenced, its job stays (the guard stops it:
    the agent cannot renew the permit; it runs again on recover). member4 is powered off, its agent with it:
    fenced and moved; powered on, its stale copy is deleted without running. member5 is partitioned right after a
    renewal and the controller-manager restarts mid-wait: the fence comes no sooner than a whole bound after the
    restart, and still comes."""
    cases = {"api-down": "member3", "power-off": "member4", "cp-restart": "member5"}
    stack.place_jobs(cases)
    watch = Watch(stack)
    stack.fault("member3", "down")
    stack.fault("member4", "off")
    stack.agent("member4", "kill")
    wait_for_renewal(stack, ["member5"])
    stack.fault("member5", "partition")
    cut = watch.now()
    watch.until(list(cases), cut + RESTART_AFTER)
    assert "member5" not in watch.fenced, f"fenced before the restart: {watch.summary()}"
    restart_started = watch.now()
    stack.sim("controlplane", "--mode", "restart")
    restart_done = watch.now()
    assert "member5" not in stack.fenced()
    latest = restart_done + BOUND + FENCE_LATE
    watch.until(list(cases), latest + FAILOVER, done=["power-off", "cp-restart"])
    watch.until(list(cases), latest)  # member3's window, in full
    print(f"member faults, controller restart at {restart_started:.1f}s after the first fault: {watch.summary()} "
          f"(bound {BOUND:g}s)")
    assert "member3" not in watch.fenced and "api-down" not in watch.moved, watch.summary()
    for job in ("power-off", "cp-restart"):
        home = cases[job]
        assert home in watch.fenced and watch.fenced[home] <= latest, watch.summary()
        assert job in watch.moved, watch.summary()
        cond = condition(stack.clusters()[home], "Fenced")
        assert cond is not None and cond["reason"] == "LeaseExpired", cond
    # the restarted controller-manager counts from when it first saw member5's Lease: never sooner
    assert watch.fenced["member5"] >= restart_started + BOUND, watch.summary()
    # member3's API is down, so its job is seen in the running history: its guard stopped it during the fault
    assert [iv for iv in stack.runs("api-down") if iv.member == "member3" and iv.end is not None], \
        f"member3's guard never stopped its job: {stack.runs('api-down')}"
    stack.assert_never_twice(cases)
    stopped = {job: _home_runs_ended(stack, job) for job in ("power-off", "cp-restart")}

    stack.fault("member3", "recover")
    stack.fault("member4", "recover")  # power on: the member first, then its agent
    stack.agent("member4", "start")
    stack.fault("member5", "recover")
    _stale_copy_gone_without_running_again(stack, "cp-restart", stopped["cp-restart"])  # before any unfence
    stack.eventually(lambda: _is(stack.where_running("api-down"), ["member3"]), "api-down RUNNING in member3 again")
    heal_and_unfence(stack, ["member4", "member5"])
    # member4's agent started after the fence never saw its Work go: it purges once member4 is unfenced
    _stale_copy_gone_without_running_again(stack, "power-off", stopped["power-off"])
    stack.assert_never_twice(cases)
    stack.rehome(watch)


def test_d19_the_control_plane_cut_from_every_member_stops_nothing_and_fences_nobody(stack: Stack) -> None:
    """`flotilla sim fault --all-members --mode partition` for longer than permit-hold + fence-after + the fence's
    bound: the agents still reach each other, every one reports the control plane unreachable, and each keeps its
    run permit through the majority: no guarded job stops, nobody is fenced, nothing moves, during the cut and
    after it heals (the agents back last get a fresh bound)."""
    cases = {"outage-m4": "member4", "outage-m5": "member5"}
    stack.place_jobs(cases)
    jobs = list(stack.jobs)
    homes = {job: stack.where_running(job) for job in jobs}
    assert all(len(where) == 1 for where in homes.values()), homes
    events = len(stack.fence_events())
    watch = Watch(stack)
    stack.sim("fault", "--all-members", "--mode", "partition")
    watch.until(jobs, BOUND + FENCE_LATE)
    print(f"control plane cut from every member: {watch.summary()} (bound {BOUND:g}s)")
    assert not watch.fenced and not watch.moved, watch.summary()
    assert not watch.stopped, f"a guarded job stopped during the control plane's cut-off: {watch.summary()}"

    before = stack.renew_times()
    stack.sim("fault", "--all-members", "--mode", "recover")
    healed = Watch(stack)
    for m in stack.pull:  # every agent back (its backoff is at most one renew interval)
        stack.eventually(lambda m=m: _differ(stack.renew_times().get(m), before.get(m)), f"{m}'s Lease renewed",
                         timeout=RENEW_INTERVAL + LOAD_SLACK + 10)
    healed.until(jobs, healed.now() + 2 * LOAD_SLACK)
    stack.assert_never_twice(jobs)
    assert not healed.fenced and not healed.moved and not healed.stopped, healed.summary()
    for job, where in homes.items():
        assert stack.where_running(job) == where, (job, stack.where_running(job), where)
    assert len(stack.fence_events()) == events
    stack.assert_never_twice(jobs)

    def ready_untainted() -> None:  # the fleet settled (Ready True, no not-ready taint) before the next case
        for name, cluster in stack.clusters().items():
            ready = condition(cluster, "Ready")
            assert ready is not None and ready["status"] == "True", (name, ready)
            assert not (cluster["spec"].get("taints") or []), (name, cluster["spec"])

    stack.eventually(ready_untainted, "every cluster Ready and untainted after the cut healed", timeout=40)


def _differ(got: object, old: object) -> None:
    assert got != old, f"still {old!r}"


def test_with_a_minority_live_nobody_is_fenced_until_a_majority_is_back(stack: Stack) -> None:
    """member2 (Push), member4 and member5 cut off at once leave the control plane 2 clusters of 5 live: past the
    bound nobody is fenced and it says why in its log; once member2 is back, 3 of 5 are live and member4 and
    member5, still cut off, are fenced and their jobs move."""
    cases = {"minority-m4": "member4", "minority-m5": "member5"}
    stack.place_jobs(cases)
    jobs = list(cases)
    watch = Watch(stack)
    # one request cuts the three at the same instant: cut one by one, the first one's pending fence could be
    # acknowledged by the others before their own cut, and then fencing it is right (nothing else is)
    stack.sim("fault", "member2", "member4", "member5", "--mode", "partition")
    watch.until(jobs, BOUND + FENCE_LATE)
    assert not watch.fenced and not watch.moved, watch.summary()
    log = stack.layout.log_file.read_text()
    assert "but only 2 of 5 clusters live: not fenced without a strict majority" in log
    healed = watch.now()
    stack.fault("member2", "recover")
    watch.until(jobs, healed + FENCE_LATE + LOAD_SLACK + FAILOVER, done=jobs)
    print(f"minority, then member2 back at {healed:.1f}s: {watch.summary()} (bound {BOUND:g}s)")
    assert watch.fenced.keys() == {"member4", "member5"}, watch.summary()
    assert all(t >= healed for t in watch.fenced.values()), watch.summary()
    assert set(watch.moved) == set(jobs), watch.summary()
    cond = condition(stack.clusters()["member4"], "Fenced")
    assert cond is not None and "3 of 5 clusters live" in cond["message"], cond
    stack.assert_never_twice(stack.jobs)
