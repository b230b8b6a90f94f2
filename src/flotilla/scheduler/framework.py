"""The plugin seam of the scheduler (Karmada's scheduler framework): filter and score plugins and their runners.

A filter plugin decides whether a cluster may receive a binding at all: :meth:`FilterPlugin.filter` returns
``None`` when the cluster passes, or Karmada's reason text when it does not. A score plugin states a preference
among the clusters that passed: :meth:`ScorePlugin.score` returns a number from :data:`MIN_SCORE` to
:data:`MAX_SCORE`. A plugin's ``name`` is Karmada's plugin name; it is what a :class:`FilterFailure` reports.

The plugins themselves are in :mod:`flotilla.scheduler.plugins`, one module each, listed in order in that
package. :func:`run_filters` applies the filters in that order and reports the first failure, as Karmada's
framework does (Karmada's own order is Go map order, i.e. random per process; Flotilla's is fixed:
ClusterAffinity, SpreadConstraint, APIEnablement, TaintToleration, ClusterEviction, from what the policy asks
for to what is transient). :func:`score_clusters` adds up the scores without weights, as Karmada does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Protocol

from .affinity import affinities_for
from .errors import FilterFailure
from .model import BindingSpec, Cluster, ClusterAffinity

__all__ = [
    "MAX_SCORE",
    "MIN_SCORE",
    "FilterContext",
    "FilterPlugin",
    "ScorePlugin",
    "run_filters",
    "score_clusters",
]

MIN_SCORE = 0
MAX_SCORE = 100


@dataclass(frozen=True)
class FilterContext:
    """Everything a filter may look at besides the cluster.

    ``affinity_name`` is the ``clusterAffinities`` term being tried (Karmada's
    ``status.schedulerObservingAffinityName`` during one scheduling attempt); ``now`` is the time of the
    attempt (the TaintToleration filter compares taint deadlines with it).
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


class FilterPlugin(Protocol):
    """A filter: which clusters may receive a binding at all."""

    #: Karmada's plugin name, reported with a failure
    name: str

    def filter(self, ctx: FilterContext, cluster: Cluster) -> str | None:
        """``None`` when ``cluster`` passes; otherwise the reason it does not (Karmada's text)."""
        ...


class ScorePlugin(Protocol):
    """A score: a preference among the clusters that passed every filter."""

    #: Karmada's plugin name
    name: str

    def score(self, spec: BindingSpec, cluster: Cluster) -> int:
        """From :data:`MIN_SCORE` to :data:`MAX_SCORE`; higher is preferred."""
        ...


# The plugin modules import this one, so the registered lists are looked up on first use (once: an import
# statement costs more than a filter, and the runners run once per cluster).


@cache
def _registered_filters() -> Sequence[FilterPlugin]:
    from .plugins import FILTER_PLUGINS

    return FILTER_PLUGINS


@cache
def _registered_scores() -> Sequence[ScorePlugin]:
    from .plugins import SCORE_PLUGINS

    return SCORE_PLUGINS


#: the failures made so far, shared: a FilterFailure is a value, and a run over many clusters repeats a few of them
_FAILURES: dict[tuple[str, str], FilterFailure] = {}
_FAILURES_KEPT = 1024  # reasons naming a taint vary with the fleet's taints: past this many, new ones are not kept


def run_filters(
    ctx: FilterContext, cluster: Cluster, plugins: Sequence[FilterPlugin] | None = None
) -> FilterFailure | None:
    """Apply every filter in order (the registered ones by default); the first failure, or ``None`` if
    the cluster is feasible."""
    for plugin in _registered_filters() if plugins is None else plugins:
        reason = plugin.filter(ctx, cluster)
        if reason is not None:
            name = plugin.name
            failure = _FAILURES.get((name, reason))
            if failure is None:
                failure = FilterFailure(plugin=name, reason=reason)
                if len(_FAILURES) < _FAILURES_KEPT:
                    _FAILURES[(name, reason)] = failure
            return failure
    return None


def score_clusters(
    spec: BindingSpec, clusters: Sequence[Cluster], plugins: Sequence[ScorePlugin] | None = None
) -> dict[str, int]:
    """Total score per cluster name: the unweighted sum of the score plugins (the registered ones by default)."""
    scorers = _registered_scores() if plugins is None else plugins
    totals: dict[str, int] = {}
    for c in clusters:
        total = 0
        for plugin in scorers:
            total += plugin.score(spec, c)
        totals[c.name] = total
    return totals
