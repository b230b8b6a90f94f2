"""The scheduler controller: decides where each (Cluster)ResourceBinding goes (karmada-core.md §3).

Watches ResourceBindings, ClusterResourceBindings and Clusters. A binding is enqueued when it is
added, when its generation changes (status-only updates never schedule), and when a Cluster update
that matters (deletion started, labels or spec changed - not Ready flips) concerns the affinity it
is scheduled against. Whether to schedule and what to write are
:mod:`flotilla.propagation.schedule_triggers`; the placement itself is :func:`flotilla.scheduler.schedule`.

Writes (merge patches with a resourceVersion precondition): ``spec.clusters`` and the
``policy.karmada.io/applied-placement`` annotation (on success, and cleared on NoClusterFit), then
the status: the ``Scheduled`` condition (Success / NoClusterFit / Unschedulable / SchedulerError),
on success ``schedulerObservedGeneration`` (the generation read at the start of the pass) and
``lastScheduledTime``, and ``schedulerObservingAffinityName`` with ``clusterAffinities``. Events
``ScheduleBindingSucceed`` / ``ScheduleBindingFailed`` go to the binding and to its template.

Retries: NoClusterFit waits for the next event (as Karmada); other scheduling errors are retried
after 1 s doubling up to 10 s; Unschedulable after 5 minutes; a new event schedules at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flotilla.client import ApiException, Resource, is_conflict
from flotilla.controllers.base import Controller, ControllerContext, split_key
from flotilla.controllers.detector import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS, patch_with_retry
from flotilla.controllers.members import CLUSTERS
from flotilla.observability.events import NORMAL, WARNING
from flotilla.policy.matching import is_deleting
from flotilla.propagation.schedule_triggers import (
    DEFAULT_SCHEDULER_NAME,
    affected_by_cluster,
    cluster_update_matters,
    clusters_patch,
    considered,
    observed_generation_patch,
    schedule_reason,
    scheduled_status,
    status_patch,
)
from flotilla.scheduler import (
    FitError,
    ModelError,
    SchedulerError,
    ScheduleResult,
    UnschedulableError,
    schedule,
)

log = logging.getLogger(__name__)

__all__ = ["SchedulerController"]

SCHEDULE_BINDING_SUCCEED = "ScheduleBindingSucceed"
SCHEDULE_BINDING_FAILED = "ScheduleBindingFailed"

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 10.0
UNSCHEDULABLE_RETRY = 300.0


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


class SchedulerController(Controller):
    name = "scheduler"
    workers = 4

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.scheduler_name: str = getattr(self.options, "scheduler_name", DEFAULT_SCHEDULER_NAME)
        self.empty_workload_propagation: bool = bool(getattr(self.options, "enable_empty_workload_propagation",
                                                             False))
        self._failures: dict[str, int] = {}

    # ------------------------------------------------------------------ setup and event handlers

    def setup(self) -> None:
        self.rbs = self.informer(RESOURCE_BINDINGS)
        self.crbs = self.informer(CLUSTER_RESOURCE_BINDINGS)
        self.clusters = self.informer(CLUSTERS)
        for inf in (self.rbs, self.crbs):
            inf.add_handler(on_add=self._on_binding_add, on_update=self._on_binding_update)
        self.clusters.add_handler(on_update=self._on_cluster_update)

    def _considered(self, binding: Mapping[str, Any]) -> bool:
        return considered(binding, self.scheduler_name)

    def _on_binding_add(self, binding: Mapping[str, Any]) -> None:
        if self._considered(binding):
            self.enqueue_object(dict(binding))

    def _on_binding_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if _meta(old).get("generation") != _meta(new).get("generation") and self._considered(new):
            self.enqueue_object(dict(new))

    def _on_cluster_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if not cluster_update_matters(old, new):
            return
        for binding in self.rbs.store.list() + self.crbs.store.list():
            if self._considered(binding) and (affected_by_cluster(binding, old) or affected_by_cluster(binding, new)):
                self.enqueue_object(binding)

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> float | None:
        namespace, name = split_key(key)
        cache = self.rbs if namespace else self.crbs
        binding = cache.store.get(key)
        if binding is None or is_deleting(binding) or not self._considered(binding):
            self._failures.pop(key, None)
            return None
        res = RESOURCE_BINDINGS if namespace else CLUSTER_RESOURCE_BINDINGS
        clusters = self.clusters.store.list()
        reason = schedule_reason(binding, clusters)
        if reason is None:
            self._failures.pop(key, None)
            await patch_with_retry(self.client, res, binding, name, namespace, observed_generation_patch,
                                   subresource="status")
            return None
        log.debug("scheduler: scheduling %s (%s)", key, reason)
        return await self._schedule(key, res, binding, clusters)

    async def _schedule(self, key: str, res: Resource, binding: Mapping[str, Any],
                        clusters: list[dict[str, Any]]) -> float | None:
        namespace, name = split_key(key)
        generation = _meta(binding).get("generation")
        now = self.ctx.now()
        try:
            result = schedule(binding, None, clusters, now=now,
                              enable_empty_workload_propagation=self.empty_workload_propagation)
        except (ModelError, ValueError, TypeError) as e:
            result = ScheduleResult(error=SchedulerError(f"cannot schedule {key}: {e}"))
        for attempt in result.attempts:
            self._event(binding, WARNING, SCHEDULE_BINDING_FAILED,
                        f"Scheduling with cluster affinity term {attempt.affinity_name!r} failed: "
                        f"{attempt.error.message}")

        current: Mapping[str, Any] = binding
        write_error: ApiException | None = None
        if result.writes_clusters:
            try:
                patch = clusters_patch(binding, result.target_clusters)
                if patch is not None:
                    current = await self.client.patch(res, name, patch, namespace=namespace)
            except ApiException as e:
                if is_conflict(e):
                    raise  # the binding moved on while we decided: decide again with the new version
                write_error = e
        condition = result.condition()
        if write_error is not None:
            reason = "NoClusterFit" if isinstance(result.error, FitError) else "SchedulerError"
            message = f"{result.message}; writing the result failed: {write_error.message}" if result.error \
                else f"writing the result failed: {write_error.message}"
            condition = {"type": "Scheduled", "status": "False", "reason": reason, "message": message}
        affinity = result.affinity_name if result.ok and write_error is None else None
        observed = generation if isinstance(generation, int) else None

        def status_change(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            return status_patch(obj, scheduled_status(obj, condition, now, affinity_name=affinity,
                                                      generation=observed))

        await patch_with_retry(self.client, res, current, name, namespace, status_change, subresource="status")

        if write_error is None and result.ok:
            self._failures.pop(key, None)
            self._event(current, NORMAL, SCHEDULE_BINDING_SUCCEED, result.event_message)
            return None
        self._event(current, WARNING, SCHEDULE_BINDING_FAILED, condition["message"])
        if write_error is not None:
            raise write_error
        if isinstance(result.error, FitError):
            self._failures.pop(key, None)
            return None  # waits for the next event (cluster or binding change)
        if isinstance(result.error, UnschedulableError):
            return UNSCHEDULABLE_RETRY
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return min(BACKOFF_MAX, BACKOFF_INITIAL * (2 ** failures))

    def _event(self, binding: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.ctx.recorder.event(binding, type_, reason, message)
        ref = _spec(binding).get("resource")
        if isinstance(ref, Mapping) and ref.get("name"):
            template = {
                "apiVersion": ref.get("apiVersion"),
                "kind": ref.get("kind"),
                "metadata": {"name": ref.get("name"), "namespace": ref.get("namespace"), "uid": ref.get("uid")},
            }
            self.ctx.recorder.event(template, type_, reason, message)
