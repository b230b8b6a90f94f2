"""The binding status controller: Works -> binding ``status.aggregatedStatus`` -> template status.

For a ResourceBinding or ClusterResourceBinding it collects the binding's Works (label
``resourcebinding.karmada.io/permanent-id`` / ``clusterresourcebinding.karmada.io/permanent-id`` = the binding's
permanent id), builds ``aggregatedStatus`` and the ``FullyApplied`` condition
(:mod:`flotilla.propagation.status`), and patches the binding's status subresource: only ``aggregatedStatus``
and ``conditions`` (the scheduler's ``schedulerObservedGeneration``/``lastScheduledTime`` are not touched), with
the binding's resourceVersion as precondition, retried on 409. Then, if the interpreter has an AggregateStatus
hook for the template's kind, it aggregates the items onto the template (from the shared informer's cache, as
Karmada reads it, else live) and writes the template's status subresource when ``.status`` changed; the same items
on the same template version are not aggregated twice.

D14: the readiness of each Work's cluster is part of the aggregation. Items of clusters that are not Ready
keep their last ``status`` and report ``health: Unknown``; the binding's ``StatusUpToDate`` condition names
those clusters. A Cluster's Ready flip (or its deletion) re-aggregates every binding with a Work there.

D5: with the gate ``StatefulFailoverInjection`` on, every pass also looks at the binding's injected-state record
(annotation ``failover.flotilla.io/injected-state``, written by the scheduler or the binding controller, D4): the
first time the aggregated item of the record's cluster reports ``health: Healthy``, ``healthyAt`` is stamped on the
record (:func:`flotilla.failover.state.observe_injected_copy_health`), so a later failover from that cluster knows
whether the copy ever ran with the injected state. The annotation is written just before that pass's status (so the
status write is the pass's last change of the binding) with a metadata-only merge patch guarded by the binding's
resourceVersion; on a 409 the binding is read again and the stamp decided again on the record found
there, so it never overwrites a record the binding controller replaced or dropped meanwhile. With the gate off the
record is left alone. While the graceful-eviction controller runs here and the binding has eviction tasks, a pass
whose status write changes ``aggregatedStatus`` leaves the stamp to that controller, which that write wakes: it
stamps in the write removing the task the same Health allows (one binding write instead of two); if the tasks are
gone when the status is written, the stamp follows here.

Coalescing: a pass that finds a target cluster of the binding without a Work yet (the binding controller has not
created it) or a Work just created (no ``Applied`` condition yet) writes nothing, for at most
:data:`FIRST_STATUS_WAIT` seconds from when a pass first found it so: the Work's first status, moments later as a
rule, brings the binding back, and one status write serves both (a "no Work yet" or "not applied" would be
superseded at once). Never while the binding says ``FullyApplied`` True: that is written False at once
(:func:`st.fully_applied_overstated`), as is a spec change adding a target cluster to such a binding. Conditions handed over by another controller (:class:`ConditionHandoff`) ride on the next
status write.

Triggers: binding create once scheduled (``status.lastScheduledTime``), binding update when scheduled and its
generation or ``spec.resource.resourceVersion`` changed (a change of the generation alone is looked at after
:data:`SPEC_CHANGE_SETTLE`: the Work deletions and creations it causes come first and bring the new picture, so one
status write covers both; and not at all when it leaves the clusters ``FullyApplied`` expects as they are), or
when it brings a new injected-state record not yet stamped Healthy whose copy already reports Healthy; Work status or
deletion change, delete (mapped to the binding by the Work's binding annotations; as in Karmada a Work's creation
is not a trigger: its first status is; a step of a copy still coming up is looked at after :data:`STARTING_SETTLE`,
so that the report superseding it is written in the same status write); Cluster readiness change or delete.
Events: ``AggregateStatusSucceed`` / ``AggregateStatusFailed`` on the binding and the template;
``StatusStale`` (Warning) / ``StatusUpToDate`` (Normal) on the binding when its StatusUpToDate condition flips.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from flotilla.api.labels import (
    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    RESOURCE_BINDING_PERMANENT_ID_LABEL,
)
from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS
from flotilla.client import ApiException, Resource, is_conflict, is_not_found
from flotilla.client.events import NORMAL, WARNING
from flotilla.cluster.health import is_ready
from flotilla.failover.purge import eviction_tasks
from flotilla.failover.state import (
    STATEFUL_FAILOVER_INJECTION_GATE,
    injected_copy_health_pending,
    injected_state_patch,
    observe_injected_copy_health,
    parse_injected_state_record,
)
from flotilla.interpreter import InterpreterError, Operation
from flotilla.kube.jsondiff import with_precondition
from flotilla.propagation import status as st
from flotilla.propagation.written import WrittenObjects
from flotilla.runtime.base import Controller, split_binding_key
from flotilla.runtime.binding_works import binding_and_work_informers, works_with_label
from flotilla.runtime.handoffs import HANDOFF, ConditionHandoff, graceful_eviction_running
from flotilla.runtime.interpreters import shared_interpreter
from flotilla.runtime.members import CLUSTERS
from flotilla.runtime.patching import patch_with_retry

log = logging.getLogger(__name__)

__all__ = ["BindingStatusController"]

RETRIES = 5
#: Seconds a binding waits after a spec-only change (generation) before it is aggregated again. The Works that
#: follow such a change (deleted, created) queue it at once with the new picture; this later pass only catches a
#: change no Work event follows (then ``FullyApplied`` is rewritten), so one status write serves both.
SPEC_CHANGE_SETTLE = 1.0

#: Seconds a binding waits after a Work status step of a copy still coming up (:func:`st.work_status_starting`:
#: applied without a report yet, or Unknown/Unhealthy before it was ever Healthy). Its next report (Healthy, as a
#: rule) queues the binding at once, so one status write covers both; a copy that stays in such a step is
#: written this much later. A first Healthy, a copy that was Healthy and stops being so, a failed apply or a
#: deletion are written at once.
STARTING_SETTLE = 1.0
#: Seconds at most that a binding's status write waits for the first status of a Work just created (no
#: ``Applied`` condition yet) from when a pass first found it; the execution controller's first status (as a
#: rule much sooner) brings the binding back at once, and one status write serves both.
FIRST_STATUS_WAIT = 10.0

_Obj = dict[str, Any]


class BindingStatusController(Controller):
    name: ClassVar[str] = "binding-status"
    role: ClassVar[str] = "reports"
    workers: ClassVar[int] = 5

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        self._handoff = ConditionHandoff(self.enqueue, SPEC_CHANGE_SETTLE)
        self.ctx.extras[HANDOFF] = self._handoff
        #: bindings and templates as this controller last wrote them (read your own writes, no 409)
        self._written = WrittenObjects()
        self._written_templates = WrittenObjects()
        #: per binding key: (template key, template resourceVersion, items) of the last aggregation onto the
        #: template that left it as wanted (same inputs again: nothing to aggregate)
        self._aggregated: dict[str, tuple[str, Any, list[dict[str, Any]]]] = {}
        #: per binding key: Works without a first status yet -> when a pass first found them (monotonic)
        self._awaited: dict[str, dict[str, float]] = {}
        self.rbs, self.crbs, self.works = binding_and_work_informers(self)
        self.clusters = self.informer(CLUSTERS)
        self.interpreters = shared_interpreter(self.ctx)
        for inf, prefix in ((self.rbs, "rb"), (self.crbs, "crb")):
            inf.add_handler(on_add=lambda b, p=prefix: self._on_binding(p, None, b),
                            on_update=lambda old, new, p=prefix: self._on_binding(p, old, new))
        # as Karmada: a Work's creation is not a trigger (its first status, Applied or Dispatching, written at once by
        # the execution controller, is: one status write for both)
        self.works.add_handler(on_update=self._on_work_update, on_delete=self._enqueue_for_work)
        self.clusters.add_handler(on_update=self._on_cluster_update, on_delete=self._on_cluster_delete)

    def _on_binding(self, prefix: str, old: _Obj | None, new: _Obj) -> None:
        md = new.get("metadata") or {}
        key = f"rb|{md.get('namespace')}|{md.get('name')}" if prefix == "rb" else f"crb|{md.get('name')}"
        if st.binding_needs_sync(None, new) and self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE) and \
                injected_copy_health_pending(old, new) and self._injected_copy_healthy_now(new, prefix):
            # a new record whose copy already reports Healthy: no Work event may follow, stamp it now (otherwise
            # the copy's next Work status change brings the binding here, with the status it leads to)
            self.enqueue(key)
        elif st.binding_needs_sync(old, new):
            if not st.binding_spec_only_changed(old, new):
                self.enqueue(key)
            elif old is None:
                self.enqueue(key, SPEC_CHANGE_SETTLE)
            elif st.expected_clusters(old.get("spec") or {}) != st.expected_clusters(new.get("spec") or {}):
                # a cluster gained has no applied Work yet: a FullyApplied True written is wrong from now on
                gained = st.expected_clusters_gained(old.get("spec") or {}, new.get("spec") or {})
                overstated = bool(gained) and st.fully_applied_written(new.get("status"))
                self.enqueue(key, 0.0 if overstated else SPEC_CHANGE_SETTLE)
            # else: a spec change that leaves the expected clusters as they are (e.g. a Directly eviction task
            # removed) changes nothing a pass writes

    def _injected_copy_healthy_now(self, binding: _Obj, prefix: str) -> bool:
        """Whether the Works of ``binding`` as cached already report its injected-state record's copy Healthy."""
        label = (RESOURCE_BINDING_PERMANENT_ID_LABEL if prefix == "rb"
                 else CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL)
        permanent_id = ((binding.get("metadata") or {}).get("labels") or {}).get(label)
        if not permanent_id:
            return False
        works = works_with_label(self.works, label, permanent_id)
        if not works:
            return False
        items = st.build_aggregated_status(works, (binding.get("spec") or {}).get("resource") or {}, self._ready)
        record = parse_injected_state_record(binding)
        return observe_injected_copy_health(record, items, self.ctx.now()) is not record

    def _enqueue_for_work(self, work: _Obj) -> None:
        key = st.binding_key_for_work(work)
        if key is not None:
            self.enqueue(key)

    def _on_work_update(self, old: _Obj, new: _Obj) -> None:
        if not st.work_status_changed(old, new):
            return
        key = st.binding_key_for_work(new)
        if key is not None:
            # a copy still coming up reports again within moments: one status write for the steps in between
            self.enqueue(key, STARTING_SETTLE if st.work_status_starting(old, new) else 0.0)

    def _on_cluster_update(self, old: _Obj, new: _Obj) -> None:
        if st.ready_changed(old, new):
            self._enqueue_cluster_bindings(new)

    def _on_cluster_delete(self, cluster: _Obj) -> None:
        self._enqueue_cluster_bindings(cluster)

    def _enqueue_cluster_bindings(self, cluster: _Obj) -> None:
        name = (cluster.get("metadata") or {}).get("name")
        if name:
            for work in self.works.store.by_index("namespace", f"karmada-es-{name}"):
                self._enqueue_for_work(work)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> float | None:
        try:
            res, cache_key = split_binding_key(key)
        except ValueError:
            log.warning("binding-status: ignoring malformed key %r", key)
            return None
        cluster_scoped = res is CLUSTER_RESOURCE_BINDINGS
        binding = self._written.fresh(key, (self.crbs if cluster_scoped else self.rbs).store.get(cache_key))
        label = CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL if cluster_scoped else RESOURCE_BINDING_PERMANENT_ID_LABEL
        if binding is None or (binding.get("metadata") or {}).get("deletionTimestamp"):
            self._aggregated.pop(key, None)
            self._awaited.pop(key, None)
            self._handoff.drop(key)
            return None
        permanent_id = ((binding.get("metadata") or {}).get("labels") or {}).get(label)
        if not permanent_id:
            return None  # admission always sets it; without it no Work can be found
        works = works_with_label(self.works, label, permanent_id)
        handed = self._handoff.pending(key)
        spec = binding.get("spec") or {}
        items = st.build_aggregated_status(works, spec.get("resource") or {}, self._ready)
        wait = self._await_works(key, binding, works)
        if wait is not None and not st.fully_applied_overstated(binding.get("status"), spec, items):
            return wait  # that Work's first status (sooner, as a rule) brings the binding back
        stale = st.stale_clusters(items, self._ready)
        # D5 stamp: while the graceful-eviction controller runs here and the binding has eviction tasks, a status
        # write that changes aggregatedStatus wakes that controller, which stamps with the task removal the same
        # Health allows (one binding write instead of two); otherwise the stamp goes first, so the status write
        # is the binding's last change of this pass, the one the graceful-eviction controller acts on
        deferred = self._stamp_deferred(binding, items)
        if not deferred:
            observed = await self._observe_injected_copy(key, res, binding, items)
            if observed is None:
                return None
            binding = observed
        written = await self._patch_binding(key, res, binding, items, stale, handed)
        if written is None:
            self._handoff.drop(key)
            return None
        self._handoff.settle(key, handed)
        if deferred and not eviction_tasks(written.get("spec") or {}):
            # the tasks went meanwhile (no graceful-eviction pass will follow): stamp here
            observed = await self._observe_injected_copy(key, res, written, items)
            if observed is None:
                return None
            written = observed
        await self._sync_template(key, written, items)
        return None

    def _await_works(self, key: str, binding: _Obj, works: list[_Obj]) -> float | None:
        """Seconds to wait for the Works of the binding's target clusters, or ``None``: write now.

        It waits for one the binding controller has not created yet and for the first status of one just
        created (at most :data:`FIRST_STATUS_WAIT` from when a pass first found it so), and for the first report
        of a copy applied moments ago (at most :data:`STARTING_SETTLE`). Written now, the binding would say "no
        Work yet", "not applied" or "no health yet" until that status comes and is written again; that status
        brings the binding back at once, and one write serves the Works that report close together (a binding
        duplicated to several members is Healthy only once all of them are).
        """
        bounds = {st.AWAIT_WORK: FIRST_STATUS_WAIT, st.AWAIT_REPORT: STARTING_SETTLE}
        waiting = {token: bounds[what] for token, what in st.awaited_reports(binding.get("spec") or {}, works).items()}
        if not waiting:
            self._awaited.pop(key, None)
            return None
        now = time.monotonic()
        seen = self._awaited.setdefault(key, {})
        for token in list(seen):
            if token not in waiting:
                del seen[token]
        left = min(seen.setdefault(token, now) + bound - now for token, bound in waiting.items())
        return left if left > 0 else None

    def _stamp_deferred(self, binding: _Obj, items: list[dict[str, Any]]) -> bool:
        """Whether the graceful-eviction controller takes this pass's D5 stamp (see :meth:`reconcile`)."""
        return (graceful_eviction_running(self.ctx) and bool(eviction_tasks(binding.get("spec") or {}))
                and ((binding.get("status") or {}).get("aggregatedStatus") or []) != items)

    async def _observe_injected_copy(self, key: str, res: Resource, binding: _Obj,
                                     items: list[dict[str, Any]]) -> _Obj | None:
        """D5: stamp ``healthyAt`` on the injected-state record once its cluster's copy reports Healthy (in the
        items about to be written). The binding as known after (``None``: it is gone)."""
        if not self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE):
            return binding

        def make_patch(obj: _Obj) -> dict[str, Any] | None:
            md = obj.get("metadata") or {}
            if md.get("deletionTimestamp"):
                return None
            record = parse_injected_state_record(obj)
            stamped = observe_injected_copy_health(record, items, self.ctx.now())
            if stamped is record:
                return None
            return injected_state_patch(stamped, md.get("resourceVersion"))

        md = binding.get("metadata") or {}
        if make_patch(binding) is None:
            return binding  # nothing to stamp on the binding as known: no write, no read
        written = await patch_with_retry(self.client, res, binding, str(md.get("name")), md.get("namespace"),
                                         make_patch)
        self._written.record(key, binding, written)
        if written is None or (written.get("metadata") or {}).get("deletionTimestamp"):
            return None
        return written

    def _ready(self, cluster: str) -> bool:
        return is_ready(self.clusters.store.get(cluster))

    async def _patch_binding(self, key: str, res: Resource, binding: _Obj, items: list[dict[str, Any]],
                             stale: list[str], handed: list[dict[str, Any]]) -> _Obj | None:
        """Write the aggregated status, and the conditions ``handed`` over by another controller
        (:class:`ConditionHandoff`); the binding as last known (``None``: it is gone or being deleted)."""
        md = binding.get("metadata") or {}
        ns, name = md.get("namespace"), str(md.get("name"))
        spec = binding.get("spec") or {}
        conditions = [*handed, st.fully_applied_condition(spec, items), st.status_up_to_date_condition(stale)]
        for _ in range(RETRIES):
            status = binding.get("status") or {}
            patch = st.binding_status_patch(status, items, conditions, self.ctx.now())
            if patch is None:
                return binding
            body = with_precondition({"status": patch}, binding)
            try:
                written = await self.client.patch(res, name, body, namespace=ns, subresource="status")
            except ApiException as e:
                if is_not_found(e):
                    return None
                if not is_conflict(e):
                    self.ctx.recorder.event(binding, WARNING, "AggregateStatusFailed",
                                            f"Writing the aggregated status failed: {e}")
                    raise
                binding = await self._get_live(res, name, ns)
                if binding is None or (binding.get("metadata") or {}).get("deletionTimestamp"):
                    return None
                continue
            self._events_for(binding, status, patch)
            if isinstance(written, Mapping) and written.get("metadata"):
                self._written.record(key, binding, written)
                return dict(written)
            return binding
        raise RuntimeError(f"{res.kind} {_display(ns, name)}: status kept conflicting after {RETRIES} attempts")

    def _events_for(self, binding: _Obj, old_status: Mapping[str, Any], patch: Mapping[str, Any]) -> None:
        if "aggregatedStatus" in patch:
            self.ctx.recorder.event(binding, NORMAL, "AggregateStatusSucceed",
                                    "Collected the status of the binding's Works into status.aggregatedStatus")
        old = st.find_condition(old_status.get("conditions"), st.CONDITION_STATUS_UP_TO_DATE)
        new = st.find_condition(patch.get("conditions"), st.CONDITION_STATUS_UP_TO_DATE)
        if new is not None and (old is None or old.get("status") != new.get("status")):
            if new.get("status") == "False":
                self.ctx.recorder.event(binding, WARNING, "StatusStale", str(new.get("message") or ""))
            elif old is not None:
                self.ctx.recorder.event(binding, NORMAL, "StatusUpToDate", str(new.get("message") or ""))

    async def _get_live(self, res: Resource, name: str, namespace: str | None) -> _Obj | None:
        return await self.client.get_or_none(res, name, namespace)

    async def _template(self, res: Resource, tkey: str, name: str, namespace: str | None) -> _Obj | None:
        """The template from the shared informer's cache (as last written here if newer), else read live."""
        inf = self.informer(res)
        if inf.has_synced:
            cached = self._written_templates.fresh(tkey, inf.store.get(tkey))
            if cached is not None:
                return cached
        return await self._get_live(res, name, namespace)

    async def _sync_template(self, key: str, binding: _Obj, items: list[dict[str, Any]]) -> None:
        ref = (binding.get("spec") or {}).get("resource") or {}
        api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        name, namespace = str(ref.get("name") or ""), ref.get("namespace") or None
        if not api_version or not kind or not name:
            return
        interpreter = self.interpreters.get()
        if not interpreter.hook_enabled({"apiVersion": api_version, "kind": kind}, Operation.AGGREGATE_STATUS):
            return  # kinds nobody aggregates keep whatever status they have
        res = await self.client.resource_for(api_version, kind)
        tkey = f"{namespace}/{name}" if namespace and res.namespaced else name
        template = await self._template(res, tkey, name, namespace)
        for _ in range(RETRIES):
            if template is None:
                return
            uid = ref.get("uid")
            if uid and (template.get("metadata") or {}).get("uid") != uid:
                return  # a newer template of the same name; its own binding will take care of it
            rv = (template.get("metadata") or {}).get("resourceVersion")
            done = self._aggregated.get(key)
            if done is not None and done[0] == tkey and done[1] == rv and done[2] == items:
                return  # this template was aggregated from these very items already
            try:
                new = await interpreter.offload(Operation.AGGREGATE_STATUS, template, functools.partial(
                    # a binding without items passes nil to a Lua script, as in Karmada (omitempty field)
                    interpreter.aggregate_status, template, items or None, now=self.ctx.now()))
            except InterpreterError as e:
                msg = f"Aggregating the status of {kind} {_display(namespace, name)} failed: {e}"
                self.ctx.recorder.event(binding, WARNING, "AggregateStatusFailed", msg)
                self.ctx.recorder.event(template, WARNING, "AggregateStatusFailed", msg)
                raise
            if not st.template_status_changed(template, new):
                self._aggregated[key] = (tkey, rv, items)
                return
            try:
                written = await self.client.update(res, new, subresource="status")
            except ApiException as e:
                if is_conflict(e):
                    template = await self._get_live(res, name, namespace)
                    continue
                if is_not_found(e):
                    return  # gone meanwhile, or the kind has no status subresource
                self.ctx.recorder.event(template, WARNING, "AggregateStatusFailed",
                                        f"Writing the aggregated status failed: {e}")
                raise
            self._written_templates.record(tkey, template, written)
            self._aggregated[key] = (tkey, (written.get("metadata") or {}).get("resourceVersion"), items)
            self.ctx.recorder.event(template, NORMAL, "AggregateStatusSucceed",
                                    "Updated the status with the status aggregated from the member clusters")
            return
        raise RuntimeError(f"{kind} {_display(namespace, name)}: status kept conflicting after {RETRIES} attempts")


def _display(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name
