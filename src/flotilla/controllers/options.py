"""Controller-manager flags (Karmada's names and defaults unless BEHAVIOR.md says otherwise) and feature gates."""

from __future__ import annotations

from dataclasses import dataclass, field

# D1: the failover machinery is on by default; each gate can still be switched off.
DEFAULT_FEATURE_GATES: dict[str, bool] = {
    "Failover": True,
    "GracefulEviction": True,
    "StatefulFailoverInjection": True,
    "PropagateDeps": True,
    "PolicyPreemption": False,
}


@dataclass
class ControllerOptions:
    # cluster health (karmada-core.md §8)
    cluster_status_update_frequency: float = 10.0
    cluster_success_threshold: float = 30.0
    cluster_failure_threshold: float = 30.0
    cluster_api_qps: float = 40.0
    # failover (karmada-failover.md; D1, D6, D10)
    enable_no_execute_taint_eviction: bool = True
    no_execute_taint_eviction_purge_mode: str = "Gracefully"
    graceful_eviction_timeout: float = 600.0
    resource_eviction_rate: float = 100.0
    secondary_resource_eviction_rate: float = 1.0
    unhealthy_cluster_threshold: float = 0.55
    state_preservation_timeout: float = 0.0
    # generic
    concurrent_syncs: int = 5
    skipped_propagating_namespaces: tuple[str, ...] = ("kube-system", "kube-public", "kube-node-lease",
                                                      "karmada-system", "karmada-cluster")
    feature_gates: dict[str, bool] = field(default_factory=lambda: dict(DEFAULT_FEATURE_GATES))

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
