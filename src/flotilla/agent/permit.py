"""The agent's run permit (``flotilla agent --guard``; docs/fencing.md "The run permit").

:class:`PermitKeeper` keeps the Lease ``flotilla-system/flotilla-run-permit`` in the member, renewing it every
``--permit-renew-interval`` only while :func:`~flotilla.failover.run_permit.permit_decision` says so: the agent's
last successful control-plane Lease renewal started less than ``--permit-hold`` ago (its monotonic clock), its
Cluster is not fenced, and the purge of stale guarded copies has run since the start or since the permit was last
withheld. The purge decides from a fresh, complete list of the cluster's Works (never a cache) and a fresh read of
the Cluster, and waits until the agent's own Work cache has caught up with that list (else its execution controller
would re-create what the purge deletes, for a Work that is gone); it deletes the guarded member objects no Work wants any more, so that a guard does not resume a copy
the control plane has already started elsewhere. It also announces the guard on the Cluster
(``guard.flotilla.io/fence-after`` and ``guard.flotilla.io/permit-hold``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flotilla.api.resources import CLUSTERS
from flotilla.client import ApiException, Client, is_already_exists, is_conflict, is_not_found
from flotilla.failover.fencing import is_fenced, recovery_works
from flotilla.failover.peer_quorum import Quorum
from flotilla.failover.run_permit import (
    GUARDED_SELECTOR,
    PERMIT_NAME,
    PERMIT_NAMESPACE,
    PermitDecision,
    PermitRoute,
    PermitStep,
    announcement_patch,
    cache_behind,
    guarded_kinds,
    parse_guarded_kinds,
    permit_body,
    permit_decision,
    permit_event,
    permit_route,
    renewed_permit,
    stale_guarded_objects,
)
from flotilla.kube.resources import LEASES, NAMESPACES
from flotilla.policy.naming import generate_execution_space_name
from flotilla.propagation.works import WORKS

if TYPE_CHECKING:
    from flotilla.agent.metrics import AgentMetrics
    from flotilla.client.events import EventRecorder

log = logging.getLogger(__name__)

__all__ = ["PermitKeeper"]


class PermitKeeper:
    """Renews the run permit of one member while its agent holds the control plane.

    ``last_renewal_started``: when the agent's last successful control-plane Lease renewal started (its
    monotonic clock, None before the first); ``caches``: the agent's cached Cluster and Works (None while its
    controllers are not running), read at every renewal to record guarded kinds and notice a fence early."""

    def __init__(self, cp: Client, member: Client, cluster: str, *, fence_after: float, permit_hold: float,
                 renew_interval: float, last_renewal_started: Callable[[], float | None],
                 caches: Callable[[], tuple[Mapping[str, Any] | None, list[Mapping[str, Any]]] | None],
                 monotonic: Callable[[], float], now: Callable[[], datetime], write_timeout: float = 10.0,
                 quorum: Callable[[], Quorum | None] = lambda: None, metrics: AgentMetrics | None = None,
                 recorder: EventRecorder | None = None, renew_now: Callable[[], None] = lambda: None) -> None:
        self.cp, self.member, self.cluster = cp, member, cluster
        self.fence_after, self.permit_hold, self.renew_interval = fence_after, permit_hold, renew_interval
        self.last_renewal_started = last_renewal_started
        self.caches = caches
        self.monotonic, self.now = monotonic, now
        self.write_timeout = write_timeout
        self.quorum = quorum
        #: asks the agent to renew its control-plane Lease at once, without waiting for its retry backoff
        self.renew_now = renew_now
        self.last_quorum: Quorum | None = None
        self.peer_renewals = 0
        self.permit: dict[str, Any] | None = None
        self.purged = False
        self.fenced = False
        self.announced = False
        self.renewals = 0
        self.purges = 0
        self.kinds: set[tuple[str, str]] = set()
        self.step: PermitStep | None = None
        self.reason = ""
        self._logged_route = ""  # "peers" while renewing through the peers' quorum, as last logged
        #: how the permit was kept at the last step (None before the first): its changes are the member's Events
        self.route: PermitRoute | None = None
        #: when the last successful permit write finished (``monotonic``; None before the first)
        self.last_write: float | None = None
        self.metrics = metrics
        self.recorder = recorder
        if metrics is not None:
            metrics.watch_permit_age(lambda: None if self.last_write is None else self.monotonic() - self.last_write)

    # ------------------------------------------------------------------ one pass
    async def step_once(self) -> PermitStep:
        """Decide and act once; the step taken."""
        if not self.announced:
            with contextlib.suppress(ApiException, OSError):
                await self.cp.patch(CLUSTERS, self.cluster, announcement_patch(self.fence_after, self.permit_hold))
                self.announced = True
        cached = self.caches()
        if cached is not None:
            cluster, works = cached
            if cluster is not None:
                self.fenced = is_fenced(cluster)
            self.kinds |= guarded_kinds(works)
        decision = self._decide()
        if decision.step is PermitStep.PURGE:
            if await self.purge():
                decision = self._decide()
        self._note(decision.step, decision.reason)
        if decision.step is PermitStep.RENEW:
            await self.renew(self._deadline())
        elif decision.step is PermitStep.WITHHOLD:
            self.purged = False
            # neither the agent's own hold nor the peers' quorum keeps the permit: the quickest way back is the
            # agent's own Lease renewal. When the peers' quorum dissolves because the other agents reach the
            # control plane again, this agent's renewal may be waiting for its retry backoff; retrying now gets
            # the permit renewed before the guard's fence-after runs out, instead of stopping the jobs needlessly
            self.renew_now()
        self._tell(permit_route(decision.step, through_peers=self.last_quorum is not None), decision.reason)
        return decision.step

    def _decide(self) -> PermitDecision:
        started = self.last_renewal_started()
        now = self.monotonic()
        own = started is not None and now - started < self.permit_hold
        # the peers matter only once a hold of the control plane has lapsed (never before the first one)
        self.last_quorum = None if own or started is None else self.quorum()
        if self.last_quorum is not None and self.metrics is not None:
            self.metrics.quorum_evaluated(self.last_quorum)
        in_force = self.last_write is not None and now - self.last_write < self.fence_after
        return permit_decision(now=now, last_renewal_started=started, hold=self.permit_hold, fenced=self.fenced,
                               purged=self.purged, quorum=self.last_quorum, in_force=in_force)

    def _deadline(self) -> float:
        """When a permit write must have finished (monotonic): the end of the hold, or of the peers' quorum."""
        started = self.last_renewal_started()
        own = started + self.permit_hold if started is not None else self.monotonic() + self.write_timeout
        if self.last_quorum is not None and self.last_quorum.held:
            return max(own, self.last_quorum.until)
        return own

    def _note(self, step: PermitStep, reason: str) -> None:
        """Log the step when it changes, and when a renewal switches between the control plane and the peers."""
        route = "peers" if step is PermitStep.RENEW and self.last_quorum is not None else ""
        if step is not self.step or route != self._logged_route:
            warn = (step is PermitStep.WITHHOLD and self.step is PermitStep.RENEW) or route == "peers"
            log.log(logging.WARNING if warn else logging.INFO, "run permit of cluster %s: %s%s (%s)", self.cluster,
                    step.value.lower(), " through the peers" if route else "", reason)
        self.step, self.reason, self._logged_route = step, reason, route

    def _tell(self, route: PermitRoute, reason: str) -> None:
        """The route of this step on the metrics, and an Event on the permit when it changed (after the step's
        write, so that the permit's namespace exists)."""
        if self.metrics is not None:
            self.metrics.set_permit_withheld(route is PermitRoute.WITHHELD)
        event = permit_event(self.route, route, reason)
        if self.route is not None or route is not PermitRoute.WITHHELD:  # not renewed yet: nothing withdrawn
            self.route = route
        if event is not None and self.recorder is not None:
            self.recorder.event(self._permit_ref(), event.type, event.reason, event.message)

    def _permit_ref(self) -> dict[str, Any]:
        """The permit Lease as the Events' involved object (the stored one when the agent has it)."""
        if self.permit is not None:
            return self.permit
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": PERMIT_NAME, "namespace": PERMIT_NAMESPACE}}

    async def purge(self) -> bool:
        """Delete the stale guarded copies (from a fresh Cluster and a fresh, complete Work list); whether it ran.
        Not run (False) when the Cluster is fenced or either read fails."""
        try:
            cluster = await self.cp.get(CLUSTERS, self.cluster)
            self.fenced = is_fenced(cluster)
            if self.fenced:
                return False
            namespace = generate_execution_space_name(self.cluster)
            first = recovery_works(await self.cp.list(WORKS, namespace))
            cached = self.caches()
            behind = cache_behind(cached[1], first) if cached is not None and first is not None else []
            if behind:
                log.info("run permit of cluster %s: the agent's cache still has Works the control plane no longer "
                         "has (%s); purging once it has caught up", self.cluster, ", ".join(behind))
                return False
            permit = await self._read_permit()
            kinds = self.kinds | guarded_kinds(first or []) | parse_guarded_kinds(permit)
            # the member's objects first, then the Works they are judged against: an object the execution
            # controller creates meanwhile is not listed, and one listed has its Work in the later list
            objects: list[dict[str, Any]] = []
            resources = {}
            for api_version, kind in sorted(kinds):
                try:
                    res = await self.member.resource_for(api_version, kind)
                except ApiException as e:
                    if is_not_found(e):
                        continue
                    raise
                resources[(api_version, kind)] = res
                found = await self.member.list(res, None, label_selector=GUARDED_SELECTOR)
                objects += [{**o, "apiVersion": api_version, "kind": kind} for o in found.get("items") or []
                            if isinstance(o, dict)]
            works = recovery_works(await self.cp.list(WORKS, namespace)) if first is not None else None
            if works is None:
                log.warning("run permit of cluster %s: no complete list of the Works of %s; not purging",
                            self.cluster, namespace)
                return False
            for obj in stale_guarded_objects(objects, works):
                res = resources[(str(obj["apiVersion"]), str(obj["kind"]))]
                meta = obj.get("metadata") or {}
                try:
                    await self.member.delete(res, str(meta.get("name")),
                                             (meta.get("namespace") or None) if res.namespaced else None,
                                             propagation_policy="Background")
                except ApiException as e:
                    if not is_not_found(e):
                        raise
                log.info("run permit of cluster %s: deleted stale guarded %s %s/%s before renewing the permit",
                         self.cluster, obj.get("kind"), meta.get("namespace"), meta.get("name"))
            self.kinds = kinds
        except (ApiException, OSError) as e:
            log.warning("run permit of cluster %s: purge before renewing failed: %s", self.cluster, e)
            return False
        self.purged = True
        self.purges += 1
        return True

    async def _read_permit(self) -> dict[str, Any] | None:
        self.permit = await self.member.get_or_none(LEASES, PERMIT_NAME, PERMIT_NAMESPACE)
        return self.permit

    async def renew(self, deadline: float | None = None) -> None:
        """Create or renew the permit, giving up on a write that cannot finish before ``deadline`` (monotonic;
        default: the end of the hold)."""
        if deadline is None:
            started = self.last_renewal_started()
            deadline = (self.monotonic() + self.write_timeout if started is None
                        else started + self.permit_hold)
        left = deadline - self.monotonic()
        try:
            await asyncio.wait_for(self._write(), max(0.0, min(self.write_timeout, left)))
        except (TimeoutError, ApiException, OSError) as e:
            self.permit = None
            log.warning("run permit of cluster %s: cannot renew: %s", self.cluster, e or "timed out")
            return
        self.renewals += 1
        self.last_write = self.monotonic()
        if self.last_quorum is not None:
            self.peer_renewals += 1
        if self.metrics is not None:
            self.metrics.permit_renewed(PermitRoute.PEERS if self.last_quorum is not None
                                        else PermitRoute.CONTROL_PLANE)

    async def _write(self) -> None:
        for _ in range(3):
            if self.permit is None:
                self.permit = await self._read_permit()
            if self.permit is None:
                await self._ensure_namespace()
                body = permit_body(self.cluster, self.fence_after, self.now(), self.kinds)
                try:
                    self.permit = await self.member.create(LEASES, body, PERMIT_NAMESPACE)
                    return
                except ApiException as e:
                    if not is_already_exists(e):
                        raise
                    continue
            try:
                self.permit = await self.member.update(
                    LEASES, renewed_permit(self.permit, self.cluster, self.fence_after, self.now(), self.kinds))
                return
            except ApiException as e:
                self.permit = None
                if not (is_conflict(e) or is_not_found(e)):
                    raise
        raise ApiException(409, "Conflict", f"lease {PERMIT_NAMESPACE}/{PERMIT_NAME} kept changing; will retry")

    async def _ensure_namespace(self) -> None:
        if await self.member.get_or_none(NAMESPACES, PERMIT_NAMESPACE) is not None:
            return
        try:
            await self.member.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": PERMIT_NAMESPACE}})
        except ApiException as e:
            if not is_already_exists(e):
                raise

    # ------------------------------------------------------------------ the loop
    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.step_once()
            except Exception:  # noqa: BLE001 - the permit loop must go on (a failed step withholds by itself)
                log.exception("run permit of cluster %s: unexpected error", self.cluster)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.renew_interval)
