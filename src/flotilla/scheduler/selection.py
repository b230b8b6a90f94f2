"""Ordering the feasible clusters and selecting the ones to use (spread constraints).

Candidate order, used everywhere: overflow order ascending (0 = the affinity term itself, k = its k-th
overflow affinity), then score descending, then available replicas descending, then name ascending.
The order is total, so it does not depend on the order clusters were given in.

Selection:

* no spread constraints, or static-weight division -> every feasible cluster;
* a ``region`` constraint -> region selection (regions scored, the best combination found by a depth
  first search, one top cluster per chosen region, then filled up to the cluster ``maxGroups``);
* else a ``cluster`` constraint -> the first ``min(#feasible, maxGroups)`` candidates, and for Divided
  non-static division, swapped for larger clusters (from the last chosen one backwards) until their
  available replicas cover ``spec.replicas``;
* anything else (``zone``/``provider``/``spreadByLabel`` without a ``cluster`` constraint) is an error,
  as in Karmada.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .affinity import cluster_matches, term_for
from .errors import SchedulerError
from .model import BindingSpec, Cluster, Placement, SpreadConstraint

__all__ = [
    "NO_MATCH_OVERFLOW_ORDER",
    "Candidate",
    "GroupInfo",
    "build_candidates",
    "candidate_sort_key",
    "group_score",
    "overflow_order",
    "select_clusters",
    "select_groups",
]

NO_MATCH_OVERFLOW_ORDER = 1000
_WEIGHT_UNIT = 1000


@dataclass(slots=True)
class Candidate:
    """A feasible cluster with what ordering and division need (Karmada's ``ClusterDetailInfo``).

    ``allocatable_replicas`` is what the cluster can still take; ``available_replicas`` adds the
    replicas the binding already has there. Built once and never changed; not a frozen dataclass only because
    a frozen one's constructor costs twice as much, and a scheduling run builds one per feasible cluster.
    """

    cluster: Cluster
    score: int = 0
    overflow_order: int = 0
    available_replicas: int = 0
    allocatable_replicas: int = 0

    @property
    def name(self) -> str:
        return self.cluster.name


def candidate_sort_key(c: Candidate) -> tuple[int, int, int, str]:
    return (c.overflow_order, -c.score, -c.available_replicas, c.name)


def overflow_order(spec: BindingSpec, affinity_name: str, cluster: Cluster) -> int:
    """0 for the term's own affinity (or no ``clusterAffinities``), k for its k-th overflow, else 1000."""
    placement = spec.placement
    if placement.cluster_affinity is not None or not placement.cluster_affinities:
        return 0
    term = term_for(spec, affinity_name)
    if term is None:
        return NO_MATCH_OVERFLOW_ORDER
    if cluster_matches(cluster, term.affinity):
        return 0
    for index, affinity in enumerate(term.overflow):
        if cluster_matches(cluster, affinity):
            return index + 1
    return NO_MATCH_OVERFLOW_ORDER


def build_candidates(
    clusters: Sequence[Cluster],
    spec: BindingSpec,
    affinity_name: str,
    scores: Mapping[str, int],
    allocatable: Mapping[str, int],
) -> list[Candidate]:
    """The feasible clusters as sorted :class:`Candidate` entries."""
    placement = spec.placement
    if placement.cluster_affinity is not None or not placement.cluster_affinities:
        orders = [0] * len(clusters)  # overflow_order's first case, for every cluster at once
    else:
        orders = [overflow_order(spec, affinity_name, c) for c in clusters]
    assigned = {t.name: t.replicas for t in reversed(spec.clusters)}  # the first entry of a name wins
    candidates = [
        Candidate(
            cluster=c,
            score=scores.get(c.name, 0),
            overflow_order=order,
            available_replicas=allocatable[c.name] + assigned.get(c.name, 0),
            allocatable_replicas=allocatable[c.name],
        )
        for c, order in zip(clusters, orders, strict=True)
    ]
    candidates.sort(key=candidate_sort_key)
    return candidates


# ------------------------------------------------------------------------------------------------
# Selection entry point
# ------------------------------------------------------------------------------------------------


def select_clusters(
    placement: Placement, candidates: Sequence[Candidate], need_replicas: int
) -> list[Candidate]:
    """Choose among the sorted candidates according to the spread constraints.

    ``need_replicas`` is ``spec.replicas``; it is ignored for Duplicated placements. Raises
    :class:`SchedulerError` when the constraints cannot be met.
    """
    if not placement.spread_constraints or placement.spread_constraints_ignored():
        return list(candidates)
    need: int | None = None if placement.is_duplicated else need_replicas
    by_field: dict[str, SpreadConstraint] = {}
    for constraint in placement.spread_constraints:
        by_field[constraint.spread_by_field] = constraint  # a later constraint on the same field wins
    if "region" in by_field:
        return _select_by_region(placement, by_field, candidates, need_replicas)
    if "cluster" in by_field:
        return _select_by_cluster(by_field["cluster"], candidates, need)
    raise SchedulerError("just support cluster and region spread constraint")


# ------------------------------------------------------------------------------------------------
# By cluster
# ------------------------------------------------------------------------------------------------


def _select_by_cluster(
    constraint: SpreadConstraint, candidates: Sequence[Candidate], need_replicas: int | None
) -> list[Candidate]:
    total = len(candidates)
    if total < constraint.min_groups:
        raise SchedulerError("the number of feasible clusters is less than spreadConstraint.MinGroups")
    if constraint.max_groups <= 0:
        # Karmada selects zero clusters and then fails with a vague message (D12: say why).
        raise SchedulerError(
            "the cluster spread constraint has maxGroups 0, so no cluster can be selected; set maxGroups "
            "(e.g. 1 to keep the workload in a single cluster)"
        )
    need_count = min(total, constraint.max_groups)
    if need_replicas is None:
        return list(candidates[:need_count])
    selected = _select_by_available_replicas(candidates, need_count, need_replicas)
    if selected is None:
        raise SchedulerError(f"no enough resource when selecting {need_count} clusters")
    return selected


def _select_by_available_replicas(
    candidates: Sequence[Candidate], need_count: int, need_replicas: int
) -> list[Candidate] | None:
    """Take the first ``need_count``; while short of replicas, from the last chosen position to the
    first, swap the chosen cluster with the largest strictly bigger one not chosen (the first of equals)."""
    pool = list(candidates)

    def enough() -> bool:
        return sum(c.available_replicas for c in pool[:need_count]) >= need_replicas

    position = need_count - 1
    while not enough() and position >= 0:
        best_index = -1
        best_value = pool[position].available_replicas
        for j in range(need_count, len(pool)):
            if pool[j].available_replicas > best_value:
                best_index, best_value = j, pool[j].available_replicas
        if best_index != -1:
            pool[position], pool[best_index] = pool[best_index], pool[position]
        position -= 1
    return pool[:need_count] if enough() else None


# ------------------------------------------------------------------------------------------------
# By region
# ------------------------------------------------------------------------------------------------


def group_score(
    clusters: Sequence[Candidate],
    placement: Placement,
    replicas: int,
    min_groups: int,
    cluster_min_groups: int,
) -> int:
    """Karmada's ``calcGroupScore`` for one region (its clusters in candidate order).

    Duplicated: ``valid * 1000 + sum(score of valid) // valid`` where valid clusters can hold all the
    replicas (0 if none). Divided: walk the clusters accumulating available replicas until at least
    ``max(cluster minGroups, region minGroups)`` clusters and ``ceil(replicas / region minGroups)``
    replicas are reached; short -> ``sum * 1000 + sum(score) // len(clusters)``, else
    ``target * 1000 + sum(score) // count``.
    """
    if placement.is_duplicated:
        valid = [c for c in clusters if c.available_replicas >= replicas]
        if not valid:
            return 0
        return len(valid) * _WEIGHT_UNIT + sum(c.score for c in valid) // len(valid)
    target = math.ceil(replicas / max(min_groups, 1))
    needed_clusters = max(cluster_min_groups, min_groups)
    total_available = 0
    total_score = 0
    count = 0
    for c in clusters:
        total_available += c.available_replicas
        total_score += c.score
        count += 1
        if count >= needed_clusters and total_available >= target:
            break
    if total_available < target:
        return total_available * _WEIGHT_UNIT + total_score // len(clusters)
    return target * _WEIGHT_UNIT + total_score // count


def _select_by_region(
    placement: Placement,
    by_field: Mapping[str, SpreadConstraint],
    candidates: Sequence[Candidate],
    replicas: int,
) -> list[Candidate]:
    region_constraint = by_field["region"]
    # Without a cluster constraint Karmada reads a zero-valued one (minGroups 0, maxGroups 0).
    cluster_constraint = by_field.get("cluster", SpreadConstraint(spread_by_field="cluster", min_groups=0))
    regions: dict[str, list[Candidate]] = {}
    for c in candidates:
        if c.cluster.region:
            regions.setdefault(c.cluster.region, []).append(c)
    if len(regions) < region_constraint.min_groups:
        raise SchedulerError("the number of feasible region is less than spreadConstraint.MinGroups")
    groups = [
        GroupInfo(
            name=name,
            value=len(members),
            weight=group_score(
                members, placement, replicas, region_constraint.min_groups, cluster_constraint.min_groups
            ),
        )
        for name, members in regions.items()
    ]
    chosen = select_groups(
        groups, region_constraint.min_groups, region_constraint.max_groups, cluster_constraint.min_groups
    )
    if not chosen:
        raise SchedulerError("the number of clusters is less than the cluster spreadConstraint.MinGroups")
    selected = [regions[g.name][0] for g in chosen]
    rest = [c for g in chosen for c in regions[g.name][1:]]
    need_count = min(len(rest) + len(selected), cluster_constraint.max_groups)
    rest_count = need_count - len(selected)
    if rest_count > 0:
        rest.sort(key=candidate_sort_key)
        selected.extend(rest[:rest_count])
    return selected


@dataclass(frozen=True)
class GroupInfo:
    """A topology group (a region): ``value`` = its cluster count, ``weight`` = its score."""

    name: str
    value: int
    weight: int


@dataclass(frozen=True)
class _Path:
    id: int
    groups: tuple[GroupInfo, ...]
    weight: int
    value: int

    def has_prefix(self, other: _Path) -> bool:
        """``other`` is strictly shorter and its groups are the first groups of this path."""
        if len(other.groups) >= len(self.groups):
            return False
        return all(self.groups[i].name == g.name for i, g in enumerate(other.groups))


def select_groups(
    groups: Sequence[GroupInfo], min_groups: int, max_groups: int, target: int
) -> list[GroupInfo]:
    """Choose ``min_groups..max_groups`` groups whose values sum to at least ``target``.

    Groups are tried in (value asc, weight desc, name asc) order by a depth-first search that records a
    combination as soon as it is feasible (and does not extend it). The best path has the highest total
    weight, then the highest total value, then was found first; a feasible path that is a strict prefix
    of the best one (both sorted by weight desc, name asc) replaces it. Returns the chosen groups sorted
    by weight descending, then name. When there are exactly ``min_groups`` groups only the path taking
    all of them is considered.
    """
    if not groups:
        return []
    ordered = sorted(groups, key=lambda g: (g.value, -g.weight, g.name)) if len(groups) > 1 else list(groups)
    paths: list[_Path] = []
    current: list[GroupInfo] = []
    take_all_only = len(ordered) == min_groups

    def dfs(total: int, begin: int) -> None:
        if total >= target and min_groups <= len(current) <= max_groups:
            members = tuple(sorted(current, key=lambda g: (-g.weight, g.name)))
            paths.append(
                _Path(
                    id=len(paths) + 1,
                    groups=members,
                    weight=sum(g.weight for g in members),
                    value=sum(g.value for g in members),
                )
            )
            return
        if len(current) >= max_groups:
            return
        for i in range(begin, len(ordered)):
            current.append(ordered[i])
            dfs(total + ordered[i].value, i + 1)
            if take_all_only:
                return
            current.pop()

    dfs(0, 0)
    if not paths:
        return []
    if len(paths) == 1:
        return list(paths[0].groups)
    ranked = sorted(paths, key=lambda p: (-p.weight, -p.value, p.id))
    best = ranked[0]
    for path in ranked[1:]:
        if best.has_prefix(path):
            best = path
    return list(best.groups)
