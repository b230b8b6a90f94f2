"""The application-failover controller: evicts a workload from a cluster where it stays Unhealthy.

One controller for both ResourceBindings and ClusterResourceBindings (keys ``rb|<ns>|<name>`` and
``crb|<name>``). The decision is :func:`flotilla.failover.application.decide_for_binding`
(Karmada's rules, and D8 below): a binding whose ``spec.failover.application`` is set (the
detector copies it from the policy), with ``propagateDeps: true``, a non-empty ``aggregatedStatus``
and a resource kind the interpreter has an ``InterpretHealth`` hook for.

D8: the time a cluster was first seen Unhealthy is persisted on the binding (annotation
``failover.flotilla.io/unhealthy-since``), so a controller restart or a leader change keeps every
timer; ``tolerationSeconds: 0`` evicts at the first look. A cluster Unhealthy for
``tolerationSeconds`` is evicted with :func:`flotilla.failover.eviction.graceful_evict_clusters` and
:func:`~flotilla.failover.eviction.application_failover_task_options` (purge mode ``Directly``,
``Gracefully`` with ``gracePeriodSeconds``, ``Never`` with ``suppressDeletion``). The new
``spec.clusters``, ``spec.gracefulEvictionTasks`` and the record go in one merge patch guarded by the
binding's resourceVersion (decided again after a 409). While the graceful-eviction controller runs beside it, a new
task is written with its ``creationTimestamp`` (that controller's first pass would stamp it in a second write).

State preservation (``failover.application.statePreservation``, gate ``StatefulFailoverInjection``; off:
no extraction, no state and no ``clustersBeforeFailover`` on the task, as Karmada): the rules run on the
status the evicted cluster last reported; the state and ``clustersBeforeFailover`` go on the task. D5:
when the evicted cluster's copy was itself started with injected state and never became Healthy since
(the binding's injected-state record has no ``healthyAt``, or, without a record, the last ``Directly``
task that injected into it is still there), the previous state is carried forward instead of what the
unhealthy copy reported, even when its extraction fails
(:func:`~flotilla.failover.state.previous_injection`, :func:`~flotilla.failover.state.carry_forward`),
with a Normal ``StateCarriedForward`` event once the eviction is written. A failed extraction that is not
carried over blocks that cluster's eviction (D6): a Warning ``StatePreservationFailed`` event every
attempt, the first failure persisted (``failover.flotilla.io/state-preservation-failing-since``) and,
with ``--state-preservation-timeout`` > 0, the eviction proceeds without state once that old
(``StatePreservationTimedOut``).

Events: ``EvictWorkloadFromClusterFailed`` (Warning) on the binding and its template per cluster when
writing the eviction fails, or when its task cannot be built (``purgeMode: Gracefully`` with the
``GracefulEviction`` gate off; the record is then still written, so the timers keep running). A
successful eviction emits no event here; the graceful-eviction controller reports the task's removal.
Runs only while the ``Failover`` feature gate is on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS
from flotilla.client import ApiException
from flotilla.failover.application_plan import Plan, binding_wants_failover, plan_binding
from flotilla.failover.eviction import (
    EVENT_EVICT_FAILED,
    REASON_APPLICATION_FAILURE,
    evict_failed_message,
)
from flotilla.failover.state import (
    EVENT_STATE_PRESERVATION_FAILED,
    EVENT_STATE_PRESERVATION_TIMED_OUT,
    STATEFUL_FAILOVER_INJECTION_GATE,
)
from flotilla.interpreter import Operation
from flotilla.kube.objects import as_map
from flotilla.observability.metrics import RESULT_BLOCKED, RESULT_ERROR, RESULT_SUCCESS, TRIGGER_APPLICATION
from flotilla.runtime.base import Controller, binding_key, cached_binding, template_ref
from flotilla.runtime.handoffs import graceful_eviction_running
from flotilla.runtime.interpreters import shared_interpreter
from flotilla.runtime.patching import patch_with_retry

log = logging.getLogger(__name__)

__all__ = ["ApplicationFailoverController"]

_Obj = dict[str, Any]


class ApplicationFailoverController(Controller):
    name: ClassVar[str] = "application-failover"
    role: ClassVar[str] = "forward"
    workers: ClassVar[int] = 5

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.enabled = self.options.gate("Failover")
        self.rbs: Any = None
        self.crbs: Any = None
        self.interpreters: Any = None

    def setup(self) -> None:
        if not self.enabled:
            log.info("application-failover controller: feature gate Failover is off")
            return
        self.rbs = self.informer(RESOURCE_BINDINGS)
        self.crbs = self.informer(CLUSTER_RESOURCE_BINDINGS)
        self.interpreters = shared_interpreter(self.ctx)
        for inf, scoped in ((self.rbs, False), (self.crbs, True)):
            inf.add_handler(on_add=lambda b, s=scoped: self._on_binding(s, None, b),
                            on_update=lambda old, new, s=scoped: self._on_binding(s, old, new))

    def _on_binding(self, cluster_scoped: bool, old: _Obj | None, new: _Obj) -> None:
        if not binding_wants_failover(new):
            return
        if old is not None and as_map(old.get("metadata")).get("resourceVersion") == as_map(
                new.get("metadata")).get("resourceVersion"):
            return  # a resync: timed rechecks are queued already
        key = binding_key(new, cluster_scoped)
        if key:
            self.enqueue(key)

    def health_interpretable(self, binding: Mapping[str, Any]) -> bool:
        ref = as_map(as_map(binding.get("spec")).get("resource"))
        gvk = {"apiVersion": str(ref.get("apiVersion") or ""), "kind": str(ref.get("kind") or "")}
        try:
            return bool(self.interpreters.get().hook_enabled(gvk, Operation.INTERPRET_HEALTH))
        except Exception:  # an interpreter that cannot answer must not stop the others
            log.exception("application-failover: cannot tell whether %s has a health hook", gvk)
            return False

    async def reconcile(self, key: str) -> float | None:
        if not self.enabled:
            return None
        binding, res = cached_binding(self.name, key, self.rbs, self.crbs)
        if binding is None:
            return None
        kind = res.kind
        md = as_map(binding.get("metadata"))
        name, namespace = str(md.get("name")), md.get("namespace") or None
        plans: list[Plan] = []

        def make_patch(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            plans.clear()
            if as_map(obj.get("metadata")).get("deletionTimestamp"):
                return None
            plan = plan_binding(obj, self.ctx.now(), binding_kind=kind,
                                health_interpretable=self.health_interpretable(obj),
                                graceful_eviction_enabled=self.options.gate("GracefulEviction"),
                                state_preservation_timeout=self.options.state_preservation_timeout,
                                state_preservation_enabled=self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE),
                                stamp_tasks=graceful_eviction_running(self.ctx))
            plans.append(plan)
            return plan.patch

        target = {"apiVersion": res.api_version, "kind": res.kind, **binding}
        try:
            patched = await patch_with_retry(self.client, res, binding, name, namespace, make_patch)
        except ApiException as e:
            for cluster in (plans[0].evicted if plans else []):
                self._event(target, "Warning", EVENT_EVICT_FAILED, f"{evict_failed_message(cluster)} {e}".strip())
                self._count(RESULT_ERROR)
            raise
        if patched is None or not plans:
            return None
        plan = plans[0]
        self._record_metrics(plan)
        target = {"apiVersion": res.api_version, "kind": res.kind, **patched}
        for ev in plan.events:
            self._event(target, ev.type, ev.reason, ev.message)
        if plan.evicted:
            log.info("%s %s: evicted from %s (application failure)", res.kind, key, ", ".join(plan.evicted))
        if plan.build_error is not None:
            for cluster in plan.decision.evict:
                if cluster not in plan.evicted:
                    self._event(target, "Warning", EVENT_EVICT_FAILED,
                                f"{evict_failed_message(cluster)} {plan.build_error}")
            raise plan.build_error
        if plan.backoff:
            raise RuntimeError(f"{res.kind} {key}: state preservation failed, eviction retried with backoff")
        return plan.retry_after

    def _count(self, result: str) -> None:
        self.ctx.metrics.failover.record_eviction(trigger=TRIGGER_APPLICATION, reason=REASON_APPLICATION_FAILURE,
                                                  result=result)

    def _record_metrics(self, plan: Plan) -> None:
        """Evictions by result (written, held back by state preservation) and state-preservation failures."""
        for _ in plan.evicted:
            self._count(RESULT_SUCCESS)
        if plan.blocked:
            for cluster in plan.decision.evict:
                if cluster not in plan.evicted:
                    self._count(RESULT_BLOCKED)
        for ev in plan.events:
            if ev.reason == EVENT_STATE_PRESERVATION_FAILED:
                self.ctx.metrics.failover.record_state_preservation_failure(TRIGGER_APPLICATION)
            elif ev.reason == EVENT_STATE_PRESERVATION_TIMED_OUT:
                self.ctx.metrics.failover.record_state_preservation_failure(TRIGGER_APPLICATION)
                self.ctx.metrics.failover.record_state_preservation_timeout(TRIGGER_APPLICATION)

    def _event(self, binding: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.ctx.recorder.event(binding, type_, reason, message)
        template = template_ref(binding)
        if template is not None:
            self.ctx.recorder.event(template, type_, reason, message)
