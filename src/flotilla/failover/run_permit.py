"""Guarded workloads, the agent's run permit and the guard's judgement of it (pure; docs/fencing.md).

Automatic fencing is safe only if a Pull member cut off from the control plane stops its ``Directly`` workloads by
itself before the control plane fences it and starts them elsewhere. The pieces decided here:

* **guarded workloads** (:func:`is_guarded`): the member objects of a binding whose failover resolves to
  ``purgeMode: Directly`` carry the label ``guard.flotilla.io/guarded: "true"``; nothing else is ever stopped by
  a guard;
* **the run permit** (:func:`permit_decision`): ``flotilla agent --guard`` keeps the Lease
  ``flotilla-system/flotilla-run-permit`` in its member and renews it only while it holds the control plane (its
  last successful control-plane Lease renewal *started* less than ``permit-hold`` ago on its monotonic clock),
  while its Cluster is not fenced, and only once the purge of stale guarded copies has run after a start or a
  lapse (:func:`stale_guarded_objects`);
* **the guard** (:class:`PermitWatch`): guarded workloads stop when the permit has not changed for
  ``fence-after``, measured on the guard's own monotonic clock from when it observed the last change.

The agent announces its guard on its Cluster (:func:`announcement_patch`), and the control plane reads the
announcement with :func:`parse_announcement`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from flotilla.api.agents import PERMIT_NAME, PERMIT_NAMESPACE
from flotilla.api.labels import MANAGED_LABEL, MANAGED_LABEL_VALUE
from flotilla.failover.eviction import resolve_cluster_purge_mode
from flotilla.failover.fencing import ObjectIdentity, stale_objects_on_recovery, wanted_identities
from flotilla.failover.peer_quorum import Quorum
from flotilla.failover.purge import PURGE_MODE_DIRECTLY, PURGE_MODE_GRACEFULLY
from flotilla.kube.durations import go_duration, parse_go_duration
from flotilla.kube.metadata import json_annotation
from flotilla.kube.objects import annotations_of, as_map, meta_of
from flotilla.kube.times import format_micro_time

__all__ = [
    "ANNOTATION_FENCE_AFTER",
    "ANNOTATION_GUARDED_KINDS",
    "ANNOTATION_PERMIT_HOLD",
    "GUARDED_LABEL",
    "GUARDED_LABEL_VALUE",
    "GUARDED_SELECTOR",
    "PERMIT_NAME",
    "PERMIT_NAMESPACE",
    "Announcement",
    "AnnouncementError",
    "EVENT_GUARD_RESUMED_WORKLOAD",
    "EVENT_GUARD_STOPPED_WORKLOAD",
    "EVENT_RUN_PERMIT_RENEWED",
    "EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS",
    "EVENT_RUN_PERMIT_WITHHELD",
    "MEMBER_EVENT_REASONS",
    "GuardChanges",
    "PermitDecision",
    "PermitEvent",
    "PermitRoute",
    "PermitStep",
    "PermitWatch",
    "announcement_patch",
    "cache_behind",
    "guard_changes",
    "guarded_kinds",
    "is_guarded",
    "is_guarded_object",
    "parse_announcement",
    "parse_guarded_kinds",
    "permit_body",
    "permit_decision",
    "permit_event",
    "permit_route",
    "permit_version",
    "renewed_permit",
    "stale_guarded_objects",
]

GUARDED_LABEL: Final = "guard.flotilla.io/guarded"
GUARDED_LABEL_VALUE: Final = "true"
GUARDED_SELECTOR: Final = f"{GUARDED_LABEL}={GUARDED_LABEL_VALUE},{MANAGED_LABEL}={MANAGED_LABEL_VALUE}"
#: the agent's announcement of its guard, on its Cluster (Go durations)
ANNOTATION_FENCE_AFTER: Final = "guard.flotilla.io/fence-after"
ANNOTATION_PERMIT_HOLD: Final = "guard.flotilla.io/permit-hold"
#: on the permit Lease: the kinds of guarded manifests the agent has seen (JSON ``[[apiVersion, kind], ...]``), so
#: that a restarted agent's purge also looks at kinds none of whose Works is left
ANNOTATION_GUARDED_KINDS: Final = "guard.flotilla.io/guarded-kinds"


# ---------------------------------------------------------------------------------------------- guarded workloads


def is_guarded(spec: Mapping[str, Any], default_purge_mode: str = PURGE_MODE_GRACEFULLY) -> bool:
    """Whether a binding's member objects are guarded: its failover resolves to ``purgeMode: Directly``.

    ``spec``: the binding's spec; ``default_purge_mode``: the controller-manager's
    ``--no-execute-taint-eviction-purge-mode``. Cluster failover resolves as the taint manager does
    (``failover.cluster.purgeMode``, empty meaning ``Gracefully``; without ``failover.cluster`` the flag);
    application failover's ``failover.application.purgeMode`` counts too."""
    failover = as_map(spec.get("failover"))
    if resolve_cluster_purge_mode(failover or None, default_purge_mode) == PURGE_MODE_DIRECTLY:
        return True
    return as_map(failover.get("application")).get("purgeMode") == PURGE_MODE_DIRECTLY


def is_guarded_object(obj: Mapping[str, Any]) -> bool:
    """The member object carries ``guard.flotilla.io/guarded: "true"``."""
    return as_map(meta_of(obj).get("labels")).get(GUARDED_LABEL) == GUARDED_LABEL_VALUE


def _manifests(work: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    manifests = as_map(as_map(as_map(work).get("spec")).get("workload")).get("manifests")
    return [m for m in manifests if isinstance(m, Mapping)] if isinstance(manifests, list) else []


def guarded_kinds(works: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(apiVersion, kind) of every guarded manifest of ``works``."""
    out: set[tuple[str, str]] = set()
    for work in works:
        for m in _manifests(work):
            if is_guarded_object(m) and m.get("apiVersion") and m.get("kind"):
                out.add((str(m["apiVersion"]), str(m["kind"])))
    return out


def parse_guarded_kinds(permit: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """The kinds recorded on the permit Lease (a malformed record counts as none)."""
    items = json_annotation(annotations_of(permit), ANNOTATION_GUARDED_KINDS)
    return {(a, k) for a, k in (i for i in items if isinstance(i, list) and len(i) == 2)
            if isinstance(a, str) and isinstance(k, str) and a and k} if isinstance(items, list) else set()


def stale_guarded_objects(objects: Iterable[Mapping[str, Any]],
                          works: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The guarded member objects to delete before the permit is renewed again: placed by Flotilla, guarded, and
    wanted by none of ``works`` (a fresh, complete list of the cluster's Works; a Work being deleted with
    ``preserveResourcesOnDeletion`` still keeps its objects, as in the execution controller's recovery purge)."""
    works = list(works)
    wanted = wanted_identities(works)
    for work in works:
        if meta_of(work).get("deletionTimestamp") and as_map(work.get("spec")).get("preserveResourcesOnDeletion") is True:
            wanted.update(ObjectIdentity.of(m) for m in _manifests(work))
    return [o for o in stale_objects_on_recovery(objects, wanted) if is_guarded_object(o)]


def cache_behind(cached: Iterable[Mapping[str, Any]], fresh: Iterable[Mapping[str, Any]]) -> list[str]:
    """The Works of the agent's cache that a fresh list of the control plane does not have (namespace/name): while
    there are any, the agent's execution controller may re-create a member object the purge deletes (it still
    believes a gone Work wants it), so the purge waits for the cache to catch up."""
    have = {(meta_of(w).get("namespace"), meta_of(w).get("name"), meta_of(w).get("uid")) for w in fresh}
    return sorted(f"{meta_of(w).get('namespace')}/{meta_of(w).get('name')}" for w in cached
                  if (meta_of(w).get("namespace"), meta_of(w).get("name"), meta_of(w).get("uid")) not in have)


# ---------------------------------------------------------------------------------------------- the run permit


class PermitStep(StrEnum):
    RENEW = "Renew"
    PURGE = "Purge"  # held, but the purge of stale guarded copies must run (and succeed) first
    WITHHOLD = "Withhold"


@dataclass(frozen=True)
class PermitDecision:
    step: PermitStep
    reason: str


def permit_decision(*, now: float, last_renewal_started: float | None, hold: float, fenced: bool,
                    purged: bool, quorum: Quorum | None = None, in_force: bool = False) -> PermitDecision:
    """Renew the run permit now?

    ``now`` and ``last_renewal_started`` are the agent's monotonic clock: ``last_renewal_started`` is when its last
    *successful* control-plane Lease renewal started (None: none yet). ``fenced``: its Cluster carries the
    out-of-service taint (then its Works may be released without contacting the member: nothing guarded may run).
    ``purged``: the purge of stale guarded copies ran since the permit was last withheld (or since the start).
    ``quorum``: what the agent's peers say (:func:`flotilla.failover.peer_quorum.peer_quorum`; None without the
    peer protocol). ``in_force``: the permit's last write is younger than fence-after (no guard has stopped
    anything on it yet). Without the control plane, a held quorum keeps the permit, but only one that was never
    withheld since its last purge or is still in force: the peers extend a permit, never revive an expired one
    (that takes the control plane, whose purge first deletes the copies whose Work is gone)."""
    if last_renewal_started is None:
        return PermitDecision(PermitStep.WITHHOLD, "no control-plane Lease renewal has succeeded yet")
    age = now - last_renewal_started
    if age >= hold:
        lost = (f"the last successful control-plane Lease renewal started {age:.1f}s ago, not less than the permit "
                f"hold {hold:g}s")
        if quorum is not None and quorum.held and (purged or in_force) and not fenced:
            return PermitDecision(PermitStep.RENEW, f"{lost}, but {quorum.reason}")
        if quorum is not None:
            lost += f"; {quorum.reason}, not a strict majority" if not quorum.held else (
                "; the peers cannot revive a permit that expired")
        return PermitDecision(PermitStep.WITHHOLD, lost)
    if fenced:
        return PermitDecision(PermitStep.WITHHOLD, "the Cluster is fenced (out-of-service taint)")
    if not purged:
        return PermitDecision(PermitStep.PURGE, "stale guarded copies must be purged before the permit is renewed")
    return PermitDecision(PermitStep.RENEW, f"the control plane is held (last renewal started {age:.1f}s ago)")


# ---------------------------------------------------------------------------------------------- the member's Events

#: Events the agent records on the permit Lease in its member, when the way the permit is kept changes
EVENT_RUN_PERMIT_WITHHELD: Final = "RunPermitWithheld"  # Warning: no longer renewed (the reason says why)
EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS: Final = "RunPermitRenewedThroughPeers"  # Warning: kept by the peers' quorum
EVENT_RUN_PERMIT_RENEWED: Final = "RunPermitRenewed"  # Normal: renewed, the control plane held
#: Events a guard records on each guarded object it stops or lets run again
EVENT_GUARD_STOPPED_WORKLOAD: Final = "GuardStoppedWorkload"  # Warning
EVENT_GUARD_RESUMED_WORKLOAD: Final = "GuardResumedWorkload"  # Normal
#: the reasons above: the recorders in a member never hold them back (they are few: transitions only)
MEMBER_EVENT_REASONS: Final[frozenset[str]] = frozenset({
    EVENT_RUN_PERMIT_WITHHELD, EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS, EVENT_RUN_PERMIT_RENEWED,
    EVENT_GUARD_STOPPED_WORKLOAD, EVENT_GUARD_RESUMED_WORKLOAD})


class PermitRoute(StrEnum):
    """How the permit is kept after one step: renewed on the agent's own hold of the control plane, renewed through
    the peers' quorum, or not renewed (withheld, or waiting for the purge of stale copies)."""

    CONTROL_PLANE = "control-plane"
    PEERS = "peers"
    WITHHELD = "withheld"


def permit_route(step: PermitStep, *, through_peers: bool) -> PermitRoute:
    """The route of a step (``through_peers``: the decision relied on the peers' quorum)."""
    if step is not PermitStep.RENEW:
        return PermitRoute.WITHHELD
    return PermitRoute.PEERS if through_peers else PermitRoute.CONTROL_PLANE


@dataclass(frozen=True)
class PermitEvent:
    type: str  # "Normal" or "Warning"
    reason: str
    message: str


def permit_event(previous: PermitRoute | None, current: PermitRoute, reason: str) -> PermitEvent | None:
    """The Event to record on the permit when its route changes from ``previous`` (None: the agent's first step)
    to ``current``, ``reason`` being the decision's reason; None when there is nothing to tell: the same route as
    before (Events mark transitions, never single renewals), or a permit withheld at the agent's first step (it
    never renewed it, so nothing was withdrawn)."""
    if previous is current or (previous is None and current is PermitRoute.WITHHELD):
        return None
    if current is PermitRoute.WITHHELD:
        return PermitEvent("Warning", EVENT_RUN_PERMIT_WITHHELD,
                           f"The run permit is no longer renewed: {reason}. Guarded workloads stop once it has "
                           "not changed for the guard's fence-after.")
    if current is PermitRoute.PEERS:
        return PermitEvent("Warning", EVENT_RUN_PERMIT_RENEWED_THROUGH_PEERS,
                           f"The run permit is renewed without the control plane: {reason}.")
    again = "again " if previous is not None else ""
    return PermitEvent("Normal", EVENT_RUN_PERMIT_RENEWED,
                       f"The run permit is renewed {again}on the control plane: {reason}.")


def permit_body(cluster: str, fence_after: float, now: datetime,
                kinds: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The permit Lease as the agent creates it (``renewTime`` is informational: no guard compares wall clocks)."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": PERMIT_NAME, "namespace": PERMIT_NAMESPACE,
                         "annotations": {ANNOTATION_GUARDED_KINDS: _kinds_text(kinds)}},
            "spec": {"holderIdentity": cluster, "leaseDurationSeconds": max(1, round(fence_after)),
                     "renewTime": format_micro_time(now)}}


def renewed_permit(permit: Mapping[str, Any], cluster: str, fence_after: float, now: datetime,
                   kinds: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """``permit`` renewed at ``now`` (its resourceVersion kept: the update is conditional on it); the kinds
    recorded before are kept."""
    body = permit_body(cluster, fence_after, now, set(kinds) | parse_guarded_kinds(permit))
    meta = dict(meta_of(permit))
    annotations = {**as_map(meta.get("annotations")), **body["metadata"]["annotations"]}
    return {**dict(permit), "metadata": {**meta, "annotations": annotations},
            "spec": {**as_map(permit.get("spec")), **body["spec"]}}


def _kinds_text(kinds: Iterable[tuple[str, str]]) -> str:
    return json.dumps(sorted([a, k] for a, k in set(kinds)), separators=(",", ":"))


# ---------------------------------------------------------------------------------------------- the guard


def permit_version(permit: Mapping[str, Any] | None) -> str | None:
    """What changes at every write of the permit (uid and resourceVersion); None when there is none."""
    meta = meta_of(permit)
    if not meta.get("resourceVersion"):
        return None
    return f"{meta.get('uid') or ''}/{meta.get('resourceVersion')}"


@dataclass
class PermitWatch:
    """The guard's view of the permit, on its own monotonic clock.

    Feed it every poll's result (:meth:`observe`, ``None`` when there is no permit); :meth:`stopped` says whether
    guarded workloads must be stopped. Rules: a guard that never saw a permit stops nothing (the agent has no
    ``--guard``, or has not started yet); a change counts from when it was observed; a permit deleted after it was
    seen changes nothing (its age keeps growing); a permit that already existed when the guard started is of
    unknown age, so guarded workloads stay stopped until it is seen to change (a restarted member does not run
    its guarded workloads on an old permit)."""

    fence_after: float
    version: str | None = None
    changed_at: float | None = None
    seen_absent: bool = False

    def observe(self, permit: Mapping[str, Any] | None, now: float) -> bool:
        """Record one observation; whether it was a change."""
        version = permit_version(permit)
        if version is None:
            if self.version is None:
                self.seen_absent = True
            return False
        if version == self.version:
            return False
        first = self.version is None
        self.version = version
        if first and not self.seen_absent:
            return False  # existed before we looked: age unknown
        self.changed_at = now
        return True

    def stopped(self, now: float) -> bool:
        if self.version is None:
            return False
        return self.changed_at is None or now - self.changed_at >= self.fence_after

    def reason(self, now: float) -> str:
        if self.version is None:
            return "no run permit seen: nothing is stopped"
        if self.changed_at is None:
            return "the run permit existed before the guard started and has not changed since"
        age = now - self.changed_at
        if age >= self.fence_after:
            return f"the run permit has not changed for {age:.1f}s (fence-after {self.fence_after:g}s)"
        return f"the run permit changed {age:.1f}s ago"


@dataclass(frozen=True)
class GuardChanges:
    """What a guard's pass changed: the objects it now stops and those it lets run again (each to be told by an
    Event), and every object it stops after the pass (by :func:`guard_changes`' key)."""

    stopped: list[Mapping[str, Any]]
    resumed: list[Mapping[str, Any]]
    stopping: dict[str, Mapping[str, Any]]


def _object_key(obj: Mapping[str, Any]) -> str:
    meta = meta_of(obj)
    uid = meta.get("uid")
    if isinstance(uid, str) and uid:
        return uid
    return f"{obj.get('apiVersion')}/{obj.get('kind')}/{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def guard_changes(*, halted: bool, stopping: Mapping[str, Mapping[str, Any]],
                  objects: Iterable[Mapping[str, Any]]) -> GuardChanges:
    """One pass of a guard over the objects its workloads honour it for.

    ``halted``: the permit is stale (:meth:`PermitWatch.stopped`); ``stopping``: what the guard stopped so far, by
    key (the object's uid); ``objects``: every object of the kinds the guard stops, as they are now. While halted,
    each guarded object not stopped yet is stopped (one Event each, an object created meanwhile included), and one
    no longer guarded runs again; once the permit is fresh, every stopped object that still exists runs again.
    Objects that are gone are forgotten without an Event."""
    current = {_object_key(obj): obj for obj in objects}
    stopped: list[Mapping[str, Any]] = []
    resumed: list[Mapping[str, Any]] = []
    after: dict[str, Mapping[str, Any]] = {}
    for key, obj in current.items():
        guarded = halted and is_guarded_object(obj)
        if guarded:
            after[key] = obj
            if key not in stopping:
                stopped.append(obj)
        elif key in stopping:
            resumed.append(obj)
    return GuardChanges(stopped, resumed, after)


# ---------------------------------------------------------------------------------------------- announcement


class AnnouncementError(ValueError):
    """A Cluster's guard announcement is malformed (the message says which annotation and why)."""


@dataclass(frozen=True)
class Announcement:
    fence_after: float
    permit_hold: float


def announcement_patch(fence_after: float, permit_hold: float) -> dict[str, Any]:
    """The merge patch with which an agent announces its guard on its Cluster."""
    return {"metadata": {"annotations": {ANNOTATION_FENCE_AFTER: go_duration(fence_after),
                                         ANNOTATION_PERMIT_HOLD: go_duration(permit_hold)}}}


def parse_announcement(cluster: Mapping[str, Any] | None) -> Announcement | None:
    """The guard a Cluster announces; None when it announces none (neither annotation). Raises
    AnnouncementError when one is missing, is not a Go duration, or is not greater than 0."""
    annotations = as_map(meta_of(cluster).get("annotations"))
    raw = {k: annotations.get(k) for k in (ANNOTATION_FENCE_AFTER, ANNOTATION_PERMIT_HOLD)}
    if all(v is None for v in raw.values()):
        return None
    values: dict[str, float] = {}
    for key, value in raw.items():
        if not isinstance(value, str):
            raise AnnouncementError(f"annotation {key} is missing (both {ANNOTATION_FENCE_AFTER} and "
                                    f"{ANNOTATION_PERMIT_HOLD} announce a guard)")
        try:
            seconds = parse_go_duration(value)
        except ValueError as e:
            raise AnnouncementError(f"annotation {key}: {e}") from None
        if not seconds > 0:
            raise AnnouncementError(f"annotation {key}: {value!r} must be greater than 0")
        values[key] = seconds
    return Announcement(values[ANNOTATION_FENCE_AFTER], values[ANNOTATION_PERMIT_HOLD])
