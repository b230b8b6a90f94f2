"""Karmada's scheduling decisions as pure functions: plain data in, plain data out, no I/O.

Entry point: :func:`schedule` (filter -> score -> select -> assign for one binding). The steps are
importable on their own: the filter and score plugins in :mod:`.plugins` (run through the interface in
:mod:`.framework`), :mod:`.estimation`, :mod:`.selection`, :mod:`.division`; cluster affinity matching is
:mod:`.affinity`; inputs are parsed by :mod:`.model`; failures are the kinds in :mod:`.errors`.
"""

from __future__ import annotations

from .affinity import cluster_matches
from .division import assign_replicas, webster
from .errors import (
    FilterFailure,
    FitError,
    ModelError,
    SchedulerError,
    SchedulingError,
    UnschedulableError,
)
from .model import (
    BindingSpec,
    BindingStatus,
    Cluster,
    ClusterAffinity,
    ClusterAffinityTerm,
    GracefulEvictionTask,
    Placement,
    ReplicaRequirements,
    ReplicaScheduling,
    ResourceRef,
    SpreadConstraint,
    Strategy,
    Taint,
    TargetCluster,
    Toleration,
    parse_binding,
    parse_binding_spec,
    parse_binding_status,
    parse_cluster,
    parse_placement,
)
from .schedule import AffinityAttempt, ScheduleResult, run_algorithm, schedule

__all__ = [
    "AffinityAttempt",
    "BindingSpec",
    "BindingStatus",
    "Cluster",
    "ClusterAffinity",
    "ClusterAffinityTerm",
    "FilterFailure",
    "FitError",
    "GracefulEvictionTask",
    "ModelError",
    "Placement",
    "ReplicaRequirements",
    "ReplicaScheduling",
    "ResourceRef",
    "ScheduleResult",
    "SchedulerError",
    "SchedulingError",
    "SpreadConstraint",
    "Strategy",
    "Taint",
    "TargetCluster",
    "Toleration",
    "UnschedulableError",
    "assign_replicas",
    "cluster_matches",
    "parse_binding",
    "parse_binding_spec",
    "parse_binding_status",
    "parse_cluster",
    "parse_placement",
    "run_algorithm",
    "schedule",
    "webster",
]
