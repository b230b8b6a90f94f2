"""The cluster controller (Karmada's): execution namespace, condition taints, finalizer, removal.

For every Cluster event:

* ensure the execution namespace ``karmada-es-<cluster>`` (label ``karmada.io/system=true``) exists, and for a
  Pull cluster the namespace ``karmada-cluster`` of its agent's Lease;
* keep the NoSchedule taints in line with the Ready condition (:mod:`flotilla.cluster.taints`: not-ready for
  False or no condition yet, unreachable for Unknown, none for True) - never touching any other taint, which
  ClusterTaintPolicies and people own; and ensure the finalizer ``karmada.io/cluster-controller``. Both go in
  one merge patch guarded by ``resourceVersion`` (re-read and re-decided on 409).

When the Cluster is being deleted:

1. (Pull clusters that are not Ready: strip ``karmada.io/execution-controller`` from their Works, since no
   agent will.)
2. Delete the execution namespace. The API server then deletes the Works in it (and refuses new ones); each
   Work goes once the execution controller has removed its finalizer - after deleting the member objects when
   the cluster is reachable, or without contacting a cluster that is terminating.
3. Wait until the namespace is gone and no ResourceBinding/ClusterResourceBinding lists the cluster in
   ``spec.clusters`` (the scheduler drops terminating clusters), then remove the finalizer.

Waiting is event driven (namespace deletions) with a fallback re-check every ``CLEANUP_CHECK_INTERVAL``
(Karmada's 10 s). While it waits, an Event says what it waits for. **If the execution controller is not
running, Works keep their finalizer and the Cluster stays Terminating** (as in Karmada); the Event names the
Works and the finalizer holding them.

The health monitor of Pull clusters (whose status only their agent writes): every ``--cluster-monitor-period``
it judges each Pull cluster with :func:`flotilla.cluster.lease_health.judge_pull_cluster` from the Cluster and
its Lease ``karmada-cluster/<cluster>`` (both from informers; Lease and Cluster events also refresh the probe
time as they arrive, so a renewal counts from when it was delivered, not from the next tick). When the decision
is Ready ``Unknown`` it reads the Cluster and the Lease again from the API server and decides again (a renewal
or a Ready condition the informers have not delivered yet wins), then merge-patches ``status.conditions`` with
the Cluster's ``resourceVersion`` as precondition: an agent's write in between makes the patch fail with 409,
and the monitor reads and decides again instead of overwriting what the agent posted. The monitor never writes
True: the agent does. The Unknown it writes is a Cluster update like any other, so the taints follow above
(``unreachable:NoSchedule``), and a ClusterTaintPolicy adds its NoExecute taint as for a Push member. Push
clusters are not monitored (their status controller runs here and posts every probe's result).

The automatic fence (:mod:`flotilla.failover.auto_fence`), at the end of each monitor pass: a Pull cluster whose
agent announces a guard, whose Lease the monitor has not seen change for the announced ``permit-hold +
fence-after`` + ``--fence-margin`` (on this process's monotonic clock), is fenced while a strict majority of all
clusters is live. As for Unknown, the Cluster and Lease are read again from the API server and the decision made
again before anything is written; then the out-of-service taint is merge-patched with the Cluster's
``resourceVersion`` as precondition (re-read and re-decided on 409), the ``Fenced`` condition is set, a Warning
Event ``ClusterFencedAutomatically`` recorded and ``flotilla_clusters_fenced_total{trigger="lease"}`` counted.
Nothing here ever removes the taint. A malformed announcement gets a Warning Event ``GuardAnnouncementInvalid``
(once per distinct problem) and the cluster is not fenced automatically.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flotilla.api.labels import (
    CLUSTER_CONTROLLER_FINALIZER,
    EXECUTION_CONTROLLER_FINALIZER,
    KARMADA_CLUSTER_NAMESPACE,
    SYSTEM_LABEL,
)
from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS, WORKS
from flotilla.client import ApiException, is_already_exists, is_conflict, is_not_found
from flotilla.cluster.health import is_ready, ready_condition, ready_transition
from flotilla.cluster.lease_health import LeaseMemory, MonitorGrace, is_pull_cluster, judge_pull_cluster
from flotilla.cluster.taints import taints_for_condition, taints_message
from flotilla.failover.auto_fence import (
    EVENT_GUARD_ANNOUNCEMENT_INVALID,
    AutoFenceAction,
    AutoFenceDecision,
    cluster_liveness,
    decide_auto_fence,
    fleet_window,
    keeps_lease,
    majority_live,
    silent_clusters,
)
from flotilla.failover.events import EVENT_TAINT_CLUSTER_FAILED, EVENT_TAINT_CLUSTER_SUCCEED
from flotilla.failover.fencing import fence_patch, is_fenced
from flotilla.failover.peer_quorum import (
    ANNOTATION_FENCE_PENDING,
    observe_acknowledgements,
    peer_endpoint,
)
from flotilla.kube.conditions import set_condition
from flotilla.kube.objects import meta_of
from flotilla.kube.resources import LEASES, NAMESPACES
from flotilla.observability.metrics import FENCE_TRIGGER_LEASE
from flotilla.policy.naming import (
    cluster_name_from_execution_space,
    generate_execution_space_name,
    is_execution_space,
)
from flotilla.runtime.base import Controller, ControllerContext
from flotilla.runtime.members import CLUSTERS
from flotilla.runtime.patching import Written, write_once

log = logging.getLogger(__name__)

__all__ = ["CLEANUP_CHECK_INTERVAL", "ClusterController"]


CLEANUP_CHECK_INTERVAL = 10.0
_CONFLICT_RETRIES = 5
_NAMES_SHOWN = 5

# Karmada's event reasons for clusters
REASON_CREATE_EXECUTION_SPACE_SUCCEED = "CreateExecutionSpaceSucceed"
REASON_CREATE_EXECUTION_SPACE_FAILED = "CreateExecutionSpaceFailed"
REASON_REMOVE_EXECUTION_SPACE_SUCCEED = "RemoveExecutionSpaceSucceed"
REASON_REMOVE_EXECUTION_SPACE_FAILED = "RemoveExecutionSpaceFailed"
REASON_TAINT_CLUSTER_SUCCEED = EVENT_TAINT_CLUSTER_SUCCEED
REASON_TAINT_CLUSTER_FAILED = EVENT_TAINT_CLUSTER_FAILED
# Flotilla's: what a deletion is waiting for
REASON_CLEANUP_PENDING = "ClusterCleanupPending"


def _shown(names: list[str]) -> str:
    more = len(names) - _NAMES_SHOWN
    return ", ".join(names[:_NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


class ClusterController(Controller):
    name = "cluster"
    workers = 5  # Karmada's --concurrent-cluster-syncs

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.clusters: Any = None
        self.namespaces: Any = None
        self.cleanup_check_interval = float(ctx.extras.get("cluster_cleanup_check_interval",
                                                           CLEANUP_CHECK_INTERVAL))
        self._pending: dict[str, str] = {}  # cluster -> what its deletion waits for (last Event sent)
        self.leases: Any = None
        self.monitor_period = float(self.options.cluster_monitor_period)
        self.grace = MonitorGrace(grace_period=float(self.options.cluster_monitor_grace_period),
                                  startup_grace_period=float(self.options.cluster_startup_grace_period))
        self._health: dict[str, LeaseMemory] = {}  # Pull cluster -> what the monitor remembers of it
        self.fence_margin = float(self.options.fence_margin)
        self._fence_notes: dict[str, str] = {}  # cluster -> the last held/invalid note logged or sent as an Event
        # agent's cluster -> {candidate: (pending-fence token its Lease acknowledges, monotonic time first seen)}
        self._acks: dict[str, dict[str, tuple[str, float]]] = {}
        self._recheck: float | None = None  # the soonest a fence decision is due (monotonic), within a period
        self._majority: bool | None = None  # whether the last fence pass saw a strict majority of clusters live
        self._monitor_task: asyncio.Task[None] | None = None

    def setup(self) -> None:
        self.clusters = self.informer(CLUSTERS)
        self.clusters.add_handler(**self.handlers_enqueue_self())
        self.clusters.add_handler(on_add=self._observe, on_update=lambda old, new: self._observe(new))
        self.leases = self.informer(LEASES, KARMADA_CLUSTER_NAMESPACE)
        self.leases.add_handler(on_add=self._on_lease, on_update=lambda old, new: self._on_lease(new))
        self.namespaces = self.informer(NAMESPACES)
        self.namespaces.add_handler(on_add=self._on_namespace, on_update=lambda old, new: self._on_namespace(new),
                                    on_delete=self._on_namespace)

    def _on_namespace(self, ns: dict[str, Any]) -> None:
        name = meta_of(ns).get("name") or ""
        if is_execution_space(name):
            cluster = cluster_name_from_execution_space(name)
            if cluster:
                self.enqueue(cluster)

    def start(self) -> None:
        super().start()
        self._monitor_task = asyncio.get_running_loop().create_task(self._monitor_loop())

    async def stop(self) -> None:
        if self._monitor_task is not None:
            self._monitor_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._monitor_task
            self._monitor_task = None
        await super().stop()

    async def reconcile(self, key: str) -> float | None:
        cluster = self.clusters.store.get(key)
        if cluster is None:
            self._pending.pop(key, None)
            self._health.pop(key, None)
            self._fence_notes.pop(key, None)
            return None
        if meta_of(cluster).get("deletionTimestamp"):
            return await self._remove(cluster)
        self._pending.pop(key, None)
        await self._ensure_execution_space(cluster)
        if keeps_lease(cluster):
            await self._ensure_lease_space()
        await self._sync_taints_and_finalizer(cluster)
        return None

    # ------------------------------------------------------------------ normal life
    async def _ensure_execution_space(self, cluster: dict[str, Any]) -> None:
        name = meta_of(cluster)["name"]
        es = generate_execution_space_name(name)
        ns = self.namespaces.store.get(es)
        if ns is not None:
            if meta_of(ns).get("deletionTimestamp"):
                log.info("cluster %s: execution space %s is still terminating; will create it once it is gone",
                         name, es)  # its deletion event enqueues the cluster again
            return
        body = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": es, "labels": {SYSTEM_LABEL: "true"}}}
        try:
            await self.client.create(NAMESPACES, body)
        except ApiException as e:
            if is_already_exists(e):
                return
            self.ctx.recorder.event(cluster, "Warning", REASON_CREATE_EXECUTION_SPACE_FAILED, str(e))
            raise
        log.info("cluster %s: created execution space %s", name, es)
        self.ctx.recorder.event(cluster, "Normal", REASON_CREATE_EXECUTION_SPACE_SUCCEED,
                                f"Created execution space({es}) for cluster({name}).")

    async def _ensure_lease_space(self) -> None:
        """``karmada-cluster``, where a Pull cluster's agent keeps its Lease (an agent may not create namespaces:
        without it the Lease could never be written and the cluster would turn Unknown)."""
        if self.namespaces.store.get(KARMADA_CLUSTER_NAMESPACE) is not None:
            return
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KARMADA_CLUSTER_NAMESPACE}}
        try:
            await self.client.create(NAMESPACES, body)
        except ApiException as e:
            if is_already_exists(e):
                return
            raise
        log.info("created namespace %s for the Leases of Pull clusters", KARMADA_CLUSTER_NAMESPACE)

    async def _sync_taints_and_finalizer(self, cluster: dict[str, Any]) -> None:
        name = meta_of(cluster)["name"]
        for _ in range(_CONFLICT_RETRIES):
            now = self.ctx.now()
            taints = taints_for_condition(cluster, now)
            finalizers = list(meta_of(cluster).get("finalizers") or [])
            missing_finalizer = CLUSTER_CONTROLLER_FINALIZER not in finalizers
            if taints is None and not missing_finalizer:
                return
            patch: dict[str, Any] = {"metadata": {"resourceVersion": meta_of(cluster).get("resourceVersion")}}
            if taints is not None:
                patch["spec"] = {"taints": taints}
            if missing_finalizer:
                patch["metadata"]["finalizers"] = [*finalizers, CLUSTER_CONTROLLER_FINALIZER]
            try:
                await self.client.patch(CLUSTERS, name, patch)
            except ApiException as e:
                if is_not_found(e):
                    return
                if is_conflict(e):
                    cluster = await self.client.get(CLUSTERS, name)
                    if meta_of(cluster).get("deletionTimestamp"):
                        return  # the deletion path takes over on its update event
                    continue
                if taints is not None:
                    self.ctx.recorder.event(cluster, "Warning", REASON_TAINT_CLUSTER_FAILED, str(e))
                raise
            if taints is not None:
                message = f"Taint cluster succeed: {taints_message(taints)}."
                log.info("cluster %s: taints now %s", name, taints_message(taints))
                self.ctx.recorder.event(cluster, "Normal", REASON_TAINT_CLUSTER_SUCCEED, message)
            if missing_finalizer:
                log.info("cluster %s: added finalizer %s", name, CLUSTER_CONTROLLER_FINALIZER)
            return
        raise ApiException(409, "Conflict", f"cluster {name} kept changing; will retry")

    # ------------------------------------------------------------------ Pull clusters' health
    def _on_lease(self, lease: dict[str, Any]) -> None:
        self._observe_acks(lease)
        cluster = self.clusters.store.get(meta_of(lease).get("name") or "")
        if cluster is not None:
            self._observe(cluster, lease)

    def _observe(self, cluster: dict[str, Any], lease: Mapping[str, Any] | None = None) -> None:
        """Refresh a Pull cluster's probe time from what was just delivered (writes happen at the next tick)."""
        name = meta_of(cluster).get("name") or ""
        if not keeps_lease(cluster):
            self._health.pop(name, None)
            return
        if lease is None:
            lease = self.leases.store.get(f"{KARMADA_CLUSTER_NAMESPACE}/{name}")
        self._health[name] = judge_pull_cluster(cluster, lease, self._health.get(name), self.ctx.now(),
                                                self.grace, self.ctx.monotonic()).memory

    def _observe_acks(self, lease: Mapping[str, Any] | None) -> None:
        """Remember when each acknowledgement of a pending fence on an agent's Lease was first seen."""
        name = meta_of(dict(lease or {})).get("name") or ""
        if name:
            self._acks[name] = observe_acknowledgements(self._acks.get(name, {}), lease, self.ctx.monotonic())

    async def _monitor_loop(self) -> None:
        while True:
            self._recheck = None
            try:
                await self.monitor_pull_clusters()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cluster health monitor: pass failed; next one in %gs", self.monitor_period)
            delay = self.monitor_period
            if self._recheck is not None:  # a fence falls due before the next period: look again then
                delay = min(delay, max(0.05, self._recheck - self.ctx.monotonic()))
            await asyncio.sleep(delay)

    async def monitor_pull_clusters(self) -> None:
        """One pass of the monitor over every Pull cluster in the informer's cache."""
        seen: set[str] = set()
        for cluster in list(self.clusters.store.list()):
            if not keeps_lease(cluster):
                continue
            name = meta_of(cluster).get("name") or ""
            seen.add(name)
            lease = self.leases.store.get(f"{KARMADA_CLUSTER_NAMESPACE}/{name}")
            self._observe_acks(lease)
            verdict = judge_pull_cluster(cluster, lease, self._health.get(name), self.ctx.now(), self.grace,
                                         self.ctx.monotonic())
            self._health[name] = verdict.memory
            # a Push cluster's Lease (its lease-only agent) only dates renewals: its health is probed directly
            if verdict.ready is not None and is_pull_cluster(cluster):
                try:
                    await self._post_unknown(name)
                except Exception:
                    log.exception("cluster %s: could not set Ready Unknown; will try again", name)
        for gone in set(self._health) - seen:
            self._health.pop(gone, None)
        for gone in set(self._acks) - seen:
            self._acks.pop(gone, None)
        await self.fence_pass()

    async def _post_unknown(self, name: str) -> None:
        """Read the Cluster and its Lease from the API server, decide again, and write Ready Unknown if that
        still holds - guarded by the Cluster's resourceVersion, re-read and re-decided on 409."""
        for _ in range(_CONFLICT_RETRIES):
            cluster = await self.client.get_or_none(CLUSTERS, name)
            if cluster is None or not is_pull_cluster(cluster):
                self._health.pop(name, None)
                return
            lease = await self.client.get_or_none(LEASES, name, KARMADA_CLUSTER_NAMESPACE)
            now = self.ctx.now()
            verdict = judge_pull_cluster(cluster, lease, self._health.get(name), now, self.grace,
                                         self.ctx.monotonic())
            self._health[name] = verdict.memory
            if verdict.ready is None:
                return
            status = cluster.get("status") if isinstance(cluster.get("status"), Mapping) else {}
            conditions = set_condition(status.get("conditions") if isinstance(status, Mapping) else None,
                                       verdict.ready, now)
            patch = {"metadata": {"resourceVersion": meta_of(cluster).get("resourceVersion")},
                     "status": {"conditions": conditions}}
            try:
                await self.client.patch(CLUSTERS, name, patch, subresource="status")
            except ApiException as e:
                if is_not_found(e):
                    self._health.pop(name, None)
                    return
                if is_conflict(e):
                    continue
                raise
            self._health[name] = verdict.written()
            log.warning("cluster %s: Ready %s (%s): no Lease renewal nor new status for %gs", name,
                        verdict.ready["status"], verdict.ready["reason"],
                        (now - verdict.memory.probe).total_seconds())
            change = ready_transition(ready_condition(cluster), verdict.ready)
            if change is not None:
                self.ctx.recorder.event(cluster, *change)
            return
        raise ApiException(409, "Conflict", f"cluster {name} kept changing; will retry")

    # ------------------------------------------------------------------ the automatic fence
    def _decide_fence(self, cluster: Mapping[str, Any]) -> AutoFenceDecision:
        name = meta_of(dict(cluster)).get("name") or ""
        others = [c for c in self.clusters.store.list() if (meta_of(c).get("name") or "") != name]
        everyone = [cluster_liveness(c, self._health.get(meta_of(c).get("name") or "")) for c in others]
        # the other agents that answer peers, and what their Leases acknowledge of this cluster's pending fence
        voters = [meta_of(c).get("name") or "" for c in others if peer_endpoint(c) is not None]
        acks = {v: self._acks[v][name] for v in voters if name in self._acks.get(v, {})}
        return decide_auto_fence(cluster, self._health.get(name), self.ctx.monotonic(), self.fence_margin, everyone,
                                 self.grace.grace_period, acks, len(voters))

    def _restart_bounds_on_regained_majority(self) -> None:
        """A control plane that had no majority of clusters live may have been the one cut off: when it sees a
        majority again, the clusters still silent get a fresh bound from now (their agents may still be in their
        retry backoff), and the acknowledgements of their pending fences count from now."""
        clusters = list(self.clusters.store.list())
        now = self.ctx.monotonic()
        everyone = [cluster_liveness(c, self._health.get(meta_of(c).get("name") or "")) for c in clusters]
        window = fleet_window(clusters, self.grace.grace_period, self.fence_margin)
        has = majority_live(everyone, now, window) if everyone else True
        if self._majority is False and has:
            silent = silent_clusters({k: m.renewed_at for k, m in self._health.items()}, now, window)
            for name in silent:
                memory = self._health.get(name)
                if memory is not None:
                    self._health[name] = replace(memory, renewed_at=now)
                for acks in self._acks.values():
                    if name in acks:
                        acks[name] = (acks[name][0], now)
            if silent:
                log.warning("a strict majority of clusters is live again after none was: the fence bounds of %s, "
                            "still silent, start again now", ", ".join(sorted(silent)))
        self._majority = has

    async def fence_pass(self) -> None:
        """Decide the automatic fence of every Pull cluster in the informer's cache; fence, mark pending or cancel
        the pending mark as it says."""
        self._restart_bounds_on_regained_majority()
        for cluster in list(self.clusters.store.list()):
            if not keeps_lease(cluster):
                continue
            decision = self._decide_fence(cluster)
            name = meta_of(cluster).get("name") or ""
            if decision.action in (AutoFenceAction.FENCE, AutoFenceAction.PEND, AutoFenceAction.CANCEL):
                try:
                    await self._fence(name, decision.action)
                except Exception:
                    log.exception("cluster %s: could not %s; will try again", name,
                                  "fence it" if decision.action is AutoFenceAction.FENCE
                                  else f"{decision.action.value} its pending fence")
            else:
                self._fence_note(cluster, decision)
                if decision.action is AutoFenceAction.NOT_YET and decision.recheck_after is not None:
                    due = self.ctx.monotonic() + decision.recheck_after
                    self._recheck = due if self._recheck is None else min(self._recheck, due)

    def _fence_note(self, cluster: dict[str, Any], decision: AutoFenceDecision) -> None:
        """Say once why a guarded cluster past its bound is not fenced (held, malformed announcement)."""
        name = meta_of(cluster).get("name") or ""
        if decision.action is AutoFenceAction.HELD:
            note = "held"
        elif decision.invalid:
            note = decision.reason
        else:
            self._fence_notes.pop(name, None)
            return
        if self._fence_notes.get(name) == note:
            return
        self._fence_notes[name] = note
        log.warning("%s", decision.reason)
        if decision.invalid:
            self.ctx.recorder.event(cluster, "Warning", EVENT_GUARD_ANNOUNCEMENT_INVALID,
                                    f"{decision.reason}; the cluster is not fenced automatically")

    async def _fence(self, name: str, action: AutoFenceAction = AutoFenceAction.FENCE) -> None:
        """Read the Cluster and its Lease from the API server, decide again, and if ``action`` still holds fence the
        cluster (FENCE), mark its fence pending (PEND) or remove the pending mark (CANCEL) - guarded by the
        Cluster's resourceVersion, re-read and re-decided on 409."""
        for _ in range(_CONFLICT_RETRIES):
            cluster = await self.client.get_or_none(CLUSTERS, name)
            if cluster is None or not keeps_lease(cluster):
                return
            lease = await self.client.get_or_none(LEASES, name, KARMADA_CLUSTER_NAMESPACE)
            self._health[name] = judge_pull_cluster(cluster, lease, self._health.get(name), self.ctx.now(),
                                                    self.grace, self.ctx.monotonic()).memory
            decision = self._decide_fence(cluster)
            if decision.action is not action or decision.condition is None:
                self._fence_note(cluster, decision)
                return
            if action is AutoFenceAction.FENCE:
                patch = fence_patch(cluster, self.ctx.now())
                if patch is None:
                    return
                if ANNOTATION_FENCE_PENDING in (meta_of(cluster).get("annotations") or {}):
                    patch.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_FENCE_PENDING] = None
            else:
                patch = {"metadata": {"annotations": {
                    ANNOTATION_FENCE_PENDING: decision.token if action is AutoFenceAction.PEND else None}}}
            patch.setdefault("metadata", {})["resourceVersion"] = meta_of(cluster).get("resourceVersion")
            try:
                written = await self.client.patch(CLUSTERS, name, patch)
            except ApiException as e:
                if is_not_found(e):
                    return
                if is_conflict(e):
                    continue
                raise
            if action is AutoFenceAction.FENCE:
                self.ctx.metrics.failover.record_cluster_fenced(FENCE_TRIGGER_LEASE)
            log.warning("%s", decision.reason)
            if decision.event is not None:
                self.ctx.recorder.event(written, decision.event.type, decision.event.reason, decision.event.message)
            await self._set_fenced_condition(written, decision.condition,
                                             still=is_fenced if action is AutoFenceAction.FENCE else None)
            return
        raise ApiException(409, "Conflict", f"cluster {name} kept changing; will retry")

    async def _set_fenced_condition(self, cluster: dict[str, Any], condition: Mapping[str, Any],
                                    still: Any = is_fenced) -> None:
        """Record the fence (or its pending mark, or the cancel) in the Cluster's ``Fenced`` condition, while
        ``still`` holds of the Cluster (None: always)."""
        name = meta_of(cluster)["name"]
        for _ in range(_CONFLICT_RETRIES):
            status = cluster.get("status") if isinstance(cluster.get("status"), Mapping) else {}
            conditions = set_condition(status.get("conditions") if isinstance(status, Mapping) else None,
                                       condition, self.ctx.now())
            patch = {"metadata": {"resourceVersion": meta_of(cluster).get("resourceVersion")},
                     "status": {"conditions": conditions}}
            if await write_once(self.client.patch(CLUSTERS, name, patch, subresource="status")) is not Written.CONFLICT:
                return
            cluster = await self.client.get_or_none(CLUSTERS, name) or {}
            if not cluster or (still is not None and not still(cluster)):
                return  # unfenced meanwhile: nothing to record
        log.warning("cluster %s: fenced, but could not record the Fenced condition (it kept changing)", name)

    # ------------------------------------------------------------------ removal
    async def _remove(self, cluster: dict[str, Any]) -> float | None:
        name = meta_of(cluster)["name"]
        if CLUSTER_CONTROLLER_FINALIZER not in (meta_of(cluster).get("finalizers") or []):
            return None
        es = generate_execution_space_name(name)
        if (cluster.get("spec") or {}).get("syncMode") == "Pull" and not is_ready(cluster):
            await self._strip_work_finalizers(es)

        ns = await self._get_namespace(es)
        if ns is not None:
            if not meta_of(ns).get("deletionTimestamp"):
                try:
                    await self.client.delete(NAMESPACES, es)
                except ApiException as e:
                    if not is_not_found(e):
                        self.ctx.recorder.event(cluster, "Warning", REASON_REMOVE_EXECUTION_SPACE_FAILED, str(e))
                        raise
                log.info("cluster %s: deleting execution space %s", name, es)
                self.ctx.recorder.event(cluster, "Normal", REASON_REMOVE_EXECUTION_SPACE_SUCCEED,
                                        f"Removed execution space({es}) for cluster({name}).")
            await self._waiting(cluster, await self._works_note(es))
            return self.cleanup_check_interval

        bindings = await self._bindings_targeting(name)
        if bindings:
            await self._waiting(cluster, f"{len(bindings)} binding(s) still target the cluster in spec.clusters "
                                         f"({_shown(bindings)}); the scheduler removes terminating clusters")
            return self.cleanup_check_interval

        await self._remove_finalizer(name)
        self._pending.pop(name, None)
        return None

    async def _get_namespace(self, name: str) -> dict[str, Any] | None:
        return await self.client.get_or_none(NAMESPACES, name)

    async def _works_note(self, es: str) -> str:
        works = (await self.client.list(WORKS, es)).get("items") or []
        if not works:
            return f"waiting for the execution space {es} to be deleted"
        held = [w for w in works if EXECUTION_CONTROLLER_FINALIZER in (meta_of(w).get("finalizers") or [])]
        names = sorted(meta_of(w).get("name", "") for w in works)
        note = f"waiting for {len(works)} Work(s) in {es} to be deleted ({_shown(names)})"
        if held:
            note += (f"; {len(held)} held by the finalizer {EXECUTION_CONTROLLER_FINALIZER}, which the execution "
                     "controller removes once the member objects are deleted (is it running?)")
        return note

    async def _bindings_targeting(self, cluster: str) -> list[str]:
        found: list[str] = []
        for res in (RESOURCE_BINDINGS, CLUSTER_RESOURCE_BINDINGS):
            try:
                items = (await self.client.list(res)).get("items") or []
            except ApiException as e:
                if is_not_found(e):  # the kind is not served: nothing can target the cluster
                    continue
                raise
            for b in items:
                targets = (b.get("spec") or {}).get("clusters") or []
                if any(isinstance(t, dict) and t.get("name") == cluster for t in targets):
                    md = meta_of(b)
                    found.append(f"{md['namespace']}/{md['name']}" if md.get("namespace") else str(md.get("name")))
        return sorted(found)

    async def _strip_work_finalizers(self, es: str) -> None:
        works = (await self.client.list(WORKS, es)).get("items") or []
        for w in works:
            finalizers = list(meta_of(w).get("finalizers") or [])
            if EXECUTION_CONTROLLER_FINALIZER not in finalizers:
                continue
            rest = [f for f in finalizers if f != EXECUTION_CONTROLLER_FINALIZER]
            patch = {"metadata": {"finalizers": rest, "resourceVersion": meta_of(w).get("resourceVersion")}}
            try:
                await self.client.patch(WORKS, meta_of(w)["name"], patch, namespace=es)
            except ApiException as e:
                if not (is_not_found(e) or is_conflict(e)):  # a conflict is retried on the next check
                    raise

    async def _waiting(self, cluster: dict[str, Any], note: str) -> None:
        name = meta_of(cluster)["name"]
        if self._pending.get(name) == note:
            return
        self._pending[name] = note
        log.info("cluster %s: deletion %s", name, note)
        self.ctx.recorder.event(cluster, "Normal", REASON_CLEANUP_PENDING, f"Cluster deletion is {note}.")

    async def _remove_finalizer(self, name: str) -> None:
        for _ in range(_CONFLICT_RETRIES):
            cluster = await self.client.get_or_none(CLUSTERS, name)
            if cluster is None:
                return
            finalizers = list(meta_of(cluster).get("finalizers") or [])
            if CLUSTER_CONTROLLER_FINALIZER not in finalizers:
                return
            patch = {"metadata": {"resourceVersion": meta_of(cluster).get("resourceVersion"),
                                  "finalizers": [f for f in finalizers if f != CLUSTER_CONTROLLER_FINALIZER]}}
            written = await write_once(self.client.patch(CLUSTERS, name, patch))
            if written is Written.CONFLICT:
                continue
            if written is Written.DONE:
                log.info("cluster %s: cleaned up, removed finalizer %s", name, CLUSTER_CONTROLLER_FINALIZER)
            return
        raise ApiException(409, "Conflict", f"cluster {name} kept changing; will retry")
