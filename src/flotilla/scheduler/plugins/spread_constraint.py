"""SpreadConstraint: a cluster lacking the property a spread constraint spreads by cannot be used."""

from __future__ import annotations

from ..framework import FilterContext
from ..model import Cluster

__all__ = ["REASON_NO_PROVIDER", "REASON_NO_REGION", "REASON_NO_ZONES", "SpreadConstraintPlugin"]

REASON_NO_PROVIDER = "cluster(s) did not have provider property"
REASON_NO_REGION = "cluster(s) did not have region property"
REASON_NO_ZONES = "cluster(s) did not have zones property"


class SpreadConstraintPlugin:
    name = "SpreadConstraint"

    def filter(self, ctx: FilterContext, cluster: Cluster) -> str | None:
        for constraint in ctx.spec.placement.spread_constraints:
            if constraint.spread_by_field == "provider" and not cluster.provider:
                return REASON_NO_PROVIDER
            if constraint.spread_by_field == "region" and not cluster.region:
                return REASON_NO_REGION
            if constraint.spread_by_field == "zone" and not cluster.zones:
                return REASON_NO_ZONES
        return None
