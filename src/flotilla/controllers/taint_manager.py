"""The taint manager: evicts workloads from clusters with an untolerated NoExecute taint.

Karmada's taint manager, with the divergences D1 (on by default), D5 (state carried over consecutive failovers),
D6 (no silent blocking), D9 (``clustersBeforeFailover`` recorded) and D10 (eviction pacing), as described below.

**Wake-up and enqueue**. Handlers only: a Cluster added or whose NoExecute taints change, and a
(Cluster)ResourceBinding added or whose ``spec.clusters`` or ``policy.karmada.io/applied-placement`` annotation
changes, queue the keys ``<cluster>|<binding key>`` (binding key ``namespace/name`` for a ResourceBinding,
``name`` for a ClusterResourceBinding) for every binding placed on such a cluster. When a key is due is
:func:`flotilla.failover.tolerations.enqueue_decision`: now (untolerated, expired, or an unreadable applied
placement), at the toleration deadline (``add_after``), or **never** (D10: a binding tolerating every NoExecute
taint forever is not queued at all; :attr:`TaintManager.queued` counts what was queued, per key).

**The eviction worker**, per key, on the binding as the informer has it (as Karmada's cached client reads
it; read from the API server when the cache does not have it yet). Every write is guarded by the resourceVersion,
so a stale copy costs a 409, after which the binding is read again and everything decided again:

1. :func:`~flotilla.failover.tolerations.binding_eviction_decision`: not due yet -> requeued at the deadline;
   never (taint removed, toleration added, cluster gone, binding deleted or no longer on the cluster) -> done;
   an applied placement that cannot be read -> error, retried with backoff.
2. State (gate ``StatefulFailoverInjection``, rules in ``spec.failover.cluster.statePreservation``): extracted
   from the failed cluster's reflected status in ``status.aggregatedStatus``; D5 carries the previous state
   forward when the failed copy never became Healthy after an injection. On failure (D6): a Warning Event
   ``StatePreservationFailed``, the condition ``StatePreserved=False``, the first failure time recorded in the
   annotation ``failover.flotilla.io/state-preservation-failing-since`` and a retry (backoff capped at the
   ``--state-preservation-timeout`` deadline); once that timeout (> 0) has passed the eviction proceeds without
   state, with a Warning Event ``StatePreservationTimedOut``.
3. Pacing (D10): one :class:`~flotilla.failover.ratelimit.EvictionRateLimiter` token per eviction; the mode
   (primary / secondary / halted) follows the fraction of Clusters whose ``Ready`` condition is not ``True``,
   counting also those still Ready whose probes by this controller-manager's cluster-status controller fail or
   hang (:mod:`flotilla.failover.brake`), so that members failing together halt evictions before the last
   one is ``Ready=False``. Halted or out of tokens: the key is requeued (after the token wait, or
   :data:`HALTED_RECHECK` seconds; sooner while suspects take part, :func:`~flotilla.failover.brake.halted_recheck`).
   An eviction from a cluster that is not Ready but answers its probes again waits a status period
   (:func:`~flotilla.failover.brake.recovering`: members coming back together).
4. The task (:func:`~flotilla.failover.eviction.cluster_failover_task_options`: ``producer: TaintManager``,
   ``reason: TaintUntolerated``, purge mode from ``failover.cluster.purgeMode`` else the flag; with state, D9
   ``clustersBeforeFailover``) is applied by :func:`~flotilla.failover.eviction.graceful_evict_cluster` as a
   merge patch guarded by ``resourceVersion`` (409: read again, decide again). While the graceful-eviction
   controller runs in the same controller-manager the task is written with its ``creationTimestamp`` (that
   controller's first pass would stamp it: one binding write and one generation less per eviction). The
   ``StatePreserved`` condition of a successful extraction is handed to the binding-status controller when it runs
   in the same controller-manager (:func:`~flotilla.controllers.binding_status.hand_off_conditions`: written with
   the status write the eviction leads to, within a second); otherwise it follows in the background, so the
   worker takes the next key at once (the writes of one binding keep their order). A failed write emits Warning
   ``EvictWorkloadFromClusterFailed`` ("Evict from cluster C failed.") on the binding and its template and is
   retried. As in Karmada, ``EvictWorkloadFromClusterSucceed`` is not emitted here (it is the graceful-eviction
   controller's, when the task is removed).

**Events** (on the binding and on its resource template), beyond Karmada's: Normal ``EvictionQueued`` when a
handler queues a key (due now, or at the toleration deadline), Normal ``EvictionPerformed`` once the task is
written, Warning ``EvictionHalted`` while D10 halts evictions, and Warning ``EvictWorkloadFromClusterFailed``
also when the applied placement cannot be read.

**Metrics** (:class:`~flotilla.observability.metrics.FailoverMetrics`): Karmada's ``eviction_queue_depth``,
``eviction_kind_total``, ``eviction_processing_latency_seconds`` and ``eviction_processing_total`` (per pass
over a key, ``name="taint-manager"``); ``flotilla_eviction_enqueue_to_done_seconds``;
``flotilla_evictions_total{trigger="cluster_taint"}`` by result (success, error, blocked);
``flotilla_taint_to_eviction_seconds``; the D6 failure and timeout counters; the D10 limiter's rate and mode.

Runs only with ``--enable-no-execute-taint-eviction`` and the feature gate ``Failover`` (both on by default, D1).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, CLUSTERS, RESOURCE_BINDINGS
from flotilla.client import ApiException, Resource, is_not_found
from flotilla.failover.brake import PROBE_BOARD, brake_count, halted_recheck, recovering
from flotilla.failover.events import EVENT_EVICTION_HALTED, EVENT_EVICTION_PERFORMED, EVENT_EVICTION_QUEUED
from flotilla.failover.eviction import (
    EVENT_EVICT_FAILED,
    REASON_TAINT_UNTOLERATED,
    cluster_failover_task_options,
    evict_failed_message,
    graceful_evict_cluster,
)
from flotilla.failover.ratelimit import EvictionMode, EvictionRateLimiter
from flotilla.failover.state import (
    STATE_PRESERVATION_FAILING_SINCE_ANNOTATION,
    STATEFUL_FAILOVER_INJECTION_GATE,
    EventSpec,
    clear_failing_since,
    clusters_before_failover,
    failing_since,
    parse_injected_state_record,
    preserve_state_for_eviction,
    record_failing_since,
    rules_of,
)
from flotilla.failover.tolerations import (
    APPLIED_PLACEMENT_ANNOTATION,
    AppliedPlacementError,
    Eviction,
    EvictionDecision,
    binding_eviction_decision,
    enqueue_decision,
    parse_taints,
    should_queue,
)
from flotilla.kube.objects import annotations_of, as_map, meta_of, spec_of
from flotilla.kube.times import format_time
from flotilla.observability.metrics import (
    RESULT_BLOCKED,
    RESULT_ERROR,
    RESULT_SUCCESS,
    TRIGGER_CLUSTER_TAINT,
)
from flotilla.runtime.base import Controller, ControllerContext, split_key
from flotilla.runtime.handoffs import (
    drop_handed_off_conditions,
    graceful_eviction_running,
    hand_off_conditions,
)
from flotilla.runtime.patching import patch_condition, patch_with_retry

log = logging.getLogger(__name__)

__all__ = ["EVENT_EVICTION_HALTED", "EVENT_EVICTION_PERFORMED", "EVENT_EVICTION_QUEUED", "HALTED_RECHECK",
           "KEY_SEPARATOR", "TaintManager", "binding_key_of", "eviction_key", "performed_message",
           "parse_eviction_key", "queued_message"]

#: Separates the cluster from the binding key in a queue key (``|`` is valid in neither).
KEY_SEPARATOR = "|"
#: Seconds before a key is looked at again while evictions are halted (every cluster unhealthy, or rate 0).
HALTED_RECHECK = 10.0
#: Retry backoff of a blocked state extraction (D6): initial and maximum seconds.
STATE_RETRY_INITIAL = 0.5
STATE_RETRY_MAX = 30.0
#: Flotilla's Event reasons (Karmada emits none at these steps).


def binding_key_of(binding: Mapping[str, Any]) -> str | None:
    md = meta_of(binding)
    name, ns = md.get("name"), md.get("namespace")
    if not name:
        return None
    return f"{ns}/{name}" if ns else str(name)


def eviction_key(cluster: str, binding_key: str) -> str:
    return f"{cluster}{KEY_SEPARATOR}{binding_key}"


def parse_eviction_key(key: str) -> tuple[str, str | None, str]:
    """``(cluster, namespace or None, name)`` of a queue key."""
    cluster, _, binding = key.partition(KEY_SEPARATOR)
    ns, name = split_key(binding)
    return cluster, ns, name


def _target_names(binding: Mapping[str, Any]) -> list[str]:
    out = []
    for c in spec_of(binding).get("clusters") or ():
        name = as_map(c).get("name")
        if isinstance(name, str) and name:
            out.append(name)
    return out


def _no_execute(cluster: Mapping[str, Any]) -> list[Any]:
    return [t for t in spec_of(cluster).get("taints") or () if as_map(t).get("effect") == "NoExecute"]


def _ready(cluster: Mapping[str, Any]) -> bool:
    for c in as_map(cluster.get("status")).get("conditions") or ():
        if as_map(c).get("type") == "Ready":
            return as_map(c).get("status") == "True"
    return False


def _template_of(binding: Mapping[str, Any]) -> dict[str, Any] | None:
    ref = spec_of(binding).get("resource")
    if not isinstance(ref, Mapping) or not ref.get("name"):
        return None
    return {"apiVersion": ref.get("apiVersion"), "kind": ref.get("kind"),
            "metadata": {"name": ref.get("name"), "namespace": ref.get("namespace"), "uid": ref.get("uid")}}


def queued_message(cluster: str, decision: EvictionDecision) -> str:
    """The ``EvictionQueued`` message for an enqueue decision (due now or at a deadline)."""
    taint = f"NoExecute taint {decision.taint}" if decision.taint is not None else "its NoExecute taints"
    if decision.error is not None:
        return (f"Cluster {cluster} has NoExecute taints and the applied placement cannot be read "
                f"({decision.error}): eviction queued now.")
    if decision.action is Eviction.AT and decision.at is not None:
        return (f"Cluster {cluster}: {taint} is tolerated until {format_time(decision.at)}: eviction queued "
                "for then.")
    if decision.at is not None:
        return f"Cluster {cluster}: the toleration of {taint} has expired: eviction queued now."
    return f"Cluster {cluster}: {taint} is not tolerated: eviction queued now."


def performed_message(cluster: str, decision: EvictionDecision, binding: Mapping[str, Any]) -> str:
    """The ``EvictionPerformed`` message: why, and the task that now waits for the graceful-eviction controller."""
    why = f"NoExecute taint {decision.taint}" if decision.taint is not None else "an untolerated NoExecute taint"
    task = next((as_map(t) for t in reversed(spec_of(binding).get("gracefulEvictionTasks") or ())
                 if as_map(t).get("fromCluster") == cluster), {})
    state = "with preserved state" if task.get("preservedLabelState") else "without preserved state"
    return (f"Evicted from cluster {cluster} ({why}): graceful-eviction task added, purgeMode "
            f"{task.get('purgeMode') or 'Gracefully'}, {state}.")


def _cause_time(decision: EvictionDecision, cluster: Mapping[str, Any] | None) -> datetime | None:
    """When the taint that caused the eviction was added (else the earliest NoExecute taint's timeAdded)."""
    added = getattr(decision.taint, "time_added", None)
    if isinstance(added, datetime):
        return added
    try:
        taints = parse_taints(cluster) if cluster is not None else ()
    except ValueError:
        return None
    times = [t.time_added for t in taints if t.effect == "NoExecute" and t.time_added is not None]
    return min(times) if times else None


class _Blocked(Exception):
    """State extraction failed and the eviction waits (D6); carries the retry delay."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"retry after {retry_after:.3g}s")
        self.retry_after = retry_after


class TaintManager(Controller):
    name = "taint-manager"
    role = "forward"
    workers = 4

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.enabled = bool(self.options.enable_no_execute_taint_eviction) and self.options.gate("Failover")
        self.limiter = EvictionRateLimiter(self.options.resource_eviction_rate,
                                           self.options.secondary_resource_eviction_rate,
                                           self.options.unhealthy_cluster_threshold)
        #: How many times each eviction key was queued by the handlers (D10: a forever-tolerated pair never is).
        self.queued: Counter[str] = Counter()
        #: Evictions written, per key.
        self.evicted: Counter[str] = Counter()
        self._state_failures: dict[str, int] = {}
        #: per binding key: the background write of the conditions that follow its last eviction
        self._condition_writes: dict[str, asyncio.Task[None]] = {}
        self.clusters: Any = None
        self._readiness: list[tuple[str, bool]] | None = None  # see _cluster_readiness
        self.rbs: Any = None
        self.crbs: Any = None

    # ------------------------------------------------------------------ setup and event handlers

    def setup(self) -> None:
        if not self.enabled:
            log.info("taint-manager: NoExecute taint eviction is disabled (--enable-no-execute-taint-eviction "
                     "or feature gate Failover off)")
            return
        self.clusters = self.informer(CLUSTERS)
        self.rbs = self.informer(RESOURCE_BINDINGS)
        self.crbs = self.informer(CLUSTER_RESOURCE_BINDINGS)
        self.clusters.add_handler(on_add=self._on_cluster, on_update=self._on_cluster_update,
                                  on_delete=self._on_cluster_delete)
        for inf in (self.rbs, self.crbs):
            inf.add_handler(on_add=self._on_binding, on_update=self._on_binding_update)

    def _on_cluster(self, cluster: Mapping[str, Any]) -> None:
        self._readiness = None
        name = meta_of(cluster).get("name")
        if not name or not _no_execute(cluster):
            return
        for binding in self.rbs.store.list() + self.crbs.store.list():
            if name in _target_names(binding):
                self._enqueue_pair(binding, cluster)

    def _on_cluster_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if _ready(old) != _ready(new):
            self._readiness = None
        if _no_execute(old) != _no_execute(new):
            self._on_cluster(new)

    def _on_cluster_delete(self, cluster: Mapping[str, Any]) -> None:
        self._readiness = None

    def _cluster_readiness(self) -> list[tuple[str, bool]]:
        """Every cluster's name and whether it is Ready, as the brake counts them; kept until a cluster comes, goes
        or its Ready condition flips (a status write that moves only its summaries keeps it)."""
        if self._readiness is None:
            self._readiness = [(str(meta_of(c).get("name")), _ready(c)) for c in self.clusters.store.list()]
        return self._readiness

    def _on_binding(self, binding: Mapping[str, Any]) -> None:
        for name in _target_names(binding):
            cluster = self.clusters.store.get(name)
            if cluster is not None and _no_execute(cluster):
                self._enqueue_pair(binding, cluster)

    def _on_binding_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        old_ann = annotations_of(old).get(APPLIED_PLACEMENT_ANNOTATION)
        new_ann = annotations_of(new).get(APPLIED_PLACEMENT_ANNOTATION)
        if _target_names(old) != _target_names(new) or old_ann != new_ann:
            self._on_binding(new)

    def _enqueue_pair(self, binding: Mapping[str, Any], cluster: Mapping[str, Any]) -> None:
        bkey = binding_key_of(binding)
        cname = meta_of(cluster).get("name")
        if bkey is None or not cname:
            return
        try:
            taints = parse_taints(cluster)
        except ValueError as e:
            log.warning("taint-manager: cluster %s has unreadable taints: %s", cname, e)
            return
        now = self.ctx.now()
        annotations = meta_of(binding).get("annotations")
        decision = enqueue_decision(annotations if isinstance(annotations, Mapping) else None, taints, now)
        if not should_queue(decision):  # D10: tolerated forever
            return
        key = eviction_key(cname, bkey)
        self.queued[key] += 1
        self.enqueue(key, decision.delay(now) or 0.0)
        self._event(binding, "Normal", EVENT_EVICTION_QUEUED, queued_message(str(cname), decision))

    # ------------------------------------------------------------------ the eviction worker

    async def reconcile(self, key: str) -> float | None:
        if not self.enabled:
            return None
        try:
            return await self._sync(key)
        except _Blocked as b:
            self._record(RESULT_BLOCKED)
            return b.retry_after

    async def _handle(self, key: str) -> None:
        """One pass over a key, timed for Karmada's eviction processing metrics."""
        start = self.queue.clock.now()
        try:
            await super()._handle(key)
        except asyncio.CancelledError:
            raise
        except Exception:
            self._record_pass(key, start, ok=False)
            raise
        self._record_pass(key, start, ok=True)

    def _record_pass(self, key: str, start: float, *, ok: bool) -> None:
        end = self.queue.clock.now()
        ready = self.queue.ready_since(key)
        self.ctx.metrics.failover.record_processing(self.name, ok=ok, seconds=end - start,
                                                    since_ready=None if ready is None else end - ready)

    def _record(self, result: str) -> None:
        self.ctx.metrics.failover.record_eviction(trigger=TRIGGER_CLUSTER_TAINT, reason=REASON_TAINT_UNTOLERATED,
                                                  result=result)

    def collect_metrics(self) -> None:
        metrics = self.ctx.metrics.failover
        if not self.enabled or self.queue.shutting_down:
            metrics.clear_live_state(self.name)
            return
        pending: Counter[tuple[str, str]] = Counter()
        for key in self.queue.keys():
            cluster, namespace, _ = parse_eviction_key(key)
            kind = RESOURCE_BINDINGS.kind if namespace else CLUSTER_RESOURCE_BINDINGS.kind
            pending[(cluster, kind)] += 1
        metrics.set_eviction_queue(self.name, self.queue.depth, pending)
        metrics.set_rate_limiter(self.name, self.limiter.mode.value, self.limiter.rate, [m.value for m in EvictionMode])

    async def _sync(self, key: str) -> float | None:
        cluster_name, namespace, name = parse_eviction_key(key)
        res = RESOURCE_BINDINGS if namespace else CLUSTER_RESOURCE_BINDINGS
        binding = await self._get(res, name, namespace)
        if binding is None:
            self._state_failures.pop(key, None)
            return None
        cluster = self.clusters.store.get(cluster_name)
        now = self.ctx.now()
        decision = self._decide(binding, cluster_name, cluster, now)
        if decision.action is Eviction.NEVER:
            self._state_failures.pop(key, None)
            return None
        if decision.action is Eviction.AT:
            return decision.delay(now)

        board = self.ctx.extras.get(PROBE_BOARD)
        if cluster is not None and recovering(board, cluster_name, _ready(cluster)):
            # D10: not Ready, but it answers its probes again: Ready (untainted) within the success threshold
            log.debug("taint-manager: %s: cluster %s answers again; eviction waits", key, cluster_name)
            return self.options.cluster_status_update_frequency

        # state (D5, D6); raises _Blocked while the eviction waits for it
        state, extra_conditions, after = await self._preserve_state(key, res, binding, cluster_name, now)

        # pacing (D10): Ready conditions, and the probes of this controller-manager's cluster-status controller
        count = brake_count(self._cluster_readiness(), board, time.monotonic())
        wait = self.limiter.decide(time.monotonic(), count.unhealthy, count.total, count.suspect)
        if wait is None:
            message = self.limiter.message(count.unhealthy, count.total, count.suspect)
            log.warning("taint-manager: %s: %s", key, message)
            self._event(binding, "Warning", EVENT_EVICTION_HALTED,
                        f"Eviction from cluster {cluster_name} waits: {message}.")
            return halted_recheck(count, HALTED_RECHECK, self.options.cluster_status_update_frequency,
                                  self.options.cluster_failure_threshold)
        if wait > 0:
            return wait
        if self.limiter.mode is EvictionMode.SECONDARY:
            log.info("taint-manager: %s", self.limiter.message(count.unhealthy, count.total, count.suspect))
        self.limiter.take(time.monotonic())

        evicted = await self._evict(key, res, binding, cluster_name, state)
        if evicted is None:
            return None
        self._state_failures.pop(key, None)
        self.evicted[key] += 1
        self._record(RESULT_SUCCESS)
        caused_at = _cause_time(decision, cluster)
        if caused_at is not None:
            self.ctx.metrics.failover.observe_taint_to_eviction((self.ctx.now() - caused_at).total_seconds())
        self._event(evicted, "Normal", EVENT_EVICTION_PERFORMED, performed_message(cluster_name, decision, evicted))
        for ev in after:  # once the eviction is written: not again for an attempt that did not evict
            self._event(evicted, ev.type, ev.reason, ev.message)
        if extra_conditions and not hand_off_conditions(self.ctx, res, evicted, extra_conditions):
            self._set_conditions_later(res, evicted, extra_conditions)
        log.info("taint-manager: evicted %s from cluster %s (%s)", binding_key_of(binding), cluster_name,
                 "with state" if state is not None else "without state")
        return None

    def _set_conditions_later(self, res: Resource, binding: dict[str, Any],
                              conditions: list[dict[str, Any]]) -> None:
        """Write the conditions that follow an eviction (``StatePreserved``) in the background: the eviction is
        done, and the worker goes on with the next key instead of waiting for a second write. The writes of one
        binding happen one after the other, in the order of its evictions (each re-reads on a 409)."""
        bkey = binding_key_of(binding) or ""
        previous = self._condition_writes.get(bkey)

        async def write() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            for condition in conditions:
                try:
                    await self._set_condition(res, binding, condition)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - as before: a later pass would not evict again
                    log.warning("taint-manager: binding %s: could not set condition %s: %s", bkey,
                                condition.get("type"), e)

        task = asyncio.get_running_loop().create_task(write(), name=f"taint-manager-conditions-{bkey}")
        self._condition_writes[bkey] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._condition_writes.get(bkey) is t:
                del self._condition_writes[bkey]

        task.add_done_callback(done)

    async def stop(self) -> None:
        await super().stop()
        tasks = list(self._condition_writes.values())
        self._condition_writes.clear()
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _get(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        inf = self.rbs if res is RESOURCE_BINDINGS else self.crbs
        cached = inf.store.get(f"{namespace}/{name}" if namespace else name) if inf is not None else None
        if cached is not None:
            return dict(cached)
        try:
            return dict(await self.client.get(res, name, namespace))
        except ApiException as e:
            if is_not_found(e):
                return None
            raise

    def _decide(self, binding: Mapping[str, Any], cluster_name: str, cluster: Mapping[str, Any] | None,
                now: datetime) -> Any:
        taints = None if cluster is None else parse_taints(cluster)
        try:
            return binding_eviction_decision(binding, cluster_name, taints, now, enabled=self.enabled)
        except AppliedPlacementError as e:
            log.warning("taint-manager: binding %s on cluster %s: %s", binding_key_of(binding), cluster_name, e)
            self._record(RESULT_ERROR)
            self._event(binding, "Warning", EVENT_EVICT_FAILED, f"{evict_failed_message(cluster_name)} {e}")
            raise

    # ------------------------------------------------------------------ state preservation

    async def _preserve_state(self, key: str, res: Resource, binding: dict[str, Any], cluster: str, now: datetime
                              ) -> tuple[dict[str, str] | None, list[dict[str, Any]], list[EventSpec]]:
        """The state to record on the task (``None``: none), and the conditions to set and the events to record
        once the eviction is written."""
        if not self.options.gate(STATEFUL_FAILOVER_INJECTION_GATE):
            return None, [], []
        failover = spec_of(binding).get("failover")
        if not isinstance(failover, Mapping) or not isinstance(failover.get("cluster"), Mapping):
            return None, [], []
        rules = rules_of(failover, "cluster")
        if not rules:
            return None, [], []
        annotations = annotations_of(binding)
        first = failing_since(annotations).get(cluster)
        kept = preserve_state_for_eviction(rules, binding, cluster, record=parse_injected_state_record(binding),
                                           first_failure_at=first, now=now,
                                           timeout=self.options.state_preservation_timeout)
        result = kept.failure
        if result is None:
            return kept.state, [kept.condition], [kept.carried] if kept.carried is not None else []

        self._event(binding, result.event.type, result.event.reason, result.event.message)
        log.warning("taint-manager: %s: %s", key, result.event.message)
        self.ctx.metrics.failover.record_state_preservation_failure(TRIGGER_CLUSTER_TAINT)
        if result.proceed_without_state:
            self.ctx.metrics.failover.record_state_preservation_timeout(TRIGGER_CLUSTER_TAINT)
            return None, [result.condition], []
        current: Mapping[str, Any] = binding
        if first is None:
            value = record_failing_since(annotations, cluster, now)
            patched = await patch_with_retry(
                self.client, res, binding, meta_of(binding)["name"], meta_of(binding).get("namespace"),
                lambda obj: {"metadata": {"annotations": {STATE_PRESERVATION_FAILING_SINCE_ANNOTATION: value},
                                          "resourceVersion": meta_of(obj).get("resourceVersion")}})
            current = patched or binding
        drop_handed_off_conditions(self.ctx, res, current)  # this newer condition supersedes them
        await self._set_condition(res, current, result.condition)
        failures = self._state_failures.get(key, 0)
        self._state_failures[key] = failures + 1
        backoff = min(STATE_RETRY_MAX, STATE_RETRY_INITIAL * (2 ** failures))
        raise _Blocked(backoff if result.retry_after is None else max(min(backoff, result.retry_after), 0.05))

    async def _set_condition(self, res: Resource, binding: Mapping[str, Any], condition: Mapping[str, Any]) -> None:
        await patch_condition(self.client, res, binding, condition, self.ctx.now())

    # ------------------------------------------------------------------ the eviction

    async def _evict(self, key: str, res: Resource, binding: dict[str, Any], cluster: str,
                     state: dict[str, str] | None) -> dict[str, Any] | None:
        """Write the eviction; the updated binding, or ``None`` when nothing was to be done."""
        flag = self.options.no_execute_taint_eviction_purge_mode
        # the task is written stamped (its creationTimestamp) while the graceful-eviction controller runs, which
        # would stamp it on its first pass anyway: one write and one generation less per eviction
        stamp = self.ctx.now() if graceful_eviction_running(self.ctx) else None
        done = False

        def make(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            nonlocal done
            done = False
            spec = spec_of(obj)
            if cluster not in _target_names(obj) or meta_of(obj).get("deletionTimestamp"):
                return None
            failover = spec.get("failover")
            options = cluster_failover_task_options(
                failover if isinstance(failover, Mapping) else None, default_purge_mode=flag,
                preserved_label_state=state, clusters_before_failover=clusters_before_failover(spec),
                creation_timestamp=stamp)
            result = graceful_evict_cluster(spec, cluster, options)
            if not result.changed:
                return None
            patch = result.spec_patch(meta_of(obj).get("resourceVersion"))
            annotations = as_map(meta_of(obj).get("annotations"))
            if cluster in failing_since(annotations):
                patch["metadata"]["annotations"] = {
                    STATE_PRESERVATION_FAILING_SINCE_ANNOTATION: clear_failing_since(annotations, cluster)}
            done = True
            return patch

        md = meta_of(binding)
        try:
            updated = await patch_with_retry(self.client, res, binding, md["name"], md.get("namespace"), make)
        except ApiException as e:
            self._record(RESULT_ERROR)
            self._event(binding, "Warning", EVENT_EVICT_FAILED, evict_failed_message(cluster))
            log.warning("taint-manager: %s: evicting failed: %s", key, e)
            raise
        if updated is None or not done:
            return None
        return updated

    def _event(self, binding: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        obj = dict(binding)
        if not obj.get("kind"):
            ns = meta_of(binding).get("namespace")
            res = RESOURCE_BINDINGS if ns else CLUSTER_RESOURCE_BINDINGS
            obj = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        self.ctx.recorder.event(obj, type_, reason, message)
        template = _template_of(binding)
        if template is not None:
            self.ctx.recorder.event(template, type_, reason, message)
