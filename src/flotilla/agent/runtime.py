"""The agent at run time: register the Cluster, renew the Lease, run the scoped controllers, stop on request.

:class:`Agent` takes two clients: the control plane's (from ``--karmada-kubeconfig``; a kubeconfig listing several
servers of an HA control plane gives a client that fails over between them) and the member's (``--kubeconfig``).
Every control-plane call that fails (unreachable, refused, 403) is retried with an exponential backoff, never in
a busy loop; the controllers' informers back off and re-list on 410 Gone by themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from flotilla.agent.lease import LEASE_NAMESPACE, lease_body, renew_interval, renewed_lease
from flotilla.agent.metrics import AgentMetrics
from flotilla.agent.peers import FleetView, PeerPoller, PeerServer, split_host_port
from flotilla.agent.permit import PermitKeeper
from flotilla.agent.registration import RegistrationError, adoption_patch, cluster_body
from flotilla.api.resources import CLUSTERS, WORKS
from flotilla.client import ApiException, Client, is_already_exists, is_conflict, is_not_found
from flotilla.client.events import EventRecorder
from flotilla.cluster.scope import cluster_field_selector, execution_namespace
from flotilla.failover import peer_quorum
from flotilla.failover.run_permit import MEMBER_EVENT_REASONS
from flotilla.kube.resources import LEASES
from flotilla.observability.metrics import MetricsServer
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.members import AgentMemberClients
from flotilla.runtime.options import ControllerOptions

log = logging.getLogger(__name__)

__all__ = ["AGENT_CONTROLLERS", "Agent", "AgentConfig", "Backoff"]

#: the controllers the agent runs, scoped to its cluster (the controller-manager skips Pull clusters in them)
AGENT_CONTROLLERS: Final = ("cluster-status", "execution", "work-status")


@dataclass
class AgentConfig:
    """The agent's settings (the flags of ``flotilla agent``, Karmada's names and defaults)."""

    cluster_name: str
    cluster_namespace: str = LEASE_NAMESPACE
    cluster_api_endpoint: str | None = None
    cluster_lease_duration: float = 40.0
    cluster_lease_renew_interval_fraction: float = 0.25
    cluster_status_update_frequency: float = 10.0
    cluster_api_timeout: float = 10.0
    #: how long the member must answer its health checks before Ready turns True again (Karmada: 30s)
    cluster_success_threshold: float = 30.0
    #: how long the member's health checks must fail before Ready turns False (Karmada: 30s)
    cluster_failure_threshold: float = 30.0
    #: how long the controllers' start waits for the control plane's caches (then they start anyway)
    sync_timeout: float = 60.0
    #: keep the run permit in the member (docs/fencing.md): --guard, --fence-after, --permit-hold,
    #: --permit-renew-interval
    guard: bool = False
    fence_after: float = 15.0
    permit_hold: float = 15.0
    permit_renew_interval: float = 1.0
    #: the peer protocol (docs/fencing.md): --peer-listen HOST:PORT (empty: off), --peer-advertise HOST:PORT
    #: (what peers are told; default the listen address), --peer-report-ttl, --peer-poll-interval
    peer_listen: str = ""
    peer_advertise: str = ""
    peer_report_ttl: float = peer_quorum.DEFAULT_PEER_REPORT_TTL
    peer_poll_interval: float = 0.5
    #: --lease-only: beside a Push cluster (joined with `flotilla join`, its Works applied by the control plane),
    #: only renew the Lease, keep the permit (--guard) and speak the peer protocol; no controllers
    lease_only: bool = False
    #: --metrics-bind-address: serve /metrics here (None: no metrics endpoint); an address that cannot be bound is
    #: reported and the agent runs on without it
    metrics_address: tuple[str, int] | None = None

    def validate(self) -> list[str]:
        """What is wrong with the settings (empty: usable)."""
        errs: list[str] = []
        if not self.cluster_name:
            errs.append("--cluster-name is required: the name of this member's Cluster on the control plane")
        elif not _dns_label(self.cluster_name):
            errs.append(f"--cluster-name {self.cluster_name!r}: must be a DNS label (lowercase letters, digits "
                        "and '-', at most 48 characters: karmada-es-<name> must be a namespace name)")
        if not self.cluster_lease_duration > 0:
            errs.append("--cluster-lease-duration must be greater than 0")
        if not 0 < self.cluster_lease_renew_interval_fraction < 1:
            errs.append("--cluster-lease-renew-interval-fraction must be between 0 and 1 (exclusive)")
        if not self.cluster_status_update_frequency > 0:
            errs.append("--cluster-status-update-frequency must be greater than 0")
        for flag, value in (("--cluster-success-threshold", self.cluster_success_threshold),
                            ("--cluster-failure-threshold", self.cluster_failure_threshold)):
            if not value >= 0:
                errs.append(f"{flag} must be 0 or more")
        for flag, value in (("--fence-after", self.fence_after), ("--permit-hold", self.permit_hold),
                            ("--permit-renew-interval", self.permit_renew_interval)):
            if not value > 0:
                errs.append(f"{flag} must be greater than 0")
        for flag, address in (("--peer-listen", self.peer_listen), ("--peer-advertise", self.peer_advertise)):
            if address:
                try:
                    split_host_port(address)
                except ValueError as e:
                    errs.append(f"{flag}: {e} (for example 127.0.0.1:7480)")
        if self.lease_only and not (self.guard or self.peer_listen):
            errs.append("--lease-only needs --guard or --peer-listen: a Push cluster's agent only keeps the run "
                        "permit and answers peers")
        if self.peer_advertise and not self.peer_listen:
            errs.append("--peer-advertise needs --peer-listen: the address peers are told must lead to a listener")
        if self.peer_advertise and self.peer_advertise.endswith(":0"):
            errs.append("--peer-advertise must name a real port, not 0")
        for flag, value in (("--peer-report-ttl", self.peer_report_ttl),
                            ("--peer-poll-interval", self.peer_poll_interval)):
            if not value > 0:
                errs.append(f"{flag} must be greater than 0")
        if 0 < self.peer_report_ttl <= self.peer_poll_interval:
            errs.append(f"--peer-poll-interval ({self.peer_poll_interval:g}s) must be shorter than "
                        f"--peer-report-ttl ({self.peer_report_ttl:g}s), or reports expire between two polls")
        if self.guard and self.permit_renew_interval > 0 and self.permit_renew_interval >= self.fence_after:
            errs.append(f"--permit-renew-interval ({self.permit_renew_interval:g}s) must be shorter than "
                        f"--fence-after ({self.fence_after:g}s), or the guard stops workloads between renewals")
        if self.guard and self.permit_hold > 0 and self.permit_hold <= renew_interval(
                self.cluster_lease_duration, self.cluster_lease_renew_interval_fraction):
            errs.append(f"--permit-hold ({self.permit_hold:g}s) must be longer than the Lease renew interval "
                        "(--cluster-lease-duration x --cluster-lease-renew-interval-fraction), or the permit "
                        "lapses between two renewals")
        return errs

    def controller_options(self) -> ControllerOptions:
        """The options of the agent's controllers: scoped to its cluster, with its timings."""
        return ControllerOptions(agent_cluster=self.cluster_name,
                                 cluster_status_update_frequency=self.cluster_status_update_frequency,
                                 cluster_api_timeout=self.cluster_api_timeout,
                                 cluster_success_threshold=self.cluster_success_threshold,
                                 cluster_failure_threshold=self.cluster_failure_threshold)


def _dns_label(name: str) -> bool:
    import re

    return len(name) <= 48 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) is not None


@dataclass
class Backoff:
    """Exponential backoff with jitter between ``first`` and ``cap`` seconds (reset after a success)."""

    first: float = 0.5
    cap: float = 30.0
    failures: int = 0

    def next(self) -> float:
        delay = min(self.cap, self.first * (2 ** min(self.failures, 30)))
        self.failures += 1
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.failures = 0


def utcnow() -> datetime:
    return datetime.now(UTC)


class Agent:
    """One Pull member's agent. ``await agent.run(stop)`` returns the exit code once ``stop`` is set (0), or at
    once when the Cluster cannot be this agent's (1: a Push cluster of that name)."""

    def __init__(self, control_plane: Client, member: Client, config: AgentConfig, *,
                 backoff: tuple[float, float] = (0.5, 30.0), now: Callable[[], datetime] = utcnow,
                 monotonic: Callable[[], float] = time.monotonic, metrics: AgentMetrics | None = None) -> None:
        self.cp = control_plane
        self.member = member
        self.config = config
        self.backoff = backoff
        self.now = now
        self.monotonic = monotonic
        self.manager: ControllerManager | None = None
        self.lease: dict[str, Any] | None = None
        self.renewals = 0
        #: when the last successful Lease renewal started (``monotonic``; None before the first): the run permit
        #: is renewed only while this is less than --permit-hold ago
        self.last_renewal_started: float | None = None
        self.permit: PermitKeeper | None = None
        #: the peer protocol (None without --peer-listen): the fleet as last seen, the report server, the poller
        self.fleet: FleetView | None = None
        self.peer_server: PeerServer | None = None
        self.poller: PeerPoller | None = None
        #: what the agent records into (served on --metrics-bind-address), the server, and the Events it records
        #: in its member (on the run permit)
        self.metrics = metrics if metrics is not None else AgentMetrics()
        self.metrics_server: MetricsServer | None = None
        self.recorder: EventRecorder | None = None
        #: the outcome of the last contact with the control plane (Lease renewal or probe), as peers are told
        self._cp_reachable = False
        self._renew_now = asyncio.Event()
        self._probe_now = asyncio.Event()
        #: --lease-only: the agent's own caches of its Cluster and Works (the controllers' otherwise)
        self._own: tuple[Any, Any] | None = None

    @property
    def cp_reachable(self) -> bool:
        return self._cp_reachable

    @cp_reachable.setter
    def cp_reachable(self, value: bool) -> None:
        self._cp_reachable = value
        self.metrics.set_control_plane_reachable(value)

    # ------------------------------------------------------------------ the Cluster
    async def register_once(self) -> dict[str, Any]:
        """Create the Cluster, or adopt it; RegistrationError when it must not be adopted, ApiException else."""
        name = self.config.cluster_name
        try:
            return await self.cp.create(CLUSTERS, cluster_body(name, self.config.cluster_api_endpoint))
        except ApiException as e:
            if not is_already_exists(e):
                raise
        existing = await self.cp.get(CLUSTERS, name)
        patch = adoption_patch(existing, self.config.cluster_api_endpoint)
        if patch is None:
            return existing
        return await self.cp.patch(CLUSTERS, name, patch)

    async def register(self, stop: asyncio.Event) -> dict[str, Any] | None:
        """Register until it succeeds (backing off while the control plane is unreachable or refuses), or None once
        ``stop`` is set. A Cluster that must not be adopted because of its mode raises RegistrationError."""
        backoff = Backoff(*self.backoff)
        while not stop.is_set():
            try:
                cluster = await self.register_once()
                log.info("cluster %s registered in Pull mode", self.config.cluster_name)
                return cluster
            except RegistrationError as e:
                if "being deleted" not in str(e):
                    raise
                log.warning("%s", e)
            except (ApiException, OSError) as e:
                log.warning("cannot register cluster %s yet: %s", self.config.cluster_name, e)
            if await _wait(stop, backoff.next()):
                return None
        return None

    # ------------------------------------------------------------------ the Lease
    async def renew_lease_once(self) -> dict[str, Any]:
        """Create or renew the Lease (an update conditional on the last resourceVersion; on 409 it is read again)."""
        name, namespace = self.config.cluster_name, self.config.cluster_namespace
        duration = self.config.cluster_lease_duration
        started = self.monotonic()
        # the pending fences this agent names in its reports from now on: the Lease acknowledges them
        acks = ({peer_quorum.ANNOTATION_ACKNOWLEDGED_FENCES: peer_quorum.acknowledgement_text(self.fleet.fences)}
                if self.fleet is not None else None)
        acked = len(peer_quorum.pending_fences(self.fleet.fences)) if self.fleet is not None else 0
        for _ in range(3):
            if self.lease is None:
                self.lease = await self.cp.get_or_none(LEASES, name, namespace)
            if self.lease is None:
                try:
                    self.lease = await self.cp.create(
                        LEASES, lease_body(name, duration, self.now(), namespace, acks), namespace)
                except ApiException as e:
                    if not is_already_exists(e):
                        raise
                    continue
            else:
                try:
                    self.lease = await self.cp.update(LEASES, renewed_lease(self.lease, name, duration, self.now(),
                                                                            acks))
                except ApiException as e:
                    self.lease = None
                    if not (is_conflict(e) or is_not_found(e)):
                        raise
                    continue
            self.renewals += 1
            self.last_renewal_started = started
            if acks is not None:
                self.metrics.set_fence_acknowledgements(acked)
            return self.lease
        raise ApiException(409, "Conflict", f"lease {namespace}/{name} kept changing; will retry")

    async def renew_lease(self, stop: asyncio.Event) -> None:
        """Renew every ``duration x fraction`` seconds until ``stop``; failures back off up to that period."""
        period = renew_interval(self.config.cluster_lease_duration, self.config.cluster_lease_renew_interval_fraction)
        backoff = Backoff(min(0.5, period), period)
        while not stop.is_set():
            self._renew_now.clear()
            try:
                await asyncio.wait_for(self.renew_lease_once(), self.config.cluster_api_timeout)
                if not self.cp_reachable:
                    self._post_status_now()
                self.cp_reachable = True
                self.metrics.lease_renewed(True)
                backoff.reset()
                delay = period
            except (ApiException, OSError, TimeoutError) as e:
                self.cp_reachable = False
                self.metrics.lease_renewed(False)
                log.warning("cannot renew lease %s/%s: %s", self.config.cluster_namespace,
                            self.config.cluster_name, e or "timed out")
                delay = backoff.next()
            if await _wait_any(stop, self._renew_now, delay):
                return

    def _post_status_now(self) -> None:
        """Back on the control plane after failures: the cluster-status controller posts the cluster's status at
        once rather than after its retry backoff, so a Ready condition turned Unknown meanwhile (and the not-ready
        taint that follows it) does not outlast the outage by that backoff."""
        if self.manager is None:
            return
        name = self.config.cluster_name
        for controller in self.manager.controllers:
            if controller.name == "cluster-status":
                controller.queue.forget(name)
                controller.enqueue(name)

    # ------------------------------------------------------------------ the peer protocol
    def own_hold_in_doubt(self) -> bool:
        """Whether the agent may soon need its peers: its last contact with the control plane failed, or its
        Lease renewal is overdue."""
        if not self.cp_reachable or self.last_renewal_started is None:
            return True
        period = renew_interval(self.config.cluster_lease_duration, self.config.cluster_lease_renew_interval_fraction)
        return self.monotonic() - self.last_renewal_started > period + 0.5

    def quorum(self) -> peer_quorum.Quorum | None:
        return self.poller.quorum() if self.poller is not None else None

    async def probe_loop(self, stop: asyncio.Event) -> None:
        """Check the control plane when a peer asks (at most once a second): reading the agent's own Lease."""
        name, namespace = self.config.cluster_name, self.config.cluster_namespace
        while not stop.is_set():
            if await _wait_any(stop, self._probe_now, 3600.0):
                return
            self._probe_now.clear()
            try:
                await asyncio.wait_for(self.cp.get_or_none(LEASES, name, namespace),
                                       min(self.config.cluster_api_timeout, self.config.peer_report_ttl))
                self.cp_reachable = True
            except (ApiException, OSError, TimeoutError):
                self.cp_reachable = False
            if await _wait(stop, 1.0):
                return

    async def announce_peers(self, stop: asyncio.Event, endpoint: str) -> None:
        backoff = Backoff(*self.backoff)
        patch = peer_quorum.peer_announcement_patch(endpoint, self.config.peer_report_ttl)
        while not stop.is_set():
            try:
                await self.cp.patch(CLUSTERS, self.config.cluster_name, patch)
                return
            except (ApiException, OSError) as e:
                log.warning("cannot announce the peer endpoint of cluster %s yet: %s", self.config.cluster_name, e)
            if await _wait(stop, backoff.next()):
                return

    async def start_peers(self, stop: asyncio.Event) -> list[asyncio.Future[None]]:
        cfg = self.config
        self.fleet = FleetView(self.cp, cfg.cluster_name, on_new_fence=self._renew_now.set)
        self.fleet.start()
        host, port = split_host_port(cfg.peer_listen)
        self.peer_server = await PeerServer(self.fleet, lambda: self.cp_reachable, self._probe_now.set,
                                            host=host, port=port).start()
        endpoint = cfg.peer_advertise or f"{host}:{self.peer_server.port}"
        log.info("agent of cluster %s: answering peers on %s:%d (announced as %s)", cfg.cluster_name, host,
                 self.peer_server.port, endpoint)
        self.poller = PeerPoller(self.fleet, interval=cfg.peer_poll_interval,
                                 timeout=min(cfg.peer_report_ttl, cfg.cluster_api_timeout), ttl=cfg.peer_report_ttl,
                                 wanted=self.own_hold_in_doubt, monotonic=self.monotonic,
                                 on_request=self.metrics.peer_asked)
        return [asyncio.ensure_future(self.poller.run(stop)), asyncio.ensure_future(self.probe_loop(stop)),
                asyncio.ensure_future(self.announce_peers(stop, endpoint))]

    async def stop_peers(self) -> None:
        if self.peer_server is not None:
            await self.peer_server.stop()
        if self.fleet is not None:
            await self.fleet.stop()

    # ------------------------------------------------------------------ the whole agent
    def options(self) -> ControllerOptions:
        return self.config.controller_options()

    async def wait_for_push_cluster(self, stop: asyncio.Event) -> dict[str, Any] | None:
        """--lease-only: the Push Cluster this agent stands beside (waits until it exists); RegistrationError
        when it is a Pull cluster (that one has an agent of its own)."""
        backoff = Backoff(*self.backoff)
        name = self.config.cluster_name
        while not stop.is_set():
            try:
                cluster = await self.cp.get_or_none(CLUSTERS, name)
                if cluster is not None:
                    if (cluster.get("spec") or {}).get("syncMode") == "Pull":
                        raise RegistrationError(f"cluster {name} is a Pull cluster: run its agent without "
                                                "--lease-only")
                    return cluster
                log.warning("cluster %s does not exist yet: join it (flotilla join) before its lease-only agent "
                            "can keep its Lease", name)
            except (ApiException, OSError) as e:
                log.warning("cannot read cluster %s yet: %s", name, e)
            if await _wait(stop, backoff.next()):
                return None
        return None

    async def run(self, stop: asyncio.Event) -> int:
        await self.start_metrics()
        if self.config.guard:
            self.recorder = EventRecorder(self.member, "flotilla-agent", self.config.cluster_name,
                                          request_timeout=self.config.cluster_api_timeout,
                                          priority_reasons=MEMBER_EVENT_REASONS, metrics=self.metrics.events)
        try:
            return await self._run(stop)
        finally:
            if self.recorder is not None:
                await self.recorder.close(grace=min(2.0, self.config.cluster_api_timeout))  # what is queued
            if self.metrics_server is not None:
                await self.metrics_server.stop()
                self.metrics_server = None

    async def start_metrics(self) -> None:
        """Serve the agent's metrics on --metrics-bind-address; an address that cannot be bound is reported and the
        agent runs on without metrics."""
        address = self.config.metrics_address
        if address is None:
            return
        server = MetricsServer(self.metrics.registry, *address)
        try:
            self.metrics_server = await server.start()
        except OSError as e:
            log.error("agent of cluster %s: cannot serve metrics on %s:%d (%s); running without metrics (choose "
                      "another --metrics-bind-address, or 0)", self.config.cluster_name, address[0], address[1],
                      e.strerror or e)
            return
        log.info("agent of cluster %s: serving metrics on %s/metrics", self.config.cluster_name, server.url)

    async def _run(self, stop: asyncio.Event) -> int:
        try:
            cluster = await (self.wait_for_push_cluster(stop) if self.config.lease_only else self.register(stop))
        except RegistrationError as e:
            log.error("%s", e)
            return 1
        if cluster is None:
            return 0
        if self.config.lease_only:
            return await self.run_lease_only(stop)
        name = self.config.cluster_name
        self.manager = ControllerManager(self.cp, self.options(), controllers=list(AGENT_CONTROLLERS),
                                         members=AgentMemberClients(self.cp, name, self.member),
                                         sync_timeout=self.config.sync_timeout, component="flotilla-agent")
        tasks = await self._start_keeping(stop)
        if tasks is None:
            return 1
        try:
            starting = asyncio.ensure_future(self.manager.start())
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait({starting, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
            else:
                log.info("agent of cluster %s: controllers %s running", name, ", ".join(AGENT_CONTROLLERS))
                await stopper
            stopper.cancel()
        finally:
            await self._stop_keeping(stop, tasks)
            await self.manager.stop()
        return 0

    async def run_lease_only(self, stop: asyncio.Event) -> int:
        """A Push cluster's agent: the Lease, the permit and the peers, with caches of its own Cluster and Works
        (the permit notices a fence and records the guarded kinds from them)."""
        from flotilla.client.informer import Informer

        name = self.config.cluster_name
        self._own = (Informer(self.cp, CLUSTERS, field_selector=cluster_field_selector(name), backoff=(0.2, 5.0)),
                     Informer(self.cp, WORKS, execution_namespace(name), backoff=(0.2, 5.0)))
        for informer in self._own:
            informer.start()
        try:
            tasks = await self._start_keeping(stop)
            if tasks is None:
                return 1
            log.info("agent of Push cluster %s: lease-only (Lease%s%s)", name,
                     ", run permit" if self.config.guard else "", ", peers" if self.config.peer_listen else "")
            try:
                await stop.wait()
            finally:
                await self._stop_keeping(stop, tasks)
        finally:
            for informer in self._own:
                await informer.stop()
        return 0

    async def _start_keeping(self, stop: asyncio.Event) -> list[asyncio.Future[None]] | None:
        """What every agent keeps up beside its controllers: the peer protocol (--peer-listen), the Lease and the
        run permit (--guard); their tasks, or None when the peer port cannot be listened on."""
        tasks: list[asyncio.Future[None]] = []
        if self.config.peer_listen:
            try:
                tasks += await self.start_peers(stop)
            except OSError as e:
                log.error("cannot listen for peers on %s: %s", self.config.peer_listen, e)
                await self.stop_peers()
                return None
        tasks.append(asyncio.ensure_future(self.renew_lease(stop)))
        if self.config.guard:
            self.permit = self.permit_keeper()
            tasks.append(asyncio.ensure_future(self.permit.run(stop)))
        return tasks

    async def _stop_keeping(self, stop: asyncio.Event, tasks: list[asyncio.Future[None]]) -> None:
        stop.set()
        for task in tasks:
            await task
        await self.stop_peers()

    # ------------------------------------------------------------------ the run permit
    def permit_keeper(self) -> PermitKeeper:
        cfg = self.config
        return PermitKeeper(self.cp, self.member, cfg.cluster_name, fence_after=cfg.fence_after,
                            permit_hold=cfg.permit_hold, renew_interval=cfg.permit_renew_interval,
                            last_renewal_started=lambda: self.last_renewal_started, caches=self._caches,
                            monotonic=self.monotonic, now=self.now, write_timeout=cfg.cluster_api_timeout,
                            quorum=self.quorum, metrics=self.metrics, recorder=self.recorder,
                            renew_now=self._renew_now.set)

    def _caches(self) -> tuple[Mapping[str, Any] | None, list[Mapping[str, Any]]] | None:
        """The controllers' cached Cluster and Works (None before they run)."""
        name = self.config.cluster_name
        if self._own is not None:
            clusters, works_informer = self._own
            if not (clusters.has_synced and works_informer.has_synced):
                return None
            return clusters.store.get(name), list(works_informer.store.list())
        ctx = self.manager.ctx if self.manager is not None else None
        if ctx is None:
            return None
        clusters = ctx.informers.informer(CLUSTERS, field_selector=cluster_field_selector(name))
        works = ctx.informers.informer(WORKS, execution_namespace(name))
        return clusters.store.get(name), list(works.store.list())


async def _wait_any(stop: asyncio.Event, wake: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``, until ``wake`` is set, or until ``stop``; whether it was stopped."""
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
    return stop.is_set()


async def _wait(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` or until ``stop``; whether it was stopped."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()
