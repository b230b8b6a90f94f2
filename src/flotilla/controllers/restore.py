"""The restore controller: resolves the snapshot a failed-over stateful job resumes from (D20).

For a (Cluster)ResourceBinding whose new copy needs a native restore (:func:`flotilla.failover.restore.restore_needs`:
a fresh state injection, a kind with ``RestoreState``, not turned off by the policy) and whose record
(``failover.flotilla.io/restore``) does not resolve it yet, one pass:

1. reads the template's ``spec.flinkConfiguration`` and, when the policy names one
   (``restore.flotilla.io/credentials-secret``), the Secret in the template's namespace (its ``s3.access-key`` /
   ``s3.secret-key``); builds the storage configuration (:func:`flotilla.checkpoints.config.storage_config`,
   with ``--restore-default-checkpoint-dir`` when the job names no directory);
2. once the old copy's Work is gone (``Directly``: its job has stopped and completes no more checkpoints; the
   Work's deletion wakes the binding), looks the snapshot up (:func:`flotilla.failover.restore.lookup_plan`): a planned move's savepoint is checked
   with ``describe_snapshot``; otherwise the preserved job id's complete snapshots are listed, and when it has none
   the path the failed copy started from is checked (D5 carry-over); every call is bounded by
   ``--restore-storage-timeout``;
3. decides (:func:`flotilla.failover.restore.decide_restore`) and writes the record with a metadata-only merge
   patch guarded by the resourceVersion (the binding controller is woken by that change and writes the Work);
4. records the Event (Normal ``StateRestored``, Warning ``StateRestoreFailed`` / ``StateRestoreTimedOut``) on the
   binding, the ``StateRestored`` condition on its status, and the metrics ``flotilla_state_restore_total{outcome}``,
   ``flotilla_state_restore_failures_total{reason}`` and ``flotilla_state_restore_age_at_fault_seconds``.

While this controller runs, the binding controller of the same controller-manager holds the Works it must resolve;
with ``--controllers=-restore`` nothing is held (Karmada's behaviour: labels only).

A ``Holding`` record is retried with backoff (1 s doubling to 30 s) and at the hold's deadline. Messages name the
storage location and the cause, never a credential.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from flotilla.api import labels as L
from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS
from flotilla.checkpoints.config import StorageConfigError, storage_config
from flotilla.checkpoints.storage import SnapshotStorageError, describe_snapshot, list_snapshots
from flotilla.client import Informer, Resource
from flotilla.failover.purge import directly_purge_pending
from flotilla.failover.restore import (
    CREDENTIALS_SECRET_ANNOTATION,
    RESTORE_ANNOTATION,
    RESTORE_CONTROLLER_RUNNING,
    Found,
    LookupPlan,
    RestoreDecision,
    RestoreFailure,
    RestoreNeed,
    decide_restore,
    failure_of,
    lookup_plan,
    move_in_progress,
    move_savepoint,
    parse_restore_record,
    record_resolves,
    restore_needs,
    restore_patch,
    restore_settings,
)
from flotilla.failover.state import (
    STATEFUL_FAILOVER_INJECTION_GATE,
    parse_injected_state_record,
    plan_injection,
)
from flotilla.kube.objects import meta_of, spec_of
from flotilla.policy.naming import generate_execution_space_name
from flotilla.propagation.works import (
    RESOURCE_INTERPRETER_CUSTOMIZATIONS,
    InterpreterCache,
    binding_ref,
    restore_state_enabled,
    work_cluster,
)
from flotilla.runtime.base import Controller
from flotilla.runtime.binding_works import binding_and_work_informers, works_of
from flotilla.runtime.interpreter_failures import customization_failures
from flotilla.runtime.members import SECRETS
from flotilla.runtime.patching import patch_condition, patch_with_retry

log = logging.getLogger(__name__)

__all__ = ["RestoreController"]

RETRY_INITIAL = 1.0
RETRY_MAX = 30.0
#: Seconds before a binding whose old copy's Work (purged Directly) still exists is looked at again, if the Work's
#: deletion did not wake it first.
PURGE_RECHECK = 5.0


def _decoded(data: Any) -> dict[str, str]:
    """A Secret's ``data`` decoded (values that are not base64 text are left out)."""
    out: dict[str, str] = {}
    for key, value in (data or {}).items() if isinstance(data, Mapping) else ():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
    return out


class RestoreController(Controller):
    name: ClassVar[str] = "restore"
    workers: ClassVar[int] = 2

    def setup(self) -> None:
        self.ctx.extras[RESTORE_CONTROLLER_RUNNING] = True
        self._rbs, self._crbs, self._works = binding_and_work_informers(self)
        self._rics = self.informer(RESOURCE_INTERPRETER_CUSTOMIZATIONS)
        self._interpreters = InterpreterCache(customization_failures(self.ctx))
        self._attempts: dict[str, int] = {}
        for kind, inf in (("ResourceBinding", self._rbs), ("ClusterResourceBinding", self._crbs)):
            inf.add_handler(on_add=lambda obj, k=kind: self._changed(k, None, obj),
                            on_update=lambda old, new, k=kind: self._changed(k, old, new))
        self._works.add_handler(on_delete=self._work_deleted)

    def _work_deleted(self, work: Mapping[str, Any]) -> None:
        """The old copy's Work is gone: its binding's restore can be looked up now (its job has stopped)."""
        ann = meta_of(work).get("annotations") or {}
        ns, name = ann.get(L.RESOURCE_BINDING_NAMESPACE_ANNOTATION), ann.get(L.RESOURCE_BINDING_NAME_ANNOTATION)
        if ns and name:
            self.enqueue(f"ResourceBinding/{ns}/{name}")
        elif ann.get(L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION):
            self.enqueue(f"ClusterResourceBinding/{ann[L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION]}")

    # ------------------------------------------------------------------ triggers
    def _changed(self, kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        spec = spec_of(new)
        if not spec.get("gracefulEvictionTasks") or meta_of(new).get("deletionTimestamp"):
            return
        if old is not None:
            o, n = meta_of(old), meta_of(new)
            same = (o.get("generation") == n.get("generation")
                    and (o.get("annotations") or {}) == (n.get("annotations") or {}))
            if same:
                return
        md = meta_of(new)
        ns, name = md.get("namespace"), md.get("name")
        self.enqueue(f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}")

    def _binding(self, key: str) -> tuple[Resource, Informer, str]:
        kind, _, rest = key.partition("/")
        if kind == "ClusterResourceBinding":
            return CLUSTER_RESOURCE_BINDINGS, self._crbs, rest
        return RESOURCE_BINDINGS, self._rbs, rest

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> float | None:
        res, inf, rest = self._binding(key)
        binding = inf.store.get(rest)
        if binding is None or meta_of(binding).get("deletionTimestamp"):
            self._attempts.pop(key, None)
            return None
        gate = self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE)
        injection = plan_injection(spec_of(binding), parse_injected_state_record(binding), self.ctx.now(), gate=gate)
        if not any(d.source == "task" for d in injection.decisions.values()):
            self._attempts.pop(key, None)
            return None
        # whether the kind restores natively is the interpreter's answer for its apiVersion and kind: the template
        # itself is read only for a restore that is still to be looked up
        interpreter = self._interpreters.get(self._rics.store.list())
        resource = spec_of(binding).get("resource") or {}
        kind = {"apiVersion": str(resource.get("apiVersion") or ""), "kind": str(resource.get("kind") or "")}
        needs = restore_needs(binding, injection, hook_enabled=restore_state_enabled(interpreter, kind), gate=gate)
        record = parse_restore_record(binding)
        pending = [n for n in needs.values() if not record_resolves(record, n)]
        if not pending:
            self._attempts.pop(key, None)
            return None
        if directly_purge_pending(self._works_of(binding), spec_of(binding)):
            return PURGE_RECHECK  # the old copy may still checkpoint: look up once its Work is gone
        need = pending[0]
        if move_in_progress(binding, need.cluster):
            return None  # the move's savepoint is on its way; the move's annotation changes wake the binding
        template = await self._template(binding)
        if template is None:
            return None
        settings = restore_settings(binding)
        plan = lookup_plan(need, record, move_savepoint(binding, need))
        found = await self._look_up(binding, template, plan, settings.credentials_secret)
        decision = decide_restore(
            need, found, now=self.ctx.now(), settings=settings, previous=record,
            missing=self.options.restore_missing, hold_timeout=self.options.restore_hold_timeout,
            existed=self._work_exists(binding, need.cluster))
        written = await self._write(res, binding, need, decision)
        if not written:
            return 0.5  # the binding changed under the pass: look again at the new one
        return self._after(key, decision)

    def _after(self, key: str, decision: RestoreDecision) -> float | None:
        if decision.failure is not None:
            self.ctx.metrics.failover.record_state_restore_failure(decision.failure.value)
        if decision.record.resolved:
            self.ctx.metrics.failover.record_state_restore(decision.outcome, decision.age)
            self._attempts.pop(key, None)
            return None
        attempts = self._attempts.get(key, 0)
        self._attempts[key] = attempts + 1
        backoff = min(RETRY_MAX, RETRY_INITIAL * (2 ** attempts))
        if decision.retry_after is not None:
            backoff = max(min(backoff, decision.retry_after), 0.05)
        return backoff

    # ------------------------------------------------------------------ reads
    async def _template(self, binding: Mapping[str, Any]) -> dict[str, Any] | None:
        resource = spec_of(binding).get("resource") or {}
        res = await self.client.resource_for(str(resource.get("apiVersion") or ""), str(resource.get("kind") or ""))
        ns = (resource.get("namespace") or None) if res.namespaced else None
        return await self.client.get_or_none(res, str(resource.get("name") or ""), ns)

    def _works_of(self, binding: Mapping[str, Any]) -> list[dict[str, Any]]:
        return works_of(self._works, binding_ref(binding))

    def _work_exists(self, binding: Mapping[str, Any], cluster: str) -> bool:
        namespace = generate_execution_space_name(cluster)
        return any(meta_of(w).get("namespace") == namespace and work_cluster(w) == cluster
                   and not meta_of(w).get("deletionTimestamp") for w in self._works_of(binding))

    async def _secret(self, namespace: str | None, name: str) -> dict[str, str] | Found:
        if not namespace:
            return Found(failure=RestoreFailure.CREDENTIALS_REFUSED,
                         message=f"{CREDENTIALS_SECRET_ANNOTATION} names Secret {name}, but a cluster-scoped "
                                 "workload has no namespace to read it from")
        secret = await self.client.get_or_none(SECRETS, name, namespace)
        if secret is None:
            return Found(failure=RestoreFailure.CREDENTIALS_REFUSED,
                         message=f"the Secret {namespace}/{name} named by {CREDENTIALS_SECRET_ANNOTATION} does not "
                                 "exist")
        data = _decoded(secret.get("data"))
        for key, value in (secret.get("stringData") or {}).items() if isinstance(secret.get("stringData"),
                                                                                  Mapping) else ():
            data.setdefault(str(key), str(value))
        return data

    async def _look_up(self, binding: Mapping[str, Any], template: Mapping[str, Any], plan: LookupPlan,
                       secret_name: str | None) -> Found:
        secret: dict[str, str] | None = None
        if secret_name:
            got = await self._secret(meta_of(template).get("namespace"), secret_name)
            if isinstance(got, Found):
                return got
            secret = got
        flink_conf = spec_of(template).get("flinkConfiguration")
        try:
            config = storage_config(flink_conf if isinstance(flink_conf, Mapping) else None, secret,
                                    default_checkpoint_dir=self.options.restore_default_checkpoint_dir or None)
        except StorageConfigError as e:
            return Found(failure=RestoreFailure.STORAGE_NOT_CONFIGURED, message=str(e))
        location = config.describe()
        timeout = self.options.restore_storage_timeout
        try:
            if plan.savepoint:
                return Found([await describe_snapshot(config, plan.savepoint, timeout=timeout)], "savepoint",
                             location=location)
            if not plan.job_id:
                return Found(location=location)
            if not config.checkpoint_dir and not config.savepoint_dir:
                return Found(failure=RestoreFailure.NO_STORAGE, location=location,
                             message="the job's flinkConfiguration names no checkpoint directory "
                                     "(execution.checkpointing.dir or state.checkpoints.dir) and the "
                                     "controller-manager has no --restore-default-checkpoint-dir")
            snapshots = await list_snapshots(config, plan.job_id, timeout=timeout)
            if snapshots or not plan.carry_over:
                return Found(snapshots, "storage", location=location)
            try:
                return Found([await describe_snapshot(config, plan.carry_over, timeout=timeout)], "carry-over",
                             location=location)
            except SnapshotStorageError as e:
                if e.reason == "invalid":  # the carried-over snapshot is gone: nothing to restore
                    return Found((), "storage", location=location)
                raise
        except SnapshotStorageError as e:
            return Found(failure=failure_of(e.reason), message=f"{location}: {e}", location=location)
        except TimeoutError:
            return Found(failure=RestoreFailure.STORAGE_UNREACHABLE, location=location,
                         message=f"{location}: no answer within {timeout:g}s")

    # ------------------------------------------------------------------ writes
    async def _write(self, res: Resource, binding: dict[str, Any], need: RestoreNeed,
                     decision: RestoreDecision) -> bool:
        """Write the record; ``False`` when the binding changed under the pass (or another pass resolved it)."""
        md = meta_of(binding)
        generation = md.get("generation")
        stale = False

        def make(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            nonlocal stale
            meta = meta_of(obj)
            # a newer spec, or a record resolved meanwhile (this pass read a cache that had not seen it yet)
            stale = (meta.get("generation") != generation or bool(meta.get("deletionTimestamp"))
                     or record_resolves(parse_restore_record(obj), need))
            if stale:
                return None
            if (meta.get("annotations") or {}).get(RESTORE_ANNOTATION) == decision.record.to_json():
                return None
            return restore_patch(decision.record, meta.get("resourceVersion"))

        written = await patch_with_retry(self.client, res, binding, str(md.get("name")), md.get("namespace"), make)
        if written is None or stale:
            return False
        self.ctx.recorder.event(written, decision.event.type, decision.event.reason, decision.event.message)
        log.info("restore: %s/%s: %s", md.get("namespace") or "", md.get("name"), decision.event.message)
        await self._set_condition(res, written, decision.condition)
        return True

    async def _set_condition(self, res: Resource, binding: Mapping[str, Any], condition: Mapping[str, Any]) -> None:
        md = meta_of(binding)
        try:
            await patch_condition(self.client, res, binding, condition, self.ctx.now())
        except Exception as e:  # noqa: BLE001 - the record is written; the condition follows on the next pass
            log.warning("restore: could not set condition %s on %s: %s", condition.get("type"), md.get("name"), e)
