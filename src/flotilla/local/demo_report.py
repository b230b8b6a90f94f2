"""What ``flotilla demo`` observed, the checks it must pass, and the summary it prints. Pure.

The demo (:mod:`flotilla.local.demo`) fills :class:`DemoFacts` as the story unfolds; :func:`checks` says which
promises held; :func:`summary_table` is the table printed at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Check", "DemoFacts", "checks", "format_seconds", "summary_table"]


@dataclass
class DemoFacts:
    job_id: str = ""
    old_member: str = ""
    new_member: str = ""
    records_at_fault: int | None = None  # what the old copy had processed when its member lost power
    newest_checkpoint: str = ""  # the old job's newest completed checkpoint after the outage
    newest_checkpoint_offset: int | None = None
    injected_label: str | None = None  # the job-id label the new copy was created with
    restored_from: str = ""  # the snapshot the new copy's job started from
    restored_offset: int | None = None
    records_at_end: int | None = None
    detection_seconds: float | None = None  # power off -> Ready False
    taint_seconds: float | None = None  # power off -> NoExecute taint
    eviction_seconds: float | None = None  # power off -> eviction task with the preserved job id
    failover_seconds: float | None = None  # power off -> the new copy RUNNING
    stale_copy_removed: bool = False
    overlaps: list[Any] = field(default_factory=list)  # pairs of copies that ran at the same time
    copies_max: int = 0  # the most copies running at one instant


@dataclass(frozen=True)
class Check:
    ok: bool
    what: str
    detail: str


def format_seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def checks(f: DemoFacts) -> list[Check]:
    out = [
        Check(bool(f.job_id) and f.injected_label == f.job_id, "the job id moved with the job",
              f"label on the new copy: {f.injected_label!r}, old job id: {f.job_id!r}"),
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
              f"most copies at one instant: {f.copies_max}"),
        Check(f.stale_copy_removed, "the stale copy was removed when the failed member came back",
              f"{f.old_member} holds no copy any more" if f.stale_copy_removed else
              f"{f.old_member} still holds a copy"),
    ]
    return out


def _reprocessed(f: DemoFacts) -> str:
    if f.records_at_fault is None or f.restored_offset is None:
        return "-"
    return str(max(0, f.records_at_fault - f.restored_offset))


def summary_table(f: DemoFacts) -> list[tuple[str, str]]:
    return [
        ("failed member", f.old_member or "-"),
        ("new member", f.new_member or "-"),
        ("job id", f.job_id or "-"),
        ("detection (power off -> Ready=False)", format_seconds(f.detection_seconds)),
        ("taint (power off -> not-ready:NoExecute)", format_seconds(f.taint_seconds)),
        ("eviction (power off -> task with job id)", format_seconds(f.eviction_seconds)),
        ("failover (power off -> job RUNNING again)", format_seconds(f.failover_seconds)),
        ("records processed before the outage", "-" if f.records_at_fault is None else str(f.records_at_fault)),
        ("records covered by the newest checkpoint",
         "-" if f.newest_checkpoint_offset is None else str(f.newest_checkpoint_offset)),
        ("records reprocessed (since that checkpoint)", _reprocessed(f)),
        ("records processed at the end", "-" if f.records_at_end is None else str(f.records_at_end)),
        ("copies running at once", "never two" if not f.overlaps and f.copies_max <= 1 else str(f.copies_max)),
    ]


def render_summary(f: DemoFacts) -> str:
    rows = summary_table(f)
    width = max(len(k) for k, _ in rows)
    lines = [f"  {k.ljust(width)}  {v}" for k, v in rows]
    lines.append("")
    for c in checks(f):
        lines.append(f"  [{'ok' if c.ok else 'FAILED'}] {c.what}: {c.detail}")
    return "\n".join(lines)
