"""``flotilla bench failover --fault partition`` produces its numbers and its safety checks hold.

A handful of mixed workloads on member1, a guarded Pull member, with short timings; the benchmark cuts member1's
agent off the control plane and does nothing else. The run must exit 0 with every number of the partition produced
(the guard's stop, the automatic fence, each new copy running), every copy in member1 stopped before the fence and
never two copies of one workload running at once in the members' running history. The bounds come from the
documented formula (docs/fencing.md) plus explicit slack, never from one run's timing.

Nonsense combinations are refused before anything starts, with exit 2.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_bench_failover_smoke import bench, check_invariants

FLOTILLA = str(Path(sys.executable).parent / "flotilla")

WORKLOADS = 6  # two of each kind: the StatefulSets and Flink jobs have a running history
# the timings given to the benchmark (seconds): the agent's Lease renewed every second
FENCE_AFTER, PERMIT_HOLD, FENCE_MARGIN, MONITOR_PERIOD, LEASE_DURATION = 2.0, 3.0, 2.0, 1.0, 4.0
RENEW_INTERVAL = LEASE_DURATION / 4
BOUND = PERMIT_HOLD + FENCE_AFTER + FENCE_MARGIN  # no renewal seen for this long and the control plane fences
# what the formula leaves out: watch delivery on a loaded machine, and a fence-pending phase before the fence
# (up to renew interval + 5 s)
FENCE_SLACK = RENEW_INTERVAL + 5.0 + 10.0
FAILOVER_SLACK = 20.0  # from the fence to every new copy running (eviction, Work released, new copy created)
WATCH_SLACK = 1.0  # how much later the driver may see one event than another that came after it
TIMINGS = ("--fence-after", f"{FENCE_AFTER:g}", "--permit-hold", f"{PERMIT_HOLD:g}", "--fence-margin",
           f"{FENCE_MARGIN:g}", "--cluster-monitor-period", f"{MONITOR_PERIOD:g}", "--lease-duration",
           f"{LEASE_DURATION:g}")


@pytest.mark.timeout(150)
def test_partitioned_guarded_pull_member_is_fenced_after_its_guard_stopped_and_never_runs_twice(
        tmp_path: Path) -> None:
    result = bench(tmp_path, "--workloads", str(WORKLOADS), "--fault", "partition", *TIMINGS)
    check_invariants(result, WORKLOADS)
    assert result["pull"] is True and "--fault partition" in result["command"]
    part = result["partition"]
    assert part["timings"]["bound_s"] == BOUND

    stopped, running = part["guard_stopped_s"], part["new_copy_running_s"]
    for summary in (stopped, running, part["healthy_s"]):
        assert summary["count"] == WORKLOADS, summary
        assert 0 < summary["p50"] <= summary["p95"] <= summary["max"], summary
    assert part["all_running_s"] == running["max"]
    assert part["guard_stopped_history_s"]["count"] == part["copies_in_history"] == 4  # StatefulSets, Flink jobs

    # the fence: after the guard stopped every copy (the history's stop is exact, and the fence is seen after it
    # happened), within the documented bound; the new copies after the fence
    fenced = part["fenced_s"]
    assert isinstance(fenced, float), part
    assert fenced <= BOUND + MONITOR_PERIOD + FENCE_SLACK, part
    assert part["guard_stopped_history_s"]["max"] <= fenced, part
    assert stopped["max"] <= fenced + WATCH_SLACK, part
    assert fenced <= running["p50"] + WATCH_SLACK and running["max"] <= fenced + FAILOVER_SLACK, part
    cond = part["fenced_condition"]
    assert (cond["reason"], cond["status"]) == ("LeaseExpired", "True") and "2 of 3 clusters live" in cond["message"]
    unseen = re.search(r"seen for ([0-9.]+)s \(bound: ", cond["message"])
    assert unseen is not None and float(unseen.group(1)) >= BOUND, cond["message"]

    # safety, from the running history
    assert part["overlap_count"] == 0 and part["overlaps"] == [], part["overlaps"]
    assert part["running_at_fence_count"] == 0 and part["seen_running_before_stop_count"] == 0, part
    assert result["max_concurrent_copies"] == 1


@pytest.mark.parametrize("argv, message", [
    (["--fault", "partition", "--purge-mode", "Gracefully"], "needs --purge-mode Directly"),
    (["--fault", "partition", "--members", "2"], "needs --members 3 or more"),
    (["--fence-after", "3"], "--fence-after applies only to --fault partition"),
    (["--fault", "partition", "--permit-hold", "5"], "must be longer than the agent's Lease renew interval"),
    (["--fault", "partition", "--controller-flag=--cluster-monitor-period=1s"], "set it with the benchmark's"),
    (["--workloads", "0"], "--workloads must be at least 1"),
])
def test_a_senseless_combination_is_refused_with_exit_2(argv: list[str], message: str) -> None:
    r = subprocess.run([FLOTILLA, "bench", "failover", *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert message in r.stderr and "usage: flotilla bench failover" in r.stderr, r.stderr
