"""The settings ``flotilla up`` gives the control plane, in a module that imports only constants, so that ``flotilla up
--help`` can show them without loading the stack (:mod:`flotilla.local.stack` applies them)."""

from __future__ import annotations

from typing import Final

from flotilla.api.labels import TAINT_CLUSTER_NOT_READY

__all__ = ["LAPTOP_TIMINGS", "NOT_READY_TAINT"]

#: Controller-manager timings for a laptop (seconds): a dead member is noticed within a few seconds rather
#: than Karmada's ~40 s; the graceful-eviction timeout is 2 minutes instead of 10.
LAPTOP_TIMINGS: Final[dict[str, float]] = {
    "cluster_status_update_frequency": 1.0,
    "cluster_success_threshold": 2.0,
    "cluster_failure_threshold": 3.0,
    "graceful_eviction_timeout": 120.0,
    "cluster_api_timeout": 10.0,  # the controller-manager's default: a frozen member is seen failing after it
    # Pull clusters: checked every second; the grace periods stay Karmada's, which an agent's default Lease
    # (40 s, renewed every 10 s) needs
    "cluster_monitor_period": 1.0,
    "cluster_monitor_grace_period": 40.0,
    "cluster_startup_grace_period": 60.0,
    # a guarded Pull member is fenced after its announced permit-hold + fence-after + this margin
    "fence_margin": 15.0,
}

#: the taint the default ClusterTaintPolicy of ``flotilla up`` puts on a member that is not Ready
NOT_READY_TAINT: Final = TAINT_CLUSTER_NOT_READY
