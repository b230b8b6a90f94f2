"""The FlinkDeployment simulator of a simulated member: the Flink Kubernetes Operator plus the Flink job.

A thin adapter: :class:`~flotilla.member.flink_model.FlinkJobModel` decides (status, checkpoints due, running
or not); this module feeds it the member's objects and the clock, writes its status and simulation annotations,
completes its checkpoints and savepoints where its ``flinkConfiguration`` says (``execution.checkpointing.dir`` or
``state.checkpoints.dir``, the savepoint directory, Flink's ``s3.*`` keys; any fsspec URI, through
:mod:`flotilla.checkpoints`), else in the member's shared :class:`~flotilla.member.checkpoints.CheckpointStore`,
and records running intervals in the member's history (running from job RUNNING until it stops, is deleted or the
simulator stops).

What the member gets:

* the FlinkDeployment CRD (``flink_crd.py``), installed when the simulator starts;
* status as the operator 1.13 writes it (``kubectl get flinkdep`` shows Job Status and Lifecycle State);
* the operator's finalizer ``flinkdeployments.flink.apache.org/finalizer``: a deleted FlinkDeployment shows
  lifecycle DELETING while its job is stopped, then goes;
* annotations with the simulation's own data (not operator fields; see ``flink_model.SIM_ANNOTATIONS``)::

      sim.flotilla.io/records-processed   stream offset reached: records [0, N) are processed
      sim.flotilla.io/restored-from       snapshot the current run started from, or "none"
      sim.flotilla.io/restored-offset     offset the current run started at
      sim.flotilla.io/last-checkpoint     newest checkpoint the current run completed, or "none"

  refreshed every ``progress_interval`` seconds while the job runs and whenever a checkpoint completes (input:
  ``sim.flotilla.io/records-per-second`` overrides the member's rate for one FlinkDeployment);
* the first two also in ``status.clusterInfo`` (simulation-only keys of the operator's string map, which the
  FlinkDeployment status interpretation reflects to the control plane): set when the job starts, completes a
  checkpoint or stops, and every ``status_progress_interval`` seconds while it runs when that is above 0;
* the member's crash switch: ``sim.flotilla.io/broken: "true"`` makes the JobManager crash-loop (job down, JM
  ERROR, CrashLoopBackOff error); removing it brings the job back under HA from its newest checkpoint;
* optionally the savepoint rule (``savepoint_rule.py``) on the member's admission chain.

Settings come from the member's ``MemberConfig``: ``checkpoint_dir``, the broken-image rule
(``broken_image(image)``), ``ready_delay`` / ``ready_delay_for(obj)`` (shared out between the operator's steps),
and these keys of ``MemberConfig.options`` (``flotilla member --sim-option KEY=VALUE``; or attributes of the same
name), all optional:

    flink_records_per_second (100)   flink_speed (1.0: simulated seconds per real second)
    flink_checkpoint_interval (2.0 s, when flinkConfiguration sets none)
    flink_checkpoints_retained (1, when flinkConfiguration sets none)
    flink_progress_interval (2.0 s)  flink_finalizer (true)
    flink_status_progress_interval (0: the progress in status.clusterInfo only at start, checkpoints and stop)
    savepoint_rule (false)           savepoint_rule_label ("failover.flink.io/job-id")

Or they are given explicitly as :class:`FlinkSimSettings` (``FlinkDeploymentSimulator(settings)``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.rest import MERGE_PATCH
from flotilla.files import private_dir
from flotilla.member.checkpoints import CheckpointStore, JobStorage, SnapshotError
from flotilla.member.flink_crd import ensure_flink_crd
from flotilla.member.flink_model import (
    ANN_RECORDS_PROCESSED,
    FINALIZER,
    GROUP,
    KIND,
    PLURAL,
    SIM_ANNOTATIONS,
    VERSION,
    FlinkJobModel,
    FlinkModelConfig,
    JobRun,
    RunningChanged,
    WriteCheckpoint,
    WriteSavepoint,
)
from flotilla.member.savepoint_rule import DEFAULT_LABEL, SavepointRule
from flotilla.member.simulator import ObjectKey, ResourceSimulator, register_simulator

if TYPE_CHECKING:
    from flotilla.member.simulated import MemberCluster

log = logging.getLogger(__name__)

__all__ = ["CRASH_ANNOTATION", "FlinkDeploymentSimulator", "FlinkSimSettings", "default_checkpoint_dir"]

DEFAULT_BROKEN_IMAGE = r"^fake/"
CRASH_ANNOTATION = "sim.flotilla.io/broken"  # the member framework's per-object crash switch


def default_checkpoint_dir() -> Path:
    return Path(tempfile.gettempdir()) / "flotilla-checkpoints"


@dataclass
class FlinkSimSettings:
    checkpoint_dir: Path = field(default_factory=default_checkpoint_dir)
    model: FlinkModelConfig = field(default_factory=FlinkModelConfig)
    progress_interval: float = 2.0  # seconds between sim.flotilla.io/records-processed refreshes
    #: seconds between refreshes of the progress in status.clusterInfo while the job runs (0: only when the
    #: job starts, completes a checkpoint or stops); each refresh is a status write the control plane reflects
    status_progress_interval: float = 0.0
    finalizer: bool = True  # add the operator's finalizer (deletion waits for the job to stop)
    savepoint_rule: bool = False  # register the savepoint rule on the member's admission chain
    savepoint_rule_label: str = DEFAULT_LABEL
    install_crd: bool = True

    @classmethod
    def from_member_config(cls, cfg: Any) -> FlinkSimSettings:
        """Read what a MemberConfig offers: its attributes, else its free-form ``options`` (all optional)."""
        options = getattr(cfg, "options", None)
        options = options if isinstance(options, dict) else {}

        def get(attr: str) -> Any:
            v = getattr(cfg, attr, None)
            return v if v is not None else options.get(attr)

        def num(attr: str, default: float) -> float:
            v = get(attr)
            if isinstance(v, str):
                try:
                    return float(v)
                except ValueError:
                    return default
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default

        def flag(attr: str, default: bool) -> bool:
            v = get(attr)
            if isinstance(v, str):
                return v.strip().lower() in ("1", "true", "yes", "on")
            return default if v is None else bool(v)

        model = FlinkModelConfig()
        model.records_per_second = num("flink_records_per_second", model.records_per_second)
        model.speed = num("flink_speed", model.speed)
        model.checkpoint_interval = num("flink_checkpoint_interval", model.checkpoint_interval)
        model.checkpoints_retained = int(num("flink_checkpoints_retained", model.checkpoints_retained))
        ready = get("ready_delay")
        if isinstance(ready, (int, float)) and not isinstance(ready, bool):
            _spread_startup(model, float(ready))
        model.broken_image = _broken_image_predicate(cfg)
        checkpoint_dir = get("checkpoint_dir")
        return cls(
            checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else default_checkpoint_dir(),
            model=model,
            progress_interval=num("flink_progress_interval", 2.0),
            status_progress_interval=num("flink_status_progress_interval", 0.0),
            finalizer=flag("flink_finalizer", True),
            savepoint_rule=flag("savepoint_rule", False),
            savepoint_rule_label=str(get("savepoint_rule_label") or DEFAULT_LABEL),
        )


def _spread_startup(model: FlinkModelConfig, total: float) -> None:
    """Share one 'ready delay' between the operator's steps (deploy 40%, JM ready 30%, job start 30%)."""
    total = max(0.0, total)
    model.deploy_delay = 0.4 * total
    model.ready_delay = 0.3 * total
    model.job_start_delay = 0.3 * total
    model.upgrade_delay = min(model.upgrade_delay, 0.3 * total) if total else 0.0


def _broken_image_predicate(cfg: Any) -> str | Callable[[str], bool]:
    """The member's broken-image rule applied to one image string."""
    for attr in ("image_is_broken", "broken_image"):
        fn = getattr(cfg, attr, None)
        if callable(fn):
            return lambda image, fn=fn: bool(fn(image))
    pattern = getattr(cfg, "broken_image_pattern", None)
    if isinstance(pattern, re.Pattern):
        return lambda image, p=pattern: p.search(image) is not None
    if isinstance(pattern, str):
        return pattern
    matcher = getattr(cfg, "image_broken", None)
    if callable(matcher):
        # the workload rule takes an object: hand it the image as a one-container pod template
        def broken(image: str, fn: Any = matcher) -> bool:
            obj = {"spec": {"template": {"spec": {"containers": [{"name": "flink-main-container",
                                                                   "image": image}]}}}}
            return bool(fn(obj))

        return broken
    return DEFAULT_BROKEN_IMAGE


class FlinkDeploymentSimulator(ResourceSimulator):
    """Simulates the Flink Kubernetes Operator and the jobs of one member (application mode)."""

    name = "flinkdeployment"
    group, version, plural = GROUP, VERSION, PLURAL
    stopped_by_guard = True
    ENDED_KEPT = 1000

    def __init__(self, settings: FlinkSimSettings | None = None) -> None:
        super().__init__()
        self._explicit = settings
        self.settings = settings or FlinkSimSettings()
        self.store = CheckpointStore(self.settings.checkpoint_dir)
        self.models: dict[str, FlinkJobModel] = {}  # uid -> model
        self.storages: dict[str, JobStorage] = {}  # uid -> where that job's snapshots go
        self.rule: SavepointRule | None = None
        self._published: dict[str, tuple[float, dict[str, str]]] = {}  # uid -> (when, annotations written)
        self._progress_reported: dict[str, float] = {}  # uid -> when the progress in status was refreshed
        # the runs of FlinkDeployments that are gone, newest last: (namespace, name) -> runs (bounded)
        self.ended: OrderedDict[ObjectKey, list[JobRun]] = OrderedDict()
        self._threads: set[asyncio.Future[Any]] = set()  # model steps and snapshot writes in threads

    # ------------------------------------------------------------------ lifecycle
    async def start(self, member: MemberCluster) -> None:
        if self._explicit is None:
            self.settings = FlinkSimSettings.from_member_config(getattr(member, "config", None))
        self.store = CheckpointStore(self.settings.checkpoint_dir)
        private_dir(self.store.root)
        if self.settings.install_crd:
            await ensure_flink_crd(member.storage)
        if self.settings.savepoint_rule:
            self.rule = self._install_rule(member)
        await super().start(member)

    def _install_rule(self, member: Any) -> SavepointRule:
        admission = member.storage.admission
        for plugin in admission.plugins_for(GROUP, KIND):
            if isinstance(plugin, SavepointRule):  # a restarted simulator: keep the one already there
                plugin.store = self.store
                plugin.label_key = self.settings.savepoint_rule_label
                return plugin
        rule = SavepointRule(self.store, self.settings.savepoint_rule_label)
        admission.register(GROUP, KIND, rule)
        return rule

    async def stop(self) -> None:
        """The member stops: jobs end abruptly (due checkpoints complete, no more after)."""
        now = time.time()
        await super().stop()
        if self._threads:  # a write its reconcile no longer waits for lands before the member is off
            await asyncio.gather(*self._threads, return_exceptions=True)
        for model in list(self.models.values()):
            if model.running:
                await self._apply(model, model.stop(now, deleted=False))
        self.models.clear()
        self.storages.clear()

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, obj: dict[str, Any]) -> float | None:
        md = obj.get("metadata") or {}
        uid = md.get("uid") or ""
        now = time.time()
        model = self.models.get(uid)
        if model is None:
            spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
            storage = self.storages[uid] = JobStorage(self.store, lambda: spec.get("flinkConfiguration"))
            model = self.models[uid] = FlinkJobModel(obj, self._model_config(obj), storage, now)
            storage.conf = lambda m=model: m.flink_conf  # type: ignore[misc]
        if md.get("deletionTimestamp"):
            await self._delete(model, obj, now)
            return None
        crashed = self._crashed(obj)

        def step() -> list[Any]:
            return model.observe(obj, now) + model.set_crashed(crashed, now) + model.tick(now)

        storage = self.storages.get(uid)
        if storage is not None and storage.remote() is not None:
            effects = await self._in_thread(step)  # its restore lookups read remote storage
        else:
            effects = step()
        await self._apply(model, effects)
        self._report_progress(model, now)
        current = obj
        if self.settings.finalizer and FINALIZER not in (md.get("finalizers") or []):
            current = await self._add_finalizer(obj) or obj
        written = await self.set_status(current, lambda _cur: model.status())
        if written is not None:
            current = written
        await self._publish(model, current, now)
        return self._next_delay(model, time.time())

    def _report_progress(self, model: FlinkJobModel, now: float) -> None:
        interval = self.settings.status_progress_interval
        if interval > 0 and model.running and now - self._progress_reported.get(model.uid, 0.0) >= interval:
            model.report_progress(now)
            self._progress_reported[model.uid] = now

    def _crashed(self, obj: dict[str, Any]) -> bool:
        """The member's crash switch for one object (``sim.flotilla.io/broken: "true"``), or its guard stopping
        a guarded FlinkDeployment on a stale run permit (the job stops; back under HA once the permit is renewed)."""
        stops = getattr(self._member, "guard_stops", None)
        if callable(stops) and stops(obj):
            return True
        check = getattr(getattr(self._member, "config", None), "crash_annotation", None)
        if callable(check):
            return bool(check(obj))
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        return str(ann.get(CRASH_ANNOTATION, "")).strip().lower() in ("true", "1", "yes")

    def _model_config(self, obj: dict[str, Any]) -> FlinkModelConfig:
        cfg = self.settings.model
        ready_for = getattr(getattr(self._member, "config", None), "ready_delay_for", None)
        if callable(ready_for) and self._explicit is None:
            try:
                total = float(ready_for(obj))
            except (TypeError, ValueError):
                return cfg
            per_object = FlinkModelConfig(**{**cfg.__dict__})
            _spread_startup(per_object, total)
            return per_object
        return cfg

    def _next_delay(self, model: FlinkJobModel, now: float) -> float | None:
        times = []
        wake = model.next_wakeup()
        if wake is not None:
            times.append(wake - now)
        if model.running:
            last = self._published.get(model.uid, (0.0, {}))[0]
            times.append(max(0.05, last + self.settings.progress_interval - now))
            if self.settings.status_progress_interval > 0:
                reported = self._progress_reported.get(model.uid, 0.0)
                times.append(max(0.05, reported + self.settings.status_progress_interval - now))
        return max(0.001, min(times)) if times else None

    async def _apply(self, model: FlinkJobModel, effects: list[Any]) -> None:
        """Carry out the model's effects in order (file writes off the event loop)."""
        storage = self.storages.get(model.uid) or self.store
        for eff in effects:
            if isinstance(eff, WriteCheckpoint):
                try:
                    snap = await self._in_thread(
                        storage.write_checkpoint, eff.job_id, eff.checkpoint_id, eff.offset, eff.timestamp,
                        retained=eff.retained, restored_from=eff.restored_from,
                        extra={"writer": self._member_name(), "namespace": model.namespace, "name": model.name})
                except (SnapshotError, OSError) as e:
                    log.warning("%s: checkpoint %d of job %s failed: %s", self._member_name(), eff.checkpoint_id,
                                eff.job_id, e)
                    continue
                model.checkpoint_completed(snap)
            elif isinstance(eff, WriteSavepoint):
                try:
                    await self._in_thread(
                        storage.write_savepoint, eff.job_id, eff.checkpoint_id, eff.offset, eff.timestamp,
                        path=eff.path, restored_from=eff.restored_from,
                        extra={"writer": self._member_name(), "namespace": model.namespace, "name": model.name})
                except (SnapshotError, OSError) as e:
                    log.warning("%s: savepoint of job %s failed: %s", self._member_name(), eff.job_id, e)
            elif isinstance(eff, RunningChanged):
                history = getattr(self._member, "history", None)
                if history is not None:
                    history.set_running(member=self._member_name(), kind=KIND, namespace=model.namespace,
                                        name=model.name, uid=model.uid, running=eff.running, at=eff.at)

    async def _in_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a model step or a snapshot write in a thread. A cancelled reconcile cannot stop the thread, so it is
        kept track of and :meth:`stop` waits for it: once the member is off, no snapshot appears any more."""
        fut = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
        self._threads.add(fut)
        fut.add_done_callback(self._threads.discard)
        return await asyncio.shield(fut)

    def _member_name(self) -> str:
        return str(getattr(self._member, "name", "") or "")

    async def _publish(self, model: FlinkJobModel, obj: dict[str, Any], now: float) -> None:
        """Write the sim.flotilla.io/* annotations when they changed (the offset at most every progress_interval)."""
        wanted = model.sim_annotations(now)
        if not wanted:
            return
        last_at, last = self._published.get(model.uid, (0.0, {}))
        current = (obj.get("metadata") or {}).get("annotations") or {}
        if all(current.get(k) == v for k, v in wanted.items()):
            self._published[model.uid] = (now, wanted)
            return
        others_changed = any(wanted.get(k) != last.get(k) for k in SIM_ANNOTATIONS if k != ANN_RECORDS_PROCESSED)
        if not others_changed and now - last_at < self.settings.progress_interval and model.running:
            return
        md = obj.get("metadata") or {}
        assert self.rt is not None
        try:
            await self.member.storage.patch(
                self.rt, md.get("namespace") or None, md.get("name") or "", MERGE_PATCH,
                {"metadata": {"resourceVersion": md.get("resourceVersion"), "annotations": wanted}})
        except ApiError as e:
            if e.code not in (404, 409, 422):
                raise
            return
        self._published[model.uid] = (now, wanted)

    async def _add_finalizer(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        md = obj.get("metadata") or {}
        assert self.rt is not None
        fins = [*(md.get("finalizers") or []), FINALIZER]
        try:
            patched, _ = await self.member.storage.patch(
                self.rt, md.get("namespace") or None, md.get("name") or "", MERGE_PATCH,
                {"metadata": {"resourceVersion": md.get("resourceVersion"), "finalizers": fins}})
            return patched  # type: ignore[no-any-return]
        except ApiError as e:
            if e.code in (404, 409, 422):
                return None  # gone, changed meanwhile (reconciled again), or being deleted
            raise

    async def _delete(self, model: FlinkJobModel, obj: dict[str, Any], now: float) -> None:
        """deletionTimestamp set: stop the job, show DELETING, release the finalizer."""
        if not model.deleting:
            await self._apply(model, model.stop(now, deleted=True))
        md = obj.get("metadata") or {}
        if FINALIZER not in (md.get("finalizers") or []):
            return
        written = await self.set_status(obj, lambda _cur: model.status())
        assert self.rt is not None
        await self.member.storage.remove_finalizer(self.rt, written or obj, FINALIZER)

    async def forget(self, key: ObjectKey, last: dict[str, Any]) -> None:
        uid = (last.get("metadata") or {}).get("uid") or ""
        model = self.models.pop(uid, None)
        self._published.pop(uid, None)
        self._progress_reported.pop(uid, None)
        if model is not None and model.running:
            await self._apply(model, model.stop(time.time(), deleted=True))
        self.storages.pop(uid, None)
        if model is not None and model.runs:
            self.ended.pop(key, None)
            self.ended[key] = list(model.runs)
            while len(self.ended) > self.ENDED_KEPT:
                self.ended.popitem(last=False)

    # ------------------------------------------------------------------ queries (tests, demo)
    def runs_of(self, namespace: str, name: str) -> list[JobRun]:
        """Every run of the live object ``namespace/name``, or of the last deleted one of that name: the job id,
        start and stop times, restored offset and path, and ``offset_at(t)`` (frozen at the stop)."""
        model = self.model_for(namespace, name)
        if model is not None:
            return list(model.runs)
        return list(self.ended.get((namespace, name), []))

    def model_for(self, namespace: str, name: str) -> FlinkJobModel | None:
        """The model of the live object ``namespace/name`` (None when there is none)."""
        obj = self.cache.get((namespace, name))
        if obj is None:
            return None
        return self.models.get((obj.get("metadata") or {}).get("uid") or "")


register_simulator("flinkdeployment", FlinkDeploymentSimulator)
