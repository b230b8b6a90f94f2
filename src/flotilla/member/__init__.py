"""Simulated member clusters (in the spirit of KWOK): Flotilla's API server plus workload simulators.

* :mod:`flotilla.member.simulated` - :class:`MemberCluster` (one member) and :class:`MemberConfig`;
* :mod:`flotilla.member.simulator` - the simulator framework (:class:`Simulator`, :class:`ResourceSimulator`,
  :func:`register_simulator`) that the workload and FlinkDeployment simulators build on;
* :mod:`flotilla.member.workloads` - Deployment, ReplicaSet, StatefulSet, DaemonSet and Job simulators;
* :mod:`flotilla.member.nodes` - simulated Nodes (capacity for the cluster status controller's summaries);
* :mod:`flotilla.member.faults` - fault injection (``down``, ``unready``, ``slow``, ``recover``);
* :mod:`flotilla.member.runner` - N members in one process and their admin HTTP endpoint;
* :mod:`flotilla.member.history` - running-interval recorder and the ``overlaps`` check.
"""

from flotilla.member.history import HistoryRecorder, Interval, overlaps, read_history
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberCluster, MemberConfig
from flotilla.member.simulator import ResourceSimulator, Simulator, register_simulator

__all__ = [
    "HistoryRecorder",
    "Interval",
    "MemberCluster",
    "MemberConfig",
    "MemberGroup",
    "ResourceSimulator",
    "Simulator",
    "overlaps",
    "read_history",
    "register_simulator",
]
