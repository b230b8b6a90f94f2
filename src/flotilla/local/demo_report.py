"""What ``flotilla demo`` observed, the checks it must pass, and the summary it prints. Pure.

The demo (:mod:`flotilla.local.demo`) fills :class:`DemoFacts` as the story unfolds; :func:`checks` says which
promises held; :func:`summary_table` is the table printed at the end. There are two stories: the default one
(:data:`AUTOMATIC`: member1 is cut off from the control plane, its guard stops the job and the control plane fences
member1 by itself) and ``--manual-fence`` (:data:`MANUAL`: member1 loses power and an operator fences it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["AUTOMATIC", "MANUAL", "Check", "DemoFacts", "checks", "format_seconds", "ran_again", "ran_behind_cut",
           "render_summary", "stopped_before_fence", "summary_table"]

AUTOMATIC: Final = "automatic"
MANUAL: Final = "manual"


@dataclass
class DemoFacts:
    story: str = AUTOMATIC
    job_id: str = ""
    old_member: str = ""
    new_member: str = ""
    records_at_fault: int | None = None  # what the old copy had processed when it stopped
    newest_checkpoint: str = ""  # the old job's newest completed checkpoint once it stopped
    newest_checkpoint_offset: int | None = None
    injected_label: str | None = None  # the job-id label the new copy was created with
    restored_from: str = ""  # the snapshot the new copy's job started from
    initial_savepoint_path: str = ""  # the new copy's spec.job.initialSavepointPath, written by the control plane
    restored_offset: int | None = None
    records_at_end: int | None = None
    failover_seconds: float | None = None  # fault -> the new copy RUNNING
    stale_copy_removed: bool = False
    overlaps: list[Any] = field(default_factory=list)  # pairs of copies that ran at the same time
    copies_max: int = 0  # the most copies running at one instant
    # --manual-fence (seconds since the power went off)
    detection_seconds: float | None = None  # power off -> Ready False
    taint_seconds: float | None = None  # power off -> NoExecute taint
    eviction_seconds: float | None = None  # power off -> eviction task with the preserved job id
    # the automatic story: the guard's and the control plane's settings (seconds)
    permit_hold: float = 0.0
    fence_after: float = 0.0
    fence_margin: float = 0.0
    # ... wall-clock instants (time.time(), as the members' running history records them)
    cut_at: float | None = None  # the partition
    old_copy_started_at: float | None = None  # the old member's run that was going on at the cut ...
    old_copy_stopped_at: float | None = None  # ... and its end (the guard), from the running history
    old_member_starts: list[float] = field(default_factory=list)  # every run of the job on the old member
    fenced_since: float | None = None  # the out-of-service taint's timeAdded (whole seconds, rounded down)
    # ... what the control plane recorded
    fence_status: str = ""  # the Fenced condition's status and reason, e.g. "True/LeaseExpired"
    fence_events: int = 0  # Events ClusterFencedAutomatically on the old member's Cluster
    fenced_by_hand: bool = False  # the demo ran `flotilla fence` (it never does in this story)
    # ... seconds since the cut, as the demo saw each step
    fence_seconds: float | None = None  # cut -> the out-of-service taint
    heal_seconds: float | None = None  # cut -> the partition healed
    stale_gone_seconds: float | None = None  # cut -> no copy left on the old member

    @property
    def fence_bound(self) -> float:
        return self.permit_hold + self.fence_after + self.fence_margin

    @property
    def guard_stop_seconds(self) -> float | None:
        """Cut -> the guard stopped the old copy, from the running history."""
        if self.cut_at is None or self.old_copy_stopped_at is None:
            return None
        return self.old_copy_stopped_at - self.cut_at


@dataclass(frozen=True)
class Check:
    ok: bool
    what: str
    detail: str


def format_seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _state_checks(f: DemoFacts) -> list[Check]:
    """What both stories promise about the job's state."""
    return [
        Check(bool(f.job_id) and f.injected_label == f.job_id, "the job id moved with the job",
              f"label on the new copy: {f.injected_label!r}, old job id: {f.job_id!r}"),
        Check(bool(f.newest_checkpoint) and f.initial_savepoint_path.removeprefix("file://") == f.newest_checkpoint,
              "the control plane gave the new copy its newest checkpoint",
              f"spec.job.initialSavepointPath {f.initial_savepoint_path or 'unset'}; newest checkpoint "
              f"{f.newest_checkpoint or 'none'} (nothing installed in the members)"),
        Check(bool(f.newest_checkpoint) and f.restored_from == f.newest_checkpoint,
              "the job resumed from its newest checkpoint",
              f"restored from {f.restored_from or 'nothing'}; newest checkpoint {f.newest_checkpoint or 'none'}"),
        Check(f.restored_offset is not None and f.newest_checkpoint_offset is not None
              and f.restored_offset == f.newest_checkpoint_offset,
              "no record lost", f"resumed at record {f.restored_offset}; the checkpoint covered records "
                                f"[0, {f.newest_checkpoint_offset})"),
        Check(f.records_at_end is not None and f.restored_offset is not None and f.records_at_end > f.restored_offset,
              "the job makes progress after the failover",
              f"records processed: {f.records_at_end} (resumed at {f.restored_offset})"),
        Check(not f.overlaps and f.copies_max <= 1, "never two copies running at once",
              f"most copies at one instant: {f.copies_max} (the members' running history)"),
    ]


def ran_behind_cut(f: DemoFacts) -> bool:
    """The old copy was running when the partition began and went on running after it."""
    return (f.cut_at is not None and f.old_copy_started_at is not None and f.old_copy_stopped_at is not None
            and f.old_copy_started_at < f.cut_at < f.old_copy_stopped_at)


def stopped_before_fence(f: DemoFacts) -> bool:
    """The guard stopped the old copy before the control plane fenced its member. The taint's ``timeAdded`` is
    taken before the taint is written and rounded down to the second, so the fence landed at or after it: a stop
    before it is a stop before the fence."""
    return f.old_copy_stopped_at is not None and f.fenced_since is not None \
        and f.old_copy_stopped_at < f.fenced_since


def ran_again(f: DemoFacts) -> list[float]:
    """Runs of the job on the old member that began after the guard stopped it."""
    if f.old_copy_stopped_at is None:
        return []
    return [s for s in f.old_member_starts if s >= f.old_copy_stopped_at]


def _automatic_checks(f: DemoFacts) -> list[Check]:
    old = f.old_member or "the old member"
    stop = f.guard_stop_seconds
    again = ran_again(f)
    fenced = f.fence_status == "True/LeaseExpired" and f.fence_events >= 1 and not f.fenced_by_hand
    return [
        Check(ran_behind_cut(f), f"the job kept running on {old} behind the cut until its guard stopped it",
              f"stopped {format_seconds(stop)} after the cut" if stop is not None else
              f"no run of the job on {old} spanning the cut in the running history"),
        Check(fenced, f"the control plane fenced {old} by itself",
              f"condition Fenced {f.fence_status or 'missing'}, {f.fence_events} Event(s) "
              f"ClusterFencedAutomatically" + ("; fenced by hand" if f.fenced_by_hand else "")),
        Check(stopped_before_fence(f), "the guard stopped the job before the fence",
              f"stopped {format_seconds(stop)} after the cut, fenced {format_seconds(f.fence_seconds)} after it"),
        *_state_checks(f),
        Check(f.stale_copy_removed and not again, "the stale copy was purged without running again",
              f"{old} holds no copy any more" if f.stale_copy_removed and not again else
              f"{old} still holds a copy" if not f.stale_copy_removed else
              f"it ran again on {old} {format_seconds(again[0] - f.cut_at if f.cut_at else None)} after the cut"),
    ]


def _manual_checks(f: DemoFacts) -> list[Check]:
    return [
        *_state_checks(f),
        Check(f.stale_copy_removed, "the stale copy was removed when the failed member came back",
              f"{f.old_member} holds no copy any more" if f.stale_copy_removed else
              f"{f.old_member} still holds a copy"),
    ]


def checks(f: DemoFacts) -> list[Check]:
    return _manual_checks(f) if f.story == MANUAL else _automatic_checks(f)


def _reprocessed(f: DemoFacts) -> str:
    if f.records_at_fault is None or f.restored_offset is None:
        return "-"
    return str(max(0, f.records_at_fault - f.restored_offset))


def _records_rows(f: DemoFacts, before: str) -> list[tuple[str, str]]:
    return [
        (f"records processed {before}", "-" if f.records_at_fault is None else str(f.records_at_fault)),
        ("records covered by the newest checkpoint",
         "-" if f.newest_checkpoint_offset is None else str(f.newest_checkpoint_offset)),
        ("records reprocessed (since that checkpoint)", _reprocessed(f)),
        ("records processed at the end", "-" if f.records_at_end is None else str(f.records_at_end)),
        ("copies running at once", "never two" if not f.overlaps and f.copies_max <= 1 else str(f.copies_max)),
    ]


def summary_table(f: DemoFacts) -> list[tuple[str, str]]:
    if f.story == MANUAL:
        return [
            ("failed member", f.old_member or "-"),
            ("new member", f.new_member or "-"),
            ("job id", f.job_id or "-"),
            ("detection (power off -> Ready=False)", format_seconds(f.detection_seconds)),
            ("taint (power off -> not-ready:NoExecute)", format_seconds(f.taint_seconds)),
            ("eviction (power off -> task with job id)", format_seconds(f.eviction_seconds)),
            ("failover (power off -> job RUNNING again)", format_seconds(f.failover_seconds)),
            *_records_rows(f, "before the outage"),
        ]
    old, new = f.old_member or "the old member", f.new_member or "the new member"
    bound = (f"{f.permit_hold:g} + {f.fence_after:g} + {f.fence_margin:g} = {f.fence_bound:g} s"
             if f.fence_bound else "-")
    return [
        ("cut-off member", old),
        ("new member", f.new_member or "-"),
        ("job id", f.job_id or "-"),
        ("fence bound (permit-hold + fence-after + margin)", bound),
        (f"cut -> guard stopped the job on {old}", format_seconds(f.guard_stop_seconds)),
        (f"cut -> {old} fenced automatically", format_seconds(f.fence_seconds)),
        (f"cut -> job RUNNING on {new}", format_seconds(f.failover_seconds)),
        ("cut -> partition healed", format_seconds(f.heal_seconds)),
        (f"cut -> stale copy gone from {old}", format_seconds(f.stale_gone_seconds)),
        *_records_rows(f, "when the guard stopped it"),
    ]


def render_summary(f: DemoFacts) -> str:
    rows = summary_table(f)
    width = max(len(k) for k, _ in rows)
    lines = [f"  {k.ljust(width)}  {v}" for k, v in rows]
    lines.append("")
    for c in checks(f):
        lines.append(f"  [{'ok' if c.ok else 'FAILED'}] {c.what}: {c.detail}")
    return "\n".join(lines)
