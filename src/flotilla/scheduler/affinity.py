"""Cluster affinity matching (Karmada's ``util.ClusterMatches``) and the affinity a scheduling attempt uses.

Shared by the ClusterAffinity filter plugin, spread selection, replica division and, outside the scheduler,
by policy matching and the reschedule triggers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from flotilla.kube.selectors import LabelSelector, Operator, Requirement, SelectorError

from .errors import ModelError
from .model import BindingSpec, Cluster, ClusterAffinity, ClusterAffinityTerm, FieldRequirement, parse_cluster

__all__ = ["affinities_for", "cluster_identity", "cluster_matches", "cluster_object_matches", "term_for"]

_NODE_SELECTOR_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}


@lru_cache(maxsize=4096)
def _field_selector(requirements: tuple[FieldRequirement, ...]) -> LabelSelector | None:
    """Non-zone field requirements as a label selector; ``None`` if any is invalid (never matches)."""
    built = []
    for r in requirements:
        op = _NODE_SELECTOR_OPERATORS.get(r.operator)
        if op is None:
            return None
        try:
            built.append(Requirement.create(r.key, op, r.values))
        except SelectorError:
            return None
    return LabelSelector(tuple(built))


def _zones_match(requirement: FieldRequirement, zones: Sequence[str]) -> bool:
    op = requirement.operator
    if op == "In":
        return any(z in requirement.values for z in zones)
    if op == "NotIn":
        return not any(z in requirement.values for z in zones)
    if op == "Exists":
        return len(zones) > 0
    if op == "DoesNotExist":
        return len(zones) == 0
    return False


def _fields_match(cluster: Cluster, requirements: tuple[FieldRequirement, ...]) -> bool:
    others = []
    for r in requirements:
        if r.key == "zone":
            if not _zones_match(r, cluster.zones):
                return False
        else:
            others.append(r)
    if not others:
        return True
    selector = _field_selector(tuple(others))
    if selector is None:
        return False
    fields = {}
    if cluster.provider:
        fields["provider"] = cluster.provider
    if cluster.region:
        fields["region"] = cluster.region
    return selector.matches(fields)


def cluster_matches(cluster: Cluster, affinity: ClusterAffinity) -> bool:
    """Whether ``cluster`` satisfies ``affinity`` (exclude, labelSelector, fieldSelector, clusterNames)."""
    if affinity.exclude and cluster.name in affinity.exclude_set:
        return False
    if affinity.label_selector is not None and not affinity.label_selector.matches(cluster.labels):
        return False
    if affinity.field_selector is not None and not _fields_match(cluster, affinity.field_selector):
        return False
    return not affinity.cluster_names or cluster.name in affinity.cluster_name_set


def term_for(spec: BindingSpec, affinity_name: str) -> ClusterAffinityTerm | None:
    """The ``clusterAffinities`` term named ``affinity_name`` (``None`` with a single ``clusterAffinity``)."""
    placement = spec.placement
    if placement.cluster_affinity is not None or not placement.cluster_affinities:
        return None
    for term in placement.cluster_affinities:
        if term.name == affinity_name:
            return term
    return None


def affinities_for(spec: BindingSpec, affinity_name: str) -> list[ClusterAffinity] | None:
    """The affinities a cluster must match one of; ``None`` means every cluster matches.

    With ``clusterAffinities`` only the term being tried counts, plus (for workloads) its
    ``overflowAffinities``.
    """
    placement = spec.placement
    if placement.cluster_affinity is not None:
        return [placement.cluster_affinity]
    term = term_for(spec, affinity_name)
    if term is None:
        return None
    result = [term.affinity]
    if spec.is_workload:
        result.extend(term.overflow)
    return result


def cluster_object_matches(cluster: Mapping[str, Any], affinity: Mapping[str, Any] | None) -> bool:
    """Whether ``cluster`` (a Cluster object) satisfies a ``ClusterAffinity``; None matches all.

    The scheduler's rule (exclude, labelSelector, fieldSelector on provider/region/zone, clusterNames),
    applied to plain objects; a malformed cluster or selector matches nothing.
    """
    if affinity is None:
        return True
    try:
        return cluster_matches(cluster_identity(cluster), ClusterAffinity.from_dict(affinity))
    except (ModelError, ValueError, TypeError):
        return False


def cluster_identity(cluster: Mapping[str, Any]) -> Cluster:
    """What an affinity looks at of a Cluster object (its name, labels, provider, region and zones), parsed
    without its status: the API enablements and resource summary there are most of a whole parse and no affinity
    reads them. Raises ModelError (or ValueError, TypeError) when the metadata or spec is malformed."""
    if not isinstance(cluster, Mapping):
        return parse_cluster(cluster)  # refused there, with the scheduler's message
    return parse_cluster({"metadata": cluster.get("metadata"), "spec": cluster.get("spec")})
