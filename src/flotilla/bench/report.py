"""The text report of ``flotilla bench failover`` (pure: a result document in, lines out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flotilla.bench.stats import STAGES

__all__ = ["fmt_ms", "latency_cells", "partition_lines", "profile_lines", "render_report", "stage_table", "step_rows",
           "text_table"]


def fmt_ms(value: Any) -> str:
    """Milliseconds as a whole number with thousands separators; ``-`` when there is none."""
    return f"{float(value):,.0f}" if isinstance(value, (int, float)) else "-"


def latency_cells(s: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """p50, p90, p99 and max of a latency summary (:func:`flotilla.bench.stats.latency_summary`), in ms."""
    return fmt_ms(s.get("p50")), fmt_ms(s.get("p90")), fmt_ms(s.get("p99")), fmt_ms(s.get("max"))


def text_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` (the first one the header) as aligned lines: the first column left, the others right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for i, r in enumerate(rows):
        out.append("  ".join([r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))]))
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def stage_table(result: dict[str, Any]) -> list[str]:
    """Stage | reached | p50 | p90 | p99 | max (ms from the fault), then the per-step durations."""
    n = result.get("workloads", 0)
    rows: list[tuple[str, ...]] = [("stage (ms since the fault)", "reached", "p50", "p90", "p99", "max")]
    stages = result.get("stages_ms") or {}
    for key, label in STAGES:
        s = stages.get(key) or {}
        rows.append((label, f"{s.get('count', 0)}/{n}", *latency_cells(s)))
    return text_table(rows + step_rows(result.get("steps_ms") or {}))


def step_rows(steps: Mapping[str, Mapping[str, Any]], skip: str = "") -> list[tuple[str, ...]]:
    """Rows of the per-step durations (ms from the previous stage) under a stage table; none without steps. A step
    into ``skip`` is left out."""
    if not steps:
        return []
    rows: list[tuple[str, ...]] = [("step (ms from the previous stage)", "", "", "", "", "")]
    rows += [(f"  {key}", str(s.get("count", 0)), *latency_cells(s)) for key, s in steps.items()
             if not (skip and key.endswith(f"->{skip}"))]
    return rows


def _events(r: dict[str, Any]) -> str:
    ev = r.get("events_recorder") or {}
    if not ev:
        return "-"
    text = (f"{ev.get('created', 0):,} created, {ev.get('aggregated', 0):,} aggregated, "
            f"{ev.get('dropped', 0):,} dropped (recorder queue full), {ev.get('failed', 0):,} failed")
    per_tx = r.get("sqlite_writes_per_transaction")
    return text + (f"; SQLite wrote {per_tx} rows per transaction" if per_tx else "")


def render_report(result: dict[str, Any]) -> str:
    r = result
    n = r.get("workloads", 0)
    ceiling = r.get("store_ceiling") or {}
    writes = r.get("writes") or {}
    cores = r.get("cpu_cores") or {}
    fault = r.get("fault") or {}
    setup = r.get("setup") or {}
    lines = [
        f"flotilla bench failover: {n} workloads ({r.get('kind')}) on member1 of {r.get('members')} members, "
        f"purge {r.get('purge_mode')}, state {'on' if r.get('state') else 'off'}, storage {r.get('storage')}, "
        f"fault {fault.get('kind')}, controllers over {r.get('transport')}",
        f"set-up: created in {setup.get('create_seconds', '-')} s, all Healthy on member1 after "
        f"{setup.get('placed_seconds', '-')} s, quiet {setup.get('quiet_seconds', '-')} s later; background writes "
        f"{writes.get('background_per_s', 0):,.1f}/s",
        f"store ceiling ({ceiling.get('backend')}, {ceiling.get('value_bytes')}-byte values, {ceiling.get('tasks')} "
        f"tasks): {ceiling.get('writes_per_s', 0):,.0f} writes/s (creates {ceiling.get('creates_per_s', 0):,.0f}/s, "
        f"CAS updates {ceiling.get('updates_per_s', 0):,.0f}/s)",
        f"fault: {fault.get('what', '-')}",
    ]
    if "fenced" in fault:
        if fault["fenced"]:
            lines.append(f"  Ready=False after {fault.get('not_ready_s') or 0:.2f} s, not-ready taint after "
                         f"{fault['not_ready_taint_s']:.2f} s; fenced (flotilla fence "
                         f"member1) at {fault['fenced_s']:.2f} s")
        else:
            lines.append("  the not-ready taint never appeared: not fenced")
    lines += partition_lines(r.get("partition") or {}, n)
    lines += ["", *stage_table(r), *slowest_lines(r), ""]
    by_resource = ", ".join(f"{k} {v:,}" for k, v in list((writes.get("by_resource") or {}).items())[:6])
    lines += [
        "summary",
        f"  total failover time   {r.get('total_seconds', 0):.2f} s (fault to last workload Healthy); "
        f"first eviction at {r.get('first_eviction_seconds', 0):.2f} s",
        f"  throughput            {r.get('throughput_per_s', 0):,.1f} workloads/s "
        f"({r.get('throughput_after_first_eviction_per_s', 0):,.1f}/s from the first eviction)",
        f"  writes                {writes.get('net_of_background', 0):,} net of background "
        f"({writes.get('until_settled', 0):,} until quiet {writes.get('settled_after_s', 0)} s after the fault; "
        f"{writes.get('until_last_healthy', 0):,} until the last Healthy) = {r.get('writes_per_workload', 0):.1f} "
        f"per workload; {by_resource}",
        f"  Events                {_events(r)}",
        f"  store ceiling ratio   {r.get('ceiling_ratio', 0):.3f} (= {r.get('writes_per_workload', 0):.1f} writes x "
        f"{r.get('throughput_per_s', 0):.1f} workloads/s / {r.get('store_ceiling_writes_per_s', 0):,.0f} writes/s)",
        f"  control plane         {r.get('cpu_seconds', 0):.1f} CPU s over {r.get('cpu_window_seconds', 0):.1f} s "
        f"({cores.get('control_plane', 0):.2f} cores); peak RSS {r.get('peak_rss_mb', 0):,.0f} MB",
        "  CPU cores (window)    " + " ".join(f"{k} {v:.2f}" for k, v in cores.items()),
        f"  state injected        {r.get('state_injected', 0)}/{n} new copies carried the old copy's state"
        + (" (injected only with purgeMode Directly, as Karmada)" if r.get("purge_mode") != "Directly" else ""),
        f"  max concurrent copies {r.get('max_concurrent_copies', 0)} (running history of "
        f"{r.get('workloads_with_running_history', 0)} StatefulSet/Flink workloads)",
        f"  all recovered         {'yes' if r.get('all_recovered') else 'NO'} ({r.get('recovered', 0)}/{n})",
        f"  machine               {(r.get('machine') or {}).get('nproc')} CPUs, load average (1 min) "
        f"{(r.get('machine') or {}).get('loadavg_1m')}",
    ]
    lines += profile_lines(r.get("profile") or {})
    return "\n".join(lines)


def slowest_lines(result: dict[str, Any]) -> list[str]:
    """The report's lines for the workloads that became Healthy last: where their time went."""
    rows = result.get("slowest") or []
    if not rows:
        return []

    def ms(value: Any) -> str:
        return "-" if value is None else f"{value:,}"

    lines = ["slowest workloads (ms since the fault)", "  " + "  ".join(
        ["workload".ljust(28), "kind".ljust(16), "to".ljust(9), *(k.rjust(12) for k in (
            "evicted", "rescheduled", "work_created", "created", "healthy"))])]
    for row in rows:
        lines.append("  " + "  ".join([str(row.get("name", ""))[:28].ljust(28), str(row.get("kind", ""))[:16].ljust(16),
                                      str(row.get("new_cluster") or "-")[:9].ljust(9),
                                      *(ms(row.get(k)).rjust(12) for k in (
                                          "evicted", "rescheduled", "work_created", "created", "healthy"))]))
    return lines


def profile_lines(profile: dict[str, Any]) -> list[str]:
    """The report's lines for a ``--profile`` run: the control plane's top functions by own samples."""
    if not profile.get("self"):
        return []
    lines = [f"  profile (py-spy, control plane, {profile.get('file')}): top functions by own samples"]
    lines += [f"    {pct:5.1f}%  {name}" for name, pct in profile["self"][:10]]
    return lines


def _s(summary: dict[str, Any], n: int) -> str:
    """``p50 / p95 / max s (count/n)`` of a seconds summary."""
    if not summary.get("count"):
        return f"- (0/{n})"
    return f"{summary['p50']:.2f} / {summary['p95']:.2f} / {summary['max']:.2f} s ({summary['count']}/{n})"


def partition_lines(part: dict[str, Any], n: int) -> list[str]:
    """The report's lines for ``--fault partition``: the timings, the bound, each step from the cut, the safety
    checks."""
    if not part:
        return []
    t = part.get("timings") or {}
    fenced = part.get("fenced_s")
    lines = [
        f"  timings: fence-after {t.get('fence_after_s', 0):g} s, permit-hold {t.get('permit_hold_s', 0):g} s, fence "
        f"margin {t.get('fence_margin_s', 0):g} s, monitor period {t.get('monitor_period_s', 0):g} s, Lease renewed "
        f"every {t.get('lease_renew_interval_s', 0):g} s; bound {t.get('bound_s', 0):g} s without a renewal seen",
        "  from the cut            p50 / p95 / max",
        f"  guard stopped (watch)   {_s(part.get('guard_stopped_s') or {}, n)}; expected by "
        f"{t.get('guard_stop_by_s', 0):g} s",
        f"  guard stopped (history) {_s(part.get('guard_stopped_history_s') or {}, part.get('copies_in_history', 0))}",
        "  fenced automatically    " + ("never" if fenced is None else
                                        f"{fenced:.2f} s; expected between {t.get('fence_not_before_s', 0):g} and "
                                        f"{t.get('fence_by_s', 0):g} s (due - renew interval, due + acknowledgements "
                                        f"+ monitor period){'' if part.get('fence_within_bound') else ': LATER'}"),
        f"  new copy running        {_s(part.get('new_copy_running_s') or {}, n)}; all running after "
        + ("-" if part.get("all_running_s") is None else f"{part['all_running_s']:.2f} s"),
        f"  Healthy (binding)       {_s(part.get('healthy_s') or {}, n)}",
        f"  two copies at once      {part.get('overlap_count', 0)} (running history of "
        f"{part.get('copies_in_history', 0)} copies in member1); still running in member1 at the fence: "
        f"{part.get('running_at_fence_count', 0)}; new copy seen running before the old one stopped: "
        f"{part.get('seen_running_before_stop_count', 0)}",
    ]
    cond = part.get("fenced_condition") or {}
    if cond.get("message"):
        lines.append(f"  Fenced condition        {cond['message']}")
    return lines
