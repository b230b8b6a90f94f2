"""What ClusterTaintPolicies make of a Cluster's taints (with D13, ClusterTaintPolicy hygiene).

Pure functions: no I/O, no clock (``now`` is passed in). :func:`evaluate` takes one Cluster and every
ClusterTaintPolicy and returns the Cluster's new ``spec.taints`` plus what changed and which policy did it;
:func:`desired_taints` returns just the list.

The policies are applied one after the other, oldest first (``creationTimestamp``, then name, so equal
timestamps still give one order). Each policy, starting from the taints left by the previous one:

1. is skipped when it has ``targetClusters`` and the Cluster does not match them (exclude first, then
   labelSelector, fieldSelector and clusterNames ANDed, each only when set; no ``targetClusters``: every
   Cluster). A Cluster that stops matching keeps its taints;
2. if its ``addOnConditions`` match, adds each of its taints the Cluster does not carry yet with that key and
   effect, stamped ``timeAdded`` = now. A taint already there with the same key and effect is left exactly as it
   is (value and ``timeAdded`` included): Clusters admit one taint per key and effect;
3. then, with the same conditions, if its ``removeOnConditions`` match, removes each of its taints - only a
   Cluster taint with the same key, effect **and** value (D13: Karmada ignores the value and can strip a taint
   somebody else put there). A taint removed and added back in the same pass (two policies disagreeing) keeps
   its place and its ``timeAdded``.

Condition matching (:func:`conditions_match`): an empty list never matches; otherwise every entry must match
(AND). An entry matches on the Cluster's conditions of its ``conditionType``: ``In`` when the status is one of
``statusValues``, ``NotIn`` when it is not (statuses compared as exact strings). **A condition the Cluster does
not have never matches, not even with NotIn.** Any other operator makes the whole list not match.

Never touched: every taint no policy names (key, effect and value), whatever its origin (people, the cluster
controller, ``flotilla fence``), and the cluster controller's own ``cluster.karmada.io/not-ready:NoSchedule``
and ``cluster.karmada.io/unreachable:NoSchedule`` (:data:`RESERVED_TAINTS`): a policy taint with one of those key
and effect pairs is ignored, so the two controllers never fight over it. Deleting a policy removes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flotilla.api.labels import TAINT_CLUSTER_NOT_READY, TAINT_CLUSTER_UNREACHABLE, TAINT_EFFECT_NO_SCHEDULE
from flotilla.kube.objects import meta_of, spec_of, status_of
from flotilla.kube.times import format_time
from flotilla.scheduler.affinity import cluster_object_matches

__all__ = [
    "cluster_needs_evaluation",
    "policy_spec_changed",
    "OPERATOR_IN",
    "OPERATOR_NOT_IN",
    "RESERVED_TAINTS",
    "TaintChange",
    "TaintPolicyResult",
    "conditions_match",
    "desired_taints",
    "evaluate",
    "is_reserved",
    "policy_targets",
    "policy_taints",
    "same_taint",
    "sort_policies",
]

OPERATOR_IN = "In"
OPERATOR_NOT_IN = "NotIn"

RESERVED_TAINTS: frozenset[tuple[str, str]] = frozenset({
    (TAINT_CLUSTER_NOT_READY, TAINT_EFFECT_NO_SCHEDULE),
    (TAINT_CLUSTER_UNREACHABLE, TAINT_EFFECT_NO_SCHEDULE),
})
"""(key, effect) of the taints the cluster controller owns (Ready condition); policies never touch them."""


@dataclass(frozen=True)
class TaintChange:
    """A taint a policy added to or removed from the Cluster."""

    policy: str
    taint: dict[str, Any]


@dataclass(frozen=True)
class TaintPolicyResult:
    """The Cluster's new ``spec.taints`` and the net changes, each attributed to the policy that made it."""

    taints: list[Any]
    added: tuple[TaintChange, ...] = ()
    removed: tuple[TaintChange, ...] = ()
    changed: bool = False
    policies: tuple[str, ...] = field(default=())  # the policies targeting the Cluster, in evaluation order


# ---------------------------------------------------------------------------------------------- helpers


def _value(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return value if isinstance(value, str) else ""  # omitted and "" are the same value


def same_taint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Same key, effect and value (D13: how a policy recognises a taint as its own)."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect") and _value(a) == _value(b)


def _same_key_effect(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def is_reserved(taint: Mapping[str, Any]) -> bool:
    """Whether ``taint`` is one the cluster controller owns (``not-ready``/``unreachable`` with NoSchedule)."""
    return (taint.get("key"), taint.get("effect")) in RESERVED_TAINTS


def policy_taints(policy: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The policy's usable taints: ``{key, effect[, value]}`` with a non-empty string key and effect, without
    the cluster controller's taints (:data:`RESERVED_TAINTS`)."""
    out: list[dict[str, Any]] = []
    raw = spec_of(policy).get("taints")
    for t in raw if isinstance(raw, list) else ():
        if not isinstance(t, Mapping):
            continue
        key, effect = t.get("key"), t.get("effect")
        if not (isinstance(key, str) and key and isinstance(effect, str) and effect):
            continue
        taint: dict[str, Any] = {"key": key, "effect": effect}
        if _value(t):
            taint["value"] = _value(t)
        if not is_reserved(taint):
            out.append(taint)
    return out


def _name(policy: Mapping[str, Any]) -> str:
    name = meta_of(policy).get("name")
    return name if isinstance(name, str) else ""


def sort_policies(policies: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Oldest first (``creationTimestamp``, RFC 3339 in UTC, so string order is time order), then by name."""

    def key(p: Mapping[str, Any]) -> tuple[str, str]:
        ts = meta_of(p).get("creationTimestamp")
        return (ts if isinstance(ts, str) else "", _name(p))

    return sorted((p for p in policies if isinstance(p, Mapping)), key=key)


# ---------------------------------------------------------------------------------------------- matching


def conditions_match(conditions: Any, match_conditions: Any) -> bool:
    """Whether a Cluster's ``status.conditions`` satisfy every entry of ``match_conditions`` (see module doc)."""
    if not isinstance(match_conditions, list) or not match_conditions:
        return False
    cluster_conditions = [c for c in conditions if isinstance(c, Mapping)] if isinstance(conditions, list) else []
    for mc in match_conditions:
        if not isinstance(mc, Mapping):
            return False
        operator = mc.get("operator")
        if operator not in (OPERATOR_IN, OPERATOR_NOT_IN):
            return False
        raw_values = mc.get("statusValues")
        values = [v for v in raw_values if isinstance(v, str)] if isinstance(raw_values, list) else []
        matched = False
        for c in cluster_conditions:
            if c.get("type") != mc.get("conditionType"):
                continue
            status = c.get("status")
            if operator == OPERATOR_IN:
                if status in values:
                    matched = True
            else:
                matched = status not in values  # the last condition of the type decides
        if not matched:  # includes: the Cluster has no condition of that type
            return False
    return True


def _targeting_view(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """Only what ``targetClusters`` looks at (name, labels, provider/region/zones), so a Cluster field that
    does not parse (a malformed taint, status) cannot make a policy miss it."""
    md, spec = meta_of(cluster), spec_of(cluster)
    labels = md.get("labels")
    view_spec = {k: spec[k] for k in ("provider", "region", "zone", "zones") if k in spec}
    return {"metadata": {"name": md.get("name"), "labels": dict(labels) if isinstance(labels, Mapping) else {}},
            "spec": view_spec}


def policy_targets(policy: Mapping[str, Any], cluster: Mapping[str, Any]) -> bool:
    """Whether the policy applies to ``cluster``: no ``targetClusters`` means every Cluster; otherwise
    placement's cluster-affinity rule (a malformed selector matches nothing)."""
    target = spec_of(policy).get("targetClusters")
    if target is None:
        return True
    if not isinstance(target, Mapping):
        return False
    return cluster_object_matches(_targeting_view(cluster), target)


# ---------------------------------------------------------------------------------------------- evaluation


@dataclass
class _Entry:
    taint: Any
    added_by: str | None = None  # None: the Cluster had it before this pass
    removed_by: str | None = None  # set when a policy removed it (kept so it can be restored in place)


def evaluate(cluster: Mapping[str, Any], policies: Iterable[Mapping[str, Any]], now: datetime) -> TaintPolicyResult:
    """Apply every policy to ``cluster`` (see module doc); the input is not modified."""
    current = spec_of(cluster).get("taints")
    original: list[Any] = list(current) if isinstance(current, list) else []
    entries = [_Entry(copy.deepcopy(t)) for t in original]
    status = cluster.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    stamp = format_time(now)
    applied: list[str] = []

    def alive() -> Iterable[_Entry]:
        return (e for e in entries if e.removed_by is None and isinstance(e.taint, Mapping))

    for policy in sort_policies(policies):
        if not policy_targets(policy, cluster):
            continue
        name = _name(policy)
        applied.append(name)
        spec = spec_of(policy)
        taints = policy_taints(policy)
        if conditions_match(conditions, spec.get("addOnConditions")):
            for taint in taints:
                if any(_same_key_effect(e.taint, taint) for e in alive()):
                    continue
                restored = next((e for e in entries if e.removed_by is not None and e.added_by is None
                                 and isinstance(e.taint, Mapping) and same_taint(e.taint, taint)), None)
                if restored is not None:  # removed earlier in this pass: back as it was, where it was
                    restored.removed_by = None
                    continue
                entries.append(_Entry({**taint, "timeAdded": stamp}, added_by=name))
        if conditions_match(conditions, spec.get("removeOnConditions")):
            for taint in taints:
                for e in list(alive()):
                    if same_taint(e.taint, taint):
                        if e.added_by is not None:
                            entries.remove(e)  # added in this pass: never existed as far as anyone knows
                        else:
                            e.removed_by = name

    result = [e.taint for e in entries if e.removed_by is None]
    added = tuple(TaintChange(e.added_by, copy.deepcopy(e.taint)) for e in entries
                  if e.added_by is not None and e.removed_by is None)
    removed = tuple(TaintChange(e.removed_by, copy.deepcopy(e.taint)) for e in entries
                    if e.added_by is None and e.removed_by is not None)
    return TaintPolicyResult(taints=result, added=added, removed=removed, changed=result != original,
                             policies=tuple(applied))


def desired_taints(cluster: Mapping[str, Any], policies: Iterable[Mapping[str, Any]], now: datetime) -> list[Any]:
    """The Cluster's ``spec.taints`` once every ClusterTaintPolicy has been applied (see module doc)."""
    return evaluate(cluster, policies, now).taints


_SELECTABLE_SPEC_FIELDS = ("provider", "region", "zone", "zones")


def _conditions(obj: Mapping[str, Any]) -> Any:
    return status_of(obj).get("conditions")


def cluster_needs_evaluation(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a Cluster update can change what the policies decide: its conditions, its labels (D13) or the
    spec fields a ``targetClusters`` field selector reads."""
    if _conditions(old) != _conditions(new):
        return True
    if (meta_of(old).get("labels") or {}) != (meta_of(new).get("labels") or {}):
        return True
    old_spec, new_spec = spec_of(old), spec_of(new)
    return any(old_spec.get(f) != new_spec.get(f) for f in _SELECTABLE_SPEC_FIELDS)


def policy_spec_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return spec_of(old) != spec_of(new)
