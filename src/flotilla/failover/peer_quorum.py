"""The agents' peer protocol and the fence-pending handshake, as pure decisions (docs/fencing.md).

An agent cannot tell a control plane that is down from a cut that isolates its own member. Without help it must
withhold the run permit once it has not held the control plane for ``permit-hold``, and a control-plane outage
then stops every guarded workload. With the peer protocol an agent that has lost the control plane keeps renewing
the permit while a **strict majority of all clusters** report, through their agents, that they have lost it too.

The danger is a control plane that fences a cluster while that cluster keeps its permit through its peers. The
control plane therefore fences a cluster whose agent speaks the protocol in two steps:

1. **fence pending**: once it has seen no Lease change for ``permit-hold`` (and sees a strict majority live) it
   marks the Cluster with the annotation :data:`ANNOTATION_FENCE_PENDING` (a token naming the Lease renewal the
   decision was based on);
2. **acknowledged**: every other agent watches the Clusters; from the moment it sees the pending mark it names
   that cluster among the fences in every report it gives (a report naming a cluster as fenced is no vote for
   it), and it renews its own Lease at once carrying the acknowledgement (:data:`ANNOTATION_ACKNOWLEDGED_FENCES`
   on the Lease). Once enough acknowledgements are seen that every possible majority of voters contains an agent
   that acknowledged (:func:`acknowledgements_needed`), no report given before those acknowledgements stays usable
   for more than the candidate's ``peer-report-ttl``; the control plane then waits that ttl plus the candidate's
   ``fence-after`` and the margin, and fences.

A Lease change of the candidate during the wait cancels the pending mark (the agent is back).

Reports are asked for, never pushed: an agent sends a request at time ``asked`` (its monotonic clock) and uses the
answer until ``asked + ttl``. The answer describes the peer at some moment after ``asked``, so a report is never
used longer than ``ttl`` after the peer gave it, whatever the network's delay. No clock is compared between
machines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from flotilla.failover.fencing import is_fenced
from flotilla.kube.durations import go_duration, parse_go_duration
from flotilla.kube.metadata import json_annotation
from flotilla.kube.objects import annotations_of, meta_of

__all__ = [
    "ANNOTATION_ACKNOWLEDGED_FENCES",
    "ANNOTATION_FENCE_PENDING",
    "ANNOTATION_PEER_ENDPOINT",
    "ANNOTATION_PEER_REPORT_TTL",
    "DEFAULT_PEER_REPORT_TTL",
    "REPORT_PATH",
    "PeerReport",
    "Quorum",
    "acknowledged_fences",
    "acknowledgement_text",
    "acknowledgements_needed",
    "fence_pending_token",
    "known_fences",
    "observe_acknowledgements",
    "parse_report",
    "peer_announcement_patch",
    "peer_endpoint",
    "peer_quorum",
    "peer_report_ttl",
    "pending_fences",
    "pending_token",
]

#: on the Cluster, written by its agent: where its peers ask for its report (``host:port``)
ANNOTATION_PEER_ENDPOINT: Final = "guard.flotilla.io/peer-endpoint"
#: on the Cluster, written by its agent: how long it uses a peer's report after asking for it (Go duration)
ANNOTATION_PEER_REPORT_TTL: Final = "guard.flotilla.io/peer-report-ttl"
#: on the Cluster, written by the control plane: the fence is pending (value: the token of the decision)
ANNOTATION_FENCE_PENDING: Final = "guard.flotilla.io/fence-pending"
#: on an agent's Lease ``karmada-cluster/<cluster>``: the pending fences it has seen (JSON ``{cluster: token}``)
ANNOTATION_ACKNOWLEDGED_FENCES: Final = "guard.flotilla.io/acknowledged-fences"
#: the HTTP path of a report
REPORT_PATH: Final = "/peer/v1/report"
DEFAULT_PEER_REPORT_TTL: Final = 2.0


# ---------------------------------------------------------------------------------------------- announcement


def peer_announcement_patch(endpoint: str, ttl: float) -> dict[str, Any]:
    """The merge patch with which an agent announces its peer endpoint and report ttl on its Cluster."""
    return {"metadata": {"annotations": {ANNOTATION_PEER_ENDPOINT: endpoint,
                                         ANNOTATION_PEER_REPORT_TTL: go_duration(ttl)}}}


def peer_endpoint(cluster: Mapping[str, Any] | None) -> str | None:
    """The ``host:port`` a Cluster's agent answers peers on (None: it speaks no peer protocol, or the value is
    not ``host:port`` with a numeric port)."""
    value = annotations_of(cluster).get(ANNOTATION_PEER_ENDPOINT)
    if not isinstance(value, str):
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return value


def peer_report_ttl(cluster: Mapping[str, Any] | None) -> float | None:
    """The report ttl a Cluster's agent announces (None: none, or not a positive Go duration)."""
    value = annotations_of(cluster).get(ANNOTATION_PEER_REPORT_TTL)
    if not isinstance(value, str):
        return None
    try:
        seconds = parse_go_duration(value)
    except ValueError:
        return None
    return seconds if seconds > 0 else None


# ---------------------------------------------------------------------------------------------- what an agent knows


def pending_token(cluster: Mapping[str, Any] | None) -> str | None:
    """The token of a Cluster's pending fence (None: none)."""
    value = annotations_of(cluster).get(ANNOTATION_FENCE_PENDING)
    return value if isinstance(value, str) and value else None


def fence_pending_token(renew_seen: str | None, uid: str | None = None) -> str:
    """The token the control plane writes: the candidate's Lease ``renewTime`` it decided on (so a later renewal
    is seen to cancel it) and the Cluster's uid."""
    return f"{uid or ''}/{renew_seen or ''}"


def known_fences(clusters: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The clusters an agent must name as fenced in its reports: those with a pending fence (value: its token) or
    the out-of-service taint (value: ``"taint"``)."""
    out: dict[str, str] = {}
    for cluster in clusters:
        name = meta_of(cluster).get("name")
        if not isinstance(name, str) or not name:
            continue
        token = pending_token(cluster)
        if token is not None:
            out[name] = token
        elif is_fenced(cluster):
            out[name] = "taint"
    return out


def pending_fences(fences: Mapping[str, str]) -> dict[str, str]:
    """The pending fences among :func:`known_fences`' (those not yet a taint): what an agent acknowledges."""
    return {k: v for k, v in sorted(fences.items()) if v != "taint"}


def acknowledgement_text(fences: Mapping[str, str]) -> str:
    """The value of :data:`ANNOTATION_ACKNOWLEDGED_FENCES` for the pending fences among ``fences``."""
    return json.dumps(pending_fences(fences), separators=(",", ":"))


def acknowledged_fences(lease: Mapping[str, Any] | None) -> dict[str, str]:
    """The pending fences an agent's Lease acknowledges (a malformed value acknowledges nothing)."""
    value = json_annotation(annotations_of(lease), ANNOTATION_ACKNOWLEDGED_FENCES)
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


# ---------------------------------------------------------------------------------------------- reports


@dataclass(frozen=True)
class PeerReport:
    """What an agent tells a peer: whether it holds the control plane, whether it has a fresh list of the
    Clusters (``synced``: an agent that just started knows no fence and its word counts for nothing), how many
    Clusters that list has, and the clusters it knows to be fenced or fence-pending."""

    cluster: str
    control_plane_reachable: bool
    synced: bool
    clusters: int
    fences: frozenset[str] = field(default_factory=frozenset)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "PeerReport", "cluster": self.cluster,
                "controlPlane": "Reachable" if self.control_plane_reachable else "Unreachable",
                "synced": self.synced, "clusters": self.clusters, "fences": sorted(self.fences)}


def parse_report(body: Any) -> PeerReport:
    """A report from its JSON; ValueError saying what is wrong."""
    if not isinstance(body, Mapping) or body.get("kind") != "PeerReport":
        raise ValueError("not a PeerReport")
    cluster = body.get("cluster")
    if not isinstance(cluster, str) or not cluster:
        raise ValueError("cluster: must be a non-empty string")
    cp = body.get("controlPlane")
    if cp not in ("Reachable", "Unreachable"):
        raise ValueError("controlPlane: must be Reachable or Unreachable")
    synced = body.get("synced")
    if not isinstance(synced, bool):
        raise ValueError("synced: must be a boolean")
    clusters = body.get("clusters")
    if not isinstance(clusters, int) or isinstance(clusters, bool) or clusters < 0:
        raise ValueError("clusters: must be a count")
    fences = body.get("fences")
    if not isinstance(fences, list) or not all(isinstance(f, str) for f in fences):
        raise ValueError("fences: must be a list of cluster names")
    return PeerReport(cluster, cp == "Reachable", synced, clusters, frozenset(fences))


@dataclass(frozen=True)
class Quorum:
    """Whether the agent's peers let it keep its permit without the control plane: ``votes`` of ``total``."""

    held: bool
    votes: int
    total: int
    reason: str
    #: while held: when the quorum ends unless fresher reports come (the reports it needs age past the ttl)
    until: float = float("-inf")


def peer_quorum(*, me: str, fleet: int | None, fenced: bool, reports: Mapping[str, tuple[PeerReport, float]],
                now: float, ttl: float) -> Quorum:
    """Count the votes for keeping the permit of ``me`` without the control plane.

    ``fleet``: how many Clusters the agent's last complete list had (None: it never had one); ``fenced``: its own
    Cluster is fenced or fence-pending as far as it knows; ``reports``: per peer, its latest report and when the
    request for it was sent (the agent's monotonic clock, like ``now``). The agent votes for itself unless it knows
    itself fenced; a peer votes when its report was asked for less than ``ttl`` ago, comes from that peer, is
    synced, says the control plane is unreachable and does not name ``me`` among the fences. The total is the
    largest fleet any of them knows of; the votes must be a strict majority of it."""
    if fleet is None:
        return Quorum(False, 0, 0, "no complete list of the clusters yet")
    own = 0 if fenced else 1
    total = fleet
    voters: list[tuple[float, str]] = []
    for peer, (report, asked) in sorted(reports.items()):
        if now - asked >= ttl or report.cluster != peer or not report.synced:
            continue
        total = max(total, report.clusters)
        if not report.control_plane_reachable and me not in report.fences:
            voters.append((asked, peer))
    votes = own + len(voters)
    held = 2 * votes > total
    who = ", ".join(p for _, p in sorted(voters, key=lambda v: v[1])) or "none"
    reason = (f"{votes} of {total} clusters report the control plane unreachable "
              f"({'this one and ' if own else ''}peers: {who})")
    until = float("-inf")
    if held:
        # the freshest reports that still make a majority: the quorum lasts until the oldest of them expires
        needed = total // 2 + 1 - own
        freshest = sorted((asked for asked, _ in voters), reverse=True)
        until = (freshest[needed - 1] if needed > 0 else now) + ttl
    return Quorum(held, votes, total, reason, until)


# ---------------------------------------------------------------------------------------------- the control plane


def acknowledgements_needed(voters: int, total: int) -> int:
    """How many of the candidate's possible peer voters must acknowledge its pending fence so that every strict
    majority of ``total`` clusters that includes the candidate includes one of them: ``voters`` (clusters other
    than the candidate whose agents answer peers) minus the most a majority can leave out of them, plus one."""
    # a majority has more than total/2 members, the candidate among them, so at least total//2 of the voters
    return max(0, voters - total // 2 + 1)


def observe_acknowledgements(previous: Mapping[str, tuple[str, float]], lease: Mapping[str, Any] | None,
                             now: float) -> dict[str, tuple[str, float]]:
    """What an agent's Lease acknowledges now, each with the time it was first seen (``now`` for a new one; the
    control plane's monotonic clock): ``{candidate: (token, first seen)}``."""
    out: dict[str, tuple[str, float]] = {}
    for candidate, token in acknowledged_fences(lease).items():
        before = previous.get(candidate)
        out[candidate] = (token, before[1] if before is not None and before[0] == token else now)
    return out
