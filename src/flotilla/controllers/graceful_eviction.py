"""The graceful-eviction controller: removes a binding's graceful-eviction tasks once they are done.

One controller for both ResourceBindings and ClusterResourceBindings (keys ``rb|<ns>|<name>`` and
``crb|<name>``). The decision is :func:`flotilla.failover.graceful.assess_binding` (Karmada's rules,
kept exactly): stamp ``creationTimestamp`` on new tasks, keep ``suppressDeletion: true``
tasks, remove a task on timeout (its ``gracePeriodSeconds``, else ``--graceful-eviction-timeout``) or
once the scheduler caught up and every target cluster reports ``Healthy``.

Tasks arrive stamped from the taint manager and application failover of the same controller-manager while this
controller runs (:func:`graceful_eviction_running`): they would be stamped here on the first pass, and writing the stamp
with the task spares one binding write and one generation per eviction. Tasks from elsewhere (a person, another
tool) are stamped here as in Karmada.

D2: a ``Directly`` task is held while a Work of the binding is still in the task's cluster (any Work
in ``karmada-es-<cluster>`` carrying the binding's permanent-id label, terminating ones included), so
the binding controller's barrier is never lifted while the old copy may still run. The deletion of
such a Work wakes the binding.

``spec.gracefulEvictionTasks`` is patched with the binding's resourceVersion as precondition (re-read
and decided again on 409). After a successful patch, each removed task gives a Normal
``EvictWorkloadFromClusterSucceed`` event on the binding and on its resource template (Karmada's, the same
whatever the reason), then a ``GracefulEvictionTaskRemoved`` event saying why: every target Healthy
(Normal), timed out (Warning) or ``suppressDeletion`` set to false (Normal). The binding is looked at again
after :attr:`~flotilla.failover.graceful.Assessment.requeue_after`.

Metrics: ``flotilla_graceful_eviction_tasks_removed_total{trigger, reason}`` for every removed task, and
``flotilla_eviction_to_healthy_seconds{trigger}`` (from the task's ``creationTimestamp``) for each task
removed because every target is Healthy; ``trigger`` follows the task's ``producer``.

Triggers: binding created with tasks; binding updated while it has tasks and its tasks changed, or its generation,
``schedulerObservedGeneration`` or ``aggregatedStatus`` changed such that a pass can act (the scheduler caught up
and every target Healthy, or a D5 ``healthyAt`` stamp due: :func:`binding_needs_assessment`); a Work of the binding
deleted.
Runs only while the ``GracefulEviction`` feature gate is on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from flotilla.api.labels import (
    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    RESOURCE_BINDING_PERMANENT_ID_LABEL,
)
from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS
from flotilla.failover.graceful import (
    EVENT_TASK_REMOVED,
    Assessment,
    Removal,
    RemovalReason,
    assess_binding,
    binding_needs_assessment,
    removal_event,
)
from flotilla.failover.purge import (
    EXECUTION_SPACE_PREFIX,
    directly_pending_clusters,
    directly_purged_clusters,
    eviction_tasks,
)
from flotilla.failover.state import STATEFUL_FAILOVER_INJECTION_GATE, injected_state_stamp
from flotilla.kube.objects import as_map
from flotilla.kube.times import parse_time
from flotilla.observability.metrics import trigger_of_producer
from flotilla.propagation.status import binding_key_for_work
from flotilla.runtime.base import Controller, binding_key, cached_binding, template_ref
from flotilla.runtime.binding_works import binding_and_work_informers, works_with_label
from flotilla.runtime.handoffs import mark_graceful_eviction_running
from flotilla.runtime.patching import patch_with_retry

log = logging.getLogger(__name__)

__all__ = ["EVENT_TASK_REMOVED", "GracefulEvictionController"]

_Obj = dict[str, Any]


def _task_of(binding: Mapping[str, Any], cluster: str) -> Mapping[str, Any]:
    return next((t for t in eviction_tasks(as_map(binding.get("spec"))) if t.get("fromCluster") == cluster), {})


class GracefulEvictionController(Controller):
    name: ClassVar[str] = "graceful-eviction"
    role: ClassVar[str] = "cleanup"
    workers: ClassVar[int] = 5

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.enabled = self.options.gate("GracefulEviction")
        self.stamps_health = self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE)
        self.rbs: Any = None
        self.crbs: Any = None
        self.works: Any = None

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        if not self.enabled:
            log.info("graceful-eviction controller: feature gate GracefulEviction is off")
            return
        mark_graceful_eviction_running(self.ctx)
        self.rbs, self.crbs, self.works = binding_and_work_informers(self)
        for inf, scoped in ((self.rbs, False), (self.crbs, True)):
            inf.add_handler(on_add=lambda b, s=scoped: self._on_binding(s, None, b),
                            on_update=lambda old, new, s=scoped: self._on_binding(s, old, new))
        self.works.add_handler(on_delete=self._on_work_delete)

    def _on_binding(self, cluster_scoped: bool, old: _Obj | None, new: _Obj) -> None:
        if binding_needs_assessment(old, new, stamps_health=self.stamps_health, now=self.ctx.now()):
            key = binding_key(new, cluster_scoped)
            if key:
                self.enqueue(key)

    def _on_work_delete(self, work: _Obj) -> None:
        # only matters for a Directly task held on this Work (D2); the reconcile checks the rest
        key = binding_key_for_work(work)
        if key is not None:
            self.enqueue(key)

    # ------------------------------------------------------------------ reconcile
    def directly_pending(self, binding: Mapping[str, Any], label: str) -> set[str]:
        """Clusters of the binding's ``Directly`` tasks that still hold a Work of the binding (D2)."""
        spec = as_map(binding.get("spec"))
        if not directly_purged_clusters(spec):
            return set()
        permanent_id = as_map(as_map(binding.get("metadata")).get("labels")).get(label)
        if not permanent_id:
            # no permanent id: its Works cannot be told apart, assume the old copy may still be there
            return directly_purged_clusters(spec)
        works = [w for w in works_with_label(self.works, label, permanent_id)
                 if str(as_map(w.get("metadata")).get("namespace") or "").startswith(EXECUTION_SPACE_PREFIX)]
        return directly_pending_clusters(works, spec)

    async def reconcile(self, key: str) -> float | None:
        if not self.enabled:
            return None
        binding, res = cached_binding(self.name, key, self.rbs, self.crbs)
        if binding is None or not eviction_tasks(as_map(binding.get("spec"))):
            return None
        label = (CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL if res is CLUSTER_RESOURCE_BINDINGS
                 else RESOURCE_BINDING_PERMANENT_ID_LABEL)
        md = as_map(binding.get("metadata"))
        name, namespace = str(md.get("name")), md.get("namespace") or None
        outcome: dict[str, Assessment] = {}
        assessed: dict[str, Mapping[str, Any]] = {}

        def make_patch(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            if as_map(obj.get("metadata")).get("deletionTimestamp"):
                outcome.pop("a", None)
                return None
            assessment = assess_binding(obj, self.ctx.now(), default_timeout=self.options.graceful_eviction_timeout,
                                        directly_pending=self.directly_pending(obj, label))
            outcome["a"] = assessment
            assessed["b"] = obj
            rv = as_map(obj.get("metadata")).get("resourceVersion")
            patch = assessment.spec_patch(rv)
            stamp = injected_state_stamp(obj, self.ctx.now()) if self.stamps_health else None
            if stamp is not None:  # D5, in the same write as the removal the same Health allows
                patch = patch or {"metadata": {"resourceVersion": rv}}
                patch.setdefault("metadata", {"resourceVersion": rv})["annotations"] = stamp
            return patch

        patched = await patch_with_retry(self.client, res, binding, name, namespace, make_patch)
        assessment = outcome.get("a")
        if patched is None or assessment is None:
            return None
        if assessment.changed:
            target = {"apiVersion": res.api_version, "kind": res.kind, **patched}
            template = template_ref(patched)
            for ev in assessment.events:
                self._event(target, template, ev.type, ev.reason, ev.message)
            for removal in assessment.removed:
                task = _task_of(assessed.get("b") or binding, removal.cluster)
                type_, message = removal_event(removal, task, self.options.graceful_eviction_timeout)
                self._event(target, template, type_, EVENT_TASK_REMOVED, message)
                self._record_removal(removal, task)
            if assessment.removed:
                log.info("%s %s: removed graceful-eviction tasks %s", res.kind, key,
                         ", ".join(f"{r.cluster} ({r.reason})" for r in assessment.removed))
        if assessment.held:
            log.debug("%s %s: Directly tasks held while their Works remain: %s", res.kind, key, assessment.held)
        return assessment.requeue_after

    def _event(self, target: Mapping[str, Any], template: Mapping[str, Any] | None, type_: str, reason: str,
               message: str) -> None:
        self.ctx.recorder.event(target, type_, reason, message)
        if template is not None:
            self.ctx.recorder.event(template, type_, reason, message)

    def _record_removal(self, removal: Removal, task: Mapping[str, Any]) -> None:
        metrics = self.ctx.metrics.failover
        trigger = trigger_of_producer(task.get("producer"))
        metrics.record_task_removed(trigger, removal.reason.value)
        created = parse_time(task.get("creationTimestamp"))
        if removal.reason is RemovalReason.HEALTHY and created is not None:
            metrics.observe_eviction_to_healthy(trigger, (self.ctx.now() - created).total_seconds())
