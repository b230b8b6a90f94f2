"""Score plugins: a preference among feasible clusters.

Karmada runs ClusterLocality and ClusterAffinity (always 0) without weights, so a total score is 0 or
100. Its only effect is to put clusters that already hold the workload first when a subset must be
chosen (spread constraints, Aggregated division).
"""

from __future__ import annotations

from collections.abc import Sequence

from .model import BindingSpec, Cluster

__all__ = ["MAX_SCORE", "MIN_SCORE", "cluster_affinity_score", "cluster_locality_score", "score_clusters"]

MIN_SCORE = 0
MAX_SCORE = 100


def cluster_locality_score(spec: BindingSpec, cluster: Cluster) -> int:
    """100 if the binding already targets the cluster, else 0."""
    if spec.clusters and spec.target_contains(cluster.name):
        return MAX_SCORE
    return MIN_SCORE


def cluster_affinity_score(spec: BindingSpec, cluster: Cluster) -> int:
    """Karmada's ClusterAffinity plugin scores every cluster 0."""
    return MIN_SCORE


SCORERS = (cluster_locality_score, cluster_affinity_score)


def score_clusters(spec: BindingSpec, clusters: Sequence[Cluster]) -> dict[str, int]:
    """Total score per cluster name (the unweighted sum of the score plugins)."""
    totals: dict[str, int] = {}
    for c in clusters:
        total = 0
        for score in SCORERS:
            total += score(spec, c)
        totals[c.name] = total
    return totals
