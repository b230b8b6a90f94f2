"""Failover history (D22): every failover of a binding, recorded on the binding, newest first, the last 10.

Pure functions: no I/O, no clock (``now`` is passed in), inputs never mutated.

The history is the binding annotation ``failover.flotilla.io/history``: a JSON list of entries, newest first,
at most :data:`MAX_ENTRIES` (an 11th entry drops the oldest)::

    {"at": "2026-01-02T10:00:00Z", "from": "member1", "to": "member2", "trigger": "ClusterTaint",
     "purgeMode": "Directly", "preservedState": {"jobid": "..."}, "restoredPath": "s3://b/ck/<job>/chk-42",
     "restoreOutcome": "Restored", "runningAt": "2026-01-02T10:00:31Z", "timeToRunning": 31.2,
     "stateGap": {"ageAtFault": 12.5, "recordsReprocessed": 1200, "recordsAtFault": 51200},
     "phase": "Completed", "evictedAt": "2026-01-02T10:00:00Z"}

**When a failover starts** (:func:`ongoing_failovers`). A failover is seen on the binding as a
graceful-eviction task (``spec.gracefulEvictionTasks[]``) once it carries its ``creationTimestamp`` (the
producers beside the graceful-eviction controller write it with the task; a task without one is looked at once
it is stamped), or as a planned move (annotation ``failover.flotilla.io/move``,
``fromCluster``/``toCluster``/``startedAt``), whichever comes first. Its trigger (:func:`trigger_of_task`):
``ClusterTaint`` for the taint manager's tasks (producer ``TaintManager`` or reason ``TaintUntolerated``),
``ApplicationFailure`` for application failover's (reason ``ApplicationFailure``, or an application-failover
controller as producer), ``PlannedMove`` for a move (a move annotation from the task's cluster, or a task with
reason ``PlannedMove``; a move a taint or a placement change started counts only while it is carried out with a
savepoint, phase ``Savepointing`` or ``Done``, and a task seen before its move's record is turned into the move),
``Other`` for any other task (one a person or another tool wrote). ``at`` is the
start: the move's ``startedAt`` for a move, else the task's ``creationTimestamp``; ``evictedAt`` is the task's
``creationTimestamp`` when there is a task. A failover is the same as an entry when ``from`` matches and
``at`` or ``evictedAt`` matches, so a move whose task appears later, or whose annotation goes while its task
stays, is one entry. The entry is written at once with ``phase: InProgress`` and ``runningAt: null``: a
restart of the controller-manager finds it on the binding and neither loses nor repeats the failover.

**Where it goes.** ``to`` is decided once the scheduler has caught up with the eviction
(``schedulerObservedGeneration == generation``): the move's ``toCluster`` once it is a target (while the move
is still ``Savepointing``, nothing yet); else the binding's target clusters that did not run the workload
before the failover (the task's ``clustersBeforeFailover``, else the targets seen when the entry was written,
if the scheduler had not caught up yet); when there is no such cluster (the survivors took the workload over),
the remaining targets. Several clusters are joined with ``,``.

**When it finishes** (phase ``Completed``). When every cluster of ``to`` has an ``aggregatedStatus`` item with
``health: Healthy`` whose reflected status, when it reports a job state (``jobStatus.state``,
FlinkDeployment), reports ``RUNNING``: the new copy runs. ``runningAt`` is when that was first seen,
``timeToRunning`` is ``runningAt - at`` in seconds (``at`` has whole seconds, so it may read up to one second
long). The removal of the eviction task does not finish it: a ``Gracefully`` task goes when every target is
Healthy (the same moment), a task that timed out goes while the new copy may still not run, and the entry
keeps waiting for it. An entry still in progress when a newer failover moves the workload from one of its
``to`` clusters (or again from its ``from`` cluster) is ``Superseded``: its new copy never ran.

**Restore and state gap.** The native restore record (annotation ``failover.flotilla.io/restore``) of the same
failover (its ``fromCluster`` is ``from``, its ``cluster`` one of ``to``, its ``faultAt`` not before ``at``)
gives ``restoredPath``, ``restoreOutcome`` (``Restored``, ``Fresh``; ``Holding`` while the restore waits) and
``stateGap.ageAtFault`` (seconds from the restored checkpoint's completion to the fault). Without such a
record (no native restore, or a kind without state) they stay ``null``.

``stateGap.recordsReprocessed`` is known for the simulated Flink job only: its operator reports, as
simulation-only keys of ``status.clusterInfo`` (a string map the operator's CRD allows and FlinkDeployment's
status interpretation keeps), ``sim.flotilla.io/records-processed`` (the stream offset the job had reached
when the status was written) and ``sim.flotilla.io/restored-offset`` (where its current run started). The old
copy's last reported offset is kept as ``stateGap.recordsAtFault`` (the controller passes the last offset it
saw from that cluster, for when its item is already gone), raised while the failover is in progress and the
old copy still reports (it runs until its Work is deleted); ``recordsReprocessed`` is then ``recordsAtFault -
restored offset of the new copy`` (never below 0): the records the new copy processes a second time, at least;
the old job may have gone on for up to one reporting interval after its last report. A real Flink operator
reports no record counts: ``null``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from flotilla.api.labels import FAILOVER_HISTORY_ANNOTATION, MOVE_ANNOTATION, RESTORE_ANNOTATION
from flotilla.failover.graceful import has_scheduled
from flotilla.failover.purge import eviction_tasks
from flotilla.failover.state import render_targets
from flotilla.kube.metadata import json_annotation
from flotilla.kube.objects import as_list, as_map
from flotilla.kube.times import parse_time, utc_seconds

__all__ = [
    "EVENT_FAILOVER_COMPLETED",
    "EVENT_FAILOVER_SUPERSEDED",
    "HISTORY_ANNOTATION",
    "MAX_ENTRIES",
    "MOVE_ANNOTATION",
    "PHASE_COMPLETED",
    "PHASE_IN_PROGRESS",
    "PHASE_SUPERSEDED",
    "RECORDS_PROCESSED_KEY",
    "RESTORED_OFFSET_KEY",
    "RESTORE_ANNOTATION",
    "TRIGGER_APPLICATION_FAILURE",
    "TRIGGER_CLUSTER_TAINT",
    "TRIGGER_OTHER",
    "TRIGGER_PLANNED_MOVE",
    "Failover",
    "HistoryUpdate",
    "completed_message",
    "copy_running",
    "entries_of",
    "history_unreadable",
    "job_progress",
    "metric_trigger",
    "ongoing_failovers",
    "parse_history",
    "plan_history",
    "safe_uri",
    "state_gap_text",
    "superseded_message",
    "trigger_of_task",
]

HISTORY_ANNOTATION: Final = FAILOVER_HISTORY_ANNOTATION
MAX_ENTRIES: Final = 10

TRIGGER_CLUSTER_TAINT: Final = "ClusterTaint"
TRIGGER_APPLICATION_FAILURE: Final = "ApplicationFailure"
TRIGGER_PLANNED_MOVE: Final = "PlannedMove"
TRIGGER_OTHER: Final = "Other"
#: Phases of a move record (``failover.flotilla.io/move``) in which the move is carried out with a savepoint.
_MOVE_CARRIED_OUT: Final = ("Savepointing", "Done")

PHASE_IN_PROGRESS: Final = "InProgress"
PHASE_COMPLETED: Final = "Completed"
PHASE_SUPERSEDED: Final = "Superseded"

#: Normal, on the binding and its template: a failover's new copy runs (from, to, trigger, time, state gap).
EVENT_FAILOVER_COMPLETED: Final = "FailoverCompleted"
#: Warning: a failover in progress was replaced by a newer one before its new copy ran.
EVENT_FAILOVER_SUPERSEDED: Final = "FailoverSuperseded"

#: Simulation-only keys of a simulated FlinkDeployment's ``status.clusterInfo`` (the simulated operator's).
RECORDS_PROCESSED_KEY: Final = "sim.flotilla.io/records-processed"
RESTORED_OFFSET_KEY: Final = "sim.flotilla.io/restored-offset"

_TAINT_PRODUCER = "TaintManager"
_TAINT_REASON = "TaintUntolerated"
_APPLICATION_REASON = "ApplicationFailure"
_PLANNED_MOVE_REASON = "PlannedMove"
_MOVE_SAVEPOINTING = "Savepointing"
#: a restore's ``faultAt`` may read up to this much before the entry's ``at`` (whole-second timestamps)
_FAULT_SLACK = timedelta(seconds=1)
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _int_text(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def safe_uri(value: Any) -> str | None:
    """A snapshot path fit for annotations and Events: any ``user:password@`` part of a URI removed."""
    text = _str(value)
    return _USERINFO.sub(r"\1", text) if text else None


# ----------------------------------------------------------------------------------------------- reading


def parse_history(annotations: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The entries of the history annotation (objects only, at most :data:`MAX_ENTRIES`); ``[]`` when there is
    none or it does not parse."""
    value = json_annotation(annotations, HISTORY_ANNOTATION)
    return [dict(e) for e in as_list(value) if isinstance(e, dict)][:MAX_ENTRIES]


def history_unreadable(annotations: Mapping[str, Any] | None) -> bool:
    """The history annotation is there but is not a JSON list (it is replaced by the next entry written)."""
    raw = as_map(annotations).get(HISTORY_ANNOTATION)
    if raw is None:
        return False
    try:
        return not isinstance(json.loads(raw), list) if isinstance(raw, str) else True
    except ValueError:
        return True


def _json_annotation(annotations: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return as_map(json_annotation(annotations, key))


def trigger_of_task(task: Mapping[str, Any]) -> str:
    """The history's trigger for a graceful-eviction task, from its ``reason`` and ``producer``."""
    reason, producer = task.get("reason"), task.get("producer")
    if producer == _TAINT_PRODUCER or reason == _TAINT_REASON:
        return TRIGGER_CLUSTER_TAINT
    by_application = isinstance(producer, str) and producer.endswith("application-failover-controller")
    if reason == _APPLICATION_REASON or by_application:
        return TRIGGER_APPLICATION_FAILURE
    if reason == _PLANNED_MOVE_REASON:
        return TRIGGER_PLANNED_MOVE
    return TRIGGER_OTHER


def metric_trigger(trigger: Any) -> str:
    """The ``trigger`` label of the history's metrics (the failover metrics' spelling)."""
    if not isinstance(trigger, str):
        return "unknown"
    return {TRIGGER_CLUSTER_TAINT: "cluster_taint", TRIGGER_APPLICATION_FAILURE: "application",
            TRIGGER_PLANNED_MOVE: "planned_move"}.get(trigger, "unknown")


def job_progress(status: Any) -> tuple[int | None, int | None]:
    """``(records processed, restored offset)`` a simulated Flink job reports in ``clusterInfo`` (None: not
    reported, as by a real operator)."""
    info = as_map(as_map(status).get("clusterInfo"))
    return _int_text(info.get(RECORDS_PROCESSED_KEY)), _int_text(info.get(RESTORED_OFFSET_KEY))


def copy_running(item: Mapping[str, Any] | None) -> bool:
    """The copy of an ``aggregatedStatus`` item runs: Healthy, and ``RUNNING`` if it reports a job state."""
    if item is None or item.get("health") != "Healthy":
        return False
    state = as_map(as_map(item.get("status")).get("jobStatus")).get("state")
    return state is None or state == "RUNNING"


@dataclass(frozen=True)
class Failover:
    """A failover seen on the binding now (an eviction task, a planned move, or both)."""

    from_cluster: str
    at: str
    trigger: str
    evicted_at: str | None = None
    purge_mode: str | None = None
    preserved_state: Mapping[str, Any] = field(default_factory=dict)
    #: clusters that ran the workload before (``clustersBeforeFailover``), None when the task does not say
    before: tuple[str, ...] | None = None
    to_hint: str | None = None


def _task_time(task: Mapping[str, Any]) -> str | None:
    created = parse_time(task.get("creationTimestamp"))
    return utc_seconds(created) if created is not None else None


def ongoing_failovers(binding: Mapping[str, Any]) -> list[Failover]:
    """The failovers the binding shows now: its stamped eviction tasks, in order, and a planned move without a
    task of its own (see the module docstring)."""
    md, spec = as_map(binding.get("metadata")), as_map(binding.get("spec"))
    move = _json_annotation(as_map(md.get("annotations")), MOVE_ANNOTATION)
    move_from, move_to = _str(move.get("fromCluster")), _str(move.get("toCluster"))
    move_at = parse_time(move.get("startedAt"))
    move_start = utc_seconds(move_at) if move_at is not None and move_from else None
    # a move a person asked for is a planned move whatever became of it; one a taint or a placement change
    # started is one while it takes (or took) its savepoint, and otherwise an ordinary failover of its task
    move_planned = move.get("trigger") in (None, TRIGGER_PLANNED_MOVE) or move.get("phase") in _MOVE_CARRIED_OUT
    out: list[Failover] = []
    for task in eviction_tasks(spec):
        source = _str(task.get("fromCluster"))
        evicted = _task_time(task)
        if source is None or evicted is None:
            continue
        before = task.get("clustersBeforeFailover")
        before_names = tuple(c for c in before if isinstance(c, str)) if isinstance(before, list) else None
        planned = move_start is not None and source == move_from and move_planned
        state = as_map(task.get("preservedLabelState"))
        out.append(Failover(
            from_cluster=source, at=move_start if planned and move_start else evicted,
            trigger=TRIGGER_PLANNED_MOVE if planned else trigger_of_task(task), evicted_at=evicted,
            purge_mode=_str(task.get("purgeMode")),
            preserved_state={str(k): str(v) for k, v in state.items()},
            before=before_names, to_hint=move_to if planned else None))
    if move_start is not None and move_from and move_planned and all(f.from_cluster != move_from for f in out):
        out.append(Failover(from_cluster=move_from, at=move_start, trigger=TRIGGER_PLANNED_MOVE,
                            to_hint=move_to))
    return out


# ----------------------------------------------------------------------------------------------- deciding


@dataclass
class HistoryUpdate:
    """The outcome for one binding: the annotation's new entries and what happened in this pass."""

    entries: list[dict[str, Any]]
    changed: bool
    started: list[dict[str, Any]] = field(default_factory=list)
    completed: list[dict[str, Any]] = field(default_factory=list)
    superseded: list[dict[str, Any]] = field(default_factory=list)

    def annotation_patch(self, resource_version: str | None) -> dict[str, Any] | None:
        """The metadata-only merge patch writing the history (None when nothing changed)."""
        if not self.changed:
            return None
        text = json.dumps(self.entries, separators=(",", ":"))
        md: dict[str, Any] = {"annotations": {HISTORY_ANNOTATION: text}}
        if resource_version is not None:
            md["resourceVersion"] = resource_version
        return {"metadata": md}

    @property
    def in_progress(self) -> bool:
        return any(e.get("phase") == PHASE_IN_PROGRESS for e in self.entries)


def _matches(entry: Mapping[str, Any], f: Failover) -> bool:
    if entry.get("from") != f.from_cluster:
        return False
    return entry.get("at") == f.at or (f.evicted_at is not None and entry.get("evictedAt") == f.evicted_at)


def _to_list(entry: Mapping[str, Any]) -> list[str]:
    to = _str(entry.get("to"))
    return [c for c in to.split(",") if c] if to else []


def _items(binding: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for item in as_list(as_map(binding.get("status")).get("aggregatedStatus")):
        name = _str(as_map(item).get("clusterName"))
        if name and name not in out:
            out[name] = as_map(item)
    return out


def _new_entry(f: Failover, targets: Sequence[str], caught_up: bool,
               records_at_fault: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "at": f.at, "from": f.from_cluster, "to": None, "trigger": f.trigger, "purgeMode": f.purge_mode,
        "preservedState": dict(f.preserved_state), "restoredPath": None, "restoreOutcome": None,
        "runningAt": None, "timeToRunning": None,
        "stateGap": {"ageAtFault": None, "recordsReprocessed": None, "recordsAtFault": records_at_fault},
        "phase": PHASE_IN_PROGRESS, "evictedAt": f.evicted_at,
    }
    if f.to_hint:
        entry["toHint"] = f.to_hint
    if f.before is not None:
        entry["before"] = [c for c in f.before if c != f.from_cluster]
    elif not caught_up:  # the targets now are the survivors: the scheduler has not placed it anew yet
        entry["before"] = [c for c in targets if c != f.from_cluster]
    return entry


def _fill_in(entry: dict[str, Any], f: Failover) -> None:
    """What a failover learns from what appears later: a move's task, or the record of the move a task
    started."""
    if f.evicted_at is not None and entry.get("evictedAt") is None:
        entry["evictedAt"] = f.evicted_at
    if f.purge_mode is not None and entry.get("purgeMode") is None:
        entry["purgeMode"] = f.purge_mode
    if f.preserved_state and not entry.get("preservedState"):
        entry["preservedState"] = dict(f.preserved_state)
    if f.before is not None and entry.get("before") is None:
        entry["before"] = [c for c in f.before if c != f.from_cluster]
    if f.trigger == TRIGGER_PLANNED_MOVE and entry.get("trigger") != TRIGGER_PLANNED_MOVE:
        entry["trigger"] = TRIGGER_PLANNED_MOVE  # the task was seen before the move's record
        if f.to_hint and not entry.get("toHint"):
            entry["toHint"] = f.to_hint


def _decide_to(entry: Mapping[str, Any], targets: Sequence[str], move: Mapping[str, Any]) -> str | None:
    hint = _str(entry.get("toHint"))
    if hint and hint in targets:
        return hint
    if hint and move.get("fromCluster") == entry.get("from") and move.get("phase") == _MOVE_SAVEPOINTING:
        return None  # the move's target is not placed yet
    source = entry.get("from")
    rest = [c for c in targets if c != source]
    before = entry.get("before")
    if isinstance(before, list):
        new = [c for c in rest if c not in before]
        if new:
            return ",".join(new)
    return ",".join(rest) or None


def _apply_restore(entry: dict[str, Any], restore: Mapping[str, Any]) -> None:
    if restore.get("fromCluster") != entry.get("from") or restore.get("cluster") not in _to_list(entry):
        return
    fault, start = parse_time(restore.get("faultAt")), parse_time(entry.get("at"))
    if fault is not None and start is not None and fault < start - _FAULT_SLACK:
        return  # the record of an earlier failover between the same clusters
    outcome = _str(restore.get("outcome"))
    entry["restoreOutcome"] = outcome
    entry["restoredPath"] = safe_uri(restore.get("path")) if outcome == "Restored" else None
    gap = dict(as_map(entry.get("stateGap")))
    age = _number(restore.get("ageAtFault"))
    gap["ageAtFault"] = round(age, 3) if age is not None and outcome == "Restored" else None
    entry["stateGap"] = gap


def _complete(entry: dict[str, Any], now: datetime, items: Mapping[str, Mapping[str, Any]]) -> None:
    entry["phase"] = PHASE_COMPLETED
    entry["runningAt"] = utc_seconds(now)
    start = parse_time(entry.get("at"))
    entry["timeToRunning"] = round(max(0.0, (now - start).total_seconds()), 1) if start is not None else None
    gap = dict(as_map(entry.get("stateGap")))
    at_fault = _int_text(gap.get("recordsAtFault"))
    restored = [job_progress(items[c].get("status"))[1] for c in _to_list(entry) if c in items]
    if at_fault is not None and restored and all(r is not None for r in restored):
        gap["recordsReprocessed"] = max(0, at_fault - min(r for r in restored if r is not None))
    entry["stateGap"] = gap


def _records_at_fault(source: str, items: Mapping[str, Mapping[str, Any]],
                      progress: Mapping[str, int] | None) -> int | None:
    """The old copy's progress as last reported: its item's, else the caller's last seen."""
    reported = job_progress(items[source].get("status"))[0] if source in items else None
    if reported is None:
        seen = as_map(progress).get(source)
        reported = seen if isinstance(seen, int) else None
    return reported


def _note_records_at_fault(entry: dict[str, Any], items: Mapping[str, Mapping[str, Any]],
                           progress: Mapping[str, int] | None) -> None:
    """While the failover is in progress the old copy may still run and report: keep its highest offset."""
    latest = _records_at_fault(str(entry.get("from")), items, progress)
    gap = as_map(entry.get("stateGap"))
    known = _int_text(gap.get("recordsAtFault"))
    if latest is not None and (known is None or latest > known):
        entry["stateGap"] = {**gap, "recordsAtFault": latest}


def plan_history(binding: Mapping[str, Any], now: datetime, *,
                 progress: Mapping[str, int] | None = None) -> HistoryUpdate:
    """The binding's history after what it shows now (see the module docstring).

    ``progress``: the last ``records-processed`` each cluster's copy of this binding reported while the caller
    watched (the old copy's item may be gone from ``aggregatedStatus`` by the time the failover is seen).
    """
    md, spec = as_map(binding.get("metadata")), as_map(binding.get("spec"))
    annotations = as_map(md.get("annotations"))
    original = parse_history(annotations)
    entries = [json.loads(json.dumps(e)) for e in original]
    targets = render_targets(spec)
    caught_up = has_scheduled(binding)
    items = _items(binding)
    update = HistoryUpdate(entries=entries, changed=False)

    for f in ongoing_failovers(binding):
        same = next((e for e in entries if _matches(e, f)), None)
        if same is not None:
            if same.get("phase") == PHASE_IN_PROGRESS:
                _fill_in(same, f)
            continue
        for e in entries:
            replaced = f.from_cluster in _to_list(e) or e.get("from") == f.from_cluster
            if e.get("phase") == PHASE_IN_PROGRESS and replaced:
                e["phase"] = PHASE_SUPERSEDED
                update.superseded.append(e)
        entry = _new_entry(f, targets, caught_up, _records_at_fault(f.from_cluster, items, progress))
        entries.insert(0, entry)
        update.started.append(entry)

    restore = _json_annotation(annotations, RESTORE_ANNOTATION)
    move = _json_annotation(annotations, MOVE_ANNOTATION)
    for e in entries:
        if e.get("phase") != PHASE_IN_PROGRESS:
            continue
        _note_records_at_fault(e, items, progress)
        if e.get("to") is None and caught_up:
            e["to"] = _decide_to(e, targets, move)
        if e.get("to") is None:
            continue
        if restore:
            _apply_restore(e, restore)
        if e.get("restoreOutcome") != "Holding" and all(copy_running(items.get(c)) for c in _to_list(e)):
            _complete(e, now, items)
            update.completed.append(e)

    del entries[MAX_ENTRIES:]
    update.entries = entries
    update.changed = entries != original
    return update


# ----------------------------------------------------------------------------------------------- messages


def _seconds_text(value: Any) -> str:
    n = _number(value)
    return f"{n:g}s" if n is not None else "unknown"


def state_gap_text(entry: Mapping[str, Any]) -> str:
    """``checkpoint age at fault 12.5s, 1200 records reprocessed`` (unknown parts said so)."""
    gap = as_map(entry.get("stateGap"))
    if entry.get("restoreOutcome") == "Fresh":
        age = "no checkpoint (started from empty state)"
    else:
        age = f"checkpoint age at fault {_seconds_text(gap.get('ageAtFault'))}"
    records = gap.get("recordsReprocessed")
    counted = f"{records} records reprocessed" if isinstance(records, int) else "records reprocessed unknown"
    return f"{age}, {counted}"


def completed_message(entry: Mapping[str, Any]) -> str:
    """The ``FailoverCompleted`` Event's message."""
    restored = entry.get("restoredPath")
    how = f"; restored from {restored}" if restored else ""
    return (f"Failover from {entry.get('from')} to {entry.get('to')} ({entry.get('trigger')}) running after "
            f"{_seconds_text(entry.get('timeToRunning'))}; state gap: {state_gap_text(entry)}{how}.")


def superseded_message(entry: Mapping[str, Any]) -> str:
    """The ``FailoverSuperseded`` Event's message."""
    return (f"Failover from {entry.get('from')} to {entry.get('to') or 'an undecided cluster'} "
            f"({entry.get('trigger')}, started {entry.get('at')}) was replaced by a newer failover before "
            "its new copy ran.")


def entries_of(bindings: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """``(binding, entry)`` for every history entry of ``bindings``, in their order, newest first each."""
    return [(b, e) for b in bindings for e in parse_history(as_map(as_map(b.get("metadata")).get("annotations")))]
