"""What must hold after a fault trial of ``flotilla soak partition`` (pure: snapshots in, problems out).

A trial places a few ``purgeMode: Directly`` workloads with state preservation, injects faults, heals them and
lets the fleet settle. It then reads each workload's end (its binding's clusters, its objects in every member)
and the members' running history (:mod:`flotilla.member.history`), and :func:`trial_problems` names every
broken promise:

* **never two copies at once**: no two running intervals of one workload, from different copies (member, uid),
  share an instant;
* **nothing lost**: the binding targets exactly one cluster, the workload's object is there and nowhere else, and
  the history shows that copy running now (an open interval in that member);
* **state kept**: a workload that ended in another member than the one it ran in before the faults carries the
  state its first copy reported (the state-preservation label: a Flink job's id, a StatefulSet's replicas), and a
  Flink job that moved restored from a snapshot rather than starting empty.

:func:`workload_timeline` reads, from the same history, when a workload's first copy stopped after the cut and
when a copy first ran in another member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flotilla.member.history import Interval, overlaps

__all__ = ["WorkloadOutcome", "counts_by_member", "loss_problems", "overlap_problems", "placement_problems",
           "state_problems", "trial_problems", "workload_problems", "workload_timeline"]

FLINK_KIND = "FlinkDeployment"
NOT_RESTORED = ("", "none")


@dataclass
class WorkloadOutcome:
    """One workload of a trial: where it ran before the faults, what state it had, and its end as read."""

    kind: str
    namespace: str
    name: str
    home: str  # the member it ran in before the faults
    state_label: str  # the state-preservation rule's aliasLabelName
    expected_state: str | None  # what the first copy reported (None: never seen, nothing to compare)
    clusters: list[str] = field(default_factory=list)  # the binding's spec.clusters at the end
    objects: dict[str, dict[str, str]] = field(default_factory=dict)  # member -> the object's labels at the end
    restored_from: dict[str, str] = field(default_factory=dict)  # member -> a Flink copy's restored-from annotation

    @property
    def workload(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _of(w: WorkloadOutcome, intervals: Iterable[Interval]) -> list[Interval]:
    return [iv for iv in intervals if iv.workload == w.workload]


def _fmt(iv: Interval) -> str:
    end = "running" if iv.end is None else f"{iv.end:.2f}"
    return f"{iv.member} [{iv.start:.2f}, {end}]"


def overlap_problems(w: WorkloadOutcome, intervals: Iterable[Interval]) -> list[str]:
    """Two copies of ``w`` running at one instant, as the running history recorded them."""
    return [f"{w.label}: two copies ran at once: {_fmt(a)} and {_fmt(b)}" for a, b in overlaps(_of(w, intervals))]


def placement_problems(w: WorkloadOutcome, intervals: Iterable[Interval]) -> list[str]:
    """``w`` not running exactly once, where its binding places it (lost, or a copy left behind)."""
    if len(w.clusters) != 1:
        return [f"{w.label}: lost: its binding targets {w.clusters or 'no cluster'}, not exactly one"]
    target = w.clusters[0]
    found = []
    if sorted(w.objects) != [target]:
        found.append(f"{w.label}: copies in {sorted(w.objects) or 'no member'}, expected only in {target}")
    if not any(iv.member == target and iv.end is None for iv in _of(w, intervals)):
        found.append(f"{w.label}: lost: not running in {target}, where its binding places it")
    return found


def loss_problems(workloads: Iterable[WorkloadOutcome], intervals: Iterable[Interval]) -> list[str]:
    """:func:`placement_problems` of every workload (what a settling fleet still lacks)."""
    ivs = list(intervals)
    return [problem for w in workloads for problem in placement_problems(w, ivs)]


def state_problems(w: WorkloadOutcome) -> list[str]:
    """A workload that ended in another member than its home without the state its first copy reported."""
    found: list[str] = []
    target = w.clusters[0] if len(w.clusters) == 1 else ""
    if target and target != w.home and target in w.objects:
        if w.expected_state is None:
            found.append(f"{w.label}: moved {w.home} -> {target}, but its state was never seen before the faults")
        else:
            got = w.objects[target].get(w.state_label)
            if got != w.expected_state:
                found.append(f"{w.label}: moved {w.home} -> {target} without its state: {w.state_label}={got!r}, "
                             f"the first copy reported {w.expected_state!r}")
        if w.kind == FLINK_KIND and w.restored_from.get(target, "") in NOT_RESTORED:
            found.append(f"{w.label}: moved {w.home} -> {target} but its job did not restore from a snapshot "
                         f"(restored-from {w.restored_from.get(target, '')!r})")
    return found


def workload_problems(w: WorkloadOutcome, intervals: Iterable[Interval]) -> list[str]:
    """Every broken promise of one workload at the end of a trial (overlap, loss, state)."""
    mine = _of(w, intervals)
    return overlap_problems(w, mine) + placement_problems(w, mine) + state_problems(w)


def trial_problems(workloads: Iterable[WorkloadOutcome], intervals: Iterable[Interval]) -> list[str]:
    """Every broken promise of a trial's workloads, given the members' whole running history."""
    ivs = list(intervals)
    found: list[str] = []
    for w in workloads:
        found += workload_problems(w, ivs)
    return found


def workload_timeline(w: WorkloadOutcome, intervals: Iterable[Interval], cut: float) -> dict[str, float | None]:
    """Seconds after ``cut`` (wall clock) until ``w``'s copy in its home member stopped running, and until a copy
    first ran in another member (None: it did not)."""
    mine = _of(w, intervals)
    stops = [iv.end for iv in mine if iv.member == w.home and iv.end is not None and iv.end >= cut]
    elsewhere = [iv.start for iv in mine if iv.member != w.home and iv.start >= cut]
    return {"stopped_s": round(min(stops) - cut, 2) if stops else None,
            "running_elsewhere_s": round(min(elsewhere) - cut, 2) if elsewhere else None}


def counts_by_member(w: WorkloadOutcome, intervals: Iterable[Interval]) -> Mapping[str, int]:
    """How many running intervals of ``w`` the history holds per member (what the overlap check looked at)."""
    out: dict[str, int] = {}
    for iv in _of(w, intervals):
        out[iv.member] = out.get(iv.member, 0) + 1
    return out
