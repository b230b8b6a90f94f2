"""The controllers by name, in start order, and where each one's class is: a table that imports nothing, so that a
command's ``--help`` can list the names without loading the controllers (:mod:`flotilla.runtime.registry` loads
them)."""

from __future__ import annotations

__all__ = ["DECLARED_CONTROLLERS", "declared_controller_names"]

# (name, module, class) in start order; each controller module holds one controller class
DECLARED_CONTROLLERS: tuple[tuple[str, str, str], ...] = (
    ("cluster", "flotilla.controllers.cluster", "ClusterController"),
    ("cluster-status", "flotilla.controllers.cluster_status", "ClusterStatusController"),
    ("taint-policy", "flotilla.controllers.taint_policy", "TaintPolicyController"),
    ("detector", "flotilla.controllers.detector", "DetectorController"),
    ("dependencies-distributor", "flotilla.controllers.dependencies", "DependenciesDistributor"),
    ("scheduler", "flotilla.controllers.scheduler", "SchedulerController"),
    ("taint-manager", "flotilla.controllers.taint_manager", "TaintManager"),
    ("restore", "flotilla.controllers.restore", "RestoreController"),
    ("binding", "flotilla.controllers.binding", "BindingController"),
    ("execution", "flotilla.controllers.execution", "ExecutionController"),
    ("work-status", "flotilla.controllers.work_status", "WorkStatusController"),
    ("binding-status", "flotilla.controllers.binding_status", "BindingStatusController"),
    ("graceful-eviction", "flotilla.controllers.graceful_eviction", "GracefulEvictionController"),
    ("application-failover", "flotilla.controllers.application_failover", "ApplicationFailoverController"),
    ("workloadRebalancer", "flotilla.controllers.workload_rebalancer", "WorkloadRebalancerController"),
    ("failoverHistory", "flotilla.controllers.failover_history", "FailoverHistoryController"),
    ("plannedMove", "flotilla.controllers.planned_move", "PlannedMoveController"),
)


def declared_controller_names() -> list[str]:
    """Every controller name declared, in start order (whether or not its module is written yet)."""
    return [name for name, _, _ in DECLARED_CONTROLLERS]
