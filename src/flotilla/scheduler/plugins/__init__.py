"""The scheduler's plugins, one module each, and the order they run in.

A new filter or score plugin is a new module here, a class with Karmada's plugin ``name`` and a ``filter``
and/or ``score`` method (see :mod:`flotilla.scheduler.framework`), plus its entry in the lists below. Filters
run in the order listed and the first failure is reported; scores are added up, so their order does not matter.
"""

from __future__ import annotations

from ..framework import FilterPlugin, ScorePlugin
from .api_enablement import APIEnablementPlugin
from .cluster_affinity import ClusterAffinityPlugin
from .cluster_eviction import ClusterEvictionPlugin
from .cluster_locality import ClusterLocalityPlugin
from .spread_constraint import SpreadConstraintPlugin
from .taint_toleration import TaintTolerationPlugin

__all__ = [
    "FILTER_PLUGINS",
    "SCORE_PLUGINS",
    "APIEnablementPlugin",
    "ClusterAffinityPlugin",
    "ClusterEvictionPlugin",
    "ClusterLocalityPlugin",
    "SpreadConstraintPlugin",
    "TaintTolerationPlugin",
]

_CLUSTER_AFFINITY = ClusterAffinityPlugin()  # a filter and a score, as in Karmada

#: from what the policy asks for to what is transient
FILTER_PLUGINS: tuple[FilterPlugin, ...] = (
    _CLUSTER_AFFINITY,
    SpreadConstraintPlugin(),
    APIEnablementPlugin(),
    TaintTolerationPlugin(),
    ClusterEvictionPlugin(),
)

SCORE_PLUGINS: tuple[ScorePlugin, ...] = (
    ClusterLocalityPlugin(),
    _CLUSTER_AFFINITY,
)
