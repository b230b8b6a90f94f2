"""Replica assignment: Duplicated, static weights, dynamic weights and Aggregated, on the Webster method.

**Webster (Sainte-Laguë)**: every seat goes, one at a time, to the party with the highest
``votes / (2 * seats + 1)``; equal priorities (exact float equality) go to the party with fewer seats, then
by name: ascending, or descending when the FNV-32a hash of the template UID is odd (an empty UID sorts
ascending). Each party has a distinct name, so the winner is unique and the result does not depend on
the order the parties are given in.

**Static weights** (recomputed from scratch): a cluster's weight is the largest ``weight`` of the
``staticWeightList`` rules whose ``targetCluster`` it matches; weight-0 clusters are left out; if nobody
has a weight, everybody weighs 1.

**Dynamic weights / Aggregated** (Steady mode unless a reschedule was requested, then Fresh):

* previous assignment = the binding's ``spec.clusters`` entries whose cluster is still a candidate;
* Steady, previous total == replicas -> kept as is;
* Steady scale up -> the missing replicas are divided by the clusters' allocatable replicas and added
  onto the previous assignment;
* Steady scale down -> the previous assignment is shrunk proportionally (Webster over its replicas);
* Fresh -> everything is divided from scratch by allocatable + currently assigned replicas;
* Aggregated additionally keeps only the shortest prefix (clusters holding replicas first) whose
  weights cover the target, i.e. as few clusters as possible.

Clusters left with 0 replicas are dropped from workload results.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import replace

from .affinity import cluster_matches, term_for
from .errors import SchedulerError, UnschedulableError
from .model import BindingSpec, Strategy, TargetCluster
from .selection import Candidate

__all__ = [
    "assign_replicas",
    "fnv32a",
    "merge_target_clusters",
    "overflow_enabled",
    "spread_by_weights",
    "static_weights",
    "tie_break_descending",
    "webster",
]


def fnv32a(data: bytes) -> int:
    """The 32-bit FNV-1a hash."""
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def tie_break_descending(uid: str) -> bool:
    """Whether Webster ties between equally seated parties go to the *later* name (odd UID hash)."""
    return bool(uid) and fnv32a(uid.encode()) & 1 == 1


class _Party:
    __slots__ = ("descending", "name", "priority", "seats", "votes")

    def __init__(self, name: str, votes: int, seats: int, descending: bool) -> None:
        self.name = name
        self.votes = votes
        self.seats = seats
        self.descending = descending
        self.priority = float(votes) / float(2 * seats + 1)

    def __lt__(self, other: _Party) -> bool:
        """``self`` gets the next seat before ``other``."""
        if self.priority != other.priority:
            return self.priority > other.priority
        if self.seats != other.seats:
            return self.seats < other.seats
        return self.name > other.name if self.descending else self.name < other.name


def webster(
    seats: int,
    votes: Mapping[str, int],
    initial: Mapping[str, int] | None = None,
    *,
    uid: str = "",
) -> list[TargetCluster]:
    """Allocate ``seats`` new seats by the Webster method; every party is returned, sorted by name.

    ``initial`` gives parties starting seats (a party only there has 0 votes).
    """
    parties: dict[str, tuple[int, int]] = {name: (0, s) for name, s in (initial or {}).items()}
    for name, v in votes.items():
        parties[name] = (v, parties.get(name, (0, 0))[1])
    if not parties:
        return []
    descending = tie_break_descending(uid)
    heap = [_Party(name, v, s, descending) for name, (v, s) in parties.items()]
    heapq.heapify(heap)
    for _ in range(max(seats, 0)):
        best = heap[0]
        heapq.heapreplace(heap, _Party(best.name, best.votes, best.seats + 1, descending))
    return [TargetCluster(p.name, p.seats) for p in sorted(heap, key=lambda p: p.name)]


def spread_by_weights(replicas: int, weights: Sequence[TargetCluster], uid: str = "") -> list[TargetCluster]:
    """Divide ``replicas`` in proportion to ``weights`` (the ``replicas`` field used as a weight).

    Nothing is returned when the weights sum to 0 (Karmada's dispenser then gives up).
    """
    if sum(w.replicas for w in weights) == 0:
        return []
    return webster(replicas, {w.name: w.replicas for w in weights}, uid=uid)


def merge_target_clusters(old: Sequence[TargetCluster], new: Sequence[TargetCluster]) -> list[TargetCluster]:
    """Add ``new`` onto ``old`` per cluster: ``new``'s order first, then clusters only in ``old``.

    (Karmada appends the latter in Go map order, i.e. randomly; Flotilla keeps ``old``'s order.)
    """
    if not old:
        return list(new)
    if not new:
        return list(old)
    previous = {c.name: c.replicas for c in old}
    merged = []
    for c in new:
        merged.append(TargetCluster(c.name, c.replicas + previous.pop(c.name, 0)))
    merged.extend(TargetCluster(c.name, c.replicas) for c in old if c.name in previous)
    return merged


def _by_replicas_desc(items: Sequence[TargetCluster]) -> list[TargetCluster]:
    # Go's sort.Sort is an insertion sort (stable) for up to 12 elements; Flotilla is stable always.
    return sorted(items, key=lambda t: -t.replicas)


# ------------------------------------------------------------------------------------------------
# Strategies
# ------------------------------------------------------------------------------------------------


def static_weights(candidates: Sequence[Candidate], spec: BindingSpec) -> dict[str, int]:
    """The static weight of every candidate that has one (every candidate weighs 1 if none has)."""
    rs = spec.placement.replica_scheduling
    wp = rs.weight_preference if rs is not None else None
    weights: dict[str, int] = {}
    if wp is None:
        weights = {c.name: 1 for c in candidates}
    else:
        for c in candidates:
            weight = 0
            for rule in wp.static_weights:
                if cluster_matches(c.cluster, rule.target):
                    weight = max(weight, rule.weight)
            if weight > 0:
                weights[c.name] = weight
    if sum(weights.values()) == 0:
        weights = {c.name: 1 for c in candidates}
    return weights


def _assign_static(candidates: Sequence[Candidate], spec: BindingSpec) -> list[TargetCluster]:
    return webster(spec.replicas, static_weights(candidates, spec), uid=spec.resource.uid)


def _divide_dynamic(
    available: list[TargetCluster],
    target: int,
    scheduled: list[TargetCluster],
    spec: BindingSpec,
    aggregated: bool,
) -> list[TargetCluster]:
    total = sum(a.replicas for a in available)
    if total < target:
        raise UnschedulableError(f"Clusters available replicas {total} are not enough to schedule.")
    if aggregated:
        prior = {c.name for c in scheduled if c.replicas > 0}
        if prior:
            available = [a for a in available if a.name in prior] + [
                a for a in available if a.name not in prior
            ]
        cumulative = 0
        for i, a in enumerate(available):
            cumulative += a.replicas
            if cumulative >= target:
                available = available[: i + 1]
                break
    return merge_target_clusters(scheduled, spread_by_weights(target, available, spec.resource.uid))


def _assign_dynamic(candidates: Sequence[Candidate], spec: BindingSpec, fresh: bool) -> list[TargetCluster]:
    aggregated = spec.placement.strategy is Strategy.AGGREGATED
    names = {c.name for c in candidates}
    scheduled = [c for c in spec.clusters if c.name in names]
    assigned = sum(c.replicas for c in scheduled)
    if fresh:
        current = {c.name: c.replicas for c in scheduled}
        weights = _by_replicas_desc(
            [TargetCluster(c.name, c.allocatable_replicas + current.get(c.name, 0)) for c in candidates]
        )
        try:
            return _divide_dynamic(weights, spec.replicas, [], spec, aggregated)
        except UnschedulableError as e:
            raise UnschedulableError(f"failed to do fresh scale: {e.message}") from e
    if assigned > spec.replicas:
        try:
            return _divide_dynamic(_by_replicas_desc(scheduled), spec.replicas, [], spec, aggregated)
        except UnschedulableError as e:
            raise UnschedulableError(f"failed to scale down: {e.message}") from e
    if assigned < spec.replicas:
        weights = _by_replicas_desc([TargetCluster(c.name, c.allocatable_replicas) for c in candidates])
        try:
            return _divide_dynamic(weights, spec.replicas - assigned, scheduled, spec, aggregated)
        except UnschedulableError as e:
            raise UnschedulableError(f"failed to scale up: {e.message}") from e
    return scheduled


def _assign_to_clusters(
    candidates: Sequence[Candidate], spec: BindingSpec, fresh: bool
) -> list[TargetCluster]:
    strategy = spec.placement.strategy
    if strategy is Strategy.DUPLICATED:
        result = [TargetCluster(c.name, spec.replicas) for c in candidates]
    elif strategy is Strategy.STATIC_WEIGHT:
        result = _assign_static(candidates, spec)
    else:
        result = _assign_dynamic(candidates, spec, fresh)
    return [c for c in result if c.replicas > 0]


def overflow_enabled(spec: BindingSpec, affinity_name: str) -> bool:
    """Whether the ``clusterAffinities`` term being used has overflow affinities."""
    if not affinity_name:
        return False
    term = term_for(spec, affinity_name)
    return term is not None and len(term.overflow) > 0


def assign_replicas(
    candidates: Sequence[Candidate],
    spec: BindingSpec,
    *,
    affinity_name: str = "",
    fresh: bool = False,
) -> list[TargetCluster]:
    """Assign replicas to the selected clusters (in candidate order).

    Non-workloads (no replicas and no replica requirements, or several components) get every selected
    cluster with 0 replicas. With overflow affinities the tiers are filled in order, each with at most
    its clusters' available replicas. ``fresh`` is Karmada's Fresh mode (an explicit reschedule).
    """
    if not candidates:
        raise SchedulerError("no clusters available to schedule")
    if not ((spec.replicas > 0 or spec.replica_requirements is not None) and spec.components <= 1):
        return [TargetCluster(c.name, 0) for c in candidates]
    if not overflow_enabled(spec, affinity_name):
        return _assign_to_clusters(candidates, spec, fresh)
    tiers: dict[int, list[Candidate]] = {}
    for c in candidates:
        tiers.setdefault(c.overflow_order, []).append(c)
    remaining = spec.replicas
    results: list[TargetCluster] = []
    for order in sorted(tiers):
        members = tiers[order]
        tier_replicas = min(remaining, sum(c.available_replicas for c in members))
        results.extend(_assign_to_clusters(members, replace(spec, replicas=tier_replicas), fresh))
        remaining -= tier_replicas
        if remaining <= 0:
            break
    if remaining > 0:
        raise UnschedulableError("Clusters available replicas are not enough to schedule.")
    return results
