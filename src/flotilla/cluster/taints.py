"""The NoSchedule taints a Cluster carries for its Ready condition, as pure functions.

======================  ====================================================  ============================
Ready condition         ensure                                                remove
======================  ====================================================  ============================
False                   ``cluster.karmada.io/not-ready:NoSchedule``           ``.../unreachable:NoSchedule``
Unknown                 ``cluster.karmada.io/unreachable:NoSchedule``         ``.../not-ready:NoSchedule``
True                    -                                                     both
none yet                ``cluster.karmada.io/not-ready:NoSchedule``           -
======================  ====================================================  ============================

Taints are matched by key **and** effect, as Kubernetes does: a ``cluster.karmada.io/not-ready:NoExecute``
taint put there by a ClusterTaintPolicy or a person is a different taint and is never touched, nor is any
other taint. A taint added here gets ``timeAdded`` = now; one already present is left as it is (its
``timeAdded`` and value included). The NoSchedule taints keep new placements away; they never evict.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from flotilla.api.labels import TAINT_CLUSTER_NOT_READY, TAINT_CLUSTER_UNREACHABLE, TAINT_EFFECT_NO_SCHEDULE
from flotilla.cluster.health import CONDITION_READY, FALSE, TRUE, UNKNOWN
from flotilla.kube.conditions import find_condition
from flotilla.kube.times import format_time

__all__ = [
    "NOT_READY_TAINT",
    "UNREACHABLE_TAINT",
    "condition_taint_changes",
    "set_taints",
    "taint_string",
    "taints_for_condition",
    "taints_message",
    "taints_patch",
]

NOT_READY_TAINT: dict[str, str] = {"key": TAINT_CLUSTER_NOT_READY, "effect": TAINT_EFFECT_NO_SCHEDULE}
UNREACHABLE_TAINT: dict[str, str] = {"key": TAINT_CLUSTER_UNREACHABLE, "effect": TAINT_EFFECT_NO_SCHEDULE}


def _matches(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def condition_taint_changes(ready: Mapping[str, Any] | None) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """``(to ensure, to remove)`` for a Ready condition (None: the cluster has none yet)."""
    if ready is None:
        return [dict(NOT_READY_TAINT)], []
    status = ready.get("status")
    if status == FALSE:
        return [dict(NOT_READY_TAINT)], [dict(UNREACHABLE_TAINT)]
    if status == UNKNOWN:
        return [dict(UNREACHABLE_TAINT)], [dict(NOT_READY_TAINT)]
    if status == TRUE:
        return [], [dict(NOT_READY_TAINT), dict(UNREACHABLE_TAINT)]
    return [], []  # a status Kubernetes does not know: leave the taints alone


def set_taints(current: Sequence[Any] | None, add: Sequence[Mapping[str, Any]],
               remove: Sequence[Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """``current`` without the taints matching ``remove``, plus those of ``add`` not present yet (appended,
    stamped ``timeAdded`` = now). Order and content of every other taint are kept."""
    out = [copy.deepcopy(t) for t in current or () if isinstance(t, dict)
           and not any(_matches(t, r) for r in remove)]
    for taint in add:
        if not any(_matches(t, taint) for t in out):
            added = dict(taint)
            added["timeAdded"] = format_time(now)
            out.append(added)
    return out


def taints_for_condition(cluster: Mapping[str, Any], now: datetime) -> list[dict[str, Any]] | None:
    """The Cluster's new ``spec.taints`` for its Ready condition, or None when they are right already."""
    spec = cluster.get("spec") or {}
    current = spec.get("taints") if isinstance(spec.get("taints"), list) else []
    status = cluster.get("status") or {}
    ready = find_condition(status.get("conditions") if isinstance(status, Mapping) else None, CONDITION_READY)
    add, remove = condition_taint_changes(ready)
    new = set_taints(current, add, remove, now)
    return None if new == current else new


def taints_patch(taints: list[dict[str, Any]], resource_version: str | None) -> dict[str, Any]:
    """Merge patch replacing ``spec.taints`` (lists are replaced whole), guarded by ``resourceVersion`` so a
    concurrent change of the taints by anyone else makes it fail (409) instead of being lost."""
    patch: dict[str, Any] = {"spec": {"taints": taints}}
    if resource_version:
        patch["metadata"] = {"resourceVersion": resource_version}
    return patch


def taint_string(taint: Mapping[str, Any]) -> str:
    """``key[=value]:Effect``, as kubectl and karmadactl print taints."""
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + str(value) if value else ''}:{taint.get('effect')}"


def taints_message(taints: Sequence[Mapping[str, Any]]) -> str:
    return ",".join(taint_string(t) for t in taints) or "none"
