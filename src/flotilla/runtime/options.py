"""Controller-manager flags (Karmada's names and defaults unless a divergence says otherwise) and feature gates.

:meth:`ControllerOptions.validate` checks the values as karmada-controller-manager does before it starts,
with Karmada's messages, plus the same kind of checks for the flags only Flotilla has (the state-preservation
timeout of D6, the eviction rates of D10).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flotilla.jsonpath.formatting import go_float_v
from flotilla.kube.durations import go_duration

#: Values of ``--no-execute-taint-eviction-purge-mode`` (Karmada's ``ClusterFailoverOptions.Validate``).
NO_EXECUTE_TAINT_EVICTION_PURGE_MODES = ("Gracefully", "Directly")

#: Values of ``--restore-missing`` (D20).
RESTORE_MISSING_CHOICES = ("hold", "fresh")

# D1: the failover machinery is on by default; each gate can still be switched off.
DEFAULT_FEATURE_GATES: dict[str, bool] = {
    "Failover": True,
    "GracefulEviction": True,
    "StatefulFailoverInjection": True,
    "PropagateDeps": True,
    "PolicyPreemption": False,
    # Karmada's default (alpha, off): with it on, the detector fills a binding's spec.components from
    # InterpretComponent instead of spec.replicas/replicaRequirements from InterpretReplica
    "MultiplePodTemplatesScheduling": False,
}


@dataclass
class ControllerOptions:
    # cluster health
    cluster_status_update_frequency: float = 10.0
    cluster_success_threshold: float = 30.0
    cluster_failure_threshold: float = 30.0
    cluster_api_qps: float = 40.0
    #: every request to a member's API server (health probes included, watches excepted) times out after this;
    #: Karmada hard-codes 32 s (pkg/util/membercluster_client.go), Flotilla's default is 10 s
    cluster_api_timeout: float = 10.0
    #: the cluster controller's monitor of Pull clusters: how often it looks, how long a
    #: Pull cluster may go without renewing its Lease or posting a new Ready condition, and that grace while it
    #: never posted one
    cluster_monitor_period: float = 5.0
    cluster_monitor_grace_period: float = 40.0
    cluster_startup_grace_period: float = 60.0
    #: the automatic fence of guarded Pull clusters (flotilla.failover.auto_fence): added to the permit-hold and
    #: fence-after a cluster's agent announces; covers the permit write's request timeout, the guard's poll and
    #: reaction, and clock-rate drift
    fence_margin: float = 15.0
    # failover (D1: on by default; D6: state-preservation timeout; D10: eviction pacing)
    enable_no_execute_taint_eviction: bool = True
    no_execute_taint_eviction_purge_mode: str = "Gracefully"
    graceful_eviction_timeout: float = 600.0
    resource_eviction_rate: float = 100.0
    secondary_resource_eviction_rate: float = 1.0
    unhealthy_cluster_threshold: float = 0.55
    state_preservation_timeout: float = 0.0
    # native restore (D20): what a failed lookup leads to, how long a Work is held, the storage call timeout,
    # and the checkpoint directory of jobs whose configuration names none ("" for none)
    restore_missing: str = "hold"
    restore_hold_timeout: float = 300.0
    restore_storage_timeout: float = 10.0
    restore_default_checkpoint_dir: str = ""
    #: D21: how long a planned move waits for the old copy's savepoint before it goes on as an unplanned failover
    move_savepoint_timeout: float = 120.0
    # generic
    concurrent_syncs: int = 5
    skipped_propagating_namespaces: tuple[str, ...] = ("kube-system", "kube-public", "kube-node-lease",
                                                      "karmada-system", "karmada-cluster")
    feature_gates: dict[str, bool] = field(default_factory=lambda: dict(DEFAULT_FEATURE_GATES))
    #: the scope of ``flotilla agent``: the one Pull cluster whose cluster status, Works and member objects this
    #: process handles (its Works' namespace and its Cluster only are watched); None in the controller-manager,
    #: which then leaves Pull clusters to their agents (:mod:`flotilla.cluster.scope`)
    agent_cluster: str | None = None

    def validate(self) -> list[str]:
        """Every invalid value, as ``field.Error`` strings (empty when the options are usable).

        Karmada's checks (``Options.Validate``, ``ClusterFailoverOptions.Validate``): the cluster status
        update frequency must be > 0; the taint-eviction purge mode must be Gracefully or Directly, checked
        only when NoExecute taint eviction is enabled; the resource eviction rate must be >= 0. Flotilla's own
        checks: the member request timeout must be > 0, the secondary eviction rate >= 0, the unhealthy-cluster
        threshold between 0 and 1, the state-preservation timeout >= 0, and the Pull-cluster monitor's period and
        grace periods > 0 (Karmada does not check them), the fence margin >= 0. As in Karmada, the graceful-eviction timeout is not checked.
        NaN never passes a check.
        """
        from flotilla.kube.validation import go_quote  # Go's %q

        errs: list[str] = []
        if not self.cluster_status_update_frequency > 0:
            errs.append("Options.ClusterStatusUpdateFrequency: Invalid value: "
                        f"{_go_duration_json(self.cluster_status_update_frequency)}: must be greater than 0")
        if not self.cluster_api_timeout > 0:
            errs.append("Options.ClusterAPITimeout: Invalid value: "
                        f"{_go_duration_json(self.cluster_api_timeout)}: must be greater than 0 (the timeout of "
                        "every request to a member cluster's API server)")
        for name, value in (("ClusterMonitorPeriod", self.cluster_monitor_period),
                            ("ClusterMonitorGracePeriod", self.cluster_monitor_grace_period),
                            ("ClusterStartupGracePeriod", self.cluster_startup_grace_period)):
            if not value > 0:
                errs.append(f"Options.{name}: Invalid value: {_go_duration_json(value)}: must be greater than 0")
        if not self.fence_margin >= 0:
            errs.append(f"Options.FenceMargin: Invalid value: {_go_duration_json(self.fence_margin)}: must be "
                        "greater than or equal to 0 (added to a guarded Pull cluster's announced permit-hold and "
                        "fence-after before it is fenced automatically)")
        if (self.enable_no_execute_taint_eviction
                and self.no_execute_taint_eviction_purge_mode not in NO_EXECUTE_TAINT_EVICTION_PURGE_MODES):
            errs.append("ClusterFailoverOptions.NoExecuteTaintEvictionPurgeMode: Invalid value: "
                        f"{go_quote(self.no_execute_taint_eviction_purge_mode)}: Invalid mode")
        if not self.resource_eviction_rate >= 0:
            errs.append("ClusterFailoverOptions.ResourceEvictionRate: Invalid value: "
                        f"{go_float_v(float(self.resource_eviction_rate))}: must be non-negative")
        if not self.secondary_resource_eviction_rate >= 0:
            errs.append("ClusterFailoverOptions.SecondaryResourceEvictionRate: Invalid value: "
                        f"{go_float_v(float(self.secondary_resource_eviction_rate))}: must be non-negative")
        if not 0 <= self.unhealthy_cluster_threshold <= 1:
            errs.append("ClusterFailoverOptions.UnhealthyClusterThreshold: Invalid value: "
                        f"{go_float_v(float(self.unhealthy_cluster_threshold))}: must be between 0 and 1")
        if not self.move_savepoint_timeout > 0:
            errs.append("Options.MoveSavepointTimeout: Invalid value: "
                        f"{_go_duration_json(self.move_savepoint_timeout)}: must be greater than 0 (how long a "
                        "planned move waits for the old copy's savepoint)")
        if not self.state_preservation_timeout >= 0:
            errs.append("Options.StatePreservationTimeout: Invalid value: "
                        f"{_go_duration_json(self.state_preservation_timeout)}: must be greater than or equal to 0")
        if self.restore_missing not in RESTORE_MISSING_CHOICES:
            errs.append(f"Options.RestoreMissing: Unsupported value: {go_quote(self.restore_missing)}: supported "
                        "values: \"hold\", \"fresh\"")
        if not self.restore_hold_timeout >= 0:
            errs.append("Options.RestoreHoldTimeout: Invalid value: "
                        f"{_go_duration_json(self.restore_hold_timeout)}: must be greater than or equal to 0")
        if not self.restore_storage_timeout > 0:
            errs.append("Options.RestoreStorageTimeout: Invalid value: "
                        f"{_go_duration_json(self.restore_storage_timeout)}: must be greater than 0")
        return errs

    def gate(self, name: str) -> bool:
        return self.feature_gates.get(name, DEFAULT_FEATURE_GATES.get(name, False))

    def set_gates(self, spec: str) -> None:
        """``Name=true,Other=false`` as in ``--feature-gates``; unknown names or values raise ValueError."""
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, value = part.partition("=")
            if not sep or value.lower() not in ("true", "false"):
                raise ValueError(f"--feature-gates: expected Name=true|false, got {part!r}")
            if name not in DEFAULT_FEATURE_GATES:
                known = ", ".join(sorted(DEFAULT_FEATURE_GATES))
                raise ValueError(f"--feature-gates: unknown gate {name!r} (known: {known})")
            self.feature_gates[name] = value.lower() == "true"


def _go_duration_json(seconds: float) -> str:
    """A ``metav1.Duration`` as ``field.Error`` prints it: its JSON, Go's ``Duration.String()`` quoted."""
    return f'"{go_duration(seconds)}"'


