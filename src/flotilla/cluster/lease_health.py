"""Health of Pull clusters from their Lease, as pure functions (the cluster controller's
health monitor).

A Pull cluster's status is written by its agent, inside the member; the control plane never calls the member.
What the control plane sees of the agent is its writes: the Ready condition it posts, and the Lease
``karmada-cluster/<cluster>`` it renews every ``--cluster-lease-duration`` x
``--cluster-lease-renew-interval-fraction``. The monitor remembers, per Pull cluster, a *probe time*: the local
time of the last sign of life, refreshed when

* the Ready condition differs from the one seen last (the agent posted something new), or
* the Lease's ``spec.renewTime`` is later than the one seen last (the first Lease seen counts as a renewal).

Once ``now > probe + grace`` it writes Ready ``Unknown``:

* reason ``ClusterStatusUnknown`` ("Cluster status controller stopped posting cluster status.") over a Ready
  condition that is not ``Unknown`` already;
* reason ``ClusterStatusNeverUpdated`` ("Cluster status controller never posted cluster status.") when the
  Cluster has no Ready condition at all.

``grace`` is ``--cluster-monitor-grace-period`` (40 s), or ``--cluster-startup-grace-period`` (60 s) while the
Cluster has no Ready condition (the agent never posted its status; before any sign of life the probe time is the
Cluster's ``creationTimestamp``).

The monitor never writes ``True`` (or ``False``): a renewal after ``Unknown`` only refreshes the probe time, and
Ready becomes True again when the agent posts it. The probe time is local (when the monitor *saw* the renewal),
never the agent's clock, so skew between the member and the control plane does not matter.

The memory also keeps, for the automatic fence (:mod:`flotilla.failover.auto_fence`), the *monotonic* time at
which the monitor last saw the Lease change (``renewed_at``, when the caller passes ``monotonic``): any
``renewTime`` different from the one seen last counts there, later or not, so an agent whose clock stepped
back still counts as renewing. It is the controller-manager's own clock only, never compared with the agent's.

``--cluster-failure-threshold`` does not apply here: it damps the results of a status controller's probes, and
for a Pull cluster that controller runs in the agent (which applies its own threshold to what it sees of its
member). The grace period is the monitor's own damping. A Pull cluster whose agent stopped therefore turns
``Unknown`` at most ``grace + --cluster-monitor-period`` after the agent's last renewal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from flotilla.cluster.health import CONDITION_READY, new_condition, ready_condition
from flotilla.kube.times import format_time, parse_time

__all__ = [
    "MESSAGE_CLUSTER_STATUS_NEVER_UPDATED",
    "MESSAGE_CLUSTER_STATUS_UNKNOWN",
    "REASON_CLUSTER_STATUS_NEVER_UPDATED",
    "REASON_CLUSTER_STATUS_UNKNOWN",
    "UNKNOWN",
    "LeaseMemory",
    "LeaseVerdict",
    "MonitorGrace",
    "is_pull_cluster",
    "judge_pull_cluster",
    "lease_renew_time",
]

UNKNOWN = "Unknown"
REASON_CLUSTER_STATUS_UNKNOWN = "ClusterStatusUnknown"
MESSAGE_CLUSTER_STATUS_UNKNOWN = "Cluster status controller stopped posting cluster status."
REASON_CLUSTER_STATUS_NEVER_UPDATED = "ClusterStatusNeverUpdated"
MESSAGE_CLUSTER_STATUS_NEVER_UPDATED = "Cluster status controller never posted cluster status."


@dataclass(frozen=True)
class MonitorGrace:
    """The two grace periods, in seconds: ``grace_period`` once the Cluster has a Ready condition,
    ``startup_grace_period`` while it has none."""

    grace_period: float = 40.0
    startup_grace_period: float = 60.0


@dataclass(frozen=True)
class LeaseMemory:
    """What the monitor remembers of one Pull cluster: the probe time (local clock), the Ready condition seen
    then (None: none) and the latest Lease ``renewTime`` seen (None: no Lease seen yet).

    ``renewed_at``: the monotonic time (the caller's ``monotonic``) at which the Lease was last seen to change
    (None: not seen yet), and ``renew_seen`` the ``renewTime`` as it was then (its text)."""

    probe: datetime
    ready: Mapping[str, Any] | None = None
    renew_time: datetime | None = None
    renewed_at: float | None = None
    renew_seen: str | None = None


@dataclass(frozen=True)
class LeaseVerdict:
    """The memory to keep and the Ready condition to write (None: write nothing)."""

    memory: LeaseMemory
    ready: dict[str, Any] | None = None

    def written(self) -> LeaseMemory:
        """The memory once :attr:`ready` has been written: that condition is the one seen, so the monitor's own
        write does not count as a sign of life."""
        return replace(self.memory, ready=self.ready) if self.ready is not None else self.memory


def is_pull_cluster(cluster: Mapping[str, Any] | None) -> bool:
    spec = (cluster or {}).get("spec")
    return isinstance(spec, Mapping) and spec.get("syncMode") == "Pull"


def lease_renew_time(lease: Mapping[str, Any] | None) -> datetime | None:
    """The Lease's ``spec.renewTime`` (RFC 3339, micro or whole seconds), or None when absent or unreadable."""
    spec = (lease or {}).get("spec")
    return parse_time(spec.get("renewTime")) if isinstance(spec, Mapping) else None


def _first_probe(cluster: Mapping[str, Any], current: Mapping[str, Any] | None, now: datetime) -> datetime:
    """Where the probe time starts when nothing is remembered: the Cluster's creation while it never posted a
    Ready condition (so a Cluster that never came up is not given a fresh startup grace at every restart of the
    controller-manager), else now."""
    if current is None:
        md = cluster.get("metadata")
        created = parse_time(md.get("creationTimestamp")) if isinstance(md, Mapping) else None
        if created is not None and created <= now:
            return created
    return now


def _renew_text(lease: Mapping[str, Any] | None) -> str | None:
    spec = (lease or {}).get("spec")
    value = spec.get("renewTime") if isinstance(spec, Mapping) else None
    return str(value) if value else None


def judge_pull_cluster(cluster: Mapping[str, Any], lease: Mapping[str, Any] | None, memory: LeaseMemory | None,
                       now: datetime, grace: MonitorGrace, monotonic: float | None = None) -> LeaseVerdict:
    """Decide for one Pull cluster (see the module docstring): refresh the probe time from its Ready condition
    and Lease, then say whether Ready must be written ``Unknown``.

    ``cluster`` and ``lease`` as read now (``lease`` None when there is none), ``memory`` what the previous call
    returned for this cluster (None on the first), ``now`` the local time, ``monotonic`` the local monotonic
    clock (when given, ``renewed_at`` follows every change of the Lease's ``renewTime``).
    """
    current = ready_condition(cluster, CONDITION_READY)
    if memory is None:
        memory = LeaseMemory(probe=_first_probe(cluster, current, now), ready=current)
    elif memory.ready != current:
        memory = replace(memory, probe=now, ready=current)
    renewed = lease_renew_time(lease)
    if renewed is not None and (memory.renew_time is None or renewed > memory.renew_time):
        memory = replace(memory, probe=now, renew_time=renewed)
    seen = _renew_text(lease)
    if monotonic is not None and seen is not None and (memory.renewed_at is None or seen != memory.renew_seen):
        memory = replace(memory, renewed_at=monotonic, renew_seen=seen)

    period = grace.startup_grace_period if current is None else grace.grace_period
    if not now > memory.probe + timedelta(seconds=period):
        return LeaseVerdict(memory)
    if current is None:
        ready = new_condition(CONDITION_READY, UNKNOWN, REASON_CLUSTER_STATUS_NEVER_UPDATED,
                              MESSAGE_CLUSTER_STATUS_NEVER_UPDATED)
    elif current.get("status") != UNKNOWN:
        ready = new_condition(CONDITION_READY, UNKNOWN, REASON_CLUSTER_STATUS_UNKNOWN,
                              MESSAGE_CLUSTER_STATUS_UNKNOWN)
        if "observedGeneration" in current:
            ready["observedGeneration"] = current["observedGeneration"]
    else:
        return LeaseVerdict(memory)
    ready["lastTransitionTime"] = format_time(now)
    return LeaseVerdict(memory, ready)
