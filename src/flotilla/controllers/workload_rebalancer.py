"""The WorkloadRebalancer controller (Karmada's ``workloadRebalancer``).

A WorkloadRebalancer (``apps.karmada.io/v1alpha1``, cluster-scoped) asks for a fresh reschedule of the
workloads it lists. For each workload without a result yet, the controller reads its binding (a
ResourceBinding in the workload's namespace, or a ClusterResourceBinding when the namespace is empty) and,
unless the binding's ``spec.rescheduleTriggeredAt`` already holds the rebalancer's ``creationTimestamp`` or
a later time, merge-patches it to that time (resourceVersion precondition). The scheduler then sees
``rescheduleTriggeredAt`` after ``status.lastScheduledTime`` and schedules the binding in Fresh mode.

The status (``observedWorkloads`` with ``Successful``, or ``Failed``/``ReferencedBindingNotFound`` when there
is no binding; ``observedGeneration``; ``finishTime``) is patched through the status subresource. Other
errors leave the workload pending and the rebalancer is retried with backoff. Once finished, a rebalancer
with ``spec.ttlSecondsAfterFinished`` is deleted that long after ``finishTime`` (precondition: the
resourceVersion it was judged on). Decisions: :mod:`flotilla.propagation.rebalance`.

Triggers: a rebalancer is created, or its ``spec`` changes (status-only updates and deletions do not).
The rebalancer is read from the API server, not from the cache, so a decision never rests on a stale status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS, WORKLOAD_REBALANCERS
from flotilla.client import ApiException, is_conflict, is_not_found
from flotilla.kube.objects import meta_of
from flotilla.kube.times import parse_time
from flotilla.propagation.rebalance import (
    Outcome,
    WorkloadRef,
    apply_outcomes,
    next_status,
    observed_workloads,
    pending,
    spec_workloads,
    status_patch,
    sync_observed,
    trigger_patch,
    ttl_remaining,
)
from flotilla.runtime.base import Controller

log = logging.getLogger(__name__)

__all__ = ["WorkloadRebalancerController"]

RETRY_INITIAL = 1.0
RETRY_MAX = 60.0
_TRIGGER_ATTEMPTS = 3


class WorkloadRebalancerController(Controller):
    name: ClassVar[str] = "workloadRebalancer"
    workers: ClassVar[int] = 2

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._failures: dict[str, int] = {}

    def setup(self) -> None:
        self.rebalancers = self.informer(WORKLOAD_REBALANCERS)
        self.rebalancers.add_handler(on_add=self.enqueue_object, on_update=self._on_update)

    def _on_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if old.get("spec") != new.get("spec"):
            self.enqueue_object(dict(new))

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> float | None:
        rebalancer = await self.client.get_or_none(WORKLOAD_REBALANCERS, key)
        if rebalancer is None:
            self._failures.pop(key, None)
            return None
        if meta_of(rebalancer).get("deletionTimestamp"):
            return None
        created = parse_time(meta_of(rebalancer).get("creationTimestamp"))
        if created is None:
            log.warning("WorkloadRebalancer %s has no readable creationTimestamp; nothing to trigger", key)
            return None
        observed = sync_observed(spec_workloads(rebalancer), observed_workloads(rebalancer))
        outcomes = {ref: await self._trigger(ref, created) for ref in pending(observed)}
        observed, retry = apply_outcomes(observed, outcomes)
        now = self.ctx.now()
        patch = status_patch(rebalancer, next_status(rebalancer, observed, retry, now))
        if patch is not None:
            rebalancer = await self.client.patch(WORKLOAD_REBALANCERS, key, patch, subresource="status")
        if retry:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            log.info("WorkloadRebalancer %s: %d workload(s) could not be triggered yet; retrying", key, retry)
            return min(RETRY_MAX, RETRY_INITIAL * (2 ** failures))
        self._failures.pop(key, None)
        return await self._expire(key, rebalancer, now)

    async def _trigger(self, ref: WorkloadRef, created: datetime) -> Outcome:
        """Ask the workload's binding to reschedule; re-read and try again when it moved on meanwhile."""
        res = CLUSTER_RESOURCE_BINDINGS if ref.cluster_scoped else RESOURCE_BINDINGS
        namespace = None if ref.cluster_scoped else ref.namespace
        for _ in range(_TRIGGER_ATTEMPTS):
            try:
                binding = await self.client.get(res, ref.binding_name, namespace)
                patch = trigger_patch(binding, created)
                if patch is not None:
                    await self.client.patch(res, ref.binding_name, patch, namespace=namespace)
                    log.info("WorkloadRebalancer: rescheduling %s (binding %s)", ref, ref.binding_name)
                return Outcome.TRIGGERED
            except ApiException as e:
                if is_not_found(e):
                    return Outcome.NOT_FOUND
                if not is_conflict(e):
                    log.warning("WorkloadRebalancer: cannot trigger %s: %s", ref, e.message)
                    return Outcome.RETRY
        return Outcome.RETRY

    async def _expire(self, key: str, rebalancer: Mapping[str, Any], now: datetime) -> float | None:
        remaining = ttl_remaining(rebalancer, now)
        if remaining is None:
            return None
        if remaining > 0:
            return remaining
        rv = meta_of(rebalancer).get("resourceVersion")
        try:
            await self.client.delete(WORKLOAD_REBALANCERS, key,
                                     preconditions={"resourceVersion": str(rv)} if rv else None)
        except ApiException as e:
            if is_not_found(e):
                return None
            raise  # a conflict: it changed since it was judged, so judge again
        log.info("WorkloadRebalancer %s deleted: finished and ttlSecondsAfterFinished passed", key)
        return None
