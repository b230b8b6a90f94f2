"""Filter plugins: which clusters may receive a binding at all.

Each filter returns ``None`` when the cluster passes, or Karmada's reason text when it does not.
:func:`run_filters` applies them in a fixed order and reports the first failure, as Karmada's
framework does (Karmada's own order is Go map order, i.e. random per process; Flotilla's is fixed:
ClusterAffinity, SpreadConstraint, APIEnablement, TaintToleration, ClusterEviction — from what the
policy asks for to what is transient).

Deliberate divergence **D11**: a cluster that is not already a target is also filtered out when one of
its ``NoExecute`` taints is tolerated only for a ``tolerationSeconds`` that has already run out
(``timeAdded + tolerationSeconds <= now``, computed exactly as the taint manager does), so that a
workload is not placed on a cluster it would be evicted from at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache

from flotilla.kube.selectors import LabelSelector, Operator, Requirement, SelectorError
from flotilla.kube.taints import matching_tolerations, no_execute_taints

from .errors import FilterFailure
from .model import (
    NO_EXECUTE,
    NO_SCHEDULE,
    BindingSpec,
    Cluster,
    ClusterAffinity,
    ClusterAffinityTerm,
    FieldRequirement,
    Taint,
    Toleration,
)

__all__ = [
    "FILTERS",
    "FilterContext",
    "affinities_for",
    "cluster_matches",
    "expired_no_execute_taint",
    "filter_api_enablement",
    "filter_cluster_affinity",
    "filter_cluster_eviction",
    "filter_spread_constraint",
    "filter_taint_toleration",
    "find_untolerated_taint",
    "run_filters",
    "term_for",
]

REASON_AFFINITY = "cluster(s) did not match the placement cluster affinity constraint"
REASON_API = "cluster(s) did not have the API resource"
REASON_EVICTION = "cluster(s) is in the process of eviction"
REASON_NO_PROVIDER = "cluster(s) did not have provider property"
REASON_NO_REGION = "cluster(s) did not have region property"
REASON_NO_ZONES = "cluster(s) did not have zones property"
EXPIRED_SUFFIX = " (toleration expired)"


@dataclass(frozen=True)
class FilterContext:
    """Everything a filter may look at besides the cluster.

    ``affinity_name`` is the ``clusterAffinities`` term being tried (Karmada's
    ``status.schedulerObservingAffinityName`` during one scheduling attempt); ``now`` is used by D11.
    """

    spec: BindingSpec
    now: datetime
    affinity_name: str = ""
    # derived once per scheduling attempt (the filters run once per cluster)
    affinities: list[ClusterAffinity] | None = field(init=False, repr=False, compare=False)
    targets: frozenset[str] = field(init=False, repr=False, compare=False)
    evicting: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "affinities", affinities_for(self.spec, self.affinity_name))
        object.__setattr__(self, "targets", frozenset(c.name for c in self.spec.clusters))
        object.__setattr__(self, "evicting",
                           frozenset(t.from_cluster for t in self.spec.graceful_eviction_tasks))


# ------------------------------------------------------------------------------------------------
# Cluster affinity matching (Karmada's util.ClusterMatches)
# ------------------------------------------------------------------------------------------------

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


# ------------------------------------------------------------------------------------------------
# Taints
# ------------------------------------------------------------------------------------------------


def find_untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint no toleration tolerates (``PreferNoSchedule`` ignored)."""
    for taint in taints:
        if taint.effect not in (NO_SCHEDULE, NO_EXECUTE):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def expired_no_execute_taint(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], now: datetime
) -> Taint | None:
    """D11: the NoExecute taint whose toleration has run out at ``now``, as the taint manager sees it.

    The taint manager takes, for every NoExecute taint in order, the *first* toleration that tolerates
    it; then every pair (such a toleration with ``tolerationSeconds``) x (a NoExecute taint with
    ``timeAdded``) that tolerates gives a deadline ``timeAdded + tolerationSeconds``. When the earliest
    deadline is not after ``now`` the binding is evicted at once. Returns the taint of that earliest
    deadline, or ``None`` when nothing has expired (or some taint is not tolerated at all, which
    :func:`find_untolerated_taint` reports).
    """
    no_execute = no_execute_taints(taints)
    if not no_execute:
        return None
    all_tolerated, used = matching_tolerations(no_execute, tolerations)
    if not all_tolerated:
        return None
    earliest: tuple[datetime, Taint] | None = None
    for tol in used:
        if tol.toleration_seconds is None:
            continue
        for taint in no_execute:
            if taint.time_added is None or not tol.tolerates(taint):
                continue
            deadline = taint.time_added + timedelta(seconds=tol.toleration_seconds)
            if earliest is None or deadline < earliest[0]:
                earliest = (deadline, taint)
    if earliest is not None and earliest[0] <= now:
        return earliest[1]
    return None


# ------------------------------------------------------------------------------------------------
# The filters
# ------------------------------------------------------------------------------------------------


def filter_cluster_affinity(ctx: FilterContext, cluster: Cluster) -> str | None:
    affinities = ctx.affinities
    if affinities is None:
        return None
    for affinity in affinities:
        if cluster_matches(cluster, affinity):
            return None
    return REASON_AFFINITY


def filter_taint_toleration(ctx: FilterContext, cluster: Cluster) -> str | None:
    """Untolerated NoSchedule/NoExecute taints keep *new* placements away; current targets always pass."""
    if cluster.name in ctx.targets or not cluster.taints:
        return None
    tolerations = ctx.spec.placement.cluster_tolerations
    taint = find_untolerated_taint(cluster.taints, tolerations)
    if taint is not None:
        return f"cluster(s) had untolerated taint {{{taint}}}"
    expired = expired_no_execute_taint(cluster.taints, tolerations, ctx.now)
    if expired is not None:
        return f"cluster(s) had untolerated taint {{{expired}}}{EXPIRED_SUFFIX}"
    return None


def filter_api_enablement(ctx: FilterContext, cluster: Cluster) -> str | None:
    """The cluster must be known to serve the template's kind (current targets always pass)."""
    if cluster.name in ctx.targets:
        return None
    resource = ctx.spec.resource
    if cluster.api_enabled(resource.api_version, resource.kind) == "Enabled":
        return None
    return REASON_API


def filter_spread_constraint(ctx: FilterContext, cluster: Cluster) -> str | None:
    """A cluster lacking the property a spread constraint spreads by cannot be used."""
    for constraint in ctx.spec.placement.spread_constraints:
        if constraint.spread_by_field == "provider" and not cluster.provider:
            return REASON_NO_PROVIDER
        if constraint.spread_by_field == "region" and not cluster.region:
            return REASON_NO_REGION
        if constraint.spread_by_field == "zone" and not cluster.zones:
            return REASON_NO_ZONES
    return None


def filter_cluster_eviction(ctx: FilterContext, cluster: Cluster) -> str | None:
    """A cluster with a graceful-eviction task in flight for this binding is skipped (any purge mode)."""
    if cluster.name in ctx.evicting:
        return REASON_EVICTION
    return None


FilterFunc = Callable[[FilterContext, Cluster], str | None]

FILTERS: tuple[tuple[str, FilterFunc], ...] = (
    ("ClusterAffinity", filter_cluster_affinity),
    ("SpreadConstraint", filter_spread_constraint),
    ("APIEnablement", filter_api_enablement),
    ("TaintToleration", filter_taint_toleration),
    ("ClusterEviction", filter_cluster_eviction),
)


#: the failures made so far, shared: a FilterFailure is a value, and a run over many clusters repeats a few of them
_FAILURES: dict[tuple[str, str], FilterFailure] = {}
_FAILURES_KEPT = 1024  # reasons naming a taint vary with the fleet's taints: past this many, new ones are not kept


def run_filters(ctx: FilterContext, cluster: Cluster) -> FilterFailure | None:
    """Apply every filter in order; the first failure, or ``None`` if the cluster is feasible."""
    for name, func in FILTERS:
        reason = func(ctx, cluster)
        if reason is not None:
            failure = _FAILURES.get((name, reason))
            if failure is None:
                failure = FilterFailure(plugin=name, reason=reason)
                if len(_FAILURES) < _FAILURES_KEPT:
                    _FAILURES[(name, reason)] = failure
            return failure
    return None
