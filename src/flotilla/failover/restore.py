"""Native restore (D20): the control plane resumes a failed-over stateful job from its newest complete snapshot.

Pure functions: no I/O, no clock (``now`` is passed in), inputs never mutated. The restore controller
(:mod:`flotilla.controllers.restore`) looks snapshots up in the job's checkpoint storage (:mod:`flotilla.checkpoints`)
and writes the decision as the binding's record; the binding controller holds the new copy's Work until the record
is resolved and then writes the restore into it on every render.

**When** (:func:`restore_needs`). A render target needs a native restore when the binding's injection for it is
fresh (Karmada's rule on the last eviction task, :func:`flotilla.failover.state.plan_injection` with source
``task``), the workload's kind has the interpreter operation ``RestoreState`` (built in for FlinkDeployment, or a
ResourceInterpreterCustomization's ``restoreState``), and the policy did not turn it off
(``restore.flotilla.io/native: "false"``). The preserved state names the job (:func:`preserved_job_id`).

**The record** (:class:`RestoreRecord`, annotation ``failover.flotilla.io/restore``): the last restore decided for
the binding, ``outcome`` ``Restored`` (a path), ``Holding`` (the Work waits) or ``Fresh`` (empty state). A record
*resolves* a need (:func:`record_resolves`) when it is for the same target, source cluster, job id and fault, and is
``Restored`` or ``Fresh``. A ``Restored`` record stays applied to its cluster (:func:`applied_restore`) until that
cluster is no longer a target or an eviction task leaves it, so a later template change never drops the path.

**Which snapshot** (:func:`lookup_plan`, :func:`choose_snapshot`): a planned move's savepoint for this target when
there is one (``failover.flotilla.io/move-savepoint``); otherwise the newest complete checkpoint or savepoint of the
preserved job id; when that job has none, the path the failed copy itself started from (the previous record, when
it restored that job id or that cluster): carried over until the job completes a checkpoint of its own.

**The continuity guard**: with ``restore.flotilla.io/max-checkpoint-age`` a snapshot that completed longer than that
before the fault is refused.

**No storage**: a job whose configuration names no checkpoint directory (and no default is set) keeps Karmada's
behaviour at once (record ``Fresh``, failure ``NoCheckpointStorage``, a Warning Event): its state may be where only
the member knows (the Flink operator's default configuration), and a member-side rule may still restore it.

**Failures** (:func:`decide_restore`): no snapshot, storage unreachable, credentials refused, a snapshot too old,
no storage configured or no job id in the preserved state. With ``--restore-missing=hold`` (the default) the Work
waits (record ``Holding``, Warning ``StateRestoreFailed`` on every attempt) until the lookup succeeds or
``--restore-hold-timeout`` passes (0: wait forever), then the job starts from empty state with Warning
``StateRestoreTimedOut``; with ``--restore-missing=fresh`` it starts from empty state at once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Literal

from flotilla.api.labels import (
    MOVE_ANNOTATION,
    MOVE_SAVEPOINT_ANNOTATION,
    RESTORE_ANNOTATION,
    RESTORE_POLICY_ANNOTATION_PREFIX,
    SAVEPOINT_ON_MOVE_ANNOTATION,
)
from flotilla.failover.purge import eviction_tasks
from flotilla.failover.state import EventSpec, InjectionPlan, render_targets, rules_of
from flotilla.kube.durations import go_duration, parse_go_duration
from flotilla.kube.metadata import json_annotation
from flotilla.kube.objects import annotations_of, as_map, as_str
from flotilla.kube.times import format_time, parse_time

if TYPE_CHECKING:  # the storage package loads fsspec: only the restore controller needs it at run time
    from flotilla.checkpoints.layout import Snapshot

__all__ = [
    "CONDITION_STATE_RESTORED",
    "CREDENTIALS_SECRET_ANNOTATION",
    "EVENT_STATE_RESTORED",
    "EVENT_STATE_RESTORE_FAILED",
    "EVENT_STATE_RESTORE_TIMED_OUT",
    "MAX_CHECKPOINT_AGE_ANNOTATION",
    "MISSING_FRESH",
    "MISSING_HOLD",
    "MOVE_ANNOTATION",
    "MOVE_SAVEPOINT_ANNOTATION",
    "NATIVE_ANNOTATION",
    "POLICY_ANNOTATION_PREFIX",
    "RESTORE_ANNOTATION",
    "RESTORE_CONTROLLER_RUNNING",
    "Found",
    "LookupPlan",
    "RestoreDecision",
    "RestoreFailure",
    "RestoreNeed",
    "RestoreRecord",
    "RestoreSettings",
    "applied_restore",
    "choose_snapshot",
    "decide_restore",
    "failure_of",
    "held_targets",
    "lookup_plan",
    "move_in_progress",
    "move_savepoint",
    "parse_restore_record",
    "policy_restore_annotations",
    "preserved_job_id",
    "record_resolves",
    "restore_needs",
    "restore_nonce",
    "restore_patch",
    "restore_settings",
    "validate_restore_annotations",
]

# the binding's record of the last native restore (JSON, :class:`RestoreRecord`): RESTORE_ANNOTATION; a planned
# move's savepoint (JSON ``{"fromCluster", "toCluster", "path", "at"}``), written by the move: MOVE_SAVEPOINT_ANNOTATION

#: ``ControllerContext.extras`` key set while the restore controller runs in a controller-manager: only then does the
#: binding controller hold a Work for its restore (with ``--controllers=-restore``, Karmada's behaviour).
RESTORE_CONTROLLER_RUNNING: Final = "restore-controller-running"

# a planned move in progress (JSON ``{"fromCluster", "toCluster", "phase", ...}``), written by the move: while its
# phase is ``Savepointing`` the savepoint does not exist yet, so the restore for ``toCluster`` waits: MOVE_ANNOTATION

#: Policy annotations (Flotilla extensions; a Karmada policy stays valid), copied to the bindings the policy makes.
POLICY_ANNOTATION_PREFIX: Final = RESTORE_POLICY_ANNOTATION_PREFIX
NATIVE_ANNOTATION: Final = "restore.flotilla.io/native"
MAX_CHECKPOINT_AGE_ANNOTATION: Final = "restore.flotilla.io/max-checkpoint-age"
CREDENTIALS_SECRET_ANNOTATION: Final = "restore.flotilla.io/credentials-secret"
_KNOWN_POLICY_ANNOTATIONS: Final = (NATIVE_ANNOTATION, MAX_CHECKPOINT_AGE_ANNOTATION, CREDENTIALS_SECRET_ANNOTATION,
                                    SAVEPOINT_ON_MOVE_ANNOTATION)

OUTCOME_RESTORED: Final = "Restored"
OUTCOME_HOLDING: Final = "Holding"
OUTCOME_FRESH: Final = "Fresh"

#: ``--restore-missing`` values.
MISSING_HOLD: Final = "hold"
MISSING_FRESH: Final = "fresh"
MISSING_CHOICES: Final = (MISSING_HOLD, MISSING_FRESH)

#: Binding condition: True/``StateRestored``; False/<a :class:`RestoreFailure`> while the Work is held;
#: False/``StateRestoreTimedOut`` or False/``StartedFresh`` when the job starts from empty state.
CONDITION_STATE_RESTORED: Final = "StateRestored"
REASON_STATE_RESTORED: Final = "StateRestored"
REASON_TIMED_OUT: Final = "StateRestoreTimedOut"
REASON_STARTED_FRESH: Final = "StartedFresh"

EVENT_STATE_RESTORED: Final = "StateRestored"  # Normal: the path written into the new copy
EVENT_STATE_RESTORE_FAILED: Final = "StateRestoreFailed"  # Warning: every failed attempt
EVENT_STATE_RESTORE_TIMED_OUT: Final = "StateRestoreTimedOut"  # Warning: the hold timed out, empty state

_JOB_ID_RE: Final = re.compile(r"^[0-9a-fA-F]{32}$")
_JOB_ID_PATH_RE: Final = re.compile(r"^\{\s*\.?\s*jobStatus\s*\.\s*jobId\s*\}$")
_NONCE_MODULUS: Final = 2 ** 48


class RestoreFailure(StrEnum):
    """Why no snapshot can be restored (the ``reason`` label of ``flotilla_state_restore_failures_total``)."""

    NO_CHECKPOINT = "NoCheckpointFound"
    STORAGE_UNREACHABLE = "StorageUnreachable"
    CREDENTIALS_REFUSED = "CredentialsRefused"
    CHECKPOINT_TOO_OLD = "CheckpointTooOld"
    STORAGE_NOT_CONFIGURED = "StorageNotConfigured"
    NO_JOB_ID = "NoJobId"
    #: the job names no checkpoint directory (and there is no default): the control plane cannot know where its
    #: state is (it may be in the member's Flink operator configuration), so native restore stands aside at once
    NO_STORAGE = "NoCheckpointStorage"


def failure_of(storage_reason: str) -> RestoreFailure:
    """The failure for a storage error's ``reason`` (``unreachable``, ``denied``, ``invalid``)."""
    return {"unreachable": RestoreFailure.STORAGE_UNREACHABLE, "denied": RestoreFailure.CREDENTIALS_REFUSED}.get(
        storage_reason, RestoreFailure.STORAGE_NOT_CONFIGURED)


# ============================================================================================ helpers


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# ============================================================================================ policy knobs


@dataclass(frozen=True)
class RestoreSettings:
    """A binding's restore settings, from the ``restore.flotilla.io/*`` annotations its policy gave it."""

    native: bool = True
    max_checkpoint_age: float | None = None  # seconds; None: no continuity guard
    credentials_secret: str | None = None


def validate_restore_annotations(annotations: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """``[(annotation, problem)]`` for malformed ``restore.flotilla.io/*`` values (admission's 422)."""
    out: list[tuple[str, str]] = []
    values = as_map(annotations)
    native = values.get(NATIVE_ANNOTATION)
    if native is not None and as_str(native).strip().lower() not in ("true", "false"):
        out.append((NATIVE_ANNOTATION, 'must be "true" or "false"'))
    age = values.get(MAX_CHECKPOINT_AGE_ANNOTATION)
    if age is not None:
        try:
            seconds = parse_go_duration(age)
        except ValueError:
            out.append((MAX_CHECKPOINT_AGE_ANNOTATION, "must be a duration such as 10m, 1h30m or 90s"))
        else:
            if seconds <= 0:
                out.append((MAX_CHECKPOINT_AGE_ANNOTATION, "must be greater than 0"))
    on_move = values.get(SAVEPOINT_ON_MOVE_ANNOTATION)
    if on_move is not None and as_str(on_move).strip().lower() not in ("true", "false"):
        out.append((SAVEPOINT_ON_MOVE_ANNOTATION, 'must be "true" or "false"'))
    secret = values.get(CREDENTIALS_SECRET_ANNOTATION)
    if secret is not None:
        name = as_str(secret)
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name):
            out.append((CREDENTIALS_SECRET_ANNOTATION,
                        "must be the name of a Secret (lower-case letters, digits, '-' and '.')"))
    for key in values:
        if isinstance(key, str) and key.startswith(POLICY_ANNOTATION_PREFIX) and key not in _KNOWN_POLICY_ANNOTATIONS:
            out.append((key, f"unknown annotation; the known ones are {', '.join(_KNOWN_POLICY_ANNOTATIONS[:-1])} "
                             f"and {_KNOWN_POLICY_ANNOTATIONS[-1]}"))
    return out


def restore_settings(obj_or_annotations: Mapping[str, Any] | None) -> RestoreSettings:
    """The settings of a binding (or a policy, or their annotations); malformed values (admission rejects them)
    fall back to the defaults."""
    values = as_map(obj_or_annotations)
    if "metadata" in values:
        values = annotations_of(values)
    native = as_str(values.get(NATIVE_ANNOTATION)).strip().lower() != "false"
    age: float | None = None
    try:
        parsed = parse_go_duration(values.get(MAX_CHECKPOINT_AGE_ANNOTATION))
        age = parsed if parsed > 0 else None
    except ValueError:
        age = None
    secret = as_str(values.get(CREDENTIALS_SECRET_ANNOTATION)).strip() or None
    return RestoreSettings(native, age, secret)


def policy_restore_annotations(policy: Mapping[str, Any]) -> dict[str, str]:
    """The ``restore.flotilla.io/*`` annotations of a (Cluster)PropagationPolicy, for its bindings."""
    return {k: v for k, v in annotations_of(policy).items()
            if isinstance(k, str) and k.startswith(POLICY_ANNOTATION_PREFIX) and isinstance(v, str)}


# ============================================================================================ the record


@dataclass(frozen=True)
class RestoreRecord:
    """The last native restore decided for a binding (annotation ``failover.flotilla.io/restore``).

    ``existed`` and ``holding_since`` are Flotilla's own additions to the shared fields: whether a Work for
    ``cluster`` existed when the restore was decided (the object is then redeployed with a nonce), and when the
    Work started waiting.
    """

    cluster: str
    from_cluster: str
    job_id: str
    outcome: Literal["Restored", "Holding", "Fresh"]
    reason: str
    path: str | None = None
    kind: str | None = None
    checkpoint_id: int | None = None
    completed_at: datetime | None = None
    fault_at: datetime | None = None
    age_at_fault: float | None = None
    resolved_at: datetime | None = None
    existed: bool = False
    holding_since: datetime | None = None
    failure: str | None = None

    @property
    def resolved(self) -> bool:
        return self.outcome in (OUTCOME_RESTORED, OUTCOME_FRESH)

    def to_json(self) -> str:
        doc: dict[str, Any] = {"cluster": self.cluster, "fromCluster": self.from_cluster, "jobId": self.job_id,
                               "outcome": self.outcome, "reason": self.reason}
        if self.path is not None:
            doc["path"] = self.path
        if self.kind is not None:
            doc["kind"] = self.kind
        if self.checkpoint_id is not None:
            doc["checkpointId"] = self.checkpoint_id
        for key, t in (("completedAt", self.completed_at), ("faultAt", self.fault_at),
                       ("resolvedAt", self.resolved_at), ("holdingSince", self.holding_since)):
            if t is not None:
                doc[key] = format_time(t)
        if self.age_at_fault is not None:
            doc["ageAtFault"] = round(self.age_at_fault, 3)
        if self.existed:
            doc["existed"] = True
        if self.failure is not None:
            doc["failure"] = self.failure
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def parse_restore_record(value: Mapping[str, Any] | str | None) -> RestoreRecord | None:
    """The record in a binding (or its annotations, or the value); ``None`` when absent or unreadable."""
    if isinstance(value, Mapping):
        annotations = annotations_of(value) if "metadata" in value else value
    else:
        annotations = {RESTORE_ANNOTATION: value}
    doc = json_annotation(annotations, RESTORE_ANNOTATION)
    if not isinstance(doc, dict):
        return None
    cluster, outcome = as_str(doc.get("cluster")), as_str(doc.get("outcome"))
    if not cluster or outcome not in (OUTCOME_RESTORED, OUTCOME_HOLDING, OUTCOME_FRESH):
        return None
    path = as_str(doc.get("path")) or None
    if outcome == OUTCOME_RESTORED and path is None:
        return None
    checkpoint_id = doc.get("checkpointId")
    return RestoreRecord(
        cluster=cluster, from_cluster=as_str(doc.get("fromCluster")), job_id=as_str(doc.get("jobId")),
        outcome=outcome,  # type: ignore[arg-type]
        reason=as_str(doc.get("reason")), path=path, kind=as_str(doc.get("kind")) or None,
        checkpoint_id=checkpoint_id if isinstance(checkpoint_id, int) and not isinstance(checkpoint_id, bool)
        else None,
        completed_at=parse_time(doc.get("completedAt")), fault_at=parse_time(doc.get("faultAt")),
        age_at_fault=_number(doc.get("ageAtFault")), resolved_at=parse_time(doc.get("resolvedAt")),
        existed=doc.get("existed") is True, holding_since=parse_time(doc.get("holdingSince")),
        failure=as_str(doc.get("failure")) or None)


def restore_patch(record: RestoreRecord | None, resource_version: Any) -> dict[str, Any]:
    """The metadata-only merge patch writing ``record`` (``None``: removing it), guarded by ``resource_version``."""
    value = None if record is None else record.to_json()
    return {"metadata": {"resourceVersion": resource_version, "annotations": {RESTORE_ANNOTATION: value}}}


# ============================================================================================ when


def preserved_job_id(labels: Mapping[str, str], rules: Iterable[Any] = ()) -> str | None:
    """The job id in a preserved state: the label of the rule reading ``{.jobStatus.jobId}``, else the one label
    value that is a Flink job id (32 hex digits), else the only label's value; ``None`` when none says."""
    for rule in rules:
        alias, path = as_str(getattr(rule, "alias", "")), as_str(getattr(rule, "json_path", ""))
        if alias in labels and _JOB_ID_PATH_RE.match(path.strip()):
            return labels[alias] or None
    ids = [v for v in labels.values() if _JOB_ID_RE.match(v)]
    if len(ids) == 1:
        return ids[0]
    if len(labels) == 1:
        return next(iter(labels.values())) or None
    return None


@dataclass(frozen=True)
class RestoreNeed:
    """A render target whose new copy must be restored: the failover ``from_cluster`` -> ``cluster`` of the job
    ``job_id`` (``None``: the preserved state names none), the fault time (the task's ``creationTimestamp``)."""

    cluster: str
    from_cluster: str
    job_id: str | None
    fault_at: datetime | None
    labels: Mapping[str, str] = field(default_factory=dict)


def restore_needs(binding: Mapping[str, Any], injection: InjectionPlan, *, hook_enabled: bool,
                  settings: RestoreSettings | None = None, gate: bool = True) -> dict[str, RestoreNeed]:
    """The render targets of ``binding`` that need a native restore (see the module docstring)."""
    settings = settings if settings is not None else restore_settings(binding)
    if not gate or not hook_enabled or not settings.native:
        return {}
    spec = as_map(binding.get("spec"))
    tasks = eviction_tasks(spec)
    if not tasks:
        return {}
    last = tasks[-1]
    from_cluster = as_str(last.get("fromCluster"))
    trigger = "application" if "application-failover" in as_str(last.get("producer")) else "cluster"
    rules = rules_of(as_map(spec.get("failover")), trigger)
    out: dict[str, RestoreNeed] = {}
    for cluster, decision in injection.decisions.items():
        if decision.source != "task" or not decision.labels:
            continue
        labels = dict(decision.labels)
        out[cluster] = RestoreNeed(cluster, from_cluster, preserved_job_id(labels, rules),
                                   parse_time(last.get("creationTimestamp")), labels)
    return out


def record_resolves(record: RestoreRecord | None, need: RestoreNeed) -> bool:
    """Whether ``record`` is the resolved decision for ``need`` (same target, source, job and fault)."""
    return record is not None and record.resolved and _same_failover(record, need)


def _same_failover(record: RestoreRecord, need: RestoreNeed) -> bool:
    if record.cluster != need.cluster or record.from_cluster != need.from_cluster:
        return False
    if need.job_id and record.job_id and record.job_id != need.job_id:
        return False
    return record.fault_at is None or need.fault_at is None or record.fault_at == need.fault_at


def held_targets(needs: Mapping[str, RestoreNeed], record: RestoreRecord | None) -> set[str]:
    """The targets whose Work must not be written yet: a restore is needed and not resolved."""
    return {cluster for cluster, need in needs.items() if not record_resolves(record, need)}


def restore_nonce(record: RestoreRecord) -> int:
    """A ``savepointRedeployNonce`` derived from the record: stable across renders, new for each restore."""
    seed = f"{record.cluster}|{record.path}|{format_time(record.resolved_at) if record.resolved_at else ''}"
    return int(hashlib.sha256(seed.encode()).hexdigest()[:12], 16) % _NONCE_MODULUS or 1


def applied_restore(binding_spec: Mapping[str, Any], record: RestoreRecord | None,
                    target: str) -> dict[str, Any] | None:
    """The ``RestoreState`` argument for ``target``'s manifest, while a ``Restored`` record applies to it: it names
    ``target``, which is still a render target, and no eviction task has left it since."""
    if record is None or record.outcome != OUTCOME_RESTORED or record.cluster != target or not record.path:
        return None
    if target not in render_targets(binding_spec):
        return None
    if any(as_str(t.get("fromCluster")) == target for t in eviction_tasks(binding_spec)):
        return None
    return {"path": record.path, "kind": record.kind or "checkpoint", "jobId": record.job_id,
            "checkpointId": record.checkpoint_id, "existed": record.existed, "nonce": restore_nonce(record)}


# ============================================================================================ which snapshot


def move_savepoint(binding: Mapping[str, Any], need: RestoreNeed) -> str | None:
    """The savepoint a planned move took for ``need`` (``failover.flotilla.io/move-savepoint``), or ``None``."""
    doc = json_annotation(annotations_of(binding), MOVE_SAVEPOINT_ANNOTATION)
    if not isinstance(doc, dict) or as_str(doc.get("toCluster")) != need.cluster:
        return None
    if doc.get("fromCluster") and as_str(doc.get("fromCluster")) != need.from_cluster:
        return None
    return as_str(doc.get("path")) or None


def move_in_progress(binding: Mapping[str, Any], cluster: str) -> bool:
    """Whether a planned move to ``cluster`` is still taking its savepoint (``failover.flotilla.io/move`` phase
    ``Savepointing``): the restore waits for it instead of settling on an older checkpoint."""
    doc = json_annotation(annotations_of(binding), MOVE_ANNOTATION)
    return isinstance(doc, dict) and doc.get("phase") == "Savepointing" and as_str(doc.get("toCluster")) == cluster


@dataclass(frozen=True)
class LookupPlan:
    """What to ask the storage for ``need``: the planned move's ``savepoint`` (checked alone), else the snapshots of
    ``job_id``, and when it has none the ``carry_over`` path the failed copy started from."""

    job_id: str | None
    savepoint: str | None = None
    carry_over: str | None = None


def lookup_plan(need: RestoreNeed, previous: RestoreRecord | None, savepoint: str | None = None) -> LookupPlan:
    """See :class:`LookupPlan`. The carry-over is the previous ``Restored`` record's path when it restored the same
    job id (D5: state carried forward) or the copy in the failed cluster (it started from that path)."""
    if savepoint:
        return LookupPlan(need.job_id, savepoint=savepoint)
    carry = None
    if previous is not None and previous.outcome == OUTCOME_RESTORED and previous.path:
        if (need.job_id and previous.job_id == need.job_id) or previous.cluster == need.from_cluster:
            carry = previous.path
    return LookupPlan(need.job_id, carry_over=carry)


@dataclass(frozen=True)
class Found:
    """What the lookup gave: complete ``snapshots`` and where from (``source``: ``savepoint`` for a planned move,
    ``storage``, ``carry-over``), or a ``failure`` with a ``message`` that holds no credential. ``location`` is the
    storage described for messages."""

    snapshots: Sequence[Snapshot] = ()
    source: Literal["savepoint", "storage", "carry-over"] = "storage"
    failure: RestoreFailure | None = None
    message: str = ""
    location: str = ""


def choose_snapshot(found: Found) -> Snapshot | None:
    """The newest complete snapshot found (by completion time, then checkpoint id)."""
    from flotilla.checkpoints.layout import newest

    return newest(found.snapshots)


# ============================================================================================ the decision


@dataclass(frozen=True)
class RestoreDecision:
    """The record to write, the Event and condition to record, and the metrics: ``outcome`` (for
    ``flotilla_state_restore_total``, only once resolved), ``failure`` (for ``..._failures_total``), ``age``
    (the age at fault, observed when restored); ``retry_after``: seconds until the hold times out (None: none)."""

    record: RestoreRecord
    event: EventSpec
    condition: dict[str, Any]
    outcome: str
    failure: RestoreFailure | None = None
    age: float | None = None
    retry_after: float | None = None


def _job(need: RestoreNeed) -> str:
    return f"job {need.job_id}" if need.job_id else "the job"


def _snapshot_text(s: Snapshot) -> str:
    what = f"checkpoint {s.checkpoint_id}" if s.kind == "checkpoint" and s.checkpoint_id is not None else s.kind
    return f"{what} {s.path}"


def _age_text(age: float | None) -> str:
    return "unknown" if age is None else go_duration(round(age, 3))


def decide_restore(
    need: RestoreNeed,
    found: Found,
    *,
    now: datetime,
    settings: RestoreSettings | None = None,
    previous: RestoreRecord | None = None,
    missing: str = MISSING_HOLD,
    hold_timeout: float = 300.0,
    existed: bool = False,
) -> RestoreDecision:
    """The decision for ``need`` given what the lookup ``found``.

    ``previous`` is the binding's current record (a ``Holding`` one for the same failover keeps its
    ``holdingSince``, the start of the hold timeout); ``missing`` is ``--restore-missing``; ``hold_timeout`` is
    ``--restore-hold-timeout`` in seconds (0: hold until the lookup succeeds); ``existed``: a Work for the target
    already exists (the restore then redeploys the object).
    """
    settings = settings or RestoreSettings()
    base = RestoreRecord(need.cluster, need.from_cluster, need.job_id or "", OUTCOME_HOLDING, "",
                         fault_at=need.fault_at, existed=existed)
    failure, detail = found.failure, found.message
    chosen = None
    if failure is None and not need.job_id and found.source != "savepoint":
        failure, detail = RestoreFailure.NO_JOB_ID, "the preserved state names no job id"
    if failure is None:
        chosen = choose_snapshot(found)
        if chosen is None:
            where = f" in {found.location}" if found.location else ""
            failure, detail = RestoreFailure.NO_CHECKPOINT, f"no complete checkpoint or savepoint of {_job(need)}{where}"
    age = None
    if chosen is not None and chosen.completed_at is not None and need.fault_at is not None:
        age = max((need.fault_at - chosen.completed_at).total_seconds(), 0.0)
    if chosen is not None and settings.max_checkpoint_age is not None and age is not None \
            and age > settings.max_checkpoint_age:
        failure = RestoreFailure.CHECKPOINT_TOO_OLD
        detail = (f"the newest complete snapshot ({_snapshot_text(chosen)}) completed {_age_text(age)} before the "
                  f"fault, more than {MAX_CHECKPOINT_AGE_ANNOTATION}={go_duration(settings.max_checkpoint_age)}")
        chosen = None
    if chosen is not None:
        why = {"savepoint": "the planned move's savepoint",
               "carry-over": "the snapshot the failed copy started from (its job completed no checkpoint)",
               "storage": f"newest complete {chosen.kind}"}[found.source]
        record = replace(base, outcome=OUTCOME_RESTORED, reason=why, path=chosen.path, kind=chosen.kind,
                         checkpoint_id=chosen.checkpoint_id, completed_at=chosen.completed_at, age_at_fault=age,
                         resolved_at=now, holding_since=None)
        message = (f"Restoring {_job(need)} in cluster {need.cluster} (failover from cluster {need.from_cluster}) "
                   f"from {_snapshot_text(chosen)} ({why}; age at the fault: {_age_text(age)})")
        condition = {"type": CONDITION_STATE_RESTORED, "status": "True", "reason": REASON_STATE_RESTORED,
                     "message": message}
        return RestoreDecision(record, EventSpec("Normal", EVENT_STATE_RESTORED, message), condition,
                               OUTCOME_RESTORED, None, age)
    assert failure is not None
    problem = f"Cannot restore the state of {_job(need)} for cluster {need.cluster}: {detail}"
    fresh = replace(base, outcome=OUTCOME_FRESH, resolved_at=now, failure=failure.value)
    if failure is RestoreFailure.NO_STORAGE:
        message = (f"{problem}; native restore is skipped: the new copy gets the preserved labels only, and the "
                   "member cluster decides its restore")
        record = replace(fresh, reason=f"{detail}; native restore skipped")
        condition = {"type": CONDITION_STATE_RESTORED, "status": "False", "reason": failure.value,
                     "message": message}
        return RestoreDecision(record, EventSpec("Warning", EVENT_STATE_RESTORE_FAILED, message), condition,
                               OUTCOME_FRESH, failure)
    if missing == MISSING_FRESH:
        message = f"{problem}; the job starts from empty state (--restore-missing=fresh)"
        record = replace(fresh, reason=f"{detail}; --restore-missing=fresh")
        condition = {"type": CONDITION_STATE_RESTORED, "status": "False", "reason": REASON_STARTED_FRESH,
                     "message": message}
        return RestoreDecision(record, EventSpec("Warning", EVENT_STATE_RESTORE_FAILED, message), condition,
                               OUTCOME_FRESH, failure)
    since = now
    if previous is not None and previous.outcome == OUTCOME_HOLDING and _same_failover(previous, need) \
            and previous.holding_since is not None:
        since = previous.holding_since
    deadline = since + timedelta(seconds=hold_timeout) if hold_timeout > 0 else None
    limit = f"--restore-hold-timeout={go_duration(hold_timeout)}" if hold_timeout > 0 else \
        "--restore-hold-timeout=0: until it succeeds"
    if deadline is not None and now >= deadline:
        message = (f"{problem}; held for {go_duration(round((now - since).total_seconds()))} ({limit}); "
                   "the job starts from empty state")
        record = replace(fresh, reason=f"{detail}; the hold timed out", holding_since=since)
        condition = {"type": CONDITION_STATE_RESTORED, "status": "False", "reason": REASON_TIMED_OUT,
                     "message": message}
        return RestoreDecision(record, EventSpec("Warning", EVENT_STATE_RESTORE_TIMED_OUT, message), condition,
                               OUTCOME_FRESH, failure)
    tail = f"until {format_time(deadline)}" if deadline is not None else "until it succeeds"
    message = f"{problem}; the new copy's Work is held and the lookup retried {tail} ({limit})"
    record = replace(base, reason=detail, holding_since=since, failure=failure.value)
    condition = {"type": CONDITION_STATE_RESTORED, "status": "False", "reason": failure.value, "message": message}
    retry = max((deadline - now).total_seconds(), 0.0) if deadline is not None else None
    return RestoreDecision(record, EventSpec("Warning", EVENT_STATE_RESTORE_FAILED, message), condition,
                           OUTCOME_HOLDING, failure, None, retry)
