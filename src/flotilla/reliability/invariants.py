"""What must hold once a failover has converged, whatever happened during it (pure: snapshots in, problems out).

A trial (``flotilla soak crash``) reads the end state of every workload it placed (its binding, its Works, its
objects in every member) plus what its observer and the members' running history saw, and
:func:`converged_problems` names every broken promise:

* exactly one copy: the binding targets one cluster, allowed (not the failed one) and Healthy there; the workload
  exists in that member and in no other; one Work, in that cluster's execution namespace;
* the injected state equals what the previous copy reported (Directly with state);
* no graceful eviction task duplicated (ever, as the observer saw the binding) or left behind, and none removed by
  its timeout (the ``GracefulEvictionTaskRemoved`` Warning) rather than because the new copy became Healthy: a
  timeout means the controllers did not see the failover through (a scheduler status left behind, a report
  lost), however well the end state looks once the task is gone;
* never two copies running at one instant (the simulators' running intervals).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flotilla.failover.graceful import EVENT_TASK_REMOVED, timed_out_cluster

__all__ = ["WorkloadEnd", "converged_problems", "timed_out_tasks", "workload_problems"]


@dataclass
class WorkloadEnd:
    """One workload's end state, as the trial read it."""

    binding: str
    clusters: list[str] = field(default_factory=list)  # spec.clusters names
    tasks: list[str] = field(default_factory=list)  # fromCluster of the graceful eviction tasks left
    healthy_on: list[str] = field(default_factory=list)  # clusters whose aggregatedStatus item is Healthy
    works_in: list[str] = field(default_factory=list)  # clusters with a Work of this binding
    objects_in: dict[str, dict[str, str]] = field(default_factory=dict)  # member -> the object's labels
    state_label: str = ""
    expected_state: str | None = None  # what the previous copy reported (None: state not checked)


def workload_problems(w: WorkloadEnd, failed: str, allowed: Iterable[str]) -> list[str]:
    allowed_set = set(allowed)
    found: list[str] = []
    if len(w.clusters) != 1:
        found.append(f"{w.binding}: targets {w.clusters or 'no cluster'}, not exactly one")
    target = w.clusters[0] if w.clusters else ""
    if target and (target == failed or target not in allowed_set):
        found.append(f"{w.binding}: placed on {target}, which is not allowed")
    if target and target not in w.healthy_on:
        found.append(f"{w.binding}: not Healthy on {target}")
    if sorted(w.objects_in) != ([target] if target else []):
        found.append(f"{w.binding}: copies in {sorted(w.objects_in) or 'no member'}, expected only in {target}")
    if sorted(w.works_in) != ([target] if target else []):
        found.append(f"{w.binding}: Works for {sorted(w.works_in) or 'no cluster'}, expected one for {target}")
    if w.tasks:
        found.append(f"{w.binding}: graceful eviction tasks left for {w.tasks}")
    if w.expected_state is not None and target in w.objects_in:
        got = w.objects_in[target].get(w.state_label)
        if got != w.expected_state:
            found.append(f"{w.binding}: injected {w.state_label}={got!r}, the previous copy reported "
                         f"{w.expected_state!r}")
    return found


def timed_out_tasks(events: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Binding name -> the clusters whose graceful eviction task was removed by its timeout, from the Events of the
    workloads' namespace (the graceful-eviction controller's ``GracefulEvictionTaskRemoved`` Warnings on the
    ResourceBindings; those on the templates repeat them)."""
    found: dict[str, list[str]] = {}
    for event in events:
        involved = event.get("involvedObject")
        if event.get("reason") != EVENT_TASK_REMOVED or not isinstance(involved, Mapping):
            continue
        if involved.get("kind") != "ResourceBinding" or not isinstance(involved.get("name"), str):
            continue
        cluster = timed_out_cluster(event.get("type"), event.get("message"))
        if cluster is not None and cluster not in found.get(involved["name"], []):
            found.setdefault(involved["name"], []).append(cluster)
    return found


def converged_problems(ends: Iterable[WorkloadEnd], *, failed: str, allowed: Iterable[str], expected: int,
                       max_copies: int, duplicate_tasks: Mapping[str, list[str]],
                       timed_out: Mapping[str, list[str]] | None = None) -> list[str]:
    """Every broken promise of a converged failover of ``expected`` workloads away from ``failed``
    (``timed_out``: :func:`timed_out_tasks`)."""
    allowed_list = list(allowed)
    ends = list(ends)
    found: list[str] = []
    if len(ends) != expected:
        found.append(f"{len(ends)} of {expected} workloads have a binding")
    for w in ends:
        found += workload_problems(w, failed, allowed_list)
    for binding, sources in sorted(duplicate_tasks.items()):
        found.append(f"{binding}: graceful eviction task from {sorted(set(sources))} duplicated")
    for binding, clusters in sorted((timed_out or {}).items()):
        found.append(f"{binding}: graceful eviction task from {sorted(clusters)} removed by its timeout, not because "
                     f"the new copy became Healthy")
    if max_copies > 1:
        found.append(f"{max_copies} copies of one workload ran at the same time")
    return found
