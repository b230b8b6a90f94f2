"""Planned moves with a savepoint (D21): the rules, as pure functions.

A *planned move* takes a stateful workload out of a member cluster that is still Ready: ``flotilla failover move``,
a NoExecute taint on a healthy cluster (cordon and drain), or a placement change that drops the cluster (a
WorkloadRebalancer, an edited policy). The old copy can still take a savepoint, so the new copy starts from the
exact point where the old one stopped instead of from its newest periodic checkpoint: nothing is processed twice.

The move is recorded on the binding in the annotation ``failover.flotilla.io/move`` (:class:`Move`)::

    {"fromCluster": "member1", "toCluster": "member2", "phase": "Savepointing", "startedAt": "<RFC 3339>",
     "nonce": 1, "reason": "...", "path": null, "trigger": "PlannedMove"}

Step by step (the planned-move controller writes the record, the binding controller renders by it):

1. **Start** (:func:`move_candidate`): the binding's only live Work is in a Ready cluster ``X`` that the binding
   leaves: an eviction task from ``X`` written by ``flotilla failover move`` or by the taint manager, or ``X`` no
   longer among the binding's existing clusters. The kind must take a savepoint (:func:`savepoint_capable`:
   FlinkDeployment) and neither the policy nor the template may say
   ``restore.flotilla.io/savepoint-on-move: "false"`` (:func:`savepoint_on_move_enabled`; then the record is
   written with phase ``Skipped`` and the move goes on as an ordinary failover). ``toCluster`` is the binding's
   single target once the scheduler chose it (it may be empty at first).
2. **Savepointing** (:func:`render_rule`): the Work in ``X`` is kept (not deleted, whatever the purge mode) and its
   manifest stops the job with a savepoint (:func:`stop_with_savepoint`: ``spec.job.state: suspended``,
   ``upgradeMode: savepoint``); no Work is written anywhere else, so two copies never run at once. Between the
   eviction and the record (the controllers see the eviction at the same time) the render holds the same way.
3. **Savepoint seen** (:func:`reflected_savepoint`): the old copy's reflected status says the job is suspended
   (``lifecycleState: SUSPENDED``, job ``FINISHED``) with a savepoint (``upgradeSavepointPath``, or
   ``savepointInfo.lastSavepoint.location``) taken after the move started. The controller writes
   ``failover.flotilla.io/move-savepoint`` (:func:`move_savepoint_record`) and a restore record
   ``failover.flotilla.io/restore`` for ``toCluster`` with outcome ``Restored`` (:func:`restore_record`), then
   phase ``Done``.
4. **Done**: the Work in ``X`` is deleted, and no other Work is written until it is gone; then the new copy's Work
   is written with the savepoint as ``spec.job.initialSavepointPath`` (:func:`apply_move_restore`, through the
   interpreter's RestoreState).
   ``completedAt`` is added to the record once the new copy reports Healthy.
5. **Failed** (:func:`failure_reason`): ``X`` turns not Ready, the old copy's Work disappears, or no savepoint is
   seen within ``--move-savepoint-timeout``: the move goes on as an unplanned failover (the new copy restores the
   newest checkpoint).

The request of ``flotilla failover move`` is :func:`plan_move_request`: it checks the target with the scheduler's
own algorithm (the move must be kept by the next scheduling passes) and returns the binding patch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from flotilla.api.labels import (
    MOVE_ANNOTATION,
    MOVE_SAVEPOINT_ANNOTATION,
    RESTORE_ANNOTATION,
    SAVEPOINT_ON_MOVE_ANNOTATION,
)
from flotilla.cluster.health import is_ready
from flotilla.failover.eviction import PRODUCER_TAINT_MANAGER
from flotilla.failover.fencing import is_fenced
from flotilla.failover.peer_quorum import pending_token
from flotilla.failover.purge import PURGE_MODE_DIRECTLY, eviction_tasks, kept_clusters, work_cluster
from flotilla.interpreter import Operation, ResourceInterpreter
from flotilla.kube.metadata import json_annotation
from flotilla.kube.objects import annotations_of, as_list, as_map, as_str, meta_of
from flotilla.kube.times import format_time, parse_time

__all__ = [
    "DEFAULT_MOVE_SAVEPOINT_TIMEOUT",
    "EVENT_PLANNED_MOVE_COMPLETED",
    "EVENT_PLANNED_MOVE_FAILED",
    "EVENT_PLANNED_MOVE_SKIPPED",
    "EVENT_PLANNED_MOVE_STARTED",
    "EVENT_SAVEPOINT_TAKEN",
    "MOVE_ANNOTATION",
    "MOVE_PRODUCER",
    "MOVE_REASON",
    "MOVE_SAVEPOINT_ANNOTATION",
    "PHASE_DONE",
    "PHASE_FAILED",
    "PHASE_SAVEPOINTING",
    "PHASE_SKIPPED",
    "RESTORE_ANNOTATION",
    "SAVEPOINT_ON_MOVE_ANNOTATION",
    "TRIGGER_CLUSTER_TAINT",
    "TRIGGER_PLACEMENT_CHANGE",
    "TRIGGER_PLANNED_MOVE",
    "Candidate",
    "Move",
    "MoveRender",
    "MoveRequest",
    "MoveRequestError",
    "apply_move_restore",
    "completed_patch",
    "failure_reason",
    "move_candidate",
    "reachable",
    "move_patch",
    "move_restore",
    "move_savepoint_record",
    "new_copy_healthy",
    "parse_move",
    "plan_move_request",
    "current_savepoint",
    "reflected_savepoint",
    "render_rule",
    "restore_record",
    "savepoint_capable",
    "savepoint_on_move_enabled",
    "stop_with_savepoint",
    "waits_on_old_copy",
]


PHASE_SAVEPOINTING: Final = "Savepointing"
PHASE_DONE: Final = "Done"
PHASE_FAILED: Final = "Failed"
PHASE_SKIPPED: Final = "Skipped"
PHASES: Final = (PHASE_SAVEPOINTING, PHASE_DONE, PHASE_FAILED, PHASE_SKIPPED)

#: What started the move (the failover history's ``trigger``).
TRIGGER_PLANNED_MOVE: Final = "PlannedMove"
TRIGGER_CLUSTER_TAINT: Final = "ClusterTaint"
TRIGGER_PLACEMENT_CHANGE: Final = "PlacementChange"

#: The eviction task ``flotilla failover move`` writes: its producer and reason.
MOVE_PRODUCER: Final = "FailoverMove"
MOVE_REASON: Final = "PlannedMove"

EVENT_PLANNED_MOVE_STARTED: Final = "PlannedMoveStarted"
EVENT_SAVEPOINT_TAKEN: Final = "SavepointTaken"
EVENT_PLANNED_MOVE_FAILED: Final = "PlannedMoveFailed"
EVENT_PLANNED_MOVE_COMPLETED: Final = "PlannedMoveCompleted"
EVENT_PLANNED_MOVE_SKIPPED: Final = "PlannedMoveSkipped"

DEFAULT_MOVE_SAVEPOINT_TIMEOUT: Final = 120.0
#: A savepoint counts for a move when it was taken at most this long before the move started (member clocks).
CLOCK_SKEW_TOLERANCE: Final = 5.0

FLINK_GROUP: Final = "flink.apache.org"
FLINK_KIND: Final = "FlinkDeployment"
_SUSPENDED_JOB_STATES: Final = ("FINISHED", "SUSPENDED", "CANCELED")


# --------------------------------------------------------------------------------------------- readers


def _targets(spec: Mapping[str, Any]) -> list[str]:
    return [n for n in (as_str(as_map(c).get("name")) for c in as_list(spec.get("clusters"))) if n]


def _terminating(work: Mapping[str, Any]) -> bool:
    return bool(meta_of(work).get("deletionTimestamp"))


# --------------------------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class Move:
    """The annotation ``failover.flotilla.io/move``."""

    from_cluster: str
    to_cluster: str | None
    phase: str
    started_at: datetime
    nonce: int = 1
    reason: str = ""
    path: str | None = None
    trigger: str = TRIGGER_PLANNED_MOVE
    completed_at: datetime | None = None
    #: the savepoint the old copy reported before the move (a newer one without a time is the move's)
    previous_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fromCluster": self.from_cluster, "toCluster": self.to_cluster, "phase": self.phase,
                               "startedAt": format_time(self.started_at), "nonce": self.nonce,
                               "reason": self.reason, "path": self.path, "trigger": self.trigger}
        if self.completed_at is not None:
            out["completedAt"] = format_time(self.completed_at)
        if self.previous_path is not None:
            out["previousSavepoint"] = self.previous_path
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @property
    def savepointing(self) -> bool:
        return self.phase == PHASE_SAVEPOINTING


def parse_move(binding: Mapping[str, Any] | None) -> Move | None:
    """The binding's move record, or None (absent or unreadable: an unreadable record is no move)."""
    data = json_annotation(annotations_of(binding), MOVE_ANNOTATION)
    if not isinstance(data, Mapping):
        return None
    started = parse_time(data.get("startedAt"))
    source, phase = as_str(data.get("fromCluster")), as_str(data.get("phase"))
    if not source or phase not in PHASES or started is None:
        return None
    nonce = data.get("nonce")
    return Move(from_cluster=source, to_cluster=as_str(data.get("toCluster")) or None, phase=phase,
                started_at=started, nonce=nonce if isinstance(nonce, int) and not isinstance(nonce, bool) else 1,
                reason=as_str(data.get("reason")), path=as_str(data.get("path")) or None,
                trigger=as_str(data.get("trigger")) or TRIGGER_PLANNED_MOVE,
                completed_at=parse_time(data.get("completedAt")),
                previous_path=as_str(data.get("previousSavepoint")) or None)


def move_patch(move: Move | None, extra: Mapping[str, str | None] | None = None,
               resource_version: Any = None) -> dict[str, Any]:
    """The metadata merge patch writing ``move`` (and ``extra`` annotations), guarded by ``resource_version``."""
    annotations: dict[str, str | None] = {MOVE_ANNOTATION: None if move is None else move.to_json()}
    annotations.update(extra or {})
    meta: dict[str, Any] = {"annotations": annotations}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"metadata": meta}


# --------------------------------------------------------------------------------------------- which kinds


def savepoint_capable(obj: Mapping[str, Any] | None) -> bool:
    """Whether the kind can stop with a savepoint on a planned move (FlinkDeployment, any version)."""
    obj = obj or {}
    group = as_str(obj.get("apiVersion")).partition("/")[0]
    return obj.get("kind") == FLINK_KIND and group == FLINK_GROUP


def savepoint_on_move_enabled(*objects: Mapping[str, Any] | None) -> bool:
    """False when any of ``objects`` (the policy, the template) says ``savepoint-on-move: "false"``."""
    for obj in objects:
        value = annotations_of(obj).get(SAVEPOINT_ON_MOVE_ANNOTATION)
        if isinstance(value, str) and value.strip().lower() == "false":
            return False
    return True


def stop_with_savepoint(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a FlinkDeployment manifest that stops its job with a savepoint (suspend in savepoint mode)."""
    out = json.loads(json.dumps(manifest))
    spec = out.get("spec")
    if not isinstance(spec, dict):
        spec = out["spec"] = {}
    job = spec.get("job")
    if not isinstance(job, dict):
        job = spec["job"] = {}
    job["state"] = "suspended"
    job["upgradeMode"] = "savepoint"
    return out


# --------------------------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Candidate:
    """A move that should start: out of ``from_cluster`` (Ready, holding the only live Work), into
    ``to_cluster`` (None until the scheduler chose it)."""

    from_cluster: str
    to_cluster: str | None
    trigger: str


def _live_works(works: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for w in works:
        cluster = work_cluster(w)
        if cluster and not _terminating(w):
            out[cluster] = w
    return out


def _handled(move: Move | None, cluster: str, work: Mapping[str, Any]) -> bool:
    """Whether ``move`` is about the copy ``work`` in ``cluster`` (it started after that Work was created)."""
    if move is None or move.from_cluster != cluster:
        return False
    created = parse_time(meta_of(work).get("creationTimestamp"))
    return created is None or move.started_at >= created


def reachable(cluster: Mapping[str, Any] | None) -> bool:
    """Whether a savepoint can be asked of the cluster's copy: Ready, and neither fenced (out-of-service) nor
    marked fence-pending. A cut-off Pull cluster can stay Ready until its grace period ends; the automatic fence
    marks it, or fences it, before that."""
    return is_ready(cluster) and not is_fenced(cluster) and pending_token(cluster) is None


def move_candidate(binding: Mapping[str, Any], works: Iterable[Mapping[str, Any]],
                   clusters: Mapping[str, Mapping[str, Any]], template: Mapping[str, Any] | None = None) -> \
        Candidate | None:
    """The planned move the binding needs now and has no record of yet, or None.

    ``works``: the binding's Works; ``clusters``: Cluster objects by name; ``template``: the resource template
    (its kind decides, :func:`savepoint_capable`; without it the kind is read from ``spec.resource``).
    """
    meta, spec = meta_of(binding), as_map(binding.get("spec"))
    if meta.get("deletionTimestamp"):
        return None
    kind_of = template if template is not None else as_map(spec.get("resource"))
    if not savepoint_capable(kind_of):
        return None
    live = _live_works(works)
    if len(live) != 1:
        return None  # not a single-cluster workload (or nothing runs)
    (source, work), = live.items()
    if not reachable(clusters.get(source)):
        return None
    if _handled(parse_move(binding), source, work):
        return None
    targets = [t for t in _targets(spec) if t != source]
    to = targets[0] if len(targets) == 1 else None
    if source in _targets(spec):
        return None
    for task in eviction_tasks(spec):
        if task.get("fromCluster") != source:
            continue
        producer = task.get("producer")
        if producer == MOVE_PRODUCER:
            return Candidate(source, to, TRIGGER_PLANNED_MOVE)
        if producer == PRODUCER_TAINT_MANAGER:
            return Candidate(source, to, TRIGGER_CLUSTER_TAINT)
        return None  # an application failure is no planned move: the job is failing there
    if source not in kept_clusters(spec) and to is not None:
        return Candidate(source, to, TRIGGER_PLACEMENT_CHANGE)
    return None


# --------------------------------------------------------------------------------------------- the render


@dataclass
class MoveRender:
    """What a planned move means for one render of the binding's Works.

    ``hold``: write no Work and delete none but ``delete`` (the normal render does not run);
    ``update``: Works to write as given (the old copy with its stop-with-savepoint);
    ``delete``: Works to delete (the old copy once its savepoint is taken); ``requeue``: seconds to look again.
    """

    hold: bool = False
    update: list[dict[str, Any]] = field(default_factory=list)
    delete: list[Mapping[str, Any]] = field(default_factory=list)
    keep_clusters: set[str] = field(default_factory=set)
    reason: str = ""


def _suspended_work(work: Mapping[str, Any]) -> dict[str, Any] | None:
    """``work`` with its manifests stopped with a savepoint, or None when they already are."""
    body = json.loads(json.dumps(work))
    manifests = as_list(as_map(as_map(body.get("spec")).get("workload")).get("manifests"))
    changed = False
    for i, manifest in enumerate(manifests):
        if isinstance(manifest, Mapping) and savepoint_capable(manifest):
            stopped = stop_with_savepoint(manifest)
            if stopped != manifest:
                manifests[i] = stopped
                changed = True
    return body if changed else None


def render_rule(binding: Mapping[str, Any], works: Sequence[Mapping[str, Any]],
                clusters: Mapping[str, Mapping[str, Any]], template: Mapping[str, Any] | None = None, *,
                pending: bool = True) -> MoveRender:
    """How the binding controller renders while a planned move is under way (see the module docstring).

    ``pending``: whether the plannedMove controller runs. Only then does a move in phase Savepointing, or one that
    should start and has no record yet, hold the render: nothing else would end the hold.
    """
    spec = as_map(binding.get("spec"))
    move = parse_move(binding)
    by_cluster: dict[str, list[Mapping[str, Any]]] = {}
    for w in works:
        cluster = work_cluster(w)
        if cluster:
            by_cluster.setdefault(cluster, []).append(w)
    if pending and move is not None and move.savepointing and move.from_cluster not in _targets(spec):
        old = [w for w in by_cluster.get(move.from_cluster, []) if not _terminating(w)]
        if old:
            updates = [u for u in (_suspended_work(w) for w in old) if u is not None]
            return MoveRender(hold=True, update=updates, keep_clusters={move.from_cluster},
                              reason=f"stopping the job in {move.from_cluster} with a savepoint")
    if move is not None and move.phase == PHASE_DONE and move.from_cluster not in _targets(spec):
        old = by_cluster.get(move.from_cluster, [])
        if old:
            return MoveRender(hold=True, delete=[w for w in old if not _terminating(w)],
                              reason=f"the savepoint is taken: removing the old copy in {move.from_cluster} first")
    candidate = move_candidate(binding, works, clusters, template) if pending else None
    if candidate is not None:
        return MoveRender(hold=True, keep_clusters={candidate.from_cluster},
                          reason=f"a planned move out of {candidate.from_cluster} is starting")
    return MoveRender()


def waits_on_old_copy(binding: Mapping[str, Any], cluster: str | None) -> bool:
    """Whether a render of the binding waits for its Work in ``cluster`` to go (a planned move out of it)."""
    move = parse_move(binding)
    return move is not None and move.from_cluster == cluster and move.phase in (PHASE_SAVEPOINTING, PHASE_DONE)


def move_restore(binding: Mapping[str, Any], cluster: str, *, existed: bool = False) -> dict[str, Any] | None:
    """The RestoreState input for ``cluster``'s Work after a planned move into it, or None."""
    move = parse_move(binding)
    if move is None or move.phase != PHASE_DONE or move.to_cluster != cluster:
        return None
    record = json_annotation(annotations_of(binding), MOVE_SAVEPOINT_ANNOTATION)
    if not isinstance(record, Mapping) or record.get("toCluster") != cluster or not as_str(record.get("path")):
        return None
    restore = as_map(json_annotation(annotations_of(binding), RESTORE_ANNOTATION))
    job_id = restore.get("jobId") if restore.get("cluster") == cluster else None
    return {"path": record["path"], "kind": "savepoint", "jobId": job_id, "checkpointId": None,
            "existed": existed, "nonce": move.nonce}


def apply_move_restore(manifest: Mapping[str, Any], binding: Mapping[str, Any], cluster: str,
                       interpreter: ResourceInterpreter) -> dict[str, Any] | None:
    """``manifest`` (the new copy's, for ``cluster``) starting from the move's savepoint through the interpreter's
    RestoreState, or None when no move into ``cluster`` applies, the manifest already names the savepoint, or the
    kind has no RestoreState. Raises :class:`~flotilla.interpreter.InterpreterError` when the operation fails."""
    restore = move_restore(binding, cluster)
    if restore is None:
        return None
    job = as_map(as_map(manifest.get("spec")).get("job"))
    if job.get("initialSavepointPath") == restore["path"]:
        return None
    if not interpreter.hook_enabled(dict(manifest), Operation.RESTORE_STATE):
        return None
    return dict(interpreter.restore_state(dict(manifest), restore))


# --------------------------------------------------------------------------------------------- the savepoint


def _reflected(binding: Mapping[str, Any], cluster: str) -> Mapping[str, Any] | None:
    for item in as_list(as_map(binding.get("status")).get("aggregatedStatus")):
        if as_map(item).get("clusterName") == cluster:
            return as_map(item)
    return None


def _savepoint_fields(binding: Mapping[str, Any], cluster: str) -> tuple[Mapping[str, Any], str, datetime | None]:
    """``(status, path, at)``: the reflected status of ``cluster``, its newest savepoint and that savepoint's time."""
    item = _reflected(binding, cluster)
    status = as_map(item.get("status")) if item is not None else {}
    job = as_map(status.get("jobStatus"))
    last = as_map(as_map(job.get("savepointInfo")).get("lastSavepoint"))
    location = as_str(last.get("location"))
    path = as_str(job.get("upgradeSavepointPath")) or location
    stamp = last.get("timeStamp") if location == path else None
    try:
        at = datetime.fromtimestamp(int(stamp) / 1000, UTC) if stamp is not None else None
    except (TypeError, ValueError, OverflowError):
        at = None
    return status, path, at


def current_savepoint(binding: Mapping[str, Any], cluster: str) -> str | None:
    """The newest savepoint the copy in ``cluster`` reports now (recorded when a move starts), or None."""
    return _savepoint_fields(binding, cluster)[1] or None


def reflected_savepoint(binding: Mapping[str, Any], cluster: str, since: datetime,
                        previous: str | None = None) -> tuple[str, datetime] | None:
    """The savepoint the old copy in ``cluster`` reports it stopped with for the move: ``(path, at)``.

    The job must be suspended (``lifecycleState: SUSPENDED``; job ``FINISHED``), and the savepoint is the
    ``upgradeSavepointPath`` (operator 1.10+) or ``savepointInfo.lastSavepoint.location``. With its ``timeStamp``
    (epoch milliseconds, operators that still fill ``savepointInfo``) it must not be older than ``since`` (less
    :data:`CLOCK_SKEW_TOLERANCE`); without one it must differ from ``previous``, the savepoint reported when the
    move started (its time is then taken as ``since``).
    """
    status, path, at = _savepoint_fields(binding, cluster)
    if status.get("lifecycleState") != "SUSPENDED" or not path:
        return None
    if as_map(status.get("jobStatus")).get("state") not in _SUSPENDED_JOB_STATES:
        return None
    if at is None:
        return (path, since) if path != previous else None
    if at < since - timedelta(seconds=CLOCK_SKEW_TOLERANCE):
        return None
    return path, at


def failure_reason(move: Move, binding: Mapping[str, Any], works: Iterable[Mapping[str, Any]],
                   clusters: Mapping[str, Mapping[str, Any]], now: datetime, timeout: float) -> str | None:
    """Why a move in phase Savepointing fails now, or None while it may go on."""
    source = move.from_cluster
    if source in _targets(as_map(binding.get("spec"))):
        return f"the binding targets {source} again: the move is called off"
    if not reachable(clusters.get(source)):
        why = "is fenced or being fenced" if is_ready(clusters.get(source)) else "is not Ready"
        return f"cluster {source} {why}: no savepoint can be taken there; restoring from the newest checkpoint"
    if source not in _live_works(works):
        return f"the old copy's Work in {source} is gone before its savepoint was seen"
    if now - move.started_at >= timedelta(seconds=timeout):
        return (f"no savepoint reported by the job in {source} within {timeout:g}s (--move-savepoint-timeout); "
                "restoring from the newest checkpoint")
    return None


def _job_id(binding: Mapping[str, Any], cluster: str) -> str | None:
    item = _reflected(binding, cluster)
    value = as_map(as_map(as_map(item).get("status")).get("jobStatus")).get("jobId") if item is not None else None
    return value if isinstance(value, str) and value else None


def move_savepoint_record(move: Move, path: str, at: datetime) -> str:
    """The annotation ``failover.flotilla.io/move-savepoint``."""
    return json.dumps({"fromCluster": move.from_cluster, "toCluster": move.to_cluster, "path": path,
                       "at": format_time(at)}, separators=(",", ":"))


def restore_record(move: Move, binding: Mapping[str, Any], path: str, at: datetime, now: datetime) -> str:
    """The restore record (``failover.flotilla.io/restore``) for ``move.to_cluster``: restored from the savepoint.

    ``faultAt`` is when the move started; the savepoint is newer, so the state gap (``ageAtFault``) is 0.
    """
    return json.dumps({
        "cluster": move.to_cluster, "fromCluster": move.from_cluster, "jobId": _job_id(binding, move.from_cluster),
        "outcome": "Restored", "reason": "savepoint taken for a planned move", "path": path, "kind": "savepoint",
        "checkpointId": None, "completedAt": format_time(at), "faultAt": format_time(move.started_at),
        "ageAtFault": max(0.0, (move.started_at - at).total_seconds()), "resolvedAt": format_time(now),
    }, separators=(",", ":"))


def new_copy_healthy(binding: Mapping[str, Any], cluster: str) -> bool:
    """The new copy in ``cluster`` is applied and reports Healthy."""
    item = _reflected(binding, cluster)
    return item is not None and item.get("applied") is True and item.get("health") == "Healthy"


def completed_patch(move: Move, now: datetime, resource_version: Any = None) -> dict[str, Any]:
    return move_patch(replace(move, completed_at=now), resource_version=resource_version)


# --------------------------------------------------------------------------------------------- the request


class MoveRequestError(ValueError):
    """A ``flotilla failover move`` that cannot be done; the message says why and what to do."""


@dataclass(frozen=True)
class MoveRequest:
    """What ``flotilla failover move`` writes: ``patch`` (a merge patch of the binding, resourceVersion-guarded)."""

    from_cluster: str
    to_cluster: str
    savepoint: bool
    why_no_savepoint: str
    patch: dict[str, Any]


def _cluster_state(cluster: Mapping[str, Any] | None) -> str:
    for c in as_list(as_map(as_map(cluster).get("status")).get("conditions")):
        if as_map(c).get("type") == "Ready":
            return f"Ready={as_map(c).get('status')} ({as_map(c).get('reason') or 'no reason'})"
    return "no Ready condition yet"


def _feasible(binding: Mapping[str, Any], spec: Mapping[str, Any], clusters: Sequence[Mapping[str, Any]],
              to: str, now: datetime) -> str | None:
    """Why the scheduler would not keep the workload in ``to`` after the move (None: it would)."""
    from flotilla.scheduler import schedule  # the scheduler's own algorithm decides feasibility

    for label, candidate in (("while the old cluster is being evicted", spec),
                             ("once the eviction is over", {k: v for k, v in spec.items()
                                                            if k != "gracefulEvictionTasks"})):
        try:
            result = schedule({"spec": candidate, "status": as_map(binding.get("status"))}, None, clusters, now=now)
        except Exception as e:  # noqa: BLE001 - a malformed binding or cluster: say so
            return f"the scheduler cannot place the binding: {e}"
        if not result.ok:
            failure = result.failures.get(to) if result.failures else None
            return f"{to} does not fit the placement: {failure or result.message}"
        chosen = [c.name for c in result.clusters]
        if chosen != [to]:
            failure = result.failures.get(to) if result.failures else None
            why = f" ({to}: {failure})" if failure else ""
            return (f"the scheduler would place it in {', '.join(chosen) or 'no cluster'} rather than {to} "
                    f"{label}{why}")
    return None


def plan_move_request(binding: Mapping[str, Any], clusters: Sequence[Mapping[str, Any]], to: str, now: datetime,
                      *, template: Mapping[str, Any] | None = None, policy: Mapping[str, Any] | None = None,
                      preserved_label_state: Mapping[str, str] | None = None) -> MoveRequest:
    """Check a move of ``binding`` to ``to`` and build its patch; raises :class:`MoveRequestError`.

    The workload must run in exactly one cluster, ``to`` must be another registered, Ready cluster that the
    placement accepts and the scheduler keeps. The patch sets ``spec.clusters`` to ``to``, appends an eviction
    task from the old cluster (producer ``FailoverMove``, reason ``PlannedMove``, purge mode ``Directly``, the
    preserved state if any) and, when the kind takes a savepoint and the old cluster is Ready, the move record
    in phase ``Savepointing``.
    """
    meta, spec = meta_of(binding), as_map(binding.get("spec"))
    if meta.get("deletionTimestamp"):
        raise MoveRequestError("the binding is being deleted")
    by_name = {as_str(meta_of(c).get("name")): c for c in clusters}
    if to not in by_name:
        known = ", ".join(sorted(n for n in by_name if n)) or "none registered"
        raise MoveRequestError(f"--to {to}: no such cluster (clusters: {known})")
    targets = _targets(spec)
    if not targets:
        raise MoveRequestError("the workload is not scheduled to any cluster yet (spec.clusters is empty): there is "
                               "nothing to move")
    if len(targets) > 1:
        raise MoveRequestError(f"the workload runs in {len(targets)} clusters ({', '.join(targets)}): only a "
                               "workload placed in a single cluster can be moved")
    source = targets[0]
    if source == to:
        raise MoveRequestError(f"the workload already runs in {to}")
    if not is_ready(by_name[to]):
        raise MoveRequestError(f"--to {to}: the cluster is not Ready ({_cluster_state(by_name[to])}); wait until it "
                               "is, or choose another cluster")
    current = parse_move(binding)
    if current is not None and current.savepointing:
        raise MoveRequestError(f"a planned move from {current.from_cluster} is already under way (started "
                               f"{format_time(current.started_at)})")
    if any(as_map(t).get("fromCluster") == to for t in eviction_tasks(spec)):
        raise MoveRequestError(f"--to {to}: the workload is being evicted from {to}; wait until that eviction is "
                               "over (its graceful-eviction task is removed)")
    replicas = next((as_map(c).get("replicas") for c in as_list(spec.get("clusters"))
                     if as_map(c).get("name") == source), None)
    task: dict[str, Any] = {"fromCluster": source, "purgeMode": PURGE_MODE_DIRECTLY, "reason": MOVE_REASON,
                            "message": f"moved to {to} by flotilla failover move", "producer": MOVE_PRODUCER,
                            "creationTimestamp": format_time(now)}
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > 0:
        task["replicas"] = replicas
    if preserved_label_state:
        task["preservedLabelState"] = dict(preserved_label_state)
        task["clustersBeforeFailover"] = [source]
    tasks = [dict(as_map(t)) for t in eviction_tasks(spec) if as_map(t).get("fromCluster") != source] + [task]
    new_target: dict[str, Any] = {"name": to}
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > 0:
        new_target["replicas"] = replicas
    moved_spec = {**spec, "clusters": [new_target], "gracefulEvictionTasks": tasks}
    why = _feasible(binding, moved_spec, clusters, to, now)
    if why is not None:
        raise MoveRequestError(why)
    kind_of = template if template is not None else as_map(spec.get("resource"))
    why_not = ""
    if not savepoint_capable(kind_of):
        why_not = f"{as_str(as_map(kind_of).get('kind')) or 'this kind'} takes no savepoint"
    elif not savepoint_on_move_enabled(policy, template):
        why_not = f"the policy or the template says {SAVEPOINT_ON_MOVE_ANNOTATION}: \"false\""
    elif not reachable(by_name.get(source)):
        why_not = (f"cluster {source} is not Ready ({_cluster_state(by_name.get(source))})"
                   if not is_ready(by_name.get(source)) else f"cluster {source} is fenced or being fenced")
    annotations: dict[str, Any] = {}
    if not why_not:
        nonce = (current.nonce + 1) if current is not None else 1
        move = Move(source, to, PHASE_SAVEPOINTING, now, nonce=nonce, reason="requested by flotilla failover move",
                    trigger=TRIGGER_PLANNED_MOVE, previous_path=current_savepoint(binding, source))
        annotations[MOVE_ANNOTATION] = move.to_json()
    patch: dict[str, Any] = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                             "spec": {"clusters": [new_target], "gracefulEvictionTasks": tasks}}
    if annotations:
        patch["metadata"]["annotations"] = annotations
    return MoveRequest(source, to, not why_not, why_not, patch)
