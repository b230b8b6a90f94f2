"""The binding controller: ResourceBindings and ClusterResourceBindings become one Work per target cluster.

Karmada's binding controllers. Decisions are in :mod:`flotilla.propagation.works`;
this module reads caches and writes Works.

Triggers: a binding's creation and every change of its generation (the scheduler's ``spec.clusters``,
eviction tasks, the detector's ``spec.resource.resourceVersion`` ...); a change of an OverridePolicy
(bindings of its namespace whose template its selectors match) or ClusterOverridePolicy (all
bindings whose template matches); and, in Flotilla, a change of the template itself (so Works follow
the template even before the detector has bumped the binding). Cluster health is not looked at:
Works mirror ``spec.clusters``.

Reconcile: a binding being deleted has all its Works deleted, then loses the finalizer
``karmada.io/binding-controller`` (``karmada.io/cluster-resource-binding-controller``). Otherwise
orphan Works are deleted; if a Work still exists in a cluster evicted with ``purgeMode: Directly``
nothing else happens: the deletion of that Work (the Work informer's delete event) queues the binding again,
so the new copy's Work is written as soon as the old one is gone (Karmada polls every 5 s instead); a safety
look after :data:`DIRECTLY_PURGE_SAFETY_REQUEUE` seconds remains; else every target cluster's Work is
created or updated (errors of one cluster do not stop the others and requeue the binding), with
Events ``SyncWorkSucceed`` / ``SyncWorkFailed`` on the binding and the template.

Injected state (gate ``StatefulFailoverInjection``; D4, injected state stays): before the Works are written,
:func:`flotilla.failover.state.plan_injection` decides, from the eviction tasks and the binding's record
(annotation ``failover.flotilla.io/injected-state``), which labels each target cluster's Work gets: the
last ``Directly`` task's preserved state under Karmada's conditions, else the recorded labels in the
recorded cluster until a later failover supersedes the record. When the record changes (a new injection,
or a superseded record that goes) the annotation is written first, as a metadata-only merge patch guarded
by the resourceVersion (no generation bump, so no new render). On a 409 the binding is read again and, if
its generation is still the rendered one, decided again (the binding-status controller may have stamped
``healthyAt`` meanwhile); if the spec moved on, nothing is written and the newer render does it. Writing
the record before the Works means a Work never carries injected labels the binding has no record of, so
the labels survive the task's removal. With the gate off nothing is injected and the record is left alone.

Native restore (D20, :mod:`flotilla.failover.restore`): a target that needs a restore
(:func:`~flotilla.failover.restore.restore_needs`) gets no Work until the binding's record
(``failover.flotilla.io/restore``, written by the restore controller) resolves it; the other targets are written as
usual and the binding is looked at again when the record changes. Works are held only while the restore controller
runs in the same controller-manager. A ``Restored`` record is written into its
cluster's manifest through ``RestoreState`` on every render (:func:`~flotilla.failover.restore.applied_restore`).

Flotilla also deletes the Works of a binding that disappears without its finalizer (e.g. created by
hand): Karmada would leave them behind.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

from flotilla.api import labels as L
from flotilla.client import ApiException, Informer, Resource, is_already_exists, is_conflict, is_not_found
from flotilla.failover.events import EVENT_SYNC_WORK_FAILED, EVENT_SYNC_WORK_SUCCEED
from flotilla.failover.moves import (
    MOVE_ANNOTATION,
    MoveRender,
    apply_move_restore,
    render_rule,
    waits_on_old_copy,
)
from flotilla.failover.restore import (
    RESTORE_ANNOTATION,
    RESTORE_CONTROLLER_RUNNING,
    applied_restore,
    held_targets,
    parse_restore_record,
    restore_needs,
)
from flotilla.failover.state import (
    STATEFUL_FAILOVER_INJECTION_GATE,
    InjectionPlan,
    injected_state_patch,
    parse_injected_state_record,
    plan_injection,
)
from flotilla.interpreter import InterpreterError, Operation, ResourceInterpreter, prune_irrelevant_fields
from flotilla.kube.objects import meta_of, spec_of
from flotilla.policy.matching import resource_matches_selector
from flotilla.policy.naming import generate_binding_name
from flotilla.propagation.works import (
    CLUSTER_OVERRIDE_POLICIES,
    CLUSTER_RESOURCE_BINDING_KIND,
    CLUSTER_RESOURCE_BINDINGS,
    OVERRIDE_POLICIES,
    RESOURCE_BINDING_KIND,
    RESOURCE_BINDINGS,
    RESOURCE_INTERPRETER_CUSTOMIZATIONS,
    WORKS,
    BindingRef,
    InterpreterCache,
    WorkIntent,
    binding_ref,
    directly_purge_pending,
    directly_purged_clusters,
    orphan_works,
    plan_works,
    render_work,
    restore_state_enabled,
    work_cluster,
    work_update,
)
from flotilla.runtime.base import Controller, settle_deleted
from flotilla.runtime.binding_works import binding_and_work_informers, planned_moves_running, works_of
from flotilla.runtime.interpreter_failures import customization_failures
from flotilla.runtime.members import CLUSTERS
from flotilla.runtime.patching import Written, patch_with_retry, write_once

log = logging.getLogger(__name__)

__all__ = ["BindingController", "BindingSyncError", "binding_key"]

#: Seconds before a binding held by the ``Directly`` barrier is looked at again if no Work deletion woke it first
#: (the deletion of the old Work is what normally queues it: :meth:`BindingController._work_deleted`).
DIRECTLY_PURGE_SAFETY_REQUEUE = 60.0
#: Seconds before a binding whose spec changed while its injected-state record was written is looked at again
#: (the generation change queues it too; this covers a cache that has not seen the change yet).
STALE_RENDER_REQUEUE = 0.5
#: Seconds before a binding with a Work held for its native restore is looked at again if the record's change did
#: not wake it first.
RESTORE_HOLD_REQUEUE = 5.0
_WRITE_ATTEMPTS = 5


class BindingSyncError(Exception):
    """Some Works of a binding could not be written; the binding is retried with backoff."""


def binding_key(binding: Mapping[str, Any]) -> str:
    """The queue key of a binding: ``ResourceBinding/<ns>/<name>`` or ``ClusterResourceBinding/<name>``."""
    ref = binding_ref(binding)
    return f"{ref.kind}/{ref.key}"


class BindingController(Controller):
    name: ClassVar[str] = "binding"
    role: ClassVar[str] = "forward"
    workers: ClassVar[int] = 5

    def setup(self) -> None:
        self._rbs, self._crbs, self._works = binding_and_work_informers(self)
        self._ops = self.informer(OVERRIDE_POLICIES)
        self._cops = self.informer(CLUSTER_OVERRIDE_POLICIES)
        self._clusters = self.informer(CLUSTERS)
        self._rics = self.informer(RESOURCE_INTERPRETER_CUSTOMIZATIONS)
        self._interpreters = InterpreterCache(customization_failures(self.ctx))
        self._templates: dict[tuple[str, str], Informer] = {}
        self._deleted: dict[str, BindingRef] = {}
        for inf in (self._rbs, self._crbs):
            inf.add_handler(on_add=self._binding_added, on_update=self._binding_updated,
                            on_delete=self._binding_deleted)
        self._works.add_handler(on_delete=self._work_deleted)
        for inf in (self._ops, self._cops):
            inf.add_handler(on_add=self._override_changed,
                            on_update=lambda old, new: (self._override_changed(old), self._override_changed(new)),
                            on_delete=self._override_changed)

    # ------------------------------------------------------------------ event handlers
    def _binding_added(self, obj: dict[str, Any]) -> None:
        self.enqueue(binding_key(obj))

    def _binding_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        o, n = meta_of(old), meta_of(new)
        if o.get("generation") != n.get("generation") or o.get("deletionTimestamp") != n.get("deletionTimestamp"):
            self.enqueue(binding_key(new))
        elif (o.get("annotations") or {}).get(RESTORE_ANNOTATION) != (n.get("annotations") or {}).get(
                RESTORE_ANNOTATION):
            self.enqueue(binding_key(new))  # a native restore resolved: the held Work can be written (D20)
        elif (o.get("annotations") or {}).get(MOVE_ANNOTATION) != (n.get("annotations") or {}).get(MOVE_ANNOTATION):
            self.enqueue(binding_key(new))  # a planned move changed phase (D21)

    def _binding_deleted(self, obj: dict[str, Any]) -> None:
        ref = binding_ref(obj)
        if ref.permanent_id:
            self._deleted[binding_key(obj)] = ref
        self.enqueue(binding_key(obj))

    def _work_deleted(self, work: dict[str, Any]) -> None:
        """The old copy of a ``Directly`` eviction or of a planned move is gone: its binding may write the new Works
        now."""
        annotations = meta_of(work).get("annotations") or {}
        namespace = annotations.get(L.RESOURCE_BINDING_NAMESPACE_ANNOTATION)
        name = annotations.get(L.RESOURCE_BINDING_NAME_ANNOTATION)
        if namespace and name:
            kind, rest = RESOURCE_BINDING_KIND, f"{namespace}/{name}"
        elif annotations.get(L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION):
            kind, rest = CLUSTER_RESOURCE_BINDING_KIND, str(annotations[L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION])
        else:
            return
        binding = self._binding_informer(kind).store.get(rest)
        if binding is not None and (work_cluster(work) in directly_purged_clusters(spec_of(binding))
                                    or waits_on_old_copy(binding, work_cluster(work))):
            self.enqueue(f"{kind}/{rest}")

    def _override_changed(self, policy: dict[str, Any]) -> None:
        namespace = meta_of(policy).get("namespace")
        selectors = [s for s in spec_of(policy).get("resourceSelectors") or [] if isinstance(s, dict)]
        bindings = self._rbs.store.by_index("namespace", namespace) if namespace else self._rbs.store.list()
        if not namespace:
            bindings = bindings + self._crbs.store.list()
        for binding in bindings:
            template = self._cached_template(binding) if selectors else None
            if not selectors or template is None or any(resource_matches_selector(template, s) for s in selectors):
                self.enqueue(binding_key(binding))

    def _template_changed(self, kind: str, obj: dict[str, Any]) -> None:
        meta = meta_of(obj)
        name, namespace = meta.get("name"), meta.get("namespace")
        if not isinstance(name, str):
            return
        binding_name = generate_binding_name(kind, name)
        if namespace:
            if self._rbs.store.get(f"{namespace}/{binding_name}") is not None:
                self.enqueue(f"{RESOURCE_BINDING_KIND}/{namespace}/{binding_name}")
        elif self._crbs.store.get(binding_name) is not None:
            self.enqueue(f"{CLUSTER_RESOURCE_BINDING_KIND}/{binding_name}")

    def _template_updated(self, kind: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        try:
            changed = prune_irrelevant_fields(old) != prune_irrelevant_fields(new)
        except Exception:  # noqa: BLE001 - a malformed object: look at it anyway
            changed = True
        if changed:
            self._template_changed(kind, new)

    # ------------------------------------------------------------------ templates
    def _template_informer(self, res: Resource) -> Informer:
        inf = self._templates.get((res.api_version, res.kind))
        if inf is None:
            inf = self.informer(res)
            kind = res.kind
            inf.add_handler(on_add=lambda obj: self._template_changed(kind, obj),
                            on_update=lambda old, new: self._template_updated(kind, old, new))
            self._templates[(res.api_version, res.kind)] = inf
        return inf

    def _cached_template(self, binding: Mapping[str, Any]) -> dict[str, Any] | None:
        resource = spec_of(binding).get("resource") or {}
        inf = self._templates.get((resource.get("apiVersion"), resource.get("kind")))
        if inf is None:
            return None
        ns, name = resource.get("namespace"), resource.get("name", "")
        return inf.store.get(f"{ns}/{name}" if ns else name)

    async def _fetch_template(self, binding: Mapping[str, Any]) -> dict[str, Any] | None:
        """The template (cache, else a live GET); None when it does not exist."""
        resource = spec_of(binding).get("resource") or {}
        res = await self.client.resource_for(str(resource.get("apiVersion") or ""), str(resource.get("kind") or ""))
        inf = self._template_informer(res)
        ns = (resource.get("namespace") or None) if res.namespaced else None
        name = str(resource.get("name") or "")
        if inf.has_synced:
            cached = inf.store.get(f"{ns}/{name}" if ns else name)
            if cached is not None:
                return cached
        return await self.client.get_or_none(res, name, ns)

    # ------------------------------------------------------------------ reconcile
    def _binding_informer(self, kind: str) -> Informer:
        return self._crbs if kind == CLUSTER_RESOURCE_BINDING_KIND else self._rbs

    def _works_of(self, ref: BindingRef) -> list[dict[str, Any]]:
        return works_of(self._works, ref)

    async def reconcile(self, key: str) -> float | None:
        kind, _, rest = key.partition("/")
        binding = self._binding_informer(kind).store.get(rest)
        if await settle_deleted(self._deleted, key, binding, self._delete_works):
            return None
        ref = binding_ref(binding)
        if meta_of(binding).get("deletionTimestamp"):
            await self._delete_works(ref)
            await self._remove_finalizer(binding)
            return None
        if not ref.permanent_id:
            raise BindingSyncError(f"{kind} {rest} has no {ref.id_label} label yet")
        spec = spec_of(binding)
        works = self._works_of(ref)
        move = render_rule(binding, works, {str(meta_of(c).get("name")): c for c in self._clusters.store.list()},
                           self._cached_template(binding), pending=planned_moves_running(self.ctx))
        if move.hold:
            return await self._render_move(binding, works, move)
        orphans = orphan_works(works, spec)
        if orphans:
            await self._delete_orphans(binding, orphans)
        if directly_purge_pending(works, spec):
            log.debug("%s %s: Works in clusters purged Directly still exist; not syncing Works yet", kind, rest)
            return DIRECTLY_PURGE_SAFETY_REQUEUE
        template = await self._fetch_template(binding)
        if template is None:
            return None
        injection = await self._sync_injected_state(binding)
        if injection is None:
            return STALE_RENDER_REQUEUE
        held = await self._ensure_works(binding, template, injection)
        return RESTORE_HOLD_REQUEUE if held else None

    async def _render_move(self, binding: dict[str, Any], works: list[dict[str, Any]], move: MoveRender) -> float:
        """D21: a planned move is under way: the old copy is kept (stopped with a savepoint) or deleted, other
        orphans go, and nothing else is written (:func:`flotilla.failover.moves.render_rule`)."""
        log.debug("%s: %s", binding_key(binding), move.reason)
        doomed = {id(w): w for w in orphan_works(works, spec_of(binding)) if work_cluster(w) not in move.keep_clusters}
        doomed.update((id(w), w) for w in move.delete)
        await self._delete_orphans(binding, list(doomed.values()))
        for body in move.update:
            try:
                await self.client.update(WORKS, body)
            except ApiException as e:
                if not (is_conflict(e) or is_not_found(e)):
                    raise
                return STALE_RENDER_REQUEUE
        return DIRECTLY_PURGE_SAFETY_REQUEUE

    async def _sync_injected_state(self, binding: dict[str, Any]) -> InjectionPlan | None:
        """D4: what this render injects; the binding's record is written first when it changes.

        ``None`` when the binding changed (or went) under the render: its Works are not written now.
        """
        gate = self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE)
        meta = meta_of(binding)
        generation = meta.get("generation")
        res = CLUSTER_RESOURCE_BINDINGS if binding_ref(binding).cluster_scoped else RESOURCE_BINDINGS
        plans: list[InjectionPlan] = []

        def make_patch(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            plans.clear()
            md = meta_of(obj)
            if md.get("generation") != generation or md.get("deletionTimestamp"):
                return None  # a newer render follows (or the binding goes); decide nothing from this one
            plan = plan_injection(spec_of(obj), parse_injected_state_record(obj), self.ctx.now(), gate=gate)
            plans.append(plan)
            return injected_state_patch(plan.record, md.get("resourceVersion")) if plan.record_changed else None

        written = await patch_with_retry(self.client, res, binding, str(meta.get("name")), meta.get("namespace"),
                                         make_patch)
        if written is None or not plans:
            return None
        plan = plans[0]
        if plan.record_changed:
            who = binding_key(binding)
            if plan.record is None:
                log.info("%s: dropped the injected-state record (superseded)", who)
            else:
                log.info("%s: recorded the state injected into cluster %s: %s", who, plan.record.cluster,
                         plan.record.to_json())
        return plan

    async def _ensure_works(self, binding: dict[str, Any], template: dict[str, Any],
                            injection: InjectionPlan) -> set[str]:
        """Write the Works; returns the targets held for their native restore (D20)."""
        clusters = {str(meta_of(c).get("name")): c for c in self._clusters.store.list()}
        interpreter = self._interpreters.get(self._rics.store.list())
        gate = self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE)
        record = parse_restore_record(binding)
        restoring = bool(self.ctx.extras.get(RESTORE_CONTROLLER_RUNNING))
        needs = restore_needs(binding, injection, hook_enabled=restore_state_enabled(interpreter, template),
                              gate=gate and restoring)
        held = held_targets(needs, record)
        restores = {}
        for target in injection.decisions:
            restore = applied_restore(spec_of(binding), record, target)
            if restore is not None:
                restores[target] = restore
        if held:
            log.info("%s: Work for %s held until its native restore is resolved", binding_key(binding),
                     ", ".join(sorted(held)))
        # a ReviseReplica customization runs in the Lua worker threads, not on the event loop
        intents, build_errors = await interpreter.offload(Operation.REVISE_REPLICA, template, functools.partial(
            plan_works,
            template, binding,
            interpreter=interpreter,
            clusters=clusters,
            override_policies=self._ops.store.list(),
            cluster_override_policies=self._cops.store.list(),
            inject_preserved_labels=self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE),
            injections=injection.labels,
            default_purge_mode=self.options.no_execute_taint_eviction_purge_mode,
            restores=restores,
            held=held,
        ))
        errors = [e.message for e in build_errors]
        intents = self._restore_moved(binding, intents, interpreter, errors)
        for intent in intents:
            try:
                await self._write_work(intent)
            except Exception as e:  # noqa: BLE001 - one cluster's failure does not stop the others
                errors.append(f"failed to write Work {intent.key}: {e}")
        meta = meta_of(binding)
        who = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
        if errors:
            message = "; ".join(errors)
            self.ctx.recorder.event(binding, "Warning", EVENT_SYNC_WORK_FAILED, message)
            self.ctx.recorder.event(template, "Warning", EVENT_SYNC_WORK_FAILED, message)
            raise BindingSyncError(f"{binding.get('kind')} {who}: {message}")
        if held and not intents:
            return held
        message = f"Sync work of {binding.get('kind')}({who}) successful."
        self.ctx.recorder.event(binding, "Normal", EVENT_SYNC_WORK_SUCCEED, message)
        self.ctx.recorder.event(template, "Normal", EVENT_SYNC_WORK_SUCCEED, message)
        return held

    @staticmethod
    def _restore_moved(binding: Mapping[str, Any], intents: list[WorkIntent], interpreter: ResourceInterpreter,
                       errors: list[str]) -> list[WorkIntent]:
        """D21: the new copy of a planned move starts from its savepoint; a copy that cannot is not written."""
        kept = []
        for intent in intents:
            try:
                restored = apply_move_restore(intent.manifest, binding, intent.cluster, interpreter)
            except InterpreterError as e:
                errors.append(f"failed to restore the planned move's savepoint in cluster {intent.cluster}: {e}")
                continue
            if restored is not None:
                intent.manifest = restored
            kept.append(intent)
        return kept

    async def _write_work(self, intent: WorkIntent) -> None:
        """Create or update one Work (optimistic lock on its resourceVersion, retried on conflict)."""
        existing = self._works.store.get(intent.key)
        for _ in range(_WRITE_ATTEMPTS):
            if existing is None:
                try:
                    await self.client.create(WORKS, render_work(intent, None, str(uuid.uuid4())))
                    return
                except ApiException as e:
                    if not is_already_exists(e):
                        raise
                existing = await self._get_work(intent)
                continue
            if meta_of(existing).get("deletionTimestamp"):
                raise BindingSyncError(f"work {intent.key} is being deleted")
            body = work_update(existing, render_work(intent, existing, str(uuid.uuid4())))
            if body is None:
                return
            try:
                await self.client.update(WORKS, body)
                return
            except ApiException as e:
                if not (is_conflict(e) or is_not_found(e)):
                    raise
            existing = await self._get_work(intent)
        raise BindingSyncError(f"work {intent.key}: gave up after {_WRITE_ATTEMPTS} conflicting writes")

    async def _get_work(self, intent: WorkIntent) -> dict[str, Any] | None:
        return await self.client.get_or_none(WORKS, intent.name, intent.namespace)

    async def _delete_work(self, work: Mapping[str, Any]) -> None:
        meta = meta_of(work)
        try:
            await self.client.delete(WORKS, str(meta.get("name")), str(meta.get("namespace")))
        except ApiException as e:
            if not is_not_found(e):
                raise

    async def _delete_orphans(self, binding: dict[str, Any], works: list[Mapping[str, Any]]) -> None:
        errors = []
        for work in works:
            if meta_of(work).get("deletionTimestamp"):
                continue
            try:
                await self._delete_work(work)
                log.info("deleted orphan Work %s/%s", meta_of(work).get("namespace"), meta_of(work).get("name"))
            except ApiException as e:
                errors.append(f"{meta_of(work).get('namespace')}/{meta_of(work).get('name')}: {e}")
        if errors:
            message = "failed to delete orphan Works: " + "; ".join(errors)
            self.ctx.recorder.event(binding, "Warning", "CleanupWorkFailed", message)
            raise BindingSyncError(message)

    async def _delete_works(self, ref: BindingRef) -> None:
        errors = []
        for work in self._works_of(ref):
            if meta_of(work).get("deletionTimestamp"):
                continue
            try:
                await self._delete_work(work)
            except ApiException as e:
                errors.append(f"{meta_of(work).get('namespace')}/{meta_of(work).get('name')}: {e}")
        if errors:
            raise BindingSyncError(f"{ref.kind} {ref.key}: failed to delete Works: " + "; ".join(errors))

    async def _remove_finalizer(self, binding: dict[str, Any]) -> None:
        kind = binding.get("kind")
        res = CLUSTER_RESOURCE_BINDINGS if kind == CLUSTER_RESOURCE_BINDING_KIND else RESOURCE_BINDINGS
        finalizer = (L.CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER if kind == CLUSTER_RESOURCE_BINDING_KIND
                     else L.BINDING_CONTROLLER_FINALIZER)
        current: dict[str, Any] | None = binding
        for _ in range(_WRITE_ATTEMPTS):
            if current is None:
                return
            finalizers = list(meta_of(current).get("finalizers") or [])
            if finalizer not in finalizers:
                return
            body = dict(current)
            body["metadata"] = {**meta_of(current), "finalizers": [f for f in finalizers if f != finalizer]}
            if await write_once(self.client.update(res, body)) is not Written.CONFLICT:
                return
            meta = meta_of(current)
            found = await self.client.get_or_none(res, str(meta.get("name")), meta.get("namespace"))
            if found is None:
                return
            current = found
        raise BindingSyncError(f"{kind} {binding_ref(binding).key}: could not remove finalizer {finalizer}")
