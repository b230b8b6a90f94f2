"""ClusterTaintPolicy admission: Karmada's T1/T2 and D13 (ClusterTaintPolicy hygiene)."""

from __future__ import annotations

from typing import Any

from flotilla.apiserver.webhooks.cluster_taint_policy import (
    ClusterTaintPolicyAdmission,
    cluster_taint_policy_warnings,
    validate_cluster_taint_policy_spec,
)

READY_FALSE = [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}]


def spec(**extra: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"addOnConditions": READY_FALSE, "taints": [{"key": "example.com/not-ready", "effect": "NoExecute"}]}
    s.update(extra)
    return s


def errors(s: dict[str, Any], allow_no_execute: bool = True) -> list[str]:
    return [f"{c.field}: {c.message}" for c in validate_cluster_taint_policy_spec(s, allow_no_execute=allow_no_execute)]


def test_no_execute_allowed_by_default() -> None:
    assert errors(spec()) == []


def test_no_execute_forbidden_with_karmadas_t1_message() -> None:
    assert errors(spec(), allow_no_execute=False) == [
        "spec.taints[0]: Forbidden: Configuring taint with NoExecute effect is not allowed, this capability must be "
        "explicitly enabled by administrators through command-line flags"
    ]
    assert errors(spec(taints=[{"key": "a", "effect": "NoSchedule"}]), allow_no_execute=False) == []


def test_duplicate_key_and_effect_reported_once_per_taint() -> None:
    taints = [{"key": "a", "effect": "NoSchedule", "value": "1"}, {"key": "a", "effect": "NoSchedule", "value": "2"},
              {"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}]
    assert errors(spec(taints=taints)) == [
        'spec.taints[0]: Duplicate value: "Duplicate taint with the same key(a) and effect(NoSchedule) is not allowed"',
        'spec.taints[1]: Duplicate value: "Duplicate taint with the same key(a) and effect(NoSchedule) is not allowed"',
    ]


def test_d13_taints_validated() -> None:
    taints = [{"key": "bad key", "effect": "NoSchedule"}, {"key": "ok", "value": "{x}", "effect": "NoSchedule"},
              {"key": "pref", "effect": "PreferNoSchedule"}, {"key": "none", "effect": ""}]
    msgs = errors(spec(taints=taints))
    assert msgs[0].startswith('spec.taints[0].key: Invalid value: "bad key": name part must consist of')
    assert msgs[1].startswith('spec.taints[1].value: Invalid value: "{x}": a valid label must be an empty string')
    assert msgs[2:] == [
        'spec.taints[2].effect: Unsupported value: "PreferNoSchedule": supported values: "NoSchedule", "NoExecute"',
        "spec.taints[3].effect: Required value",
    ]


def test_d13_match_conditions() -> None:
    bad = [{"conditionType": "", "operator": "Equals", "statusValues": []},
           {"conditionType": "Ready", "operator": "NotIn", "statusValues": ["true"]}]
    assert errors(spec(addOnConditions=bad, removeOnConditions=bad[:1])) == [
        "spec.addOnConditions[0].conditionType: Required value",
        'spec.addOnConditions[0].operator: Unsupported value: "Equals": supported values: "In", "NotIn"',
        "spec.addOnConditions[0].statusValues: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        'spec.addOnConditions[1].statusValues[0]: Unsupported value: "true": supported values: "True", "False", "Unknown"',
        "spec.removeOnConditions[0].conditionType: Required value",
        'spec.removeOnConditions[0].operator: Unsupported value: "Equals": supported values: "In", "NotIn"',
        "spec.removeOnConditions[0].statusValues: Required value: must be specified when `operator` is 'In' or 'NotIn'",
    ]


def test_target_clusters_selectors() -> None:
    target = {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]},
              "fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}}
    assert errors(spec(targetClusters=target)) == [
        "spec.targetClusters.labelSelector.matchExpressions[0].values: Forbidden: may not be specified when "
        "`operator` is 'Exists' or 'DoesNotExist'"
    ]


def test_warning_for_a_policy_that_never_acts() -> None:
    assert cluster_taint_policy_warnings(spec()) == []
    assert cluster_taint_policy_warnings({"taints": [{"key": "a", "effect": "NoSchedule"}]}) == [
        "spec: neither addOnConditions nor removeOnConditions is set, so this policy never adds or removes a taint"
    ]


def test_plugin_respects_the_flag() -> None:
    obj = {"metadata": {"name": "p"}, "spec": spec()}
    assert ClusterTaintPolicyAdmission().validate(obj, None, "CREATE") == []
    assert len(ClusterTaintPolicyAdmission(allow_no_execute=False).validate(obj, None, "CREATE")) == 1
    # a policy admitted while NoExecute was allowed can still get metadata updates
    assert ClusterTaintPolicyAdmission(allow_no_execute=False).validate(obj, obj, "UPDATE") == []
