"""APIEnablement: the cluster must be known to serve the template's kind (current targets always pass)."""

from __future__ import annotations

from ..framework import FilterContext
from ..model import Cluster

__all__ = ["REASON", "APIEnablementPlugin"]

REASON = "cluster(s) did not have the API resource"


class APIEnablementPlugin:
    name = "APIEnablement"

    def filter(self, ctx: FilterContext, cluster: Cluster) -> str | None:
        if cluster.name in ctx.targets:
            return None
        resource = ctx.spec.resource
        if cluster.api_enabled(resource.api_version, resource.kind) == "Enabled":
            return None
        return REASON
