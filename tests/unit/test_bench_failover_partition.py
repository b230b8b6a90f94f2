"""``flotilla bench failover --fault partition``: the usage it refuses, the bound its timings give, and the
numbers and safety checks it derives from what the driver saw and from the members' running history."""

from __future__ import annotations

from typing import Any

import pytest

from flotilla.bench.failover import FailoverParams, result_problems, usage_errors
from flotilla.bench.partition import (
    DEFAULT_TIMINGS,
    PartitionTimings,
    partition_problems,
    partition_summary,
    timing_errors,
    workload_running,
)
from flotilla.bench.report import partition_lines
from flotilla.bench.stats import Timeline

T0 = 1_000_000.0  # the cut, wall clock
SHORT = PartitionTimings(fence_after=2, permit_hold=3, fence_margin=2, monitor_period=1, lease_duration=4)


def test_the_default_timings_fence_47s_after_the_last_renewal_seen_and_by_54s() -> None:
    t = DEFAULT_TIMINGS
    # pending at 15 s, then ttl 2 + fence-after 15 + margin 15 after the acknowledgements (2 s allowed), monitor 5
    assert (t.bound, t.due, t.fence_by, t.lease_renew_interval, t.fence_not_before) == (45.0, 47.0, 54.0, 10.0,
                                                                                        37.0)
    assert t.guard_stop_by == 30.5
    assert timing_errors(t) == []


def test_a_permit_hold_not_longer_than_the_lease_renew_interval_is_refused_naming_both_flags() -> None:
    errs = timing_errors(PartitionTimings(permit_hold=10, lease_duration=40))
    assert len(errs) == 1 and "--permit-hold (10s)" in errs[0] and "--lease-duration 40s" in errs[0]
    assert timing_errors(PartitionTimings(permit_hold=3, lease_duration=4)) == []


def test_a_fence_after_not_longer_than_the_permit_renew_interval_is_refused() -> None:
    errs = timing_errors(PartitionTimings(fence_after=1))
    assert len(errs) == 1 and "--fence-after (1s)" in errs[0]


def test_partition_with_gracefully_or_two_members_is_a_usage_error() -> None:
    errs = usage_errors(FailoverParams(fault="partition", purge_mode="Gracefully", members=2))
    assert any("needs --purge-mode Directly" in e for e in errs), errs
    assert any("needs --members 3 or more" in e for e in errs), errs
    assert usage_errors(FailoverParams(fault="partition")) == []


def test_partition_timings_without_the_partition_are_a_usage_error() -> None:
    errs = usage_errors(FailoverParams(fault="taint"), given=["fence_after", "lease_duration"])
    assert errs == ["--fence-after, --lease-duration apply only to --fault partition (the guarded Pull member's "
                    "timings)"]
    assert usage_errors(FailoverParams(fault="taint")) == []


def test_the_fence_margin_as_a_controller_flag_is_refused_with_partition() -> None:
    errs = usage_errors(FailoverParams(fault="partition", controller_flags=["--fence-margin=3s"]))
    assert len(errs) == 1 and "--controller-flag=--fence-margin=3s" in errs[0]
    assert usage_errors(FailoverParams(fault="taint", controller_flags=["--fence-margin=3s"])) == []


def test_a_copy_runs_when_its_job_is_running_or_a_replica_is_ready() -> None:
    assert workload_running("FlinkDeployment", {"status": {"jobStatus": {"state": "RUNNING"}}})
    assert not workload_running("FlinkDeployment", {"status": {"jobStatus": {"state": "FAILED"}}})
    assert workload_running("StatefulSet", {"status": {"readyReplicas": 1}})
    assert not workload_running("Deployment", {"status": {"replicas": 1}})
    assert not workload_running("Deployment", {"status": {"readyReplicas": "x"}})
    assert not workload_running("Deployment", {})


def _timeline(name: str, stopped: float | None, running: float | None, kind: str = "StatefulSet") -> Timeline:
    return Timeline(name=name, kind=kind, binding=f"{name}-{kind.lower()}", old_stopped=stopped, running=running,
                    healthy=None if running is None else running + 0.1)


def _run(name: str, member: str, start: float, end: float | None) -> dict[str, Any]:
    return {"kind": "StatefulSet", "namespace": "bench", "name": name, "member": member, "uid": f"{member}-{name}",
            "start": start, "end": end}


def _summary(timelines: list[Timeline], fenced: float | None, intervals: list[dict[str, Any]]) -> dict[str, Any]:
    return partition_summary(timelines, T0, fenced, intervals, failed="member1", namespace="bench", timings=SHORT)


def test_a_clean_partition_gives_every_number_and_no_problem() -> None:
    tls = [_timeline("w0", T0 + 3.0, T0 + 7.0), _timeline("w1", T0 + 3.5, T0 + 8.0)]
    runs = [_run("w0", "member1", T0 - 60, T0 + 2.9), _run("w0", "member2", T0 + 7.0, None),
            _run("w1", "member1", T0 - 60, T0 + 3.4), _run("w1", "member3", T0 + 8.0, None),
            _run("other", "member1", T0 - 60, None) | {"namespace": "elsewhere"}]
    s = _summary(tls, T0 + 6.5, runs)
    assert s["guard_stopped_s"] == {"count": 2, "p50": 3.0, "p95": 3.5, "max": 3.5}
    assert s["guard_stopped_history_s"]["count"] == 2 and s["guard_stopped_history_s"]["max"] == 3.4
    assert s["fenced_s"] == 6.5 and s["fence_within_bound"] is True and s["fenced_after_guard_stopped"] is True
    assert s["new_copy_running_s"]["count"] == 2 and s["all_running_s"] == 8.0
    assert (s["overlap_count"], s["running_at_fence_count"], s["seen_running_before_stop_count"]) == (0, 0, 0)
    assert partition_problems(s, 2) == []
    lines = "\n".join(partition_lines(s, 2))
    assert "fenced automatically    6.50 s; expected between 8 and 12 s" in lines
    assert "new copy running        7.00 / 8.00 / 8.00 s (2/2); all running after 8.00 s" in lines


def test_two_copies_at_once_in_the_history_fail_the_run_loudly() -> None:
    tls = [_timeline("w0", T0 + 3.0, T0 + 7.0)]
    runs = [_run("w0", "member1", T0 - 60, T0 + 7.5), _run("w0", "member2", T0 + 7.0, None)]
    s = _summary(tls, T0 + 6.5, runs)
    assert s["overlap_count"] == 1
    assert s["running_at_fence"] == ["StatefulSet/w0"]  # it also still ran when member1 was fenced
    problems = partition_problems(s, 1)
    assert any(p.startswith("TWO COPIES RAN AT ONCE: 1 overlapping pairs") for p in problems), problems
    assert any("still ran in member1 when it was fenced" in p for p in problems), problems
    found = result_problems({"all_recovered": True, "state_injected": 1, "max_concurrent_copies": 2,
                             "partition": s}, FailoverParams(workloads=1, fault="partition", kind="statefulset"))
    assert any("TWO COPIES RAN AT ONCE" in p for p in found) and any("2 copies" in p for p in found), found


def test_no_fence_no_guard_stop_or_a_new_copy_seen_before_the_stop_are_problems() -> None:
    tls = [_timeline("w0", None, T0 + 7.0), _timeline("w1", T0 + 3.0, None)]
    s = _summary(tls, None, [])
    problems = partition_problems(s, 2)
    assert "member1 was never fenced automatically (no out-of-service taint seen)" in problems
    assert "the guard was seen stopping 1 of 2 workloads in member1" in problems
    assert "1 of 2 new copies were seen running" in problems
    assert any(p.startswith("1 new copies were seen running before the old copy") for p in problems), problems
    assert s["all_running_s"] is None and "never" in "\n".join(partition_lines(s, 2))


def test_the_links_target_is_host_and_port_or_a_clear_error() -> None:
    from flotilla.bench.link import parse_target

    assert parse_target("127.0.0.1:6443") == ("127.0.0.1", 6443)
    for bad in ("127.0.0.1", ":80", "host:0", "host:70000", "host:http"):
        with pytest.raises(ValueError, match="--target wants HOST:PORT"):
            parse_target(bad)
