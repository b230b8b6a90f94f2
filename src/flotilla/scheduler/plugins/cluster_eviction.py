"""ClusterEviction: a cluster with a graceful-eviction task in flight for this binding is skipped (any purge
mode)."""

from __future__ import annotations

from ..framework import FilterContext
from ..model import Cluster

__all__ = ["REASON", "ClusterEvictionPlugin"]

REASON = "cluster(s) is in the process of eviction"


class ClusterEvictionPlugin:
    name = "ClusterEviction"

    def filter(self, ctx: FilterContext, cluster: Cluster) -> str | None:
        if cluster.name in ctx.evicting:
            return REASON
        return None
