"""The control plane's automatic fence of a guarded Pull cluster, pure.

A Pull cluster's agent started with ``--guard`` keeps a run permit in its member and stops renewing it once it
has not renewed its Lease ``karmada-cluster/<cluster>`` in the control plane for ``permit-hold``; a guard beside
the workloads stops the guarded ones once the permit has not changed for ``fence-after``. The agent announces
both on its Cluster (annotations :data:`ANNOTATION_PERMIT_HOLD` and :data:`ANNOTATION_FENCE_AFTER`, Go
durations). The control plane can then know, without reaching the member, that the guarded workloads of a
cluster it has not heard from for long enough are stopped, and fence it (the out-of-service taint of
:mod:`flotilla.failover.fencing`).

:func:`decide_auto_fence` says, for one Cluster:

* **never** - the cluster is not Pull, announces no guard, announces a malformed one (the reason says what is
  wrong), or is being deleted;
* **nothing** - it is fenced already (by this rule or by a person): it is never fenced twice;
* **not yet** - no Lease change seen yet, or the last one was seen less than the bound ago (``recheck_after``
  says when to look again);
* **held** - past the bound, but the control plane does not see a strict majority of all clusters live: the
  control plane may be the one cut off, and a fence then would move every workload for nothing;
* **fence** - past the bound with a majority: the condition and the Event to write.

A cluster whose agent speaks the peer protocol (it announces a peer endpoint and a report ttl,
:mod:`flotilla.failover.peer_quorum`) may keep its permit through its peers, so it is fenced in two steps:

* **pend** - no Lease change seen for its ``permit-hold``, with a majority: mark the fence pending (the annotation
  ``guard.flotilla.io/fence-pending``, the ``Fenced`` condition False with reason ``FencePending``, an Event);
* **not yet** - pending, until enough of the other agents acknowledged it and then ``ttl + fence-after + margin``
  has passed since the control plane saw the last acknowledgement it needed, and the bound has passed too;
* **cancel** - pending, but its Lease changed since the mark was written (the token names the renewal the mark
  was based on): the mark goes and the cluster is judged afresh;
* **fence** - as above, the pending mark removed with the taint's write.

The bound is ``permit-hold + fence-after + margin`` (``--fence-margin``). Every time is the controller-manager's
monotonic clock: ``renewed_at`` is when *it* saw the Lease change (:class:`flotilla.cluster.lease_health.LeaseMemory`),
never the agent's ``renewTime``.

A cluster is **live** when it is Push and its Ready condition is True, or Pull and its Lease was seen to change
less than ``window`` ago, ``window`` being the smaller of ``--cluster-monitor-grace-period`` and the candidate's
bound, **and later than the candidate's last change plus its permit-hold**. The candidate never counts as live.
The second condition is what makes a control plane cut off from every member fence nobody: the Leases then stop
at the same instant X but were last renewed at different phases of their renew intervals, so the candidate (the
one whose bound runs out first) saw its last change at ``t >= X - renew interval > X - permit-hold`` (an agent
refuses a permit-hold not longer than its renew interval), and every other Lease's last change, at or before X,
is before ``t + permit-hold``. When only the candidate is cut off, the others keep renewing and one of their
renewals lands after ``t + permit-hold`` within one renew interval; with ``fence-after + margin`` shorter than
that interval the fence may wait for it (at most the difference).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from flotilla.cluster.health import TRUE, condition_status
from flotilla.cluster.lease_health import LeaseMemory, is_pull_cluster
from flotilla.failover.fencing import OUT_OF_SERVICE_TAINT_EFFECT, OUT_OF_SERVICE_TAINT_KEY, is_fenced
from flotilla.failover.peer_quorum import (
    acknowledgements_needed,
    fence_pending_token,
    peer_endpoint,
    peer_report_ttl,
    pending_token,
)
from flotilla.failover.run_permit import (
    ANNOTATION_FENCE_AFTER,
    ANNOTATION_PERMIT_HOLD,
    Announcement,
    AnnouncementError,
    parse_announcement,
)
from flotilla.failover.state import EventSpec
from flotilla.kube.conditions import find_condition
from flotilla.kube.durations import parse_go_duration
from flotilla.kube.objects import as_map

__all__ = [
    "ANNOTATION_FENCE_AFTER",
    "ANNOTATION_PERMIT_HOLD",
    "CONDITION_FENCED",
    "EVENT_CLUSTER_FENCE_CANCELLED",
    "EVENT_CLUSTER_FENCE_PENDING",
    "REASON_FENCE_CANCELLED",
    "REASON_FENCE_PENDING",
    "DEFAULT_FENCE_MARGIN",
    "EVENT_CLUSTER_FENCED_AUTOMATICALLY",
    "EVENT_GUARD_ANNOUNCEMENT_INVALID",
    "REASON_LEASE_EXPIRED",
    "AutoFenceAction",
    "AutoFenceDecision",
    "ClusterLiveness",
    "Guard",
    "announced_guard",
    "keeps_lease",
    "fleet_window",
    "majority_live",
    "silent_clusters",
    "cluster_liveness",
    "decide_auto_fence",
    "fence_reason",
    "format_seconds",
    "parse_go_duration",
]

#: The agent's announcement on its Cluster (Go durations): how long it keeps renewing the run permit after its
#: last successful Lease renewal started, and how long the guard waits after the permit's last change.
#: The Cluster condition the automatic fence writes (status True, reason :data:`REASON_LEASE_EXPIRED`).
CONDITION_FENCED: Final = "Fenced"
REASON_LEASE_EXPIRED: Final = "LeaseExpired"
#: Warning Events on the Cluster.
EVENT_CLUSTER_FENCED_AUTOMATICALLY: Final = "ClusterFencedAutomatically"
EVENT_GUARD_ANNOUNCEMENT_INVALID: Final = "GuardAnnouncementInvalid"
#: the fence-pending step of a cluster whose agent speaks the peer protocol
REASON_FENCE_PENDING: Final = "FencePending"
REASON_FENCE_CANCELLED: Final = "FenceCancelled"
EVENT_CLUSTER_FENCE_PENDING: Final = "ClusterFencePending"
EVENT_CLUSTER_FENCE_CANCELLED: Final = "ClusterFenceCancelled"
#: ``--fence-margin``'s default, seconds.
DEFAULT_FENCE_MARGIN: Final = 15.0



def format_seconds(seconds: float) -> str:
    """A duration for messages: ``45s``, ``1.5s``, ``2m5s``."""
    if seconds < 60:
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m" + f"{rest:.3f}".rstrip("0").rstrip(".") + "s"


#: A guard as its agent announced it, in seconds (``permit_hold``, ``fence_after``).
Guard = Announcement


def keeps_lease(cluster: Mapping[str, Any] | None) -> bool:
    """Whether an agent renews the cluster's Lease ``karmada-cluster/<cluster>``: every Pull cluster, and a Push
    cluster whose lease-only agent (``flotilla agent --lease-only``) announces a guard (either annotation, so a
    malformed announcement is reported too)."""
    if is_pull_cluster(cluster):
        return True
    annotations = as_map(as_map(as_map(cluster).get("metadata")).get("annotations"))
    return ANNOTATION_FENCE_AFTER in annotations or ANNOTATION_PERMIT_HOLD in annotations


def announced_guard(cluster: Mapping[str, Any] | None) -> tuple[Guard | None, str]:
    """The guard the Cluster announces, or (None, why not): no annotation at all, only one of the two, or a value
    that is not a positive Go duration (:func:`~flotilla.failover.run_permit.parse_announcement`, which the agent's
    side reads too)."""
    try:
        guard = parse_announcement(cluster)
    except AnnouncementError as e:
        return None, f"malformed guard announcement: {e}"
    if guard is None:
        return None, "no guard announced (annotations guard.flotilla.io/permit-hold and fence-after absent)"
    return guard, "guard announced"


@dataclass(frozen=True)
class ClusterLiveness:
    """What the majority rule needs of one cluster: Push with Ready True, or Pull with the monotonic time its
    Lease was last seen to change (None: never)."""

    name: str
    pull: bool
    ready: bool = False
    renewed_at: float | None = None

    def live(self, now: float, window: float, after: float = float("-inf")) -> bool:
        """Push: Ready True. Pull: its Lease seen to change less than ``window`` ago and later than ``after``."""
        if not self.pull:
            return self.ready
        return self.renewed_at is not None and now - self.renewed_at < window and self.renewed_at > after


def cluster_liveness(cluster: Mapping[str, Any], memory: LeaseMemory | None) -> ClusterLiveness:
    name = str(as_map(as_map(cluster).get("metadata")).get("name") or "")
    if is_pull_cluster(cluster):
        return ClusterLiveness(name, True, renewed_at=memory.renewed_at if memory is not None else None)
    return ClusterLiveness(name, False, ready=condition_status(cluster) == TRUE)


def majority_live(clusters: Iterable[ClusterLiveness], now: float, window: float) -> bool:
    """Whether more than half of ``clusters`` are live (Pull: a Lease change seen less than ``window`` ago). A
    control plane that sees no such majority may be the one cut off."""
    everyone = list(clusters)
    return 2 * sum(1 for c in everyone if c.live(now, window)) > len(everyone)


def fleet_window(clusters: Iterable[Mapping[str, Any]], grace_period: float, margin: float) -> float:
    """The liveness window for the fleet as a whole: ``--cluster-monitor-grace-period``, capped by the smallest
    bound any guarded cluster announces (so a control plane cut off from everything notices it no later than the
    first fence could fall due)."""
    bounds = [g.permit_hold + g.fence_after + margin
              for g in (announced_guard(c)[0] for c in clusters) if g is not None]
    return min([grace_period, *bounds])


def silent_clusters(renewed_at: Mapping[str, float | None], now: float, window: float) -> list[str]:
    """The clusters whose Lease was seen to change, but not for ``window`` (``renewed_at``: per cluster whose
    Lease an agent keeps, when the control plane last saw it change). When the control plane regains a majority
    after it had none, their silence may have been its own cut-off rather than theirs: their bounds start again
    from that moment, which postpones a fence and never brings one forward."""
    return sorted(name for name, at in renewed_at.items() if at is not None and now - at >= window)


class AutoFenceAction(enum.Enum):
    NEVER = "never"
    NOTHING = "nothing"
    NOT_YET = "not-yet"
    HELD = "held"
    PEND = "pend"
    CANCEL = "cancel"
    FENCE = "fence"


@dataclass(frozen=True)
class AutoFenceDecision:
    """``reason`` says why in words. ``recheck_after`` (seconds) with NOT_YET. With FENCE, PEND and CANCEL,
    ``condition`` (the ``Fenced`` condition, without ``lastTransitionTime``) and ``event``; with PEND ``token``
    (the value of the pending mark). ``invalid``: the announcement was malformed (worth an Event, unlike a
    cluster that announces nothing)."""

    action: AutoFenceAction
    reason: str
    recheck_after: float | None = None
    condition: Mapping[str, Any] | None = None
    event: EventSpec | None = None
    invalid: bool = False
    token: str | None = None


def fence_reason(cluster: Mapping[str, Any] | None) -> str | None:
    """How ``flotilla get clusters`` says the cluster is fenced: None when it is not; ``Pending`` while a fence
    waits for the other agents' acknowledgements; the ``Fenced`` condition's reason when that is True; ``Manual``
    for the taint alone (put there by ``flotilla fence`` or by hand)."""
    if not is_fenced(cluster):
        return "Pending" if pending_token(cluster) is not None else None
    status = as_map(as_map(cluster).get("status"))
    condition = find_condition(status.get("conditions"), CONDITION_FENCED)
    if condition is not None and condition.get("status") == TRUE and condition.get("reason"):
        return str(condition["reason"])
    return "Manual"


def decide_auto_fence(cluster: Mapping[str, Any], memory: LeaseMemory | None, now: float, margin: float,
                      clusters: Iterable[ClusterLiveness], grace_period: float,
                      acknowledgements: Mapping[str, tuple[str, float]] | None = None,
                      voters: int = 0) -> AutoFenceDecision:
    """Decide for one Cluster (see the module docstring).

    ``memory`` is the Lease monitor's memory of it (``renewed_at`` on the same monotonic clock as ``now``),
    ``margin`` the ``--fence-margin`` in seconds, ``clusters`` the liveness of every Cluster (this one included or
    not: it never counts as live), ``grace_period`` the ``--cluster-monitor-grace-period``. For a cluster whose
    agent speaks the peer protocol: ``acknowledgements``, per other agent, the pending fence of this cluster its
    Lease acknowledges and when the control plane first saw that (monotonic); ``voters``, how many other
    clusters' agents answer peers.
    """
    meta = as_map(cluster.get("metadata"))
    name = str(meta.get("name") or "")
    A = AutoFenceAction
    if not keeps_lease(cluster):
        return AutoFenceDecision(A.NEVER, f"cluster {name} is a Push cluster without a lease-only agent announcing "
                                          "a guard: it is fenced only by hand")
    if meta.get("deletionTimestamp"):
        return AutoFenceDecision(A.NEVER, f"cluster {name} is being deleted")
    if is_fenced(cluster):
        return AutoFenceDecision(A.NOTHING, f"cluster {name} is fenced already "
                                            f"(taint {OUT_OF_SERVICE_TAINT_KEY}:{OUT_OF_SERVICE_TAINT_EFFECT})")
    token = pending_token(cluster)
    guard, why = announced_guard(cluster)
    ttl = peer_report_ttl(cluster) if peer_endpoint(cluster) is not None else None
    if token is not None and (guard is None or ttl is None):
        return _cancel(name, "it no longer announces a guard with the peer protocol")
    if guard is None:
        return AutoFenceDecision(A.NEVER, f"cluster {name}: {why}", invalid=why.startswith("malformed"))
    bound = guard.permit_hold + guard.fence_after + margin
    if memory is None or memory.renewed_at is None:
        return AutoFenceDecision(A.NOT_YET, f"cluster {name}: no change of its Lease seen yet", recheck_after=bound)
    if token is not None and token != fence_pending_token(memory.renew_seen, meta.get("uid")):
        return _cancel(name, "its Lease was renewed after the fence was marked pending")
    silent = now - memory.renewed_at
    spelled = (f"permit-hold {format_seconds(guard.permit_hold)} + fence-after {format_seconds(guard.fence_after)}"
               f" + fence-margin {format_seconds(margin)} = {format_seconds(bound)}")
    first_step = guard.permit_hold if ttl is not None else bound
    if silent < first_step:
        return AutoFenceDecision(A.NOT_YET, f"cluster {name}: Lease last renewed {format_seconds(silent)} ago, "
                                            f"under the bound ({spelled})", recheck_after=first_step - silent)
    window = min(grace_period, bound)
    everyone = {c.name: c for c in clusters}
    everyone.pop(name, None)
    # a Pull cluster counts only with a renewal seen more than the candidate's permit-hold after the candidate's
    # last one: the candidate renewed at least that often, so a control plane cut off from every member saw
    # every other Lease's last change before then (see the module docstring)
    after = memory.renewed_at + guard.permit_hold
    total = len(everyone) + 1
    if ttl is not None and token is None:
        # the pending mark fences nothing: a majority within the liveness window is enough (the candidate's own
        # renew cycle need not have passed for the others; the fence itself waits for that)
        after = float("-inf")
    live = sum(1 for c in everyone.values() if c.live(now, window, after))
    majority = f"{live} of {total} clusters live"
    if not 2 * live > total:
        return AutoFenceDecision(A.HELD, f"cluster {name}: no Lease renewal for {format_seconds(silent)} "
                                         f"({spelled}), but only {majority}: not fenced without a strict majority "
                                         "(the control plane may be the one cut off)")
    acknowledged = ""
    if ttl is not None:
        needed = acknowledgements_needed(voters, total)
        if token is None:
            token = fence_pending_token(memory.renew_seen, meta.get("uid"))
            message = (f"No renewal of Lease karmada-cluster/{name} seen for {format_seconds(silent)} (its "
                       f"permit-hold is {format_seconds(guard.permit_hold)}), {majority}. Fence pending: waiting "
                       f"for {needed} of the {voters} other agents to acknowledge it, then for its peer-report-ttl "
                       f"{format_seconds(ttl)} + fence-after {format_seconds(guard.fence_after)} + fence-margin "
                       f"{format_seconds(margin)}")
            return AutoFenceDecision(A.PEND, f"cluster {name}: {message}", token=token,
                                     condition={"type": CONDITION_FENCED, "status": "False",
                                                "reason": REASON_FENCE_PENDING, "message": message},
                                     event=EventSpec("Warning", EVENT_CLUSTER_FENCE_PENDING,
                                                     f"Cluster {name}: {message}"))
        seen = sorted(at for t, at in (acknowledgements or {}).values() if t == token)
        if len(seen) < needed:
            return AutoFenceDecision(A.NOT_YET, f"cluster {name}: fence pending, {len(seen)} of the {needed} "
                                                "acknowledgements it needs seen")
        fence_at = memory.renewed_at + bound
        if needed > 0:
            fence_at = max(fence_at, seen[needed - 1] + ttl + guard.fence_after + margin)
        if now < fence_at:
            return AutoFenceDecision(A.NOT_YET, f"cluster {name}: fence pending, acknowledged by {len(seen)} of "
                                                f"{voters} other agents; fenced in {format_seconds(fence_at - now)}",
                                     recheck_after=fence_at - now)
        acknowledged = (f"; acknowledged by {len(seen)} of the {voters} other agents (needed {needed}), "
                        f"{format_seconds(now - seen[needed - 1]) if needed else 'no wait'} since the last one "
                        f"needed (peer-report-ttl {format_seconds(ttl)})")
    message = (f"No renewal of Lease karmada-cluster/{name} seen for {format_seconds(silent)} (bound: {spelled})"
               f"{acknowledged}; its guard has stopped the guarded workloads, {majority}. Taint "
               f"{OUT_OF_SERVICE_TAINT_KEY}:{OUT_OF_SERVICE_TAINT_EFFECT} added; `flotilla unfence {name}` removes it")
    condition = {"type": CONDITION_FENCED, "status": TRUE, "reason": REASON_LEASE_EXPIRED, "message": message}
    return AutoFenceDecision(A.FENCE, f"cluster {name}: {message}", condition=condition,
                             event=EventSpec("Warning", EVENT_CLUSTER_FENCED_AUTOMATICALLY,
                                             f"Cluster {name} fenced automatically. {message}"))


def _cancel(name: str, why: str) -> AutoFenceDecision:
    message = f"Pending fence of cluster {name} cancelled: {why}"
    return AutoFenceDecision(AutoFenceAction.CANCEL, f"cluster {name}: {message}",
                             condition={"type": CONDITION_FENCED, "status": "False",
                                        "reason": REASON_FENCE_CANCELLED, "message": message},
                             event=EventSpec("Normal", EVENT_CLUSTER_FENCE_CANCELLED, message))
