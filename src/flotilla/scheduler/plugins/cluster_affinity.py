"""ClusterAffinity: a cluster must match the placement's cluster affinity (the term being tried, with
``clusterAffinities``). As in Karmada, the same plugin also scores, and scores every cluster the same."""

from __future__ import annotations

from ..affinity import cluster_matches
from ..framework import MIN_SCORE, FilterContext
from ..model import BindingSpec, Cluster

__all__ = ["REASON", "ClusterAffinityPlugin"]

REASON = "cluster(s) did not match the placement cluster affinity constraint"


class ClusterAffinityPlugin:
    name = "ClusterAffinity"

    def filter(self, ctx: FilterContext, cluster: Cluster) -> str | None:
        affinities = ctx.affinities
        if affinities is None:
            return None
        for affinity in affinities:
            if cluster_matches(cluster, affinity):
                return None
        return REASON

    def score(self, spec: BindingSpec, cluster: Cluster) -> int:
        """Karmada's ClusterAffinity plugin scores every cluster 0."""
        return MIN_SCORE
