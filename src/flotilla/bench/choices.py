"""The words the benchmarks' and trials' flags accept, in a module that imports nothing, so that building the
command line does not load the benchmarks (``flotilla --help`` stays fast)."""

from __future__ import annotations

from typing import Final

__all__ = ["FAULT_CHOICES", "KIND_CHOICES", "KIND_NAMES", "PLACEMENTS", "STORAGE_CHOICES"]

#: ``--storage`` of the benchmarks that start a control plane
STORAGE_CHOICES: Final = ("sqlite", "memory", "etcd")
#: ``flotilla bench failover --fault``
FAULT_CHOICES: Final = ("taint", "down", "partition")
#: ``flotilla bench propagate --placement``
PLACEMENTS: Final = ("duplicated", "single")
#: the workload kinds (:data:`flotilla.bench.workloads.KINDS`), and ``--kind`` (they, or mix: each in turn)
KIND_NAMES: Final = ("deployment", "statefulset", "flink")
KIND_CHOICES: Final = (*KIND_NAMES, "mix")
