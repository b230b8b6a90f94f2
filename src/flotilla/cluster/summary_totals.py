"""A member's node and resource summaries kept as running totals (pure; no I/O).

:func:`flotilla.cluster.resources.summarize` walks every Node, Pod and workload of a member; the cluster status
controller's watch-fed caches change a few objects at a time, so :class:`SummaryTotals` keeps, per object, what
it contributes (its *share*) and the sums of the shares: an added or changed object replaces its old share by its
new one, a deleted object takes its share away, and :meth:`SummaryTotals.summaries` formats the sums. A change
costs O(1), a summary O(resources), whatever the number of objects.

The shares are made by the same per-object rules as ``summarize`` (:func:`~flotilla.cluster.resources.pod_usage`,
:func:`~flotilla.cluster.resources.workload_usage`, :func:`~flotilla.cluster.resources.node_resources`,
:func:`~flotilla.cluster.resources.is_node_ready`), the sums are exact (:class:`~fractions.Fraction`: adding and
taking away never drifts) and the result is what ``summarize`` gives on the same objects:

* a resource is listed while at least one share names it, zero or not (``summarize`` lists every resource some
  object named), so each sum counts the shares that name each resource;
* ``nodeSummary`` and ``allocatable`` follow the Ready nodes, with zero counts and an empty ``allocatable`` left
  out (``omitempty``);
* Pods are measured while there is at least one Pod (finished ones included), the workloads otherwise - never
  both.

Objects are identified by the caller's keys (``namespace/name``); a workload by its group, kind and key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

from flotilla.cluster.resources import (
    ALWAYS_LISTED,
    RequestsOf,
    Summaries,
    format_resource,
    is_node_ready,
    node_resources,
    pod_requests,
    pod_usage,
    workload_usage,
)

__all__ = ["ResourceSums", "SummaryTotals"]

_ZERO = Fraction(0)
Share = dict[str, Fraction]
_K = TypeVar("_K", str, tuple[str, str, str])
#: an object's key -> its pod spec and that spec's requests
_Specs = dict[_K, tuple[Any, Mapping[str, Fraction]]]
_NO_SHARE: Share = {}  # never mutated


class ResourceSums:
    """Exact per-resource sums of shares, with how many shares name each resource."""

    __slots__ = ("amounts", "named")

    def __init__(self) -> None:
        self.amounts: dict[str, Fraction] = {}
        self.named: dict[str, int] = {}

    def add(self, share: Mapping[str, Fraction]) -> None:
        amounts, named = self.amounts, self.named
        for name, value in share.items():
            amounts[name] = amounts.get(name, _ZERO) + value
            named[name] = named.get(name, 0) + 1

    def subtract(self, share: Mapping[str, Fraction]) -> None:
        """Take away a share that was added."""
        amounts, named = self.amounts, self.named
        for name, value in share.items():
            left = named[name] - 1
            if left:
                named[name] = left
                amounts[name] -= value
            else:  # the last share naming it: the resource is no longer listed (and its sum is exactly 0)
                del named[name], amounts[name]

    def resource_list(self, always: Iterable[str] = ()) -> dict[str, str]:
        """The sums as a ResourceList; ``always`` names resources listed even when no share names them."""
        names = set(self.named).union(always)
        return {name: format_resource(name, self.amounts.get(name, _ZERO)) for name in sorted(names)}


_V = TypeVar("_V")


def _replace(table: dict[_K, _V], key: _K, new: _V, take: Callable[[_V], None]) -> bool:
    """Put ``new`` at ``key``, the entry it replaces first taken out of the totals by ``take``; False when
    ``new`` is there already (nothing changes)."""
    old = table.get(key)
    if old == new:
        return False
    if old is not None:
        take(old)
    table[key] = new
    return True


def _remove(table: dict[_K, _V], key: _K, take: Callable[[_V], None]) -> bool:
    """Remove the entry at ``key`` and take it out of the totals by ``take``; False when there is none."""
    old = table.pop(key, None)
    if old is None:
        return False
    take(old)
    return True


def _with_pods(requests: Mapping[str, Fraction], pods: int) -> Share:
    """``pods`` × ``requests`` plus the pods themselves, as ``ResourceTotals.add`` and ``add_pods`` sum them."""
    share = {name: value * pods for name, value in requests.items()} if pods != 1 else dict(requests)
    share["pods"] = share.get("pods", _ZERO) + pods
    return share


class SummaryTotals:
    """Running totals of one member's summaries, fed by ``put_*`` (an object added or changed) and ``remove_*``
    (deleted). Each returns whether the totals changed."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[bool, Share]] = {}  # key -> (Ready, allocatable when Ready)
        self._ready = 0
        self._allocatable = ResourceSums()
        self._pods: dict[str, tuple[str | None, Share]] = {}  # key -> (where it counts, share)
        self._pod_sums = {"allocated": ResourceSums(), "allocating": ResourceSums()}
        self._workloads: dict[tuple[str, str, str], Share] = {}  # (group, kind, key) -> share
        self._workload_sums = ResourceSums()
        # per pod and per workload, its pod spec (a workload's: its template's) and the spec's requests: most
        # updates leave the spec as it was, and an equal spec's requests are not computed again; nor are those of
        # a spec equal to the last one computed (objects made from one template, as a list or a burst brings them)
        self._pod_specs: _Specs[str] = {}
        self._workload_specs: _Specs[tuple[str, str, str]] = {}
        self._last_spec: tuple[Any, Mapping[str, Fraction]] | None = None

    def _requests_of(self, specs: _Specs[_K], memo: _K) -> RequestsOf:
        def requests(pod_spec: Any) -> Mapping[str, Fraction]:
            known = specs.get(memo)
            if known is None or known[0] != pod_spec:
                last = self._last_spec
                if last is not None and last[0] == pod_spec:
                    known = last
                else:
                    known = self._last_spec = (pod_spec, pod_requests(pod_spec))
            specs[memo] = (pod_spec, known[1])  # the spec the cache holds now, not an older equal copy
            return known[1]

        return requests

    # ---------------------------------------------------------------------------------------- nodes
    def put_node(self, key: str, node: Mapping[str, Any]) -> bool:
        ready = is_node_ready(node)
        new = (ready, node_resources(node) if ready else _NO_SHARE)
        if not _replace(self._nodes, key, new, self._take_node):
            return False
        if ready:
            self._ready += 1
            self._allocatable.add(new[1])
        return True

    def remove_node(self, key: str) -> bool:
        return _remove(self._nodes, key, self._take_node)

    def _take_node(self, old: tuple[bool, Share]) -> None:
        if old[0]:
            self._ready -= 1
            self._allocatable.subtract(old[1])

    # ---------------------------------------------------------------------------------------- pods
    def put_pod(self, key: str, pod: Mapping[str, Any]) -> bool:
        where, requests = pod_usage(pod, self._requests_of(self._pod_specs, key))
        new = (where, _with_pods(requests, 1) if where is not None else _NO_SHARE)
        if not _replace(self._pods, key, new, self._take_pod):
            return False
        if where is not None:
            self._pod_sums[where].add(new[1])
        return True

    def remove_pod(self, key: str) -> bool:
        self._pod_specs.pop(key, None)
        return _remove(self._pods, key, self._take_pod)

    def _take_pod(self, old: tuple[str | None, Share]) -> None:
        if old[0] is not None:
            self._pod_sums[old[0]].subtract(old[1])

    # ---------------------------------------------------------------------------------------- workloads
    def put_workload(self, group: str, kind: str, key: str, obj: Mapping[str, Any]) -> bool:
        wkey = (group, kind, key)
        pods, requests = workload_usage(group, kind, obj, self._requests_of(self._workload_specs, wkey))
        new = _with_pods(requests, pods) if pods > 0 else _NO_SHARE
        if not _replace(self._workloads, wkey, new, self._workload_sums.subtract):
            return False
        self._workload_sums.add(new)
        return True

    def remove_workload(self, group: str, kind: str, key: str) -> bool:
        self._workload_specs.pop((group, kind, key), None)
        return _remove(self._workloads, (group, kind, key), self._workload_sums.subtract)

    def clear_workloads(self) -> bool:
        """Forget every workload (their watches stopped)."""
        changed = bool(self._workloads)
        self._workloads.clear()
        self._workload_specs.clear()
        self._workload_sums = ResourceSums()
        return changed

    # ---------------------------------------------------------------------------------------- result
    def summaries(self) -> Summaries:
        """What :func:`~flotilla.cluster.resources.summarize` gives on the objects put and not removed (fresh
        dicts at every call)."""
        node_summary: dict[str, int] = {}
        if self._nodes:  # omitempty
            node_summary["totalNum"] = len(self._nodes)
        if self._ready:
            node_summary["readyNum"] = self._ready
        summary: dict[str, dict[str, str]] = {}
        allocatable = self._allocatable.resource_list()
        if allocatable:  # omitempty
            summary["allocatable"] = allocatable
        from_pods = bool(self._pods)
        if from_pods:  # a cluster with Pods is measured by its Pods only
            summary["allocated"] = self._pod_sums["allocated"].resource_list(ALWAYS_LISTED)
            summary["allocating"] = self._pod_sums["allocating"].resource_list(ALWAYS_LISTED)
        else:
            summary["allocated"] = self._workload_sums.resource_list(ALWAYS_LISTED)
            summary["allocating"] = ResourceSums().resource_list(ALWAYS_LISTED)
        return Summaries(node_summary, summary, from_pods=from_pods)
