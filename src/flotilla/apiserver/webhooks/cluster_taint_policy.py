"""ClusterTaintPolicy admission: Karmada's validating webhook plus D13 (ClusterTaintPolicy hygiene).

Karmada checks only two things: NoExecute taints are forbidden unless the webhook
runs with ``--allow-no-execute-taint-policy`` (T1), and no two taints share key and effect (T2),
both with Karmada's messages. Flotilla allows NoExecute taints by default (D1, failover on by default; the API
server's ``allow_no_execute_taint_policy=False`` gives Karmada's default) and also validates (D13) what would
otherwise fail later, when the policy's taints are written to a Cluster:
  - taints: key a qualified name, value a label value, effect NoSchedule or NoExecute;
  - ``addOnConditions``/``removeOnConditions``: ``conditionType`` not empty, operator In or NotIn,
    ``statusValues`` not empty and each one True, False or Unknown;
  - ``targetClusters``: field selector keys provider/region/zone with In/NotIn, valid label selector.
A policy with neither addOnConditions nor removeOnConditions gets a warning: it never does anything.
"""

from __future__ import annotations

from typing import Any

from flotilla.apiserver.admission import Operation
from flotilla.apiserver.webhooks.cluster import validate_taint
from flotilla.apiserver.webhooks.common import (
    NoOpPlugin,
    as_dict,
    duplicate,
    forbidden,
    not_supported,
    objects_of,
    required,
    spec_unchanged,
    validate_cluster_affinity,
)
from flotilla.kube.objects import as_list, as_str
from flotilla.kube.validation import Cause

NO_EXECUTE_FORBIDDEN = (
    "Configuring taint with NoExecute effect is not allowed, this capability must be explicitly enabled by "
    "administrators through command-line flags"
)
MATCH_OPERATORS = ("In", "NotIn")
CONDITION_STATUSES = ("True", "False", "Unknown")


def validate_policy_taints(taints: Any, path: str, *, allow_no_execute: bool) -> list[Cause]:
    causes: list[Cause] = []
    items = [as_dict(t) for t in as_list(taints)]
    for i, taint in enumerate(items):
        where = f"{path}[{i}]"
        if not allow_no_execute and taint.get("effect") == "NoExecute":
            causes.append(forbidden(where, NO_EXECUTE_FORBIDDEN))  # T1
        key, effect = as_str(taint.get("key")), as_str(taint.get("effect"))
        for later in items[i + 1 :]:
            if as_str(later.get("key")) == key and as_str(later.get("effect")) == effect:
                causes.append(  # T2
                    duplicate(where, f"Duplicate taint with the same key({key}) and effect({effect}) is not allowed")
                )
                break
        causes.extend(validate_taint(taint, where))  # D13
    return causes


def validate_match_conditions(conditions: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, condition in objects_of(conditions):
        where = f"{path}[{i}]"
        if condition.get("conditionType") == "":
            causes.append(required(f"{where}.conditionType"))
        operator = condition.get("operator")
        if isinstance(operator, str) and operator not in MATCH_OPERATORS:
            causes.append(not_supported(f"{where}.operator", operator, MATCH_OPERATORS))
        values = condition.get("statusValues")
        if isinstance(values, list):
            if not values:
                causes.append(required(f"{where}.statusValues", "must be specified when `operator` is 'In' or 'NotIn'"))
            for j, value in enumerate(values):
                if value not in CONDITION_STATUSES:
                    causes.append(not_supported(f"{where}.statusValues[{j}]", value, CONDITION_STATUSES))
    return causes


def validate_cluster_taint_policy_spec(spec: dict[str, Any], *, allow_no_execute: bool = True) -> list[Cause]:
    causes = validate_policy_taints(spec.get("taints"), "spec.taints", allow_no_execute=allow_no_execute)
    causes.extend(validate_match_conditions(spec.get("addOnConditions"), "spec.addOnConditions"))
    causes.extend(validate_match_conditions(spec.get("removeOnConditions"), "spec.removeOnConditions"))
    causes.extend(validate_cluster_affinity(spec.get("targetClusters"), "spec.targetClusters"))
    return causes


def cluster_taint_policy_warnings(spec: dict[str, Any]) -> list[str]:
    if not as_list(spec.get("addOnConditions")) and not as_list(spec.get("removeOnConditions")):
        return [
            "spec: neither addOnConditions nor removeOnConditions is set, so this policy never adds or removes "
            "a taint"
        ]
    return []


class ClusterTaintPolicyAdmission(NoOpPlugin):
    def __init__(self, *, allow_no_execute: bool = True) -> None:
        self.allow_no_execute = allow_no_execute

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec_unchanged(obj, old, op):
            return []
        return validate_cluster_taint_policy_spec(spec, allow_no_execute=self.allow_no_execute)

    def warnings(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[str]:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec_unchanged(obj, old, op):
            return []
        return cluster_taint_policy_warnings(spec)
