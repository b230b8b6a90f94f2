"""What the Flink Kubernetes Operator and a Flink job do to a FlinkDeployment, as a pure state machine.

No I/O and no clock: every input carries ``now`` (epoch seconds), reads of the checkpoint store go through a
:class:`SnapshotSource`, and writes come back as effects (:class:`WriteCheckpoint`, :class:`WriteSavepoint`,
:class:`RunningChanged`) for the adapter (``flink.py``) to carry out. Status shapes follow operator 1.13
(application mode), the error texts follow the operator's ``FlinkResourceException`` JSON.

Lifecycle of one FlinkDeployment (application mode)::

    created ──submit──► DEPLOYING ──► DEPLOYED_NOT_READY ──► READY/job CREATED ──► READY/job RUNNING (STABLE)
                          │ broken image                          │ initialSavepointPath missing
                          ▼                                       ▼
                 ERROR/job RECONCILING (DEPLOYED)          READY/job FAILED (FAILED)

    spec change while running:   upgrading (UPGRADING) ──► redeploy, restoring per spec.job.upgradeMode
    spec.job.state=suspended:    suspended (SUSPENDED, job FINISHED, JM MISSING) ──resume──► redeploy
    JobManager crash-loops:      ERROR/job RECONCILING (CrashLoopBackOff) ──recovers──► redeploy under HA
    deleted / member stops:      the job stops at once (checkpoints already due complete first)

The job reads an endless counted stream: it reaches offset ``restored + rate * speed * (t - run start)``
and completes checkpoint ``n`` every ``execution.checkpointing.interval / speed`` seconds, recording that
offset. A job restored from a snapshot continues at the snapshot's offset with the next checkpoint id, as Flink
does; so records are never lost across a kill, and at most one interval's worth is processed again.
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from flotilla.checkpoints.config import conf_value as conf_get
from flotilla.member.checkpoints import Snapshot, SnapshotError, StorageConfigurationError, valid_job_id

GROUP = "flink.apache.org"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "FlinkDeployment"
PLURAL = "flinkdeployments"
FINALIZER = "flinkdeployments.flink.apache.org/finalizer"

# Simulation data, clearly not operator fields (annotations on the FlinkDeployment, written by the simulator).
SIM_PREFIX = "sim.flotilla.io/"
ANN_RECORDS_PROCESSED = SIM_PREFIX + "records-processed"  # stream offset reached: records [0, N) are done
ANN_RESTORED_FROM = SIM_PREFIX + "restored-from"  # snapshot path the current run started from, or "none"
ANN_RESTORED_OFFSET = SIM_PREFIX + "restored-offset"  # the offset the current run started at
ANN_LAST_CHECKPOINT = SIM_PREFIX + "last-checkpoint"  # newest checkpoint this run completed, or "none"
ANN_RECORDS_PER_SECOND = SIM_PREFIX + "records-per-second"  # input: overrides the member's rate for this job
SIM_ANNOTATIONS = (ANN_RECORDS_PROCESSED, ANN_RESTORED_FROM, ANN_RESTORED_OFFSET, ANN_LAST_CHECKPOINT)
# The job's progress also goes into status.clusterInfo (a string map) under the same two simulation-only keys,
# so that the control plane sees it through the reflected status (the failover history's records reprocessed):
# updated when the job starts, completes a checkpoint or stops, and when the adapter asks (report_progress).
PROGRESS_INFO_KEYS = (ANN_RECORDS_PROCESSED, ANN_RESTORED_OFFSET)

PIPELINE_JOB_ID = "$internal.pipeline.job-id"
LAST_STATE_DUMMY_SP_PATH = "KUBERNETES_OPERATOR_LAST_STATE"
JM_CONTAINER = "flink-main-container"

# the operator's enums (status fields)
JOB_STATES = ("INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED", "FINISHED",
              "RESTARTING", "SUSPENDED", "RECONCILING")
LIFECYCLE_STATES = ("CREATED", "SUSPENDED", "UPGRADING", "DEPLOYED", "STABLE", "ROLLING_BACK", "ROLLED_BACK",
                    "FAILED", "DELETING", "DELETED")
JM_DEPLOYMENT_STATUSES = ("READY", "DEPLOYED_NOT_READY", "DEPLOYING", "MISSING", "ERROR")
UPGRADE_MODES = ("stateless", "savepoint", "last-state")

# substrings that make the operator call an ERROR/MISSING deployment FAILED (CommonStatus.getLifecycleState)
MSG_MANUAL_RESTORE_REQUIRED = "Manual restore required."
MSG_HA_METADATA_NOT_AVAILABLE = "HA metadata is not available"
MSG_JOB_FINISHED_OR_CONFIGMAPS_DELETED = (
    "It is possible that the job has finished or terminally failed, or the configmaps have been deleted.")

DEPLOYMENT_FAILED_EXCEPTION = "org.apache.flink.kubernetes.operator.exception.DeploymentFailedException"
JOB_INIT_EXCEPTION = "org.apache.flink.runtime.client.JobInitializationException"

# spec.job fields whose change does not redeploy the job (the operator's DiffType.IGNORE fields, roughly)
_IGNORED_JOB_FIELDS = ("state", "upgradeMode", "initialSavepointPath", "allowNonRestoredState",
                       "savepointTriggerNonce", "checkpointTriggerNonce", "savepointRedeployNonce",
                       "autoscalerResetNonce")


# ---------------------------------------------------------------------------------------------- inputs / outputs
class SnapshotSource(Protocol):
    """What the model reads from the shared checkpoint store (``CheckpointStore`` implements it)."""

    def resolve(self, pointer: str) -> Snapshot: ...

    def latest_checkpoint(self, job_id: str) -> Snapshot | None: ...

    def new_savepoint_path(self, job_id: str) -> str: ...

    # optional: ``configuration_error() -> str | None``, why the job's checkpoint storage cannot be used


@dataclass(frozen=True)
class WriteCheckpoint:
    job_id: str
    checkpoint_id: int
    offset: int
    timestamp: int  # epoch ms
    retained: int
    restored_from: str | None


@dataclass(frozen=True)
class WriteSavepoint:
    job_id: str
    checkpoint_id: int
    offset: int
    timestamp: int
    path: str
    restored_from: str | None


@dataclass(frozen=True)
class RunningChanged:
    """The job started (``running``) or stopped running at ``at``: what the history recorder wants."""

    running: bool
    at: float
    job_id: str


Effect = WriteCheckpoint | WriteSavepoint | RunningChanged


@dataclass
class FlinkModelConfig:
    records_per_second: float = 100.0  # stream records per simulated second
    speed: float = 1.0  # simulated seconds per real second (scales the rate and the checkpoint interval)
    checkpoint_interval: float = 2.0  # seconds, when flinkConfiguration sets no execution.checkpointing.interval
    checkpoints_retained: int = 1  # when flinkConfiguration sets no state.checkpoints.num-retained (Flink: 1)
    submit_delay: float = 0.05  # CR seen -> deployment submitted (JM DEPLOYING)
    deploy_delay: float = 0.3  # DEPLOYING -> DEPLOYED_NOT_READY (or ERROR for a broken image)
    ready_delay: float = 0.2  # DEPLOYED_NOT_READY -> READY (job CREATED)
    job_start_delay: float = 0.2  # job CREATED -> RUNNING (or FAILED when the restore path is missing)
    upgrade_delay: float = 0.2  # cancelling the old job before a redeploy
    broken_image: str | Callable[[str], bool] = r"^fake/"  # regex searched in spec.image, or a predicate
    flink_version: str = "1.20.1"
    flink_revision: str = "f3b2c1a @ 2025-02-25T10:17:05+01:00"

    def image_is_broken(self, image: str) -> bool:
        if callable(self.broken_image):
            return bool(self.broken_image(image))
        return bool(self.broken_image) and re.search(self.broken_image, image) is not None


# ---------------------------------------------------------------------------------------------- small helpers
def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


_DURATION_UNITS = {
    "ns": 1e-9, "nano": 1e-9, "nanos": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "µs": 1e-6, "micro": 1e-6, "micros": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "milli": 1e-3, "millis": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}


def parse_duration(value: Any) -> float | None:
    """Seconds from a Flink duration (``2s``, ``500 ms``, ``1 min``, ``2000`` = ms, ``PT2S``); None if invalid."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) / 1000.0
    text = str(value).strip().lower()
    iso = re.fullmatch(r"pt(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", text)
    if iso and any(iso.groups()):
        h, m, s = (float(g) if g else 0.0 for g in iso.groups())
        return h * 3600 + m * 60 + s
    m2 = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*([a-zµ]*)", text)
    if not m2:
        return None
    number, unit = float(m2.group(1)), m2.group(2)
    if not unit:
        return number / 1000.0
    factor = _DURATION_UNITS.get(unit)
    return None if factor is None else number * factor


_MEM_UNITS = {"": 1, "b": 1, "bytes": 1, "k": 1024, "kb": 1024, "ki": 1024, "kib": 1024,
              "m": 1024**2, "mb": 1024**2, "mi": 1024**2, "mib": 1024**2,
              "g": 1024**3, "gb": 1024**3, "gi": 1024**3, "gib": 1024**3,
              "t": 1024**4, "tb": 1024**4, "ti": 1024**4, "tib": 1024**4}


def parse_memory(value: Any, default: int = 1024**3) -> int:
    """Bytes from a Flink/Kubernetes memory size (``2048m``, ``2g``, ``2Gi``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value or ""))
    if not m or m.group(2).lower() not in _MEM_UNITS:
        return default
    return int(float(m.group(1)) * _MEM_UNITS[m.group(2).lower()])


def _int(v: Any, default: int) -> int:
    try:
        if isinstance(v, bool):
            return default
        return int(str(v).strip()) if not isinstance(v, int) else v
    except (TypeError, ValueError):
        return default


def _float(v: Any, default: float) -> float:
    try:
        if isinstance(v, bool):
            return default
        return float(v)
    except (TypeError, ValueError):
        return default


def _ms(t: float) -> int:
    return int(round(t * 1000))


def new_job_id(rng: random.Random | None = None) -> str:
    """32 random hex digits, like Flink's ``JobID.generate().toHexString()``."""
    return f"{(rng or random.SystemRandom()).getrandbits(128):032x}"


def operator_error(type_: str, message: str, *, reason: str | None = None,
                   causes: list[tuple[str, str]] | None = None) -> str:
    """``status.error`` as the operator writes it: a FlinkResourceException serialized by Jackson (compact JSON,
    fields type, message, additionalMetadata, throwableList; nulls left out)."""
    meta: dict[str, Any] = {"reason": reason} if reason else {}
    doc = {
        "type": type_,
        "message": message,
        "additionalMetadata": meta,
        "throwableList": [{"type": t, "message": m, "additionalMetadata": {}} for t, m in causes or []],
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def image_pull_error(image: str) -> str:
    """The error a JobManager pod stuck pulling its image gives (DeploymentFailedException.forContainerStatus)."""
    waiting = (f'Back-off pulling image "{image}": ErrImagePull: failed to pull and unpack image "{image}": '
               "not found")
    return operator_error(DEPLOYMENT_FAILED_EXCEPTION, f"[{JM_CONTAINER}] {waiting}", reason="ImagePullBackOff")


def crash_loop_error(name: str) -> str:
    """A JobManager container that keeps crashing (CrashLoopBackOff, DeploymentFailedException)."""
    waiting = f"back-off 10s restarting failed container={JM_CONTAINER} pod={name}-jobmanager"
    return operator_error(DEPLOYMENT_FAILED_EXCEPTION, f"[{JM_CONTAINER}] {waiting}", reason="CrashLoopBackOff")


def restore_error(err: SnapshotError) -> str:
    """A job whose savepoint cannot be read fails while its JobMaster starts (the job ends FAILED)."""
    return operator_error(JOB_INIT_EXCEPTION, "Could not start the JobMaster.",
                          causes=[(err.java_type, str(err))])


def invalid_job_id_error(value: Any) -> str:
    return operator_error(
        "java.lang.IllegalArgumentException",
        f'Cannot parse JobID from "{value}". The expected format is [0-9a-fA-F]{{32}}, '
        "e.g. fd72014d4c864993a2e5a9287b4a9c5d.",
    )


# ---------------------------------------------------------------------------------------------- the model
@dataclass
class RestorePlan:
    """Where the next run starts from."""

    path: str | None = None  # snapshot path to restore (None: empty state)
    job_id: str | None = None  # keep this job id (last-state); None: a new one
    last_state: bool = False  # restore the newest checkpoint of ``job_id`` (HA metadata), falling back to path
    upgrade_savepoint_path: str | None = None  # what status.jobStatus.upgradeSavepointPath shows
    first_deployment: bool = False


@dataclass
class JobRun:
    """One run of the job (between a start and a stop)."""

    job_id: str
    base_offset: int
    restored_from: str | None
    start: float  # epoch seconds the job turned RUNNING
    rate: float  # records per real second (records_per_second * speed)
    interval: float | None  # real seconds between checkpoints (None: checkpointing disabled)
    retained: int
    next_checkpoint_id: int
    checkpoints_triggered: int = 0
    stop: float | None = None
    last_checkpoint_path: str | None = None
    last_checkpoint_offset: int | None = None

    def offset_at(self, t: float) -> int:
        end = t if self.stop is None else min(t, self.stop)
        if end <= self.start:
            return self.base_offset
        return self.base_offset + int(math.floor((end - self.start) * self.rate + 1e-9))

    def next_due(self) -> float | None:
        if self.interval is None or self.stop is not None:
            return None
        return self.start + (self.checkpoints_triggered + 1) * self.interval


@dataclass
class _Phase:
    name: str  # created | deploying | not_ready | starting | running | session_ready | image_error |
    #            restore_failed | invalid | crashed | upgrading | suspended | deleting | stopped
    until: float | None = None  # when the next automatic transition is due


class FlinkJobModel:
    """The operator + job state of one FlinkDeployment (one uid). Feed it objects and time; read status."""

    def __init__(self, obj: dict[str, Any], config: FlinkModelConfig, snapshots: SnapshotSource, now: float,
                 rng: random.Random | None = None) -> None:
        md = _d(obj.get("metadata"))
        self.namespace: str = md.get("namespace") or ""
        self.name: str = md.get("name") or ""
        self.uid: str = md.get("uid") or ""
        self.cfg = config
        self.snapshots = snapshots
        self.rng = rng or random.SystemRandom()
        self.spec: dict[str, Any] = copy.deepcopy(_d(obj.get("spec")))
        self.annotations: dict[str, str] = dict(_d(md.get("annotations")))
        self.generation: int = _int(md.get("generation"), 1)

        # operator status
        self.job_id: str | None = None
        self.job_state: str | None = None
        self.jm_status = "MISSING"
        self.error: str | None = None
        self.start_time: int | None = None
        self.update_time: int | None = None
        self.upgrade_savepoint_path: str | None = None
        self.savepoint_history: list[dict[str, Any]] = []
        self.last_savepoint: dict[str, Any] | None = None
        self.last_checkpoint: dict[str, Any] | None = None
        self.last_periodic_checkpoint_ts = 0
        self.last_reconciled: str | None = None
        self.last_stable: str | None = None
        self.reconciliation_state = "UPGRADING"
        self.reconciliation_ts = 0
        self.observed_generation: int | None = None
        self.task_manager: dict[str, Any] | None = None
        self.cluster_info: dict[str, str] = {}
        #: (records processed, restored offset) shown in clusterInfo (PROGRESS_INFO_KEYS); None before a run
        self.progress: tuple[int, int] | None = None
        self.deleting = False

        # simulation state
        self.phase = _Phase("created", now + config.submit_delay)
        self.run: JobRun | None = None
        self.runs: list[JobRun] = []
        self.has_run = False  # some run of this object reached RUNNING
        self.plan = RestorePlan(first_deployment=True)
        self._restore_failure: SnapshotError | None = None
        self._restore_snapshot: Snapshot | None = None
        self._restore_path: str | None = None
        self._resume: RestorePlan | None = None  # how a suspended job comes back
        self.crashed = False  # the JobManager crash-loops (sim.flotilla.io/broken)
        self._recover_from_status(obj, now)

    # ------------------------------------------------------------------ derived spec values
    @property
    def flink_conf(self) -> dict[str, Any]:
        return _d(self.spec.get("flinkConfiguration"))

    @property
    def job_spec(self) -> dict[str, Any]:
        return _d(self.spec.get("job"))

    @property
    def desired_state(self) -> str:
        return str(self.job_spec.get("state") or "running")

    @property
    def upgrade_mode(self) -> str:
        mode = str(self.job_spec.get("upgradeMode") or "stateless")
        return mode if mode in UPGRADE_MODES else "stateless"

    @property
    def image(self) -> str:
        img = self.spec.get("image")
        if isinstance(img, str) and img:
            return img
        version = str(self.spec.get("flinkVersion") or "v1_20").removeprefix("v").replace("_", ".")
        return f"flink:{version}"

    @property
    def session(self) -> bool:
        """A session cluster: a FlinkDeployment without spec.job."""
        return not isinstance(self.spec.get("job"), dict)

    @property
    def job_name(self) -> str:
        name = conf_get(self.flink_conf, "pipeline.name")
        return str(name) if name else self.name

    def _pinned_job_id(self) -> Any:
        return conf_get(self.flink_conf, PIPELINE_JOB_ID)

    def checkpoint_interval(self) -> float | None:
        """Simulated seconds between checkpoints; None when checkpointing is off (interval <= 0)."""
        raw = conf_get(self.flink_conf, "execution.checkpointing.interval")
        if raw is None:
            return self.cfg.checkpoint_interval if self.cfg.checkpoint_interval > 0 else None
        secs = parse_duration(raw)
        if secs is None:
            return self.cfg.checkpoint_interval
        return secs if secs > 0 else None

    def checkpoints_retained(self) -> int:
        for key in ("execution.checkpointing.num-retained", "state.checkpoints.num-retained"):
            raw = conf_get(self.flink_conf, key)
            if raw is not None:
                return max(1, _int(raw, self.cfg.checkpoints_retained))
        return max(1, self.cfg.checkpoints_retained)

    def records_per_second(self) -> float:
        raw = self.annotations.get(ANN_RECORDS_PER_SECOND)
        rate = _float(raw, self.cfg.records_per_second) if raw is not None else self.cfg.records_per_second
        return max(0.0, rate)

    def _task_managers(self) -> int:
        tm = _d(self.spec.get("taskManager"))
        if tm.get("replicas") is not None:
            return max(0, _int(tm.get("replicas"), 1))
        parallelism = max(1, _int(self.job_spec.get("parallelism"), 1))
        slots = max(1, _int(conf_get(self.flink_conf, "taskmanager.numberOfTaskSlots"), 1))
        return max(1, math.ceil(parallelism / slots))

    def _cluster_info(self) -> dict[str, str]:
        jm, tm = _d(self.spec.get("jobManager")), _d(self.spec.get("taskManager"))
        jm_res, tm_res = _d(jm.get("resource")), _d(tm.get("resource"))
        jm_replicas = max(1, _int(jm.get("replicas"), 1))
        tms = self._task_managers()
        cpu = _float(jm_res.get("cpu"), 1.0) * jm_replicas + _float(tm_res.get("cpu"), 1.0) * tms
        mem = parse_memory(jm_res.get("memory")) * jm_replicas + parse_memory(tm_res.get("memory")) * tms
        info = {
            "flink-version": self.cfg.flink_version,
            "flink-revision": self.cfg.flink_revision,
            "total-cpu": repr(float(cpu)),
            "total-memory": str(int(mem)),
        }
        if "state-size" in self.cluster_info:
            info["state-size"] = self.cluster_info["state-size"]
        return info

    def _reconciled_spec_json(self, job_state: str, first_deployment: bool) -> str:
        spec = copy.deepcopy(self.spec)
        job = spec.get("job")
        if isinstance(job, dict):
            job["state"] = job_state
            job.setdefault("upgradeMode", "stateless")
        doc = {"spec": spec, "resource_metadata": {"apiVersion": API_VERSION, "firstDeployment": first_deployment}}
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)

    # ------------------------------------------------------------------ recovery after a simulator restart
    def _recover_from_status(self, obj: dict[str, Any], now: float) -> None:
        """An object the operator had deployed before (its status says so): the Flink cluster restarts under
        HA, keeping the job id and restoring its newest checkpoint (or staying suspended)."""
        status = _d(obj.get("status"))
        recon = _d(status.get("reconciliationStatus"))
        job_status = _d(status.get("jobStatus"))
        if not recon.get("lastReconciledSpec") or not valid_job_id(job_status.get("jobId")):
            return
        self.job_id = job_status["jobId"]
        self.last_reconciled = recon.get("lastReconciledSpec")
        self.last_stable = recon.get("lastStableSpec")
        self.reconciliation_state = str(recon.get("state") or "DEPLOYED")
        self.reconciliation_ts = _int(recon.get("reconciliationTimestamp"), 0)
        self.observed_generation = _int(status.get("observedGeneration"), self.generation)
        self.start_time = _int(job_status.get("startTime"), 0) or None
        self.upgrade_savepoint_path = job_status.get("upgradeSavepointPath")
        sp = _d(job_status.get("savepointInfo"))
        self.last_savepoint = sp.get("lastSavepoint") if isinstance(sp.get("lastSavepoint"), dict) else None
        self.savepoint_history = [s for s in sp.get("savepointHistory") or [] if isinstance(s, dict)]
        cp = _d(job_status.get("checkpointInfo"))
        self.last_checkpoint = cp.get("lastCheckpoint") if isinstance(cp.get("lastCheckpoint"), dict) else None
        self.last_periodic_checkpoint_ts = _int(cp.get("lastPeriodicCheckpointTimestamp"), 0)
        self.has_run = True
        self.generation = self.observed_generation or self.generation
        try:
            reconciled = json.loads(self.last_reconciled or "{}")
        except ValueError:
            reconciled = {}
        suspended = _d(_d(reconciled.get("spec")).get("job")).get("state") == "suspended"
        restored = self.annotations.get(ANN_RESTORED_FROM)
        fallback = restored if restored and restored != "none" else None
        if suspended:
            self.phase = _Phase("suspended")
            self.jm_status = "MISSING"
            self.job_state = job_status.get("state") or "FINISHED"
            if self.upgrade_savepoint_path and self.upgrade_savepoint_path != LAST_STATE_DUMMY_SP_PATH:
                self._resume = RestorePlan(path=self.upgrade_savepoint_path,
                                           upgrade_savepoint_path=self.upgrade_savepoint_path)
            else:
                self._resume = RestorePlan(path=fallback, job_id=self.job_id, last_state=True)
            return
        self.plan = RestorePlan(path=fallback, job_id=self.job_id, last_state=True)
        self._start_deploy(now)

    # ------------------------------------------------------------------ inputs
    def observe(self, obj: dict[str, Any], now: float) -> list[Effect]:
        """A new version of the object (watch ADDED/MODIFIED). Acts when the spec's generation moved."""
        md = _d(obj.get("metadata"))
        self.annotations = dict(_d(md.get("annotations")))
        if self.deleting or self.phase.name in ("deleting", "stopped"):
            return []
        gen = _int(md.get("generation"), self.generation)
        if gen <= self.generation:
            return []
        old_spec = self.spec
        self.spec = copy.deepcopy(_d(obj.get("spec")))
        self.generation = gen
        return self._on_spec_change(old_spec, now)

    def tick(self, now: float) -> list[Effect]:
        """Let time pass: phase transitions that are due, then checkpoints that are due."""
        effects: list[Effect] = []
        for _ in range(16):  # transitions chain when ticks come late; each one moves ``until`` forward
            until = self.phase.until
            if until is None or until > now:
                break
            effects.extend(self._advance(until))
        effects.extend(self._due_checkpoints(now))
        return effects

    def next_wakeup(self) -> float | None:
        times = [t for t in (self.phase.until, self.run.next_due() if self.run else None) if t is not None]
        return min(times) if times else None

    def checkpoint_completed(self, snap: Snapshot) -> None:
        """The adapter wrote a checkpoint this model asked for."""
        run = self.run if self.run and self.run.job_id == snap.job_id else None
        if run is not None:
            run.last_checkpoint_path = snap.path
            run.last_checkpoint_offset = snap.offset
            if self.progress is None or snap.offset > self.progress[0]:
                self.progress = (snap.offset, run.base_offset)
        self.last_checkpoint = {"timeStamp": snap.timestamp, "triggerType": "PERIODIC", "formatType": "FULL"}
        self.last_periodic_checkpoint_ts = snap.timestamp
        size = snap.extra.get("stateSize")
        self.cluster_info["state-size"] = str(size if isinstance(size, int) else 16 * 1024 + snap.offset % 4096)

    def stop(self, now: float, *, deleted: bool) -> list[Effect]:
        """The job ends abruptly: the FlinkDeployment was deleted (``deleted``) or its member went down.

        Checkpoints whose time came before ``now`` are completed first (they were due before the kill)."""
        effects = self._due_checkpoints(now)
        effects.extend(self._stop_run(now))
        if deleted:
            self.deleting = True
            self.phase = _Phase("deleting")
        else:
            self.phase = _Phase("stopped")
        return effects

    def set_crashed(self, crashed: bool, now: float) -> list[Effect]:
        """The JobManager starts (``True``) or stops (``False``) crash-looping.

        While it crashes the job is down: JM ERROR, job RECONCILING, a CrashLoopBackOff error (which Karmada's
        health rule counts as a user error, not a failover reason). When it stops crashing the cluster comes
        back under HA: same job id, restored from its newest checkpoint."""
        if crashed == self.crashed:
            return []
        self.crashed = crashed
        if self.deleting or self.phase.name in ("deleting", "stopped"):
            return []
        if crashed:
            if self.phase.name not in ("deploying", "not_ready", "starting", "running", "session_ready"):
                return []  # nothing runs that could crash (yet); applied when the next deployment comes up
            effects = self._due_checkpoints(now)
            if self.running:
                assert self.run is not None
                self.plan = RestorePlan(path=self.run.restored_from, job_id=self.job_id, last_state=True)
            effects.extend(self._stop_run(now))
            self._crash(now)
            return effects
        if self.phase.name == "crashed":
            self._start_deploy(now)
        return []

    def _crash(self, t: float) -> None:
        self.jm_status = "ERROR"
        if not self.session:
            self._set_job_state("RECONCILING", t)
        self.error = crash_loop_error(self.name)
        self.cluster_info = {}
        self.phase = _Phase("crashed")

    # ------------------------------------------------------------------ outputs
    @property
    def running(self) -> bool:
        return self.run is not None and self.run.stop is None

    def offset_at(self, t: float) -> int:
        """Stream offset the job has reached at ``t`` (the last run's, frozen once stopped)."""
        run = self.run or (self.runs[-1] if self.runs else None)
        return run.offset_at(t) if run else 0

    def lifecycle_state(self) -> str:
        if self.deleting:
            return "DELETING"
        if self.last_reconciled is None:
            return "FAILED" if self.error else "CREATED"
        if self.reconciliation_state == "UPGRADING":
            return "UPGRADING"
        if self.reconciliation_state == "ROLLING_BACK":
            return "ROLLING_BACK"
        try:
            reconciled_job = _d(_d(json.loads(self.last_reconciled).get("spec")).get("job"))
        except ValueError:
            reconciled_job = {}
        if reconciled_job.get("state") == "suspended":
            return "SUSPENDED"
        if self.job_state == "FAILED":
            return "FAILED"
        if self.jm_status in ("MISSING", "ERROR") and self.error and any(
                m in self.error for m in (MSG_MANUAL_RESTORE_REQUIRED, MSG_JOB_FINISHED_OR_CONFIGMAPS_DELETED,
                                          MSG_HA_METADATA_NOT_AVAILABLE)):
            return "FAILED"
        if self.reconciliation_state == "ROLLED_BACK":
            return "ROLLED_BACK"
        if self.last_stable is not None and self.last_stable == self.last_reconciled:
            return "STABLE"
        return "DEPLOYED"

    def status(self) -> dict[str, Any]:
        """``.status`` as the operator writes it (operator 1.13 field set; absent values left out)."""
        job: dict[str, Any] = {}
        if self.job_name and (self.job_id or self.job_state):
            job["jobName"] = self.job_name
        for key, value in (("jobId", self.job_id), ("state", self.job_state),
                           ("startTime", None if self.start_time is None else str(self.start_time)),
                           ("updateTime", None if self.update_time is None else str(self.update_time)),
                           ("upgradeSavepointPath", self.upgrade_savepoint_path)):
            if value is not None:
                job[key] = value
        savepoint_info: dict[str, Any] = {
            "savepointHistory": copy.deepcopy(self.savepoint_history),
            "lastPeriodicSavepointTimestamp": 0,
        }
        if self.last_savepoint:
            savepoint_info["lastSavepoint"] = dict(self.last_savepoint)
        checkpoint_info: dict[str, Any] = {"lastPeriodicCheckpointTimestamp": self.last_periodic_checkpoint_ts}
        if self.last_checkpoint:
            checkpoint_info["lastCheckpoint"] = dict(self.last_checkpoint)
        job["savepointInfo"] = savepoint_info
        job["checkpointInfo"] = checkpoint_info
        recon: dict[str, Any] = {"reconciliationTimestamp": self.reconciliation_ts,
                                 "state": self.reconciliation_state}
        if self.last_reconciled is not None:
            recon["lastReconciledSpec"] = self.last_reconciled
        if self.last_stable is not None:
            recon["lastStableSpec"] = self.last_stable
        info = dict(self.cluster_info)
        if self.progress is not None:
            info.update(zip(PROGRESS_INFO_KEYS, (str(self.progress[0]), str(self.progress[1])), strict=True))
        status: dict[str, Any] = {
            "jobStatus": job,
            "clusterInfo": info,
            "jobManagerDeploymentStatus": self.jm_status,
            "reconciliationStatus": recon,
            "lifecycleState": self.lifecycle_state(),
        }
        if self.error is not None:
            status["error"] = self.error
        if self.observed_generation is not None:
            status["observedGeneration"] = self.observed_generation
        if self.task_manager is not None:
            status["taskManager"] = dict(self.task_manager)
        return status

    def report_progress(self, now: float) -> None:
        """Show the offset the job reached at ``now`` in its status (``clusterInfo``, simulation-only)."""
        run = self.run or (self.runs[-1] if self.runs else None)
        if run is not None:
            self.progress = (run.offset_at(now), run.base_offset)

    def sim_annotations(self, now: float) -> dict[str, str]:
        """The simulation's own data (annotations ``sim.flotilla.io/*``; not operator fields). Empty before the
        job first ran."""
        run = self.run or (self.runs[-1] if self.runs else None)
        if run is None:
            return {}
        return {
            ANN_RECORDS_PROCESSED: str(run.offset_at(now)),
            ANN_RESTORED_FROM: run.restored_from or "none",
            ANN_RESTORED_OFFSET: str(run.base_offset),
            ANN_LAST_CHECKPOINT: run.last_checkpoint_path or "none",
        }

    # ------------------------------------------------------------------ transitions
    def _set_job_state(self, state: str | None, t: float) -> None:
        if state != self.job_state:
            self.job_state = state
            self.update_time = _ms(t)

    def _advance(self, t: float) -> list[Effect]:
        name = self.phase.name
        if name == "created" and self.desired_state == "suspended" and not self.session:
            # created suspended: the operator records the spec and deploys nothing
            self._resume = RestorePlan(first_deployment=True)
            self.phase = _Phase("suspended")
            self._record_reconciled_suspended(t)
        elif name == "created":
            self._start_deploy(t)
        elif name == "upgrading":
            self._start_deploy(t)
        elif name == "deploying" and self.crashed:
            self._crash(t)
        elif name == "deploying":
            if self.cfg.image_is_broken(self.image):
                # DeploymentFailedException: JM deployment ERROR, job RECONCILING, error JSON (lifecycle DEPLOYED)
                self.jm_status = "ERROR"
                self._set_job_state("RECONCILING", t)
                self.error = image_pull_error(self.image)
                self.phase = _Phase("image_error")
            else:
                self.jm_status = "DEPLOYED_NOT_READY"
                self.phase = _Phase("not_ready", t + self.cfg.ready_delay)
        elif name == "not_ready" and self.session:
            # a session cluster (no spec.job): ready and stable once the JobManager is up; no job
            self.jm_status = "READY"
            self.cluster_info = self._cluster_info()
            self.error = None
            self.last_stable = self.last_reconciled
            self.phase = _Phase("session_ready")
        elif name == "not_ready":
            self.jm_status = "READY"
            self.start_time = _ms(t)
            self._set_job_state("CREATED", t)
            self.cluster_info = self._cluster_info()
            self.phase = _Phase("starting", t + self.cfg.job_start_delay)
        elif name == "starting":
            return self._start_job(t)
        return []

    def _start_deploy(self, t: float) -> None:
        """Submit the application cluster per ``self.plan`` (ApplicationReconciler.deploy)."""
        plan = self.plan
        if self.session:
            self.jm_status = "DEPLOYING"
            self.reconciliation_state = "DEPLOYED"
            self.reconciliation_ts = _ms(t)
            self.last_reconciled = self._reconciled_spec_json("running", plan.first_deployment)
            self.observed_generation = self.generation
            self.phase = _Phase("deploying", t + self.cfg.deploy_delay)
            return
        pinned = self._pinned_job_id()
        if pinned is not None and not valid_job_id(pinned):
            self.error = invalid_job_id_error(pinned)
            self.phase = _Phase("invalid")
            self.jm_status = "MISSING"
            return
        if pinned is not None:
            self.job_id = str(pinned)
        elif plan.job_id and valid_job_id(plan.job_id):
            self.job_id = plan.job_id
        else:
            self.job_id = new_job_id(self.rng)
        # decide what the job restores now (the operator resolves the path before submitting)
        self._restore_failure = None
        self._restore_snapshot = None
        path = plan.path
        marker = plan.upgrade_savepoint_path
        problem = getattr(self.snapshots, "configuration_error", None)
        problem = problem() if callable(problem) else None
        if problem:  # the JobManager refuses a checkpoint storage it cannot use
            self._restore_failure = StorageConfigurationError(problem)
            plan = RestorePlan(first_deployment=plan.first_deployment)
        elif plan.last_state:
            latest = self.snapshots.latest_checkpoint(self.job_id)
            if latest is not None:
                path, marker = latest.path, LAST_STATE_DUMMY_SP_PATH
        elif plan.first_deployment:
            initial = self.job_spec.get("initialSavepointPath")
            path = initial if isinstance(initial, str) and initial else None
        if path and not problem:
            try:
                self._restore_snapshot = self.snapshots.resolve(path)
            except SnapshotError as e:
                self._restore_failure = e
        self._restore_path = path
        self.upgrade_savepoint_path = marker if not plan.first_deployment else None
        self.jm_status = "DEPLOYING"
        self._set_job_state("RECONCILING", t)
        self.reconciliation_state = "DEPLOYED"
        self.reconciliation_ts = _ms(t)
        self.last_reconciled = self._reconciled_spec_json("running", plan.first_deployment)
        self.observed_generation = self.generation
        self.task_manager = {"labelSelector": f"component=taskmanager,app={self.name}",
                             "replicas": self._task_managers()}
        self.cluster_info = {}
        self.phase = _Phase("deploying", t + self.cfg.deploy_delay)

    def _start_job(self, t: float) -> list[Effect]:
        assert self.job_id is not None
        if self._restore_failure is not None:
            self._set_job_state("FAILED", t)
            self.error = restore_error(self._restore_failure)
            self.phase = _Phase("restore_failed")
            return []
        snap = self._restore_snapshot
        interval = self.checkpoint_interval()
        speed = self.cfg.speed if self.cfg.speed > 0 else 1.0
        self.run = JobRun(
            job_id=self.job_id,
            base_offset=snap.offset if snap else 0,
            restored_from=snap.path if snap else None,
            start=t,
            rate=self.records_per_second() * speed,
            interval=None if interval is None else interval / speed,
            retained=self.checkpoints_retained(),
            next_checkpoint_id=(snap.checkpoint_id + 1) if snap else 1,
        )
        self.runs.append(self.run)
        self.has_run = True
        self.progress = (self.run.base_offset, self.run.base_offset)
        self._set_job_state("RUNNING", t)
        self.error = None  # a healthy deployment clears errors
        self.last_stable = self.last_reconciled
        self.phase = _Phase("running")
        return [RunningChanged(True, t, self.job_id)]

    def _due_checkpoints(self, now: float) -> list[Effect]:
        run = self.run
        if run is None or run.stop is not None:
            return []
        effects: list[Effect] = []
        while (due := run.next_due()) is not None and due <= now:
            run.checkpoints_triggered += 1
            effects.append(WriteCheckpoint(
                job_id=run.job_id, checkpoint_id=run.next_checkpoint_id, offset=run.offset_at(due),
                timestamp=_ms(due), retained=run.retained, restored_from=run.restored_from))
            run.next_checkpoint_id += 1
        return effects

    def _stop_run(self, t: float) -> list[Effect]:
        run = self.run
        if run is None or run.stop is not None:
            return []
        run.stop = t
        self.progress = (run.offset_at(t), run.base_offset)
        return [RunningChanged(False, t, run.job_id)]

    def _take_savepoint(self, t: float) -> list[Effect]:
        """Stop-with-savepoint (upgrade/suspend in savepoint mode); records it like setUpgradeSavepointPath."""
        run = self.run
        assert run is not None and run.stop is None
        path = self.snapshots.new_savepoint_path(run.job_id)
        effect = WriteSavepoint(job_id=run.job_id, checkpoint_id=run.next_checkpoint_id, offset=run.offset_at(t),
                                timestamp=_ms(t), path=path, restored_from=run.restored_from)
        run.next_checkpoint_id += 1
        self.upgrade_savepoint_path = path
        sp = {"timeStamp": _ms(t), "location": path, "triggerType": "UPGRADE", "formatType": "CANONICAL"}
        if not self.last_savepoint or self.last_savepoint.get("location") != path:
            self.savepoint_history.append(sp)
        self.last_savepoint = sp
        return [effect]

    def _cancel(self, t: float, mode: str) -> tuple[list[Effect], RestorePlan]:
        """Stop the current job for an upgrade or a suspend; returns the effects and how to come back."""
        effects = self._due_checkpoints(t)
        plan: RestorePlan
        if not self.running:
            # nothing was restored yet (deploying, failed, upgrading): the next deployment restores the same
            # way, unless the user asked for a fresh start (stateless) after an earlier run
            plan = RestorePlan() if (mode == "stateless" and self.has_run) else self.plan
        elif mode == "savepoint":
            effects.extend(self._take_savepoint(t))
            plan = RestorePlan(path=self.upgrade_savepoint_path, upgrade_savepoint_path=self.upgrade_savepoint_path)
        elif mode == "last-state":
            # HA metadata keeps the job id and its newest checkpoint; without one the job restarts from where
            # this run started
            assert self.run is not None
            plan = RestorePlan(path=self.run.restored_from, job_id=self.job_id, last_state=True)
        else:
            plan = RestorePlan()
        effects.extend(self._stop_run(t))
        if self.phase.name != "upgrading":
            self.jm_status = "MISSING"
            self.cluster_info = {}
            if self.job_state is not None:
                self._set_job_state("FINISHED", t)
        return effects, plan

    def _on_spec_change(self, old_spec: dict[str, Any], now: float) -> list[Effect]:
        phase = self.phase.name
        desired = self.desired_state
        if phase == "created":
            return []  # not deployed yet: the first deployment takes the newest spec
        if phase == "suspended":
            if desired == "running":
                self.plan = self._resume or RestorePlan(first_deployment=not self.has_run)
                self._resume = None
                self._start_deploy(now)
            else:
                self._record_reconciled_suspended(now)
            return []
        if phase == "invalid":
            self.error = None
            self._start_deploy(now)
            return []
        if phase == "upgrading" and desired == "running":
            return []  # the pending redeployment takes the newest spec
        if desired == "suspended":
            effects, plan = self._cancel(now, self.upgrade_mode)
            self._resume = plan
            self.phase = _Phase("suspended")
            self._record_reconciled_suspended(now)
            return effects
        redeploy_nonce_changed = (_d(old_spec.get("job")).get("savepointRedeployNonce")
                                  != self.job_spec.get("savepointRedeployNonce"))
        if not redeploy_nonce_changed and _upgrade_relevant(old_spec) == _upgrade_relevant(self.spec):
            # nothing the job cares about changed: just record the spec as reconciled
            first = self.last_reconciled is not None and '"firstDeployment":true' in self.last_reconciled
            self.last_reconciled = self._reconciled_spec_json("running", first)
            if self.phase.name == "running":
                self.last_stable = self.last_reconciled
            self.observed_generation = self.generation
            self.reconciliation_ts = _ms(now)
            return []
        effects, plan = self._cancel(now, self.upgrade_mode)
        if redeploy_nonce_changed:
            initial = self.job_spec.get("initialSavepointPath")
            plan = RestorePlan(path=initial if isinstance(initial, str) and initial else None)
        self.plan = plan
        self.reconciliation_state = "UPGRADING"
        self.reconciliation_ts = _ms(now)
        self.phase = _Phase("upgrading", now + self.cfg.upgrade_delay)
        return effects

    def _record_reconciled_suspended(self, t: float) -> None:
        self.last_reconciled = self._reconciled_spec_json("suspended", False)
        self.last_stable = self.last_reconciled  # a suspend by the user is stable at once
        self.reconciliation_state = "DEPLOYED"
        self.reconciliation_ts = _ms(t)
        self.observed_generation = self.generation
        self.task_manager = {"labelSelector": "", "replicas": 0}
        self.error = None


def _upgrade_relevant(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of a spec whose change makes the operator redeploy the job."""
    out = copy.deepcopy(spec)
    job = out.get("job")
    if isinstance(job, dict):
        for k in _IGNORED_JOB_FIELDS:
            job.pop(k, None)
    return out


def is_flink_deployment(obj: dict[str, Any]) -> bool:
    return obj.get("apiVersion") == API_VERSION and obj.get("kind") == KIND


__all__ = [
    "ANN_LAST_CHECKPOINT", "ANN_RECORDS_PER_SECOND", "ANN_RECORDS_PROCESSED", "ANN_RESTORED_FROM",
    "ANN_RESTORED_OFFSET", "API_VERSION", "FINALIZER", "GROUP", "KIND", "LAST_STATE_DUMMY_SP_PATH", "PLURAL",
    "SIM_ANNOTATIONS", "VERSION", "Effect", "FlinkJobModel", "FlinkModelConfig", "JobRun", "RestorePlan",
    "RunningChanged", "SnapshotSource", "WriteCheckpoint", "WriteSavepoint", "conf_get", "crash_loop_error",
    "image_pull_error",
    "new_job_id", "operator_error", "parse_duration", "parse_memory", "restore_error",
]
