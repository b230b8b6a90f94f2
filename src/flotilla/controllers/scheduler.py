"""The scheduler controller: decides where each (Cluster)ResourceBinding goes.

Watches ResourceBindings, ClusterResourceBindings and Clusters. A binding is enqueued when it is
added, when its generation changes (status-only updates never schedule), and when a Cluster update
that matters (deletion started, labels or spec changed - not Ready flips) concerns the affinity it
is scheduled against. Whether to schedule and what to write are
:mod:`flotilla.scheduler.triggers`; the placement itself is :func:`flotilla.scheduler.schedule`.

Writes: ``spec.clusters`` and the ``policy.karmada.io/applied-placement`` annotation (on success, and
cleared on NoClusterFit), then the status: the ``Scheduled`` condition (Success / NoClusterFit /
Unschedulable / SchedulerError), on success ``schedulerObservedGeneration`` (the generation read at the
start of the pass) and ``lastScheduledTime``, and ``schedulerObservingAffinityName`` with
``clusterAffinities``. Events ``ScheduleBindingSucceed`` / ``ScheduleBindingFailed`` go to the binding and
to its template. With the gate ``StatefulFailoverInjection``, a ``spec.clusters`` write that leads to a fresh
state injection (D4) carries the ``failover.flotilla.io/injected-state`` record the binding
controller would write before rendering it (:func:`~flotilla.failover.state.injected_state_for_schedule`).

Each write is guarded by exactly what it depends on, so that the status writes of the other controllers
on the same binding (aggregated status, conditions) are no conflict: the spec write is a JSON patch that
tests the uid, ``generation`` (the spec, and no deletion started), the labels (the claim) and the
scheduler's own status fields the decision read; a status write of the scheduler's own fields only tests
the uid; one that changes ``conditions`` (a list others write too) is a merge patch with the
resourceVersion precondition. Where a guard cannot be expressed (a field that is absent), the merge patch
with the resourceVersion precondition is used. A failed guard or a 409 reads the binding again and
decides again at once (not through the rate-limited requeue). Until the informer shows the scheduler's
own last write, a pass decides on what that write returned.

Retries: NoClusterFit waits for the next event (as Karmada); other scheduling errors are retried
after 1 s doubling up to 10 s; Unschedulable after 5 minutes; a new event schedules at once.

Queue order: bindings enqueued by a Cluster change go behind those whose own spec changed (an eviction
task, a new placement), one at a time, once no binding was enqueued for half a second - Karmada enqueues
the same set of bindings, but a taint on a cluster of 1,000 bindings must not make an evicted binding
wait for the other 999 passes. A binding in both is scheduled once.

Under load (a forward queue has keys ready, :meth:`ForwardFirst.holds_reports`) a successful pass writes
``spec.clusters`` at once and leaves its status write to run as a reporting pass, oldest first
(:class:`~flotilla.runtime.held_writes.HeldWrites`): the binding controller renders Works from the spec, and
nothing forward reads the ``Scheduled`` condition. The held write is dropped when the binding moved on meanwhile
(the pass that change queues writes its own status) or went; a restarted scheduler finds the generation
unconfirmed and schedules the binding again. An idle system writes both in the same pass, in Karmada's order.

The pass Karmada makes after its own spec write (the write bumps ``generation``; the next pass normally
finds the same result and only confirms ``schedulerObservedGeneration``) is made at once, on the patched
object and the same cluster snapshot: when it decides nothing new, one status write confirms the new
generation and the informer's echo of the spec write is not scheduled again. When it would decide
something else, the first pass's status is written and the echo is scheduled as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS
from flotilla.client import ApiException, Resource, is_conflict, is_not_found
from flotilla.client.events import NORMAL, WARNING
from flotilla.failover.events import EVENT_SCHEDULE_BINDING_FAILED, EVENT_SCHEDULE_BINDING_SUCCEED
from flotilla.failover.state import (
    INJECTED_STATE_ANNOTATION,
    STATEFUL_FAILOVER_INJECTION_GATE,
    injected_state_for_schedule,
)
from flotilla.kube.jsondiff import with_precondition
from flotilla.kube.objects import meta_of, spec_of, status_of
from flotilla.kube.resources import object_key
from flotilla.policy.matching import is_deleting
from flotilla.runtime.base import Controller, ControllerContext, split_key
from flotilla.runtime.held_writes import HeldWrites
from flotilla.runtime.members import CLUSTERS
from flotilla.runtime.patching import patch_with_retry
from flotilla.scheduler import (
    Cluster,
    FitError,
    ModelError,
    SchedulerError,
    ScheduleResult,
    UnschedulableError,
    parse_cluster,
    schedule,
)
from flotilla.scheduler.triggers import (
    DEFAULT_SCHEDULER_NAME,
    ClusterChange,
    cluster_update_matters,
    clusters_patch,
    confirmation_patch,
    considered,
    guarded_clusters_patch,
    guarded_status_patch,
    held_status_due,
    pass_status_patch,
    schedule_reason,
    scheduled_fields,
)

log = logging.getLogger(__name__)

__all__ = ["SchedulerController"]

SCHEDULE_BINDING_SUCCEED = EVENT_SCHEDULE_BINDING_SUCCEED
SCHEDULE_BINDING_FAILED = EVENT_SCHEDULE_BINDING_FAILED

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 10.0
UNSCHEDULABLE_RETRY = 300.0
#: passes over a binding whose spec write met a conflict, each on the binding read again, before the
#: key goes back to the queue with backoff
CONFLICT_ATTEMPTS = 3
#: queue priority of bindings enqueued because a Cluster changed (their own spec changes use 0)
CLUSTER_EVENT_PRIORITY = -1


class _Changed(Exception):
    """The binding changed in what a decision read before its spec write: ``fresh`` is how it is now (None:
    gone)."""

    def __init__(self, fresh: dict[str, Any] | None) -> None:
        super().__init__("the binding changed")
        self.fresh = fresh


def _rv(obj: Mapping[str, Any]) -> int:
    """The resourceVersion as a number (the store revision), -1 when it is not one."""
    value = meta_of(obj).get("resourceVersion")
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return -1


@dataclass(frozen=True, slots=True)
class _StatusWrite:
    """A scheduling pass's status write (made at once, or held back under load): the resource, the generation it
    confirms (-1: none), and the result it writes (the ``Scheduled`` condition, the time, the affinity term)."""

    res: Resource
    observed: int
    condition: Mapping[str, Any]
    now: Any
    affinity: str | None

    @property
    def result(self) -> tuple[Mapping[str, Any], Any, str | None]:
        return self.condition, self.now, self.affinity

    def change(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The status patch on ``obj`` (as it is now), confirming the generation of the pass; None when a later
        pass recorded a newer generation (:func:`pass_status_patch`)."""
        return pass_status_patch(obj, self.condition, self.now, affinity_name=self.affinity, observed=self.observed)

    def held_change(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """:meth:`change` for the write held back under load: also None once it is no longer due on ``obj``
        (:func:`held_status_due`), so that a write re-read after a failed guard is decided again."""
        return pass_status_patch(obj, self.condition, self.now, affinity_name=self.affinity, observed=self.observed,
                                 held=True)


class SchedulerController(Controller):
    name = "scheduler"
    role = "forward"
    # a pass waits for one to three writes; 32 passes at once keep up with a mass eviction (a worker is a
    # coroutine: idle ones cost nothing)
    workers = 32
    # bindings enqueued by a Cluster change are scheduled behind the others, one at a time (Karmada's scheduler
    # has one worker) and only once no binding changed for a moment: after a taint most of them are evicted
    # before their turn and then scheduled once, for both reasons
    low_priority_workers = 1
    low_priority_quiet = 0.5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.scheduler_name: str = getattr(self.options, "scheduler_name", DEFAULT_SCHEDULER_NAME)
        self.empty_workload_propagation: bool = bool(getattr(self.options, "enable_empty_workload_propagation",
                                                             False))
        self._failures: dict[str, int] = {}
        # parsed Clusters: name -> (the cached object it was parsed from, the parse)
        self._parsed: dict[str, tuple[Mapping[str, Any], Cluster]] = {}
        # key -> the generation of our own spec write whose follow-up pass was already made (its echo
        # from the informer is not scheduled again)
        self._echo: dict[str, int] = {}
        # key -> (resourceVersion, object) of our last write, until the cache has caught up with it: a pass
        # right after our own write decides on what we wrote, not on an older cached version
        self._written: dict[str, tuple[int, dict[str, Any]]] = {}
        # status writes held back while the forward queues were busy, written as reporting passes
        gate = ctx.forward_first
        self._held: HeldWrites[_StatusWrite] = HeldWrites("scheduler", gate.turn, gate.done,
                                                              self._write_held_status, self.enqueue)

    # ------------------------------------------------------------------ setup and event handlers

    def setup(self) -> None:
        self.rbs = self.informer(RESOURCE_BINDINGS)
        self.crbs = self.informer(CLUSTER_RESOURCE_BINDINGS)
        self.clusters = self.informer(CLUSTERS)
        for inf in (self.rbs, self.crbs):
            inf.add_handler(on_add=self._on_binding_add, on_update=self._on_binding_update,
                            on_delete=self._on_binding_delete)
        self.clusters.add_handler(on_update=self._on_cluster_update)

    def _considered(self, binding: Mapping[str, Any]) -> bool:
        return considered(binding, self.scheduler_name)

    def _on_binding_add(self, binding: Mapping[str, Any]) -> None:
        if self._considered(binding):
            self.enqueue_object(binding)

    def _on_binding_delete(self, binding: Mapping[str, Any]) -> None:
        if self._written or self._echo or self._held:
            key = object_key(binding)
            self._written.pop(key, None)
            self._echo.pop(key, None)
            self._held.drop(key)

    def _on_binding_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if self._written:
            key = object_key(new)
            written = self._written.get(key)
            if written is not None and _rv(new) >= written[0]:
                del self._written[key]  # the cache has caught up with our write
        generation = meta_of(new).get("generation")
        if meta_of(old).get("generation") == generation:
            return
        if self._echo:
            key = object_key(new)
            if self._echo.get(key) == generation:
                del self._echo[key]  # our own spec write, whose follow-up pass is done
                return
        if self._considered(new):
            self.enqueue_object(new)

    def _on_cluster_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if not cluster_update_matters(old, new):
            return
        change = ClusterChange(old, new)
        for cache in (self.rbs, self.crbs):
            for binding in cache.store.list():
                if self._considered(binding) and change.affects(binding):
                    self.enqueue_object(binding, CLUSTER_EVENT_PRIORITY)

    def _cluster_snapshot(self) -> tuple[list[dict[str, Any]], tuple[Cluster, ...] | None]:
        """Every cached Cluster, and their parses (None when one does not parse: then the scheduler
        gets the objects and reports the error). A Cluster is parsed again only when it changed."""
        objs = self.clusters.store.list()
        parsed: list[Cluster] = []
        cache = self._parsed
        for obj in objs:
            name = meta_of(obj).get("name")
            hit = cache.get(name) if isinstance(name, str) else None
            if hit is None or hit[0] is not obj:
                try:
                    hit = (obj, parse_cluster(obj, previous=hit))  # what did not change is not parsed again
                except ModelError:
                    return objs, None
                cache[hit[1].name] = hit
            parsed.append(hit[1])
        if len(cache) > len(objs):
            live = {c.name for c in parsed}
            for name in [n for n in cache if n not in live]:
                del cache[name]
        return objs, tuple(parsed)

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> float | None:
        self._echo.pop(key, None)  # a pass of its own now: any echo left over is scheduled by it
        held = self._held.take(key)  # and it writes the status itself (the held one, when it only confirms)
        namespace, name = split_key(key)
        res = RESOURCE_BINDINGS if namespace else CLUSTER_RESOURCE_BINDINGS
        binding = self._current(key)  # the cache, or our last write when the cache has not seen it yet
        for attempt in range(CONFLICT_ATTEMPTS):
            if binding is None or is_deleting(binding) or not self._considered(binding):
                self._failures.pop(key, None)
                return None
            clusters, parsed = self._cluster_snapshot()
            reason = schedule_reason(binding, clusters)
            if reason is None:
                moved = await self._confirm(key, res, binding, clusters, held)
                if moved is not None and attempt < CONFLICT_ATTEMPTS - 1:
                    binding = moved  # re-read after a conflict, it is to be scheduled: decide again on it
                    continue
                if moved is not None:
                    raise ApiException(409, message=f"{key} kept changing while it was scheduled")
                self._failures.pop(key, None)
                return None
            log.debug("scheduler: scheduling %s (%s)", key, reason)
            try:
                return await self._schedule(key, res, binding, clusters, parsed)
            except _Changed as e:
                # the binding changed in what the decision read: decide again on it as it is now
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise ApiException(409, message=f"{key} kept changing while it was scheduled") from None
                binding = e.fresh
                continue
            except ApiException as e:
                # the binding moved on while we decided: decide again on the binding as it is now, rather
                # than through the rate-limited requeue
                if not is_conflict(e) or attempt == CONFLICT_ATTEMPTS - 1:
                    raise
            binding = await self._read(res, name, namespace)
        raise RuntimeError("unreachable")  # pragma: no cover

    async def _confirm(self, key: str, res: Resource, binding: Mapping[str, Any], clusters: list[dict[str, Any]],
                       held: _StatusWrite | None) -> Mapping[str, Any] | None:
        """A pass with nothing to schedule: confirm the generation (with the held result, if any). Returns None when
        done; the binding as re-read when a conflict showed it changed into one to schedule (under HA the cached
        version may be behind the other replica's writes): confirming it would claim a generation no pass
        scheduled."""
        namespace, name = split_key(key)
        moved: list[Mapping[str, Any]] = []

        def change(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            if obj is not binding and schedule_reason(obj, clusters) is not None:
                moved.append(obj)
                return None
            return confirmation_patch(obj, held=held.result if held else None)

        written = await patch_with_retry(self.client, res, binding, name, namespace, change, subresource="status")
        if moved:
            return moved[-1]
        self._remember(key, written, binding)
        return None

    async def _read(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        return await self.client.get_or_none(res, name, namespace)

    def _decide(self, key: str, binding: Mapping[str, Any], clusters: list[dict[str, Any]],
                parsed: tuple[Cluster, ...] | None, now: Any) -> ScheduleResult:
        try:
            return schedule(binding, None, parsed if parsed is not None else clusters, now=now,
                            enable_empty_workload_propagation=self.empty_workload_propagation,
                            multiple_pod_templates=self.options.gate("MultiplePodTemplatesScheduling"))
        except (ModelError, ValueError, TypeError) as e:
            return ScheduleResult(error=SchedulerError(f"cannot schedule {key}: {e}"))

    def _follow_up(self, key: str, written: Mapping[str, Any], status: Mapping[str, Any],
                   clusters: list[dict[str, Any]], parsed: tuple[Cluster, ...] | None, now: Any,
                   result: ScheduleResult) -> tuple[int, str | None] | None:
        """Karmada's next pass, triggered by our own spec write, made now on ``written`` (the patched
        binding) with ``status`` (the one this pass writes): ``(generation, success event message or
        None)`` when it only confirms ``generation``; None when it would decide something (or cannot
        be made here), and then the informer's echo is scheduled as usual."""
        generation = meta_of(written).get("generation")
        if not isinstance(generation, int) or isinstance(generation, bool):
            return None
        echo = dict(written)
        echo["status"] = status
        if is_deleting(echo) or not self._considered(echo):
            return None
        if schedule_reason(echo, clusters) is None:
            return generation, None  # it would only confirm schedulerObservedGeneration
        again = self._decide(key, echo, clusters, parsed, now)
        if (not again.ok or again.attempts or again.affinity_name != result.affinity_name
                or again.condition() != result.condition()
                or clusters_patch(echo, again.target_clusters) is not None):
            return None
        return generation, again.event_message

    async def _schedule(self, key: str, res: Resource, binding: Mapping[str, Any],
                        clusters: list[dict[str, Any]], parsed: tuple[Cluster, ...] | None) -> float | None:
        namespace, name = split_key(key)
        generation = meta_of(binding).get("generation")
        now = self.ctx.now()
        result = self._decide(key, binding, clusters, parsed, now)
        for attempt in result.attempts:
            self._event(binding, WARNING, SCHEDULE_BINDING_FAILED,
                        f"Scheduling with cluster affinity term {attempt.affinity_name!r} failed: "
                        f"{attempt.error.message}")

        current: Mapping[str, Any] = binding
        write_error: ApiException | None = None
        spec_written = False
        if result.writes_clusters:
            try:
                patch = self._with_injected_state(binding, clusters_patch(binding, result.target_clusters), now)
                if patch is not None:
                    current = await self._write_spec(res, name, namespace, binding, patch)
                    self._remember(key, current, binding)
                    spec_written = True
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

        follow_up = None
        if spec_written and result.ok:
            status = {**status_of(current),
                      **scheduled_fields(current, condition, now, affinity_name=affinity, generation=observed)}
            follow_up = self._follow_up(key, current, status, clusters, parsed, now, result)
            if follow_up is not None:
                observed = follow_up[0]
                self._echo[key] = follow_up[0]  # before the next await: the echo may come meanwhile

        status_write = _StatusWrite(res, observed if observed is not None else -1, condition, now, affinity)
        if spec_written and result.ok and write_error is None and self.ctx.forward_first.holds_reports():
            # under load the spec write is what moves the workload; the status follows once the forward
            # queues are done (forward_first), unless the spec has moved on by then
            self._held.hold(key, status_write)
        else:
            self._remember(key, await self._write_status(res, name, namespace, current, status_write.change), current)

        if write_error is None and result.ok:
            self._failures.pop(key, None)
            self._event(current, NORMAL, SCHEDULE_BINDING_SUCCEED, result.event_message)
            if follow_up is not None and follow_up[1] is not None:
                self._event(current, NORMAL, SCHEDULE_BINDING_SUCCEED, follow_up[1])
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

    def _with_injected_state(self, binding: Mapping[str, Any], patch: dict[str, Any] | None,
                             now: Any) -> dict[str, Any] | None:
        """``patch`` with the D4 injected-state record the binding controller would write before rendering the
        new ``spec.clusters`` (:func:`~flotilla.failover.state.injected_state_for_schedule`): one write less."""
        spec_patch = (patch or {}).get("spec") or {}
        if patch is None or "clusters" not in spec_patch:
            return patch
        value = injected_state_for_schedule(binding, spec_patch.get("clusters"), now,
                                            gate=self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE))
        if value is None:
            return patch
        metadata = dict(patch.get("metadata") or {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), INJECTED_STATE_ANNOTATION: value}
        return {**patch, "metadata": metadata}

    async def _write_spec(self, res: Resource, name: str, namespace: str | None, binding: Mapping[str, Any],
                          patch: dict[str, Any]) -> dict[str, Any]:
        """The spec write: guarded by what the decision read (a JSON patch with tests) when it can be, so that
        another controller's status write meanwhile is no conflict; else, or when a test fails (422), the merge
        patch with the resourceVersion precondition, whose 409 means: decide again."""
        ops = guarded_clusters_patch(binding, patch)
        if ops is not None:
            try:
                return await self.client.patch(res, name, ops, namespace=namespace, patch_type="json")
            except ApiException as e:
                if e.status != 422:
                    raise
            # a test failed, or the write itself is invalid: which one, the binding as it is now tells
            fresh = await self._read(res, name, namespace)
            if fresh is None or guarded_clusters_patch(fresh, patch) != ops:
                raise _Changed(fresh)
            unguarded = {**patch, "metadata": {k: v for k, v in (patch.get("metadata") or {}).items()
                                               if k != "resourceVersion"}}
            patch = with_precondition(unguarded, fresh)  # the same write on the same decision: its error
        return await self.client.patch(res, name, patch, namespace=namespace)

    async def _write_status(self, res: Resource, name: str, namespace: str | None, current: Mapping[str, Any],
                            change: Callable[[Mapping[str, Any]], dict[str, Any] | None]) -> dict[str, Any] | None:
        """The status write: only the scheduler's own fields -> guarded by the uid alone; with ``conditions``
        (which others write too) -> merge patch with the resourceVersion precondition, read again on 409.
        Returns the binding written, or None when nothing was written."""
        patch = change(current)
        if patch is None:
            return None
        base: Mapping[str, Any] | None = current
        ops = guarded_status_patch(current, patch)
        if ops is not None:
            try:
                return await self.client.patch(res, name, ops, namespace=namespace, patch_type="json",
                                               subresource="status")
            except ApiException as e:
                if is_not_found(e):
                    return None
                if e.status != 422:
                    raise
                base = None  # another binding of that name: read it
        return await patch_with_retry(self.client, res, base, name, namespace, change, subresource="status")

    async def _write_held_status(self, key: str, held: _StatusWrite) -> None:
        """A status write held back under load, unless the binding moved on meanwhile (:func:`held_status_due`).

        It is made outside the key's queue, on the cached binding, which may be behind a pass made meanwhile (of
        this scheduler, or of another replica after a change of leader): so the write is guarded by what it was
        decided on (the JSON patch's tests of the generation and ``schedulerObservedGeneration``, or the
        resourceVersion precondition), and a failed guard reads the binding again and decides again on it
        (:meth:`_StatusWrite.held_change`). Nothing is read or written more when nothing moved meanwhile."""
        binding = self._current(key)
        if binding is None or not held_status_due(binding, held.observed):
            return  # gone, or moved on: the pass its change queued writes the status
        namespace, name = split_key(key)
        self._remember(key, await self._write_status(held.res, name, namespace, binding, held.held_change), binding)

    def _current(self, key: str) -> Mapping[str, Any] | None:
        """The binding as cached, or as our last write returned it while the cache has not caught up."""
        namespace, _ = split_key(key)
        binding = (self.rbs if namespace else self.crbs).store.get(key)
        written = self._written.get(key)
        if written is not None and binding is not None and _rv(binding) < written[0]:
            return written[1]
        return binding

    async def stop(self) -> None:
        await self._held.close()  # a restarted scheduler finds their generations unconfirmed and schedules them
        await super().stop()

    def _remember(self, key: str, written: dict[str, Any] | None, before: Mapping[str, Any] | None = None) -> None:
        """Keep ``written`` (what a write of ours returned) until the cache has it; ``before``: the version the
        write was made on (a write that changed nothing returns an equal object: nothing to keep)."""
        if written is None:
            return
        rv = _rv(written)
        if rv >= 0 and (before is None or rv > _rv(before)):
            self._written[key] = (rv, written)

    def _event(self, binding: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.ctx.recorder.event(binding, type_, reason, message)
        ref = spec_of(binding).get("resource")
        if isinstance(ref, Mapping) and ref.get("name"):
            template = {
                "apiVersion": ref.get("apiVersion"),
                "kind": ref.get("kind"),
                "metadata": {"name": ref.get("name"), "namespace": ref.get("namespace"), "uid": ref.get("uid")},
            }
            self.ctx.recorder.event(template, type_, reason, message)
