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

from __future__ import annotations

from flotilla.kube.lazy_exports import lazy_exports

#: sub-module -> the names it defines, imported on first use (PEP 562): ``flotilla member --help`` and the other
#: commands whose parser lives in this package must not load the simulators
__getattr__, __all__ = lazy_exports(__name__, {
    "history": ("HistoryRecorder", "Interval", "overlaps", "read_history"),
    "runner": ("MemberGroup",),
    "simulated": ("MemberCluster", "MemberConfig"),
    "simulator": ("ResourceSimulator", "Simulator", "register_simulator"),
})
