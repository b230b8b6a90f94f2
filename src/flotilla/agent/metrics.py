"""The agent's metrics (``flotilla agent --metrics-bind-address``; docs/fencing.md "Watching it").

:class:`AgentMetrics` declares them on a :class:`~flotilla.observability.metrics.MetricsRegistry` (with the
``process_*`` metrics, as the agent serves it) and offers the recording calls the agent makes; the gauges that mirror
live state (the permit's age) are refreshed by a collector at every scrape. Every counter's known label values are
created at 0, so a rate over them exists from the start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from flotilla.failover.peer_quorum import Quorum
from flotilla.failover.run_permit import PermitRoute
from flotilla.observability.metrics import EventMetrics, MetricsRegistry

__all__ = ["AgentMetrics", "RESULT_FAILURE", "RESULT_SUCCESS", "ROUTES"]

RESULT_SUCCESS: Final = "success"
RESULT_FAILURE: Final = "failure"
#: the routes a permit renewal takes (``flotilla_agent_run_permit_renewals_total{route}``)
ROUTES: Final = (PermitRoute.CONTROL_PLANE.value, PermitRoute.PEERS.value)


class AgentMetrics:
    """What an agent records into: the registry and the metrics declared on it."""

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else MetricsRegistry()
        self.lease_renewals = r.counter(
            "flotilla_agent_lease_renewals_total",
            "Attempts to renew this cluster's Lease karmada-cluster/<cluster> in the control plane, by result "
            "(success, failure: refused, unreachable or timed out)", ["result"])
        self.control_plane_reachable = r.gauge(
            "flotilla_agent_control_plane_reachable",
            "1 when the agent's last contact with the control plane (a Lease renewal, or a check a peer asked for) "
            "succeeded, else 0: what this agent tells its peers")
        self.permit_renewals = r.counter(
            "flotilla_agent_run_permit_renewals_total",
            "Successful writes of the run permit flotilla-system/flotilla-run-permit in the member, by route "
            "(control-plane: the agent holds the control plane; peers: kept by a strict majority of clusters "
            "reporting the control plane unreachable)", ["route"])
        self.permit_withheld = r.gauge(
            "flotilla_agent_run_permit_withheld",
            "1 while the agent does not renew the run permit (no hold of the control plane and no peer quorum, a "
            "fenced cluster, or the purge of stale guarded copies not done yet), else 0")
        self.permit_age = r.gauge(
            "flotilla_agent_run_permit_age_seconds",
            "Seconds since the agent's last successful write of the run permit, on its monotonic clock (-1 before "
            "the first); the guard stops guarded workloads once the permit has not changed for fence-after")
        self.peer_votes = r.gauge(
            "flotilla_agent_peer_votes",
            "Clusters voting for this agent's permit at its latest peer quorum evaluation (this one and the peers "
            "reporting the control plane unreachable; evaluated while its own hold of the control plane has lapsed)")
        self.peer_total = r.gauge(
            "flotilla_agent_peer_total",
            "Clusters counted at the latest peer quorum evaluation: the votes must be a strict majority of it")
        self.peer_requests = r.counter(
            "flotilla_agent_peer_requests_total",
            "Report requests this agent sent to its peers, by peer cluster and result (success, failure: no "
            "usable answer within the timeout)", ["peer", "result"])
        self.fence_acknowledgements = r.gauge(
            "flotilla_agent_fence_acknowledgements",
            "Pending fences of other clusters this agent acknowledges on its Lease (as of its last successful "
            "renewal)")
        self.events = EventMetrics(r)
        for result in (RESULT_SUCCESS, RESULT_FAILURE):
            self.lease_renewals.labels(result)
        for route in ROUTES:
            self.permit_renewals.labels(route)
        self.control_plane_reachable.set(0)
        self.permit_withheld.set(0)
        self.permit_age.set(-1)
        self._permit_age: Callable[[], float | None] | None = None
        self.registry.add_collector(self._collect)
        r.add_process_metrics()

    # ------------------------------------------------------------------ the recording calls
    def lease_renewed(self, ok: bool) -> None:
        self.lease_renewals.labels(RESULT_SUCCESS if ok else RESULT_FAILURE).inc()

    def set_control_plane_reachable(self, reachable: bool) -> None:
        self.control_plane_reachable.set(1 if reachable else 0)

    def permit_renewed(self, route: PermitRoute) -> None:
        self.permit_renewals.labels(route.value).inc()

    def set_permit_withheld(self, withheld: bool) -> None:
        self.permit_withheld.set(1 if withheld else 0)

    def watch_permit_age(self, age: Callable[[], float | None]) -> None:
        """Refresh the permit's age from ``age()`` (seconds, None before the first write) at every scrape."""
        self._permit_age = age

    def quorum_evaluated(self, quorum: Quorum) -> None:
        self.peer_votes.set(quorum.votes)
        self.peer_total.set(quorum.total)

    def peer_asked(self, peer: str, ok: bool) -> None:
        self.peer_requests.labels(peer, RESULT_SUCCESS if ok else RESULT_FAILURE).inc()

    def set_fence_acknowledgements(self, n: int) -> None:
        self.fence_acknowledgements.set(n)

    def render(self) -> str:
        return self.registry.render()

    def _collect(self) -> None:
        age = self._permit_age() if self._permit_age is not None else None
        self.permit_age.set(-1 if age is None else max(0.0, age))
