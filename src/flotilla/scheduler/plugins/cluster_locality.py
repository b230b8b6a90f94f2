"""ClusterLocality: prefer the clusters the binding already targets.

Karmada runs this score and ClusterAffinity's (always 0) without weights, so a total score is 0 or 100. Its
only effect is to put clusters that already hold the workload first when a subset must be chosen (spread
constraints, Aggregated division).
"""

from __future__ import annotations

from ..framework import MAX_SCORE, MIN_SCORE
from ..model import BindingSpec, Cluster

__all__ = ["ClusterLocalityPlugin"]


class ClusterLocalityPlugin:
    name = "ClusterLocality"

    def score(self, spec: BindingSpec, cluster: Cluster) -> int:
        """100 if the binding already targets the cluster, else 0."""
        if spec.clusters and spec.target_contains(cluster.name):
            return MAX_SCORE
        return MIN_SCORE
