"""The failover timeline (pure): the bindings' failover history and the failover Events as steps on a time axis.

A step is one thing that happened at one time: a cluster's fault (``ClusterNotReady``), its taint, an eviction,
a fence, the new copy's placement and Work, its state restored, the new copy running (with the state gap the
failover history measured), or a warning. The history entries (:mod:`flotilla.failover.history`) give the
failover's start and when its new copy ran; the Events give the steps between.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from flotilla.cluster.health import (
    REASON_CLUSTER_NOT_REACHABLE,
    REASON_CLUSTER_NOT_READY,
    REASON_CLUSTER_READY,
)
from flotilla.display.rows import event_time
from flotilla.failover.auto_fence import EVENT_CLUSTER_FENCE_PENDING, EVENT_CLUSTER_FENCED_AUTOMATICALLY
from flotilla.failover.events import (
    EVENT_EVICTION_PERFORMED,
    EVENT_EVICTION_QUEUED,
    EVENT_SCHEDULE_BINDING_SUCCEED,
    EVENT_STALE_OBJECTS_DELETED,
    EVENT_SYNC_WORK_SUCCEED,
    EVENT_TAINT_CLUSTER_SUCCEED,
)
from flotilla.failover.eviction import EVENT_EVICT_SUCCEEDED
from flotilla.failover.fencing import EVENT_WORK_ABANDONED
from flotilla.failover.graceful import EVENT_TASK_REMOVED
from flotilla.failover.history import (
    EVENT_FAILOVER_COMPLETED,
    PHASE_COMPLETED,
    PHASE_SUPERSEDED,
    parse_history,
    state_gap_text,
)
from flotilla.failover.moves import (
    EVENT_PLANNED_MOVE_COMPLETED,
    EVENT_PLANNED_MOVE_STARTED,
    EVENT_SAVEPOINT_TAKEN,
)
from flotilla.failover.restore import EVENT_STATE_RESTORED
from flotilla.failover.state import EVENT_STATE_CARRIED_FORWARD
from flotilla.kube.objects import as_map
from flotilla.kube.times import human_age, parse_time

__all__ = ["STEP_KINDS", "WINDOWS", "TimelineStep", "axis_start_of", "event_step_kind", "history_steps", "parse_window",
           "timeline"]

#: the windows the timeline page offers, in seconds
WINDOWS: Final[dict[str, int]] = {"15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 24 * 3600}
#: step kinds, in the order a failover goes through them (the legend's order)
STEP_KINDS: Final = ("fault", "taint", "eviction", "fence", "placed", "state", "running", "recovered", "warning", "info")

_EVENT_KINDS: Final[dict[str, str]] = {
    REASON_CLUSTER_NOT_READY: "fault", REASON_CLUSTER_NOT_REACHABLE: "fault",
    REASON_CLUSTER_READY: "recovered",
    EVENT_TAINT_CLUSTER_SUCCEED: "taint",
    EVENT_EVICTION_QUEUED: "eviction", EVENT_EVICTION_PERFORMED: "eviction", EVENT_EVICT_SUCCEEDED: "eviction",
    EVENT_TASK_REMOVED: "eviction", EVENT_PLANNED_MOVE_STARTED: "eviction",
    EVENT_CLUSTER_FENCED_AUTOMATICALLY: "fence", EVENT_CLUSTER_FENCE_PENDING: "fence", EVENT_WORK_ABANDONED: "fence",
    EVENT_STALE_OBJECTS_DELETED: "fence",
    EVENT_SCHEDULE_BINDING_SUCCEED: "placed", EVENT_SYNC_WORK_SUCCEED: "placed",
    EVENT_STATE_RESTORED: "state", EVENT_STATE_CARRIED_FORWARD: "state", EVENT_SAVEPOINT_TAKEN: "state",
    EVENT_FAILOVER_COMPLETED: "running", EVENT_PLANNED_MOVE_COMPLETED: "running",
}
MAX_STEPS: Final = 300
#: the shortest time axis, in seconds
MIN_AXIS: Final = 60.0


def event_step_kind(event: Mapping[str, Any]) -> str:
    """The step an Event stands for; a Warning not listed is a ``warning``, anything else ``info``."""
    kind = _EVENT_KINDS.get(str(event.get("reason") or ""))
    if kind is not None:
        return kind
    return "warning" if event.get("type") == "Warning" else "info"


@dataclass
class TimelineStep:
    at: datetime
    kind: str
    title: str
    detail: str
    subject: str  # "Cluster/member1", "default/web-deployment"
    link: str | None  # the binding key of the workload the step belongs to, when there is one
    age: str = ""
    position: float = 0.0  # 0..100 along the window's axis

    @property
    def at_text(self) -> str:
        return self.at.strftime("%H:%M:%S")

    @property
    def lane(self) -> int:
        """The axis' row of this step's kind, so steps of different kinds at one time do not hide each other."""
        return STEP_KINDS.index(self.kind) if self.kind in STEP_KINDS else len(STEP_KINDS) - 1


def parse_window(text: str) -> int:
    """Seconds of a window named in :data:`WINDOWS`; ValueError otherwise."""
    if text not in WINDOWS:
        raise ValueError(f"window: one of {', '.join(WINDOWS)}, not {text[:20]!r}")
    return WINDOWS[text]


def history_steps(key: str, binding: Mapping[str, Any]) -> list[TimelineStep]:
    """The steps of a binding's failover history: each failover's start and, when it ran, its new copy running."""
    meta, spec = as_map(binding.get("metadata")), as_map(binding.get("spec"))
    resource = as_map(spec.get("resource"))
    subject = f"{meta.get('namespace') or ''}/{resource.get('name') or meta.get('name')}".lstrip("/")
    steps = []
    for e in parse_history(as_map(meta.get("annotations"))):
        if not isinstance(e, Mapping):
            continue
        at = parse_time(e.get("at"))
        if at is not None:
            preserved = ", ".join(f"{k}={v}" for k, v in sorted(as_map(e.get("preservedState")).items()))
            steps.append(TimelineStep(at=at, kind="eviction",
                                      title=f"failover from {e.get('from') or '?'} ({e.get('trigger') or '?'})",
                                      detail=(f"purge {e.get('purgeMode') or '?'}"
                                              + (f"; preserved {preserved}" if preserved else "")),
                                      subject=subject, link=key))
        running = parse_time(e.get("runningAt"))
        if running is not None and e.get("phase") == PHASE_COMPLETED:
            ttr = e.get("timeToRunning")
            took = f" after {ttr:g}s" if isinstance(ttr, (int, float)) and not isinstance(ttr, bool) else ""
            restored = e.get("restoredPath")
            steps.append(TimelineStep(at=running, kind="running", title=f"running on {e.get('to') or '?'}{took}",
                                      detail=f"state gap: {state_gap_text(e)}"
                                      + (f"; restored from {restored}" if restored else ""),
                                      subject=subject, link=key))
        elif e.get("phase") == PHASE_SUPERSEDED and at is not None:
            steps.append(TimelineStep(at=at, kind="warning", title=f"failover from {e.get('from')} superseded",
                                      detail="a newer failover replaced it before its new copy ran",
                                      subject=subject, link=key))
    return steps


def _event_step(event: Mapping[str, Any], bindings: Mapping[str, Any]) -> TimelineStep | None:
    at = parse_time(event_time(event))
    if at is None:
        return None
    inv = as_map(event.get("involvedObject"))
    kind, ns, name = str(inv.get("kind") or ""), str(inv.get("namespace") or ""), str(inv.get("name") or "")
    link = None
    if kind in ("ResourceBinding", "ClusterResourceBinding"):
        link = f"{ns}/{name}"
    elif kind and kind != "Cluster" and f"{ns}/{name}-{kind.lower()}" in bindings:
        link = f"{ns}/{name}-{kind.lower()}"
    subject = f"{kind}/{name}" if kind == "Cluster" or not ns else f"{ns}/{kind}/{name}"
    count = event.get("count")
    times = f" (x{count})" if isinstance(count, int) and count > 1 else ""
    return TimelineStep(at=at, kind=event_step_kind(event), title=f"{event.get('reason')}{times}",
                        detail=str(event.get("message") or ""), subject=subject, link=link)


def timeline(bindings: Mapping[str, Mapping[str, Any]], events: Iterable[Mapping[str, Any]], now: datetime,
             window: int, *, cluster: str = "", only: str | None = None,
             with_history: Iterable[str] | None = None) -> list[TimelineStep]:
    """The steps of the last ``window`` seconds, newest first (at most :data:`MAX_STEPS`).

    ``cluster``: only steps about that cluster or whose text names it; ``only``: only the steps of that binding
    key (its history, its Events and its template's); ``with_history``: the keys of the bindings that have a
    failover history, when the caller knows them (the others are not looked at).
    """
    start = now - timedelta(seconds=window)
    steps: list[TimelineStep] = []
    keys = [only] if only is not None else list(with_history if with_history is not None else bindings)
    for key in keys:
        b = bindings.get(key)
        if b is not None:
            steps += history_steps(key, b)
    seen: set[tuple[Any, ...]] = set()
    for e in events:
        step = _event_step(e, bindings)
        if step is None or (only is not None and step.link != only):
            continue
        if step.link is not None:  # the same Event on a binding and on its template: shown once
            same = (step.at, step.kind, step.title, step.detail, step.link)
            if same in seen:
                continue
            seen.add(same)
        steps.append(step)
    if cluster:
        steps = [s for s in steps if s.subject == f"Cluster/{cluster}" or cluster in s.title or cluster in s.detail]
    steps = [s for s in steps if s.at >= start]
    steps.sort(key=lambda s: s.at, reverse=True)
    steps = steps[:MAX_STEPS]
    axis_start = axis_start_of(steps, now, window)
    span = max((now - axis_start).total_seconds(), 1.0)
    for s in steps:
        s.age = human_age(s.at, now)
        s.position = max(0.0, min(100.0, (s.at - axis_start).total_seconds() / span * 100))
    return steps


def axis_start_of(steps: Iterable[TimelineStep], now: datetime, window: int) -> datetime:
    """Where the time axis starts: a little before the earliest step (a failover of a few seconds fills the axis
    instead of being a dot at its end), at least :data:`MIN_AXIS` seconds before ``now``, never before the
    window."""
    earliest = min((s.at for s in steps), default=now)
    span = max((now - earliest).total_seconds() * 1.1, MIN_AXIS)
    return max(now - timedelta(seconds=span), now - timedelta(seconds=window))
