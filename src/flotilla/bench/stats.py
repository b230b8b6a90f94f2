"""Pure arithmetic of ``flotilla bench failover``: per-workload timelines, percentiles, the store ceiling ratio,
concurrent copies, Prometheus text and collapsed profiles. No I/O."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

from flotilla.member.history import copies_at_most

__all__ = [
    "STAGES",
    "Timeline",
    "ceiling_ratio",
    "counter_counts",
    "counter_delta",
    "histogram_means",
    "latency_summary",
    "max_concurrent_copies",
    "parse_prometheus",
    "percentile",
    "profile_top",
    "recovered_curve",
    "stage_summaries",
    "workqueue_summary",
]

#: The stages of one workload's failover, in order: (key, label). Each is timed from the fault.
STAGES: Final[tuple[tuple[str, str], ...]] = (
    ("evicted", "evicted (task on the binding)"),
    ("rescheduled", "rescheduled (spec.clusters)"),
    ("work_created", "Work created for the new cluster"),
    ("created", "created in the new member"),
    ("healthy", "Healthy in the new member"),
)


@dataclass
class Timeline:
    """What the benchmark saw of one workload (wall-clock seconds, ``time.time()``; None: not seen)."""

    name: str
    kind: str
    binding: str
    expected_state: str | None = None  # the label value the state rule should inject (from the old copy)
    evicted: float | None = None
    rescheduled: float | None = None
    work_created: float | None = None
    created: float | None = None
    healthy: float | None = None
    new_cluster: str = ""
    created_in: str = ""
    injected: str | None = None  # the label value the new copy was created with
    preserved: dict[str, str] = field(default_factory=dict)  # the eviction task's preservedLabelState
    old_deleted: float | None = None  # the old copy's deletion seen in the failed member (when reachable)
    old_stopped: float | None = None  # the old copy seen no longer running in the failed member (when reachable)
    running: float | None = None  # the new copy seen running in its member (its status)

    def stage(self, key: str) -> float | None:
        value = getattr(self, key)
        return value if isinstance(value, float) else None

    @property
    def state_ok(self) -> bool:
        """The new copy was created with the state the old one reported."""
        return self.injected is not None and self.injected != "" and self.injected == self.expected_state


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of ``samples`` (0 if empty)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def latency_summary(seconds: Sequence[float]) -> dict[str, float | int]:
    """``{count, p50, p90, p99, max}`` of latencies given in seconds, in milliseconds."""
    def ms(x: float) -> float:
        return round(x * 1000, 1)

    return {"count": len(seconds), "p50": ms(percentile(seconds, 50)), "p90": ms(percentile(seconds, 90)),
            "p99": ms(percentile(seconds, 99)), "max": ms(max(seconds, default=0.0))}


def slowest(timelines: Iterable[Timeline], t0: float, count: int = 5) -> list[dict[str, Any]]:
    """The ``count`` workloads that became Healthy last (or never), slowest first: name, kind, new cluster and the
    ms from the fault at ``t0`` to each stage it reached (None for a stage not seen)."""
    never = float("inf")
    ranked = sorted(timelines, key=lambda tl: never if tl.healthy is None else tl.healthy, reverse=True)
    return [{"name": tl.name, "kind": tl.kind, "new_cluster": tl.new_cluster,
             **{key: None if tl.stage(key) is None else round(max(0.0, tl.stage(key) - t0) * 1000)  # type: ignore[operator]
                for key, _ in STAGES}}
            for tl in ranked[:count]]


def stage_summaries(timelines: Iterable[Timeline], t0: float) -> dict[str, dict[str, float | int]]:
    """Per stage: the latency summary (ms from the fault at ``t0``) over the workloads that reached it."""
    items = list(timelines)
    out: dict[str, dict[str, float | int]] = {}
    for key, _ in STAGES:
        samples = [max(0.0, t - t0) for t in (tl.stage(key) for tl in items) if t is not None]
        out[key] = latency_summary(samples)
    return out


def step_summaries(timelines: Iterable[Timeline]) -> dict[str, dict[str, float | int]]:
    """Per stage after the first: the time from the previous stage to it, per workload (ms)."""
    items = list(timelines)
    out: dict[str, dict[str, float | int]] = {}
    for (prev, _), (key, _) in zip(STAGES, STAGES[1:], strict=False):
        samples = []
        for tl in items:
            a, b = tl.stage(prev), tl.stage(key)
            if a is not None and b is not None:
                samples.append(max(0.0, b - a))
        out[f"{prev}->{key}"] = latency_summary(samples)
    return out


def recovered_curve(times: Iterable[float | None], t0: float) -> list[tuple[float, int]]:
    """``(seconds since t0, workloads done so far)`` at each completion, in time order (None: never done)."""
    done = sorted(max(0.0, t - t0) for t in times if t is not None)
    return [(t, i + 1) for i, t in enumerate(done)]


def ceiling_ratio(writes_per_workload: float, workloads_per_s: float, ceiling_writes_per_s: float) -> float:
    """Achieved over possible: writes per failed-over workload x workloads/s / the store's raw writes/s."""
    if ceiling_writes_per_s <= 0:
        return 0.0
    return writes_per_workload * workloads_per_s / ceiling_writes_per_s


def max_concurrent_copies(intervals: Iterable[Mapping[str, Any]], namespace: str) -> tuple[int, int]:
    """(the most copies of one workload running at one instant, workloads with a running history) over the
    running intervals (``kind namespace name member uid start end`` dicts) of ``namespace``."""
    by_workload: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for iv in intervals:
        if iv.get("namespace") != namespace:
            continue
        by_workload.setdefault((str(iv.get("kind")), str(iv.get("name"))), []).append(iv)
    most = max((copies_at_most(ivs) for ivs in by_workload.values()), default=0)
    return most, len(by_workload)


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse_prometheus(text: str) -> Samples:
    """Prometheus text format 0.0.4 to ``{(sample name, sorted label pairs): value}``, read by prometheus_client's
    parser; a line it refuses is skipped (the samples of every other line are kept)."""
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        families = []
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                try:
                    families.extend(text_string_to_metric_families(line + "\n"))
                except ValueError:
                    continue
    out: Samples = {}
    for family in families:
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return out


def counter_delta(before: Samples, after: Samples, name: str, by: str | None = None) -> dict[str, float]:
    """How much the samples named ``name`` grew, summed (key ``""``) or per value of the label ``by``."""
    out: dict[str, float] = {}
    for (metric, labels), value in after.items():
        if metric != name:
            continue
        grown = value - before.get((metric, labels), 0.0)
        key = dict(labels).get(by, "") if by else ""
        out[key] = out.get(key, 0.0) + grown
    return out


def histogram_means(before: Samples, after: Samples, name: str, by: str = "name") -> dict[str, float]:
    """Per value of the label ``by``: the mean (ms) of what a histogram observed between two scrapes."""
    sums = counter_delta(before, after, f"{name}_sum", by=by)
    counts = counter_delta(before, after, f"{name}_count", by=by)
    return {k: round(1000.0 * sums.get(k, 0.0) / n, 2) for k, n in sorted(counts.items()) if n > 0}


def counter_counts(before: Samples, after: Samples, name: str, by: str) -> dict[str, int]:
    """:func:`counter_delta` per value of ``by``, as whole numbers, only the values that grew."""
    return {k: int(v) for k, v in counter_delta(before, after, name, by=by).items() if v}


def workqueue_summary(before: Samples, after: Samples) -> dict[str, Any]:
    """What the controllers' work queues did between two scrapes: adds and retries per queue (those that had any),
    and the mean time an item waited and was worked on (ms)."""
    return {"workqueue_adds": counter_counts(before, after, "workqueue_adds_total", "name"),
            "workqueue_retries": counter_counts(before, after, "workqueue_retries_total", "name"),
            "workqueue_wait_mean_ms": histogram_means(before, after, "workqueue_queue_duration_seconds"),
            "workqueue_work_mean_ms": histogram_means(before, after, "workqueue_work_duration_seconds")}


_LINE = re.compile(r":\d+\)$")
#: Frames every sample of the control plane runs under (the command, asyncio's loop): not worth ranking.
_ROOT_FRAMES = ("flotilla/cli/", "flotilla/bench/", "<frozen runpy>", "asyncio/runners.py", "asyncio/base_events.py",
                "asyncio/events.py", "threading.py")


def _function(frame: str) -> str:
    """``func (file.py:123)`` -> ``func (file.py)``: samples of one function at any line together."""
    return _LINE.sub(")", frame)


def profile_top(collapsed: str, limit: int = 15) -> dict[str, Any]:
    """From py-spy's ``--format raw`` (collapsed stacks ``frame;frame;... count``), functions ranked by the share
    of samples (%) on top of the stack (``self``) and anywhere in it (``inclusive``: Flotilla's functions, and
    the libraries' below the command and the event loop)."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_function(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            if not any(root in frame for root in _ROOT_FRAMES):
                inclusive[frame] = inclusive.get(frame, 0) + count

    def top(counts: dict[str, int]) -> list[tuple[str, float]]:
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [(name, round(100.0 * n / total, 1)) for name, n in ranked]

    if total == 0:
        return {"samples": 0, "self": [], "inclusive": []}
    return {"samples": total, "self": top(own), "inclusive": top(inclusive)}
