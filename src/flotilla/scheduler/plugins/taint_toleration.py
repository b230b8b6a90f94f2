"""TaintToleration: untolerated ``NoSchedule``/``NoExecute`` taints keep *new* placements away; clusters the
binding already targets always pass (evicting from them is the taint manager's job).

Deliberate divergence **D11**: a cluster that is not already a target is also filtered out when one of
its ``NoExecute`` taints is tolerated only for a ``tolerationSeconds`` that has already run out
(``timeAdded + tolerationSeconds <= now``, computed exactly as the taint manager does), so that a
workload is not placed on a cluster it would be evicted from at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from flotilla.kube.taints import matching_tolerations, no_execute_taints

from ..framework import FilterContext
from ..model import NO_EXECUTE, NO_SCHEDULE, Cluster, Taint, Toleration

__all__ = ["EXPIRED_SUFFIX", "TaintTolerationPlugin", "expired_no_execute_taint", "find_untolerated_taint"]

EXPIRED_SUFFIX = " (toleration expired)"


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


class TaintTolerationPlugin:
    name = "TaintToleration"

    def filter(self, ctx: FilterContext, cluster: Cluster) -> str | None:
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
