"""Controllers by name, in start order (the controller-manager's ``--controllers`` names)."""

from __future__ import annotations

import importlib

from flotilla.runtime.base import Controller

# (name, module, class) in start order; each controller module holds one controller class
_CONTROLLERS: tuple[tuple[str, str, str], ...] = (
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


def _load() -> dict[str, type[Controller]]:
    found: dict[str, type[Controller]] = {}
    for name, module, cls in _CONTROLLERS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name == module:  # not written yet
                continue
            raise
        found[name] = getattr(mod, cls)
    return found


CONTROLLERS: dict[str, type[Controller]] = _load()
