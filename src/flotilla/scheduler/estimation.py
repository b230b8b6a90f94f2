"""How many more replicas each cluster can take (Karmada's general estimator and ``calAvailableReplicas``).

The general estimator reads ``status.resourceSummary``:

* no summary -> 0;
* ``podsLeft = allocatable.pods - allocated.pods - allocating.pods`` (<= 0 -> 0);
* without replica requirements -> ``podsLeft``;
* otherwise, for every requested resource with a positive request:
  ``floor((allocatable - allocated - allocating) / request)`` (CPU in millicores, everything else in
  whole units; a resource the cluster does not list, or has none left of, gives 0), and the result is the
  minimum of those and ``podsLeft``.

Other estimators (Karmada's accurate per-cluster estimator) can be passed in as plain numbers; the
smallest answer wins and ``-1`` means "no answer". Not implemented: the resource-model based estimate
(``CustomizedClusterResourceModeling`` with ``allocatableModelings``).

Multi-component workloads (``MultiplePodTemplatesScheduling``, :func:`multi_template_applicable`) are estimated in
whole *sets* (one replica count of every component), Karmada's ``MaxAvailableComponentSets`` of the general
estimator: ``podsLeft // (pods of one set)``, and for every resource one set requests,
``floor(available / request of one set)``; the smallest bound wins (a resource the cluster has none left of gives
0). Amounts are in millicores for CPU and whole units otherwise; Karmada uses milli-units for quantities written
in decimal notation and whole units for binary ones (``Gi``), which gives other answers when a request and the
cluster's summary write one resource in different notations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from .model import (
    MAX_INT32,
    BindingSpec,
    Cluster,
    Component,
    ReplicaRequirements,
    milli_value,
    quantity_value,
)

__all__ = ["UNAUTHENTIC_REPLICA", "allocatable_replicas", "general_component_sets", "general_estimate",
           "multi_template_applicable"]

UNAUTHENTIC_REPLICA = -1
_ZERO = Fraction(0)


def general_estimate(cluster: Cluster, requirements: ReplicaRequirements | None) -> int:
    """The general estimator's maximum number of replicas for ``cluster`` (clamped to int32)."""
    summary = cluster.resource_summary
    pods_left = cluster.pods_left
    if summary is None or pods_left is None:
        return 0
    if pods_left <= 0:
        return 0
    maximum = pods_left
    if requirements is not None:
        allocatable = summary.allocatable or {}
        allocated = summary.allocated or {}
        allocating = summary.allocating or {}
        for name, request in requirements.resource_request.items():
            if quantity_value(request) <= 0:
                continue
            if name not in allocatable:
                return 0
            available = (
                allocatable[name] - allocated.get(name, _ZERO) - allocating.get(name, _ZERO)
            )
            if quantity_value(available) <= 0:
                return 0
            if name == "cpu":
                per_resource = milli_value(available) // milli_value(request)
            else:
                per_resource = quantity_value(available) // quantity_value(request)
            maximum = min(maximum, per_resource)
    return min(maximum, MAX_INT32)


def multi_template_applicable(spec: BindingSpec) -> bool:
    """Karmada's ``isMultiTemplateSchedulingApplicable``: at least two components, and a ``cluster`` spread
    constraint with ``minGroups`` = ``maxGroups`` = 1 (the workload goes to exactly one cluster, as a whole)."""
    if len(spec.component_specs) < 2:
        return False
    return any(c.spread_by_field == "cluster" and c.min_groups == 1 and c.max_groups == 1
               for c in spec.placement.spread_constraints)


def _amount(name: str, q: Fraction) -> int:
    return milli_value(q) if name == "cpu" else quantity_value(q)


def general_component_sets(cluster: Cluster, components: Sequence[Component]) -> int:
    """The general estimator's number of whole component sets ``cluster`` can take (clamped to int32)."""
    summary = cluster.resource_summary
    pods_left = cluster.pods_left
    if summary is None or pods_left is None or pods_left <= 0:
        return 0
    pods_per_set = sum(c.replicas for c in components)
    if pods_per_set <= 0:
        return min(pods_left, MAX_INT32)
    per_set: dict[str, int] = {}
    for c in components:
        for name, request in c.resource_request.items():
            per_set[name] = per_set.get(name, 0) + _amount(name, request) * c.replicas
    maximum = pods_left // pods_per_set
    allocatable = summary.allocatable or {}
    allocated = summary.allocated or {}
    allocating = summary.allocating or {}
    for name, request in per_set.items():
        if request <= 0:
            continue
        if name not in allocatable:
            return 0
        available = _amount(name, allocatable[name] - allocated.get(name, _ZERO) - allocating.get(name, _ZERO))
        if available <= 0:
            return 0
        maximum = min(maximum, available // request)
    return min(maximum, MAX_INT32)


def allocatable_replicas(
    clusters: Sequence[Cluster],
    spec: BindingSpec,
    extra_estimates: Mapping[str, int] | None = None,
    *,
    component_sets: bool = False,
) -> dict[str, int]:
    """Karmada's ``AllocatableReplicas`` per cluster name.

    For a binding with no replicas and no components estimation is skipped and every cluster gets
    ``MaxInt32``. Otherwise the minimum over the general estimator and ``extra_estimates`` (answers of
    ``-1`` ignored); a value still at ``MaxInt32`` is replaced by ``spec.replicas``. ``component_sets``: estimate
    whole component sets instead (:func:`general_component_sets`; the other estimators' replica answers do not
    apply to sets).
    """
    result = {c.name: MAX_INT32 for c in clusters}
    if spec.replicas == 0 and spec.components == 0:
        return result
    for cluster in clusters:
        if component_sets:
            estimate = general_component_sets(cluster, spec.component_specs)
        else:
            estimate = general_estimate(cluster, spec.replica_requirements)
        result[cluster.name] = min(result[cluster.name], estimate)
    if extra_estimates and not component_sets:
        for name, estimate in extra_estimates.items():
            if name in result and estimate != UNAUTHENTIC_REPLICA and estimate < result[name]:
                result[name] = estimate
    for name, value in result.items():
        if value == MAX_INT32:
            result[name] = spec.replicas
    return result
