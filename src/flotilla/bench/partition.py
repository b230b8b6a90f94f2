"""``flotilla bench failover --fault partition``: the timings, what they bound, and the numbers of one run (pure:
no I/O).

member1 is a guarded Pull member: its agent (``flotilla agent --guard``) keeps the run permit in member1 while it
holds its Lease with the control plane, and member1's guard stops the workloads labelled
``guard.flotilla.io/guarded=true`` once the permit has not changed for ``fence-after``. The fault cuts the agent's
link to the control plane and nothing else is done: the guard stops the workloads, the control plane fences member1
by itself once it has seen no Lease renewal for ``permit-hold + fence-after + fence-margin`` (docs/fencing.md), and
the failovers (``purgeMode: Directly``) create the new copies elsewhere.

Everything is timed from the cut, on the driver's wall clock (``time.time()``, which the members' running history
uses too):

* **guard stopped**: when the driver's watch on member1 saw the workload stop running there (a Flink job no longer
  RUNNING, no ready replica left), and, for the kinds with a running history (StatefulSet, FlinkDeployment), when
  the member recorded the stop;
* **fenced**: when the driver's watch saw the ``cluster.flotilla.io/out-of-service:NoExecute`` taint on member1;
* **new copy running**: when the driver's watch on the other members saw the new copy running (then, as for every
  fault, Healthy on the binding).

Every agent speaks the peer protocol, so the control plane first marks member1 fence-pending (``permit-hold``
without a renewal), the other agents acknowledge it at once, and the fence is due ``peer-report-ttl + fence-after +
fence-margin`` after the last acknowledgement, and not before the bound. The control plane counts from the last
renewal it saw, which came up to one Lease renew interval *before* the cut, so the fence lands between ``due -
renew interval`` and ``due + the acknowledgements' delivery + monitor period`` after the cut (plus the time its
watch takes to deliver the taint).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from flotilla.bench.stats import Timeline, percentile

__all__ = [
    "DEFAULT_TIMINGS",
    "LEASE_RENEW_FRACTION",
    "PartitionTimings",
    "partition_problems",
    "partition_summary",
    "seconds_summary",
    "timing_errors",
    "workload_running",
]

#: the agent's --cluster-lease-renew-interval-fraction (its default, which the benchmark keeps)
LEASE_RENEW_FRACTION: Final = 0.25
#: how often a simulated member's guard reads its permit (flotilla.member.guard's default)
GUARD_POLL: Final = 0.5
#: the agent's --permit-renew-interval (its default, which the benchmark keeps)
PERMIT_RENEW_INTERVAL: Final = 1.0
#: the agents' --peer-report-ttl (their default, which the benchmark keeps)
PEER_REPORT_TTL: Final = 2.0
#: what the acknowledgements of the pending mark may take to reach the control plane (watch, the agents' Lease
#: writes, the control plane's watch of them)
ACK_ALLOWANCE: Final = 2.0


@dataclass(frozen=True)
class PartitionTimings:
    """The settings that decide when member1 is fenced (seconds). The defaults are the product's: the agent's
    ``--fence-after``, ``--permit-hold`` and ``--cluster-lease-duration``, the controller-manager's
    ``--fence-margin`` and ``--cluster-monitor-period``."""

    fence_after: float = 15.0
    permit_hold: float = 15.0
    fence_margin: float = 15.0
    monitor_period: float = 5.0
    lease_duration: float = 40.0

    @property
    def lease_renew_interval(self) -> float:
        return self.lease_duration * LEASE_RENEW_FRACTION

    @property
    def bound(self) -> float:
        """No Lease renewal seen for this long, and the control plane fences (docs/fencing.md)."""
        return self.permit_hold + self.fence_after + self.fence_margin

    @property
    def due(self) -> float:
        """When the fence is due after the last renewal seen, with acknowledgements that came at once: the pending
        mark at permit-hold, then ttl + fence-after + margin, and never before the bound."""
        return max(self.bound, self.permit_hold + PEER_REPORT_TTL + self.fence_after + self.fence_margin)

    @property
    def fence_by(self) -> float:
        """The latest the fence is due after the last renewal the control plane saw (so, after the cut)."""
        return self.due + ACK_ALLOWANCE + self.monitor_period

    @property
    def fence_not_before(self) -> float:
        """The earliest the fence can come after the cut: the last renewal seen was at most one renew interval
        before it."""
        return max(0.0, self.due - self.lease_renew_interval)

    @property
    def guard_stop_by(self) -> float:
        """The latest the guard stops the workloads after the cut, without the permit write in flight and the
        simulator's reaction: the permit is renewed until permit-hold after the last successful renewal (at the
        latest, the cut), then the guard waits fence-after from the last change it saw, read every poll."""
        return self.permit_hold + self.fence_after + GUARD_POLL

    def to_dict(self) -> dict[str, float]:
        return {"fence_after_s": self.fence_after, "permit_hold_s": self.permit_hold,
                "fence_margin_s": self.fence_margin, "monitor_period_s": self.monitor_period,
                "lease_duration_s": self.lease_duration, "lease_renew_interval_s": self.lease_renew_interval,
                "guard_poll_s": GUARD_POLL, "bound_s": self.bound, "due_s": self.due, "fence_by_s": self.fence_by,
                "fence_not_before_s": self.fence_not_before, "guard_stop_by_s": self.guard_stop_by}


DEFAULT_TIMINGS: Final = PartitionTimings()


def timing_errors(t: PartitionTimings) -> list[str]:
    """What makes these timings unusable, in the benchmark's flag names (empty: usable)."""
    errs = []
    for flag, value in (("--fence-after", t.fence_after), ("--permit-hold", t.permit_hold),
                        ("--fence-margin", t.fence_margin), ("--cluster-monitor-period", t.monitor_period),
                        ("--lease-duration", t.lease_duration)):
        if not (value > 0 and math.isfinite(value)):
            errs.append(f"{flag} must be a number of seconds greater than 0, got {value:g}")
    if errs:
        return errs
    if t.permit_hold <= t.lease_renew_interval:
        errs.append(f"--permit-hold ({t.permit_hold:g}s) must be longer than the agent's Lease renew interval "
                    f"({t.lease_renew_interval:g}s = --lease-duration {t.lease_duration:g}s x "
                    f"{LEASE_RENEW_FRACTION:g}), or the permit lapses between two renewals: raise --permit-hold or "
                    f"lower --lease-duration")
    if t.fence_after <= PERMIT_RENEW_INTERVAL:
        errs.append(f"--fence-after ({t.fence_after:g}s) must be longer than the agent's permit renew interval "
                    f"({PERMIT_RENEW_INTERVAL:g}s), or the guard stops the workloads between two renewals")
    return errs


def workload_running(kind: str, obj: Mapping[str, Any]) -> bool:
    """Whether a member's copy runs, from its status: a FlinkDeployment's job RUNNING, else a ready replica."""
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        return False
    if kind == "FlinkDeployment":
        job = status.get("jobStatus") or {}
        return isinstance(job, Mapping) and job.get("state") == "RUNNING"
    try:
        return int(status.get("readyReplicas") or 0) >= 1
    except (TypeError, ValueError):
        return False


def seconds_summary(samples: Sequence[float]) -> dict[str, float | int]:
    """``{count, p50, p95, max}`` of durations in seconds (rounded to ms)."""
    return {"count": len(samples), "p50": round(percentile(samples, 50), 3), "p95": round(percentile(samples, 95), 3),
            "max": round(max(samples, default=0.0), 3)}


def _since(t0: float, times: Iterable[float | None]) -> list[float]:
    return [max(0.0, t - t0) for t in times if t is not None]


def partition_summary(timelines: Sequence[Timeline], t0: float, fenced_at: float | None,
                      intervals: Iterable[Mapping[str, Any]], *, failed: str, namespace: str,
                      timings: PartitionTimings) -> dict[str, Any]:
    """The partition's numbers from what the driver saw (``timelines``; ``fenced_at``: when it saw the taint) and the
    members' running ``intervals`` (``kind namespace name member uid start end`` dicts), all from the cut at ``t0``.

    Safety, from the running history: ``running_at_fence`` are the copies in ``failed`` that were running at the cut
    and had not stopped by the time the fence was seen; ``overlaps`` are pairs of copies of one workload, in two
    members, that ran at the same instant. ``seen_running_before_stop`` are workloads whose new copy the driver saw
    running before it saw the old one stop (every kind, history or not)."""
    from flotilla.member.history import overlaps

    ours = [dict(iv) for iv in intervals if iv.get("namespace") == namespace]
    at_cut = [iv for iv in ours if iv.get("member") == failed and float(iv["start"]) <= t0
              and (iv.get("end") is None or float(iv["end"]) > t0)]
    history_stops = [float(iv["end"]) for iv in at_cut if iv.get("end") is not None]
    still_running = [f"{iv['kind']}/{iv['name']}" for iv in at_cut if iv.get("end") is None]
    running_at_fence = sorted(
        f"{iv['kind']}/{iv['name']}" for iv in at_cut
        if fenced_at is not None and (iv.get("end") is None or float(iv["end"]) > fenced_at))
    pairs = overlaps(ours)
    stopped = _since(t0, (tl.old_stopped for tl in timelines))
    running = _since(t0, (tl.running for tl in timelines))
    early = sorted(f"{tl.kind}/{tl.name}" for tl in timelines
                   if tl.running is not None and (tl.old_stopped is None or tl.running < tl.old_stopped))
    fenced_s = None if fenced_at is None else round(max(0.0, fenced_at - t0), 3)
    return {
        "timings": timings.to_dict(),
        "guard_stopped_s": seconds_summary(stopped),
        "guard_stopped_history_s": seconds_summary(_since(t0, history_stops)),
        "fenced_s": fenced_s,
        "fenced_after_guard_stopped": None if fenced_s is None or not stopped else fenced_s >= max(stopped),
        "new_copy_running_s": seconds_summary(running),
        "all_running_s": round(max(running), 3) if len(running) == len(timelines) and running else None,
        "healthy_s": seconds_summary(_since(t0, (tl.healthy for tl in timelines))),
        "fence_within_bound": None if fenced_s is None else fenced_s <= timings.fence_by,
        "copies_in_history": len(at_cut),
        "still_running_in_failed": still_running[:20],
        "running_at_fence": running_at_fence[:20],
        "running_at_fence_count": len(running_at_fence),
        "overlaps": [[a.to_dict(), b.to_dict()] for a, b in pairs[:10]],
        "overlap_count": len(pairs),
        "seen_running_before_stop": early[:20],
        "seen_running_before_stop_count": len(early),
    }


def partition_problems(summary: Mapping[str, Any], workloads: int) -> list[str]:
    """What went wrong in a partition run (empty: every number was produced and the safety checks held)."""
    found = []
    if summary.get("fenced_s") is None:
        found.append("member1 was never fenced automatically (no out-of-service taint seen)")
    stopped = (summary.get("guard_stopped_s") or {}).get("count", 0)
    if stopped != workloads:
        found.append(f"the guard was seen stopping {stopped} of {workloads} workloads in member1")
    running = (summary.get("new_copy_running_s") or {}).get("count", 0)
    if running != workloads:
        found.append(f"{running} of {workloads} new copies were seen running")
    if summary.get("overlap_count"):
        first = summary["overlaps"][0]
        found.append(f"TWO COPIES RAN AT ONCE: {summary['overlap_count']} overlapping pairs in the running history, "
                     f"e.g. {first[0]['kind']}/{first[0]['name']} in {first[0]['member']} and {first[1]['member']}")
    if summary.get("running_at_fence_count"):
        found.append(f"{summary['running_at_fence_count']} copies still ran in member1 when it was fenced "
                     f"(running history): {', '.join(summary['running_at_fence'][:5])}")
    if summary.get("seen_running_before_stop_count"):
        found.append(f"{summary['seen_running_before_stop_count']} new copies were seen running before the old copy "
                     f"in member1 was seen stopped: {', '.join(summary['seen_running_before_stop'][:5])}")
    return found
