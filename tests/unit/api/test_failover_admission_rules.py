"""Every validation rule of the failover fields, one table row each, with Karmada's exact messages.

Rows are named after rule ids (S = a CRD schema rule of (Cluster)PropagationPolicy, M = a mutating-webhook default,
V1-V18 = Karmada's validating-webhook rules in their order, T1-T2 = ClusterTaintPolicy rules, C = Cluster taints, E
= ResourceBinding eviction tasks, F = controller-manager flags) and after Flotilla's divergences (D1, on by
default; D3, state-preservation checks; D12, no empty ``cluster`` spread; D13, ClusterTaintPolicy hygiene). Each
object goes through what the API server does on a write, in its order: the schema's defaults, the schema check,
then the registered admission plugins (defaults, validation, warnings). Messages are ``<field path>: <field.Error
body>`` as kubectl prints them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.apiserver.admission import Admission
from flotilla.apiserver.schema_check import apply_defaults, schema_errors
from flotilla.apiserver.schemas import schema_for
from flotilla.apiserver.webhooks import register_karmada_admission
from flotilla.apiserver.webhooks.propagation_policy import validate_propagation_spec
from flotilla.runtime.options import ControllerOptions

KINDS = {
    "PropagationPolicy": ("policy.karmada.io", "v1alpha1"),
    "ClusterPropagationPolicy": ("policy.karmada.io", "v1alpha1"),
    "ClusterTaintPolicy": ("policy.karmada.io", "v1alpha1"),
    "Cluster": ("cluster.karmada.io", "v1alpha1"),
    "ResourceBinding": ("work.karmada.io", "v1alpha2"),
}


@dataclass
class Outcome:
    errors: list[str]
    warnings: list[str]
    obj: dict[str, Any]


def write(obj: dict[str, Any], old: dict[str, Any] | None = None, *, allow_no_execute: bool = True) -> Outcome:
    """What the API server does with a create (or, with ``old``, an update) before storing ``obj``."""
    kind = obj["kind"]
    group, version = KINDS[kind]
    obj = copy.deepcopy(obj)
    schema = schema_for(group, version, kind)
    apply_defaults(obj, schema)
    causes = schema_errors(obj, schema)
    admission = Admission()
    register_karmada_admission(admission, allow_no_execute_taint_policy=allow_no_execute, policy_finalizers=True)
    result = admission.admit(group, kind, obj, old, "UPDATE" if old is not None else "CREATE")
    causes.extend(result.causes)
    return Outcome([f"{c.field}: {c.message}" for c in causes], result.warnings, obj)


def pp(kind: str = "PropagationPolicy", **spec: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "flink"}
    if kind == "PropagationPolicy":
        md["namespace"] = "ns"
    base: dict[str, Any] = {"resourceSelectors": [{"apiVersion": "flink.apache.org/v1beta1",
                                                   "kind": "FlinkDeployment", "name": "flink"}]}
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": md, "spec": {**base, **spec}}


ONE_CLUSTER = {"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1}]}


def app_failover(**fields: Any) -> dict[str, Any]:
    return {"application": {"decisionConditions": {}, **fields}}


def rules(*aliases: str, json_path: str = "{.jobStatus.jobId}") -> dict[str, Any]:
    return {"rules": [{"aliasLabelName": a, "jsonPath": json_path} for a in aliases]}


def ctp(*taints: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy", "metadata": {"name": "p"},
            "spec": {"addOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["False"]}],
                     "taints": list(taints)}}


def cluster(*taints: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "m1"},
            "spec": {"syncMode": "Push", "apiEndpoint": "https://m1.example:6443", "taints": list(taints)}}


def rb(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": "flink-flinkdeployment", "namespace": "ns"},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "name": "flink"},
                     "gracefulEvictionTasks": list(tasks)}}


def task(**fields: Any) -> dict[str, Any]:
    return {"fromCluster": "m1", "producer": "TaintManager", "reason": "TaintUntolerated", **fields}


# apimachinery's label-key messages (content.IsLabelKey), as Karmada's ValidateLabelName returns them
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
PREFIX_PART = ("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
               "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
               "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
TWO_SLASHES = ("a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
               "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
               "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
               "'/' (e.g. 'example.com/MyName')")
LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
               "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
T1 = ("Forbidden: Configuring taint with NoExecute effect is not allowed, this capability must be explicitly enabled "
      "by administrators through command-line flags")
D12 = ("a cluster spread constraint must set maxGroups, the most clusters to select (e.g. 1 to keep the workload in a "
       "single cluster); with maxGroups unset or 0 no cluster is ever selected")
APP_ALIAS = "spec.failover.application.statePreservation.rules[0].aliasLabelName"
CLUSTER_ALIAS = "spec.failover.cluster.statePreservation.rules[0].aliasLabelName"
TASK = "spec.gracefulEvictionTasks[0]"
REASON_PATTERN = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

# (id, object, errors the write gets); every other field of the object is valid
INVALID: list[Any] = [
    # ------------------------------------------------------------------ CRD schema of (Cluster)PropagationPolicy
    pytest.param(pp(propagateDeps=True, failover={"application": {}}),
                 ["spec.failover.application.decisionConditions: Required value"], id="S1-decisionConditions-required"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(purgeMode="Immediately")),
                 ['spec.failover.application.purgeMode: Unsupported value: "Immediately": supported values: '
                  '"Directly", "Gracefully", "Never"'], id="S3-application-purgeMode-enum-Immediately-removed"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(purgeMode="Graciously")),
                 ['spec.failover.application.purgeMode: Unsupported value: "Graciously": supported values: '
                  '"Directly", "Gracefully", "Never"'], id="S3-application-purgeMode-enum-Graciously-removed"),
    pytest.param(pp(failover={"cluster": {"purgeMode": "Never"}}),
                 ['spec.failover.cluster.purgeMode: Unsupported value: "Never": supported values: "Directly", '
                  '"Gracefully"'], id="S4-cluster-purgeMode-enum-no-Never"),
    pytest.param(pp(failover={"cluster": {"purgeMode": "Immediately"}}),
                 ['spec.failover.cluster.purgeMode: Unsupported value: "Immediately": supported values: "Directly", '
                  '"Gracefully"'], id="S8-cluster-purgeMode-Immediately-removed"),
    pytest.param(pp(failover={"cluster": {"purgeMode": "Graciously"}}),
                 ['spec.failover.cluster.purgeMode: Unsupported value: "Graciously": supported values: "Directly", '
                  '"Gracefully"'], id="S8-cluster-purgeMode-Graciously-removed"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(decisionConditions={"tolerationSeconds": "60"})),
                 ['spec.failover.application.decisionConditions.tolerationSeconds: Invalid value: "string": '
                  'spec.failover.application.decisionConditions.tolerationSeconds in body must be of type integer: '
                  '"string"'], id="S2-tolerationSeconds-is-an-integer"),
    pytest.param(pp(placement=ONE_CLUSTER, failover={"cluster": {"purgeMode": "Directly", "statePreservation": {}}}),
                 ["spec.failover.cluster.statePreservation.rules: Required value"], id="S5-rules-required"),
    pytest.param(pp(placement=ONE_CLUSTER, failover={"cluster": {"purgeMode": "Directly",
                                                                 "statePreservation": {"rules": [{}]}}}),
                 ["spec.failover.cluster.statePreservation.rules[0].aliasLabelName: Required value",
                  "spec.failover.cluster.statePreservation.rules[0].jsonPath: Required value"],
                 id="S6-rule-fields-required"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1},
                                                     {"spreadByField": "node", "maxGroups": 1}]}),
                 ['spec.placement.spreadConstraints[1].spreadByField: Unsupported value: "node": supported values: '
                  '"cluster", "region", "zone", "provider"'], id="S7-spreadByField-enum"),
    # ------------------------------------------------------------------ Karmada's validating webhook
    pytest.param(pp(failover=app_failover()),
                 ["spec.propagateDeps: Invalid value: false: application failover is set, propagateDeps must be true"],
                 id="V4-application-failover-needs-propagateDeps"),
    pytest.param(pp("ClusterPropagationPolicy", propagateDeps=False, failover=app_failover()),
                 ["spec.propagateDeps: Invalid value: false: application failover is set, propagateDeps must be true"],
                 id="V4-cluster-propagation-policy"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(decisionConditions={"tolerationSeconds": -1})),
                 ["spec.failover.application.decisionConditions.tolerationSeconds: Invalid value: -1: must be greater "
                  "than or equal to 0"], id="V5-tolerationSeconds-negative"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(purgeMode="Directly", gracePeriodSeconds=30)),
                 ["spec.failover.application.gracePeriodSeconds: Invalid value: 30: only takes effect when purgeMode "
                  "is gracefully"], id="V6-gracePeriodSeconds-with-Directly"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(purgeMode="Never", gracePeriodSeconds=30)),
                 ["spec.failover.application.gracePeriodSeconds: Invalid value: 30: only takes effect when purgeMode "
                  "is gracefully"], id="V6-gracePeriodSeconds-with-Never"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(gracePeriodSeconds=0)),
                 ["spec.failover.application.gracePeriodSeconds: Invalid value: 0: must be greater than 0"],
                 id="V8-gracePeriodSeconds-zero"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(purgeMode="Directly", gracePeriodSeconds=-1)),
                 ["spec.failover.application.gracePeriodSeconds: Invalid value: -1: only takes effect when purgeMode "
                  "is gracefully",
                  "spec.failover.application.gracePeriodSeconds: Invalid value: -1: must be greater than 0"],
                 id="V6-and-V8-together"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Directly", statePreservation=rules("-job-id"))),
                 [f'{APP_ALIAS}: Invalid value: "-job-id": {NAME_PART}'], id="V9-alias-starts-with-dash"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Directly", statePreservation=rules("a" * 64))),
                 [f'{APP_ALIAS}: Invalid value: "{"a" * 64}": name part must be no more than 63 bytes'],
                 id="V9-alias-name-too-long"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Directly", statePreservation=rules("Flink.Apache.Org/job-id"))),
                 [f'{APP_ALIAS}: Invalid value: "Flink.Apache.Org/job-id": {PREFIX_PART}'], id="V9-alias-bad-prefix"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Directly", statePreservation=rules("/job-id"))),
                 [f'{APP_ALIAS}: Invalid value: "/job-id": prefix part must be non-empty'], id="V9-alias-empty-prefix"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Directly", statePreservation=rules("a/b/c"))),
                 [f'{APP_ALIAS}: Invalid value: "a/b/c": {TWO_SLASHES}'], id="V9-alias-two-slashes"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Directly", statePreservation=rules(""))),
                 [f'{APP_ALIAS}: Invalid value: "": name part must be non-empty',
                  f'{APP_ALIAS}: Invalid value: "": {NAME_PART}'], id="V9-alias-empty"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Directly", statePreservation=rules("job-id\n"))),
                 [f'{APP_ALIAS}: Invalid value: "job-id\\n": {NAME_PART}'], id="V9-alias-trailing-newline"),
    pytest.param(pp(placement=ONE_CLUSTER, failover={"cluster": {"purgeMode": "Directly",
                                                                 "statePreservation": rules("job id")}}),
                 [f'{CLUSTER_ALIAS}: Invalid value: "job id": {NAME_PART}'], id="V10-cluster-alias"),
    pytest.param(pp(placement={**ONE_CLUSTER, "clusterTolerations": [{"key": "k", "operator": "Lt", "value": "5"}]}),
                 ['spec.placement.clusterTolerations[0].operator: Unsupported value: "Lt": supported values: "", '
                  '"Exists", "Equal"'], id="V11-toleration-Lt"),
    pytest.param(pp(placement={**ONE_CLUSTER, "clusterTolerations": [{"operator": "Exists"},
                                                                     {"key": "k", "operator": "Gt", "value": "5"}]}),
                 ['spec.placement.clusterTolerations[1].operator: Unsupported value: "Gt": supported values: "", '
                  '"Exists", "Equal"'], id="V11-toleration-Gt"),
    pytest.param(pp(placement={"clusterAffinity": {"clusterNames": ["m1"], "exclude": []},
                               "clusterAffinities": [{"affinityName": "primary", "clusterNames": ["m2"]}],
                               "clusterTolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                                       "tolerationSeconds": 0}]}),
                 ['spec.placement: Invalid value: {"clusterAffinity":{"clusterNames":["m1"]},"clusterAffinities":'
                  '[{"affinityName":"primary","clusterNames":["m2"]}],"clusterTolerations":[{"key":"k","operator":'
                  '"Exists","effect":"NoExecute","tolerationSeconds":0}]}: clusterAffinities cannot co-exist with '
                  "clusterAffinity"], id="V12-affinity-and-affinities"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "cluster", "spreadByLabel": "rack",
                                                      "maxGroups": 1}]}),
                 ['spec.placement.spreadConstraints[0]: Invalid value: {"spreadByField":"cluster","spreadByLabel":'
                  '"rack","maxGroups":1,"minGroups":1}: spreadByLabel should not co-exist with spreadByField'],
                 id="V13-field-and-label"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByLabel": "rack", "minGroups": -1}]}),
                 ['spec.placement.spreadConstraints[0]: Invalid value: {"spreadByLabel":"rack","minGroups":-1}: '
                  "minGroups lower than 0 is not allowed"], id="V14-minGroups-negative"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByLabel": "rack", "maxGroups": -1}]}),
                 ['spec.placement.spreadConstraints[0]: Invalid value: {"spreadByLabel":"rack","maxGroups":-1,'
                  '"minGroups":1}: maxGroups lower than 0 is not allowed'], id="V15-maxGroups-negative"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 2}]}),
                 ['spec.placement.spreadConstraints[0]: Invalid value: {"spreadByField":"cluster","maxGroups":1,'
                  '"minGroups":2}: maxGroups lower than minGroups is not allowed'], id="V16-max-below-min"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1},
                                                     {"spreadByField": "cluster", "maxGroups": 2},
                                                     {"spreadByField": "cluster", "maxGroups": 3}]}),
                 ['spec.placement.spreadConstraints: Invalid value: [{"spreadByField":"cluster","maxGroups":1,'
                  '"minGroups":1},{"spreadByField":"cluster","maxGroups":2,"minGroups":1},{"spreadByField":"cluster",'
                  '"maxGroups":3,"minGroups":1}]: multiple cluster spread constraints are not allowed'],
                 id="V17-same-field-twice-reported-once"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "region", "maxGroups": 1},
                                                     {"spreadByField": "cluster", "maxGroups": 1},
                                                     {"spreadByField": "region", "maxGroups": 2},
                                                     {"spreadByField": "cluster", "maxGroups": 2}]}),
                 ['spec.placement.spreadConstraints: Invalid value: [{"spreadByField":"region","maxGroups":1,'
                  '"minGroups":1},{"spreadByField":"cluster","maxGroups":1,"minGroups":1},{"spreadByField":"region",'
                  '"maxGroups":2,"minGroups":1},{"spreadByField":"cluster","maxGroups":2,"minGroups":1}]: multiple '
                  'region spread constraints are not allowed',
                  'spec.placement.spreadConstraints: Invalid value: [{"spreadByField":"region","maxGroups":1,'
                  '"minGroups":1},{"spreadByField":"cluster","maxGroups":1,"minGroups":1},{"spreadByField":"region",'
                  '"maxGroups":2,"minGroups":1},{"spreadByField":"cluster","maxGroups":2,"minGroups":1}]: multiple '
                  'cluster spread constraints are not allowed'], id="V17-once-per-field"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "region", "maxGroups": 1}]}),
                 ['spec.placement.spreadConstraints: Invalid value: [{"spreadByField":"region","maxGroups":1,'
                  '"minGroups":1}]: the cluster spread constraint must be enabled in one of the constraints in case of '
                  "SpreadByField is enabled"], id="V18-field-without-cluster"),
    # ------------------------------------------------------------------ D12, D3 (Flotilla)
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "cluster"}]}),
                 [f"spec.placement.spreadConstraints[0].maxGroups: Required value: {D12}"], id="D12-maxGroups-unset"),
    pytest.param(pp(placement={"spreadConstraints": [{"maxGroups": 0}]}),
                 [f"spec.placement.spreadConstraints[0].maxGroups: Invalid value: 0: {D12}"],
                 id="D12-maxGroups-zero-on-defaulted-cluster-constraint"),
    pytest.param(pp(placement=ONE_CLUSTER, failover={"cluster": {"purgeMode": "Directly", "statePreservation": {
        "rules": [{"aliasLabelName": "job-id", "jsonPath": "{ %health }"}]}}}),
                 ['spec.failover.cluster.statePreservation.rules[0].jsonPath: Invalid value: "{ %health }": not a '
                  "valid JSONPath template: unrecognized character in action: U+0025 '%' (at position 2)"],
                 id="D3-jsonpath-syntax-error"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER, failover=app_failover(
        purgeMode="Directly", statePreservation={"rules": [{"aliasLabelName": "job-id", "jsonPath": "{.jobStatus"}]})),
                 ['spec.failover.application.statePreservation.rules[0].jsonPath: Invalid value: "{.jobStatus": not a '
                  "valid JSONPath template: unclosed action: missing '}' (at position 0)"],
                 id="D3-jsonpath-unclosed"),
    pytest.param(pp(placement=ONE_CLUSTER, failover={"cluster": {"purgeMode": "Directly", "statePreservation": {
        "rules": [{"aliasLabelName": "job-id", "jsonPath": ""}]}}}),
                 ["spec.failover.cluster.statePreservation.rules[0].jsonPath: Required value: a JSONPath template such "
                  "as '{.jobStatus.jobId}'"], id="D3-jsonpath-empty"),
    pytest.param(pp(placement=ONE_CLUSTER, failover={"cluster": {"purgeMode": "Directly",
                                                                 "statePreservation": rules("job-id", "job-id")}}),
                 ['spec.failover.cluster.statePreservation.rules[1].aliasLabelName: Duplicate value: "job-id": '
                  "rules[0] already writes this label; each rule must use its own aliasLabelName"],
                 id="D3-duplicate-alias"),
    # ------------------------------------------------------------------ ClusterTaintPolicy, D13
    pytest.param(ctp({"key": "a", "effect": "NoSchedule", "value": "1"}, {"key": "a", "effect": "NoSchedule"},
                     {"key": "a", "effect": "NoSchedule", "value": "3"}),
                 ['spec.taints[0]: Duplicate value: "Duplicate taint with the same key(a) and effect(NoSchedule) is not '
                  'allowed"',
                  'spec.taints[1]: Duplicate value: "Duplicate taint with the same key(a) and effect(NoSchedule) is not '
                  'allowed"'], id="T2-same-key-and-effect"),
    pytest.param(ctp({"key": "bad key", "effect": "NoSchedule"}),
                 [f'spec.taints[0].key: Invalid value: "bad key": {NAME_PART}'], id="D13-policy-taint-key"),
    pytest.param(ctp({"key": "k", "value": "{x}", "effect": "NoSchedule"}),
                 [f'spec.taints[0].value: Invalid value: "{{x}}": {LABEL_VALUE}'], id="D13-policy-taint-value"),
    pytest.param(ctp({"key": "k", "effect": "PreferNoSchedule"}),
                 ['spec.taints[0].effect: Unsupported value: "PreferNoSchedule": supported values: "NoSchedule", '
                  '"NoExecute"'], id="D13-policy-taint-effect"),
    pytest.param({**ctp(), "spec": {"taints": []}},
                 ["spec.taints: Invalid value: 0: spec.taints in body should have at least 1 items"],
                 id="CTP-schema-taints-minItems"),
    pytest.param(ctp({"value": "v"}),
                 ["spec.taints[0].effect: Required value", "spec.taints[0].key: Required value"],
                 id="CTP-schema-taint-key-and-effect-required"),
    pytest.param({**ctp(), "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}],
                                    "addOnConditions": [{}], "removeOnConditions": [{"conditionType": "Ready"}]}},
                 ["spec.addOnConditions[0].conditionType: Required value",
                  "spec.addOnConditions[0].operator: Required value",
                  "spec.addOnConditions[0].statusValues: Required value",
                  "spec.removeOnConditions[0].operator: Required value",
                  "spec.removeOnConditions[0].statusValues: Required value"],
                 id="CTP-schema-match-condition-fields-required"),
    # ------------------------------------------------------------------ Cluster taints
    pytest.param(cluster({"key": "bad key", "effect": "NoSchedule"}),
                 [f'spec.taints[0].key: Invalid value: "bad key": {NAME_PART}'], id="C-key-qualified-name"),
    pytest.param(cluster({"key": "k", "value": "-x-", "effect": "NoSchedule"}),
                 [f'spec.taints[0].value: Invalid value: "-x-": {LABEL_VALUE}'], id="C-value-label-value"),
    pytest.param(cluster({"key": "k", "value": "v" * 64, "effect": "NoSchedule"}),
                 [f'spec.taints[0].value: Invalid value: "{"v" * 64}": must be no more than 63 bytes'],
                 id="C-value-too-long"),
    pytest.param(cluster({"key": "k", "effect": ""}), ["spec.taints[0].effect: Required value"],
                 id="C-effect-empty"),
    pytest.param(cluster({"key": "k"}), ["spec.taints[0].effect: Required value"], id="C-effect-absent-reported-once"),
    pytest.param(cluster({"key": "k", "effect": "PreferNoSchedule"}),
                 ['spec.taints[0].effect: Unsupported value: "PreferNoSchedule": supported values: "NoSchedule", '
                  '"NoExecute"'], id="C-effect-PreferNoSchedule"),
    pytest.param(cluster({"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}),
                 ['spec.taints[1]: Duplicate value: {"key":"k","value":"v","effect":"NoSchedule"}: taints must be '
                  "unique by key and effect pair"], id="C-unique-by-key-and-effect"),
    # ------------------------------------------------------------------ ResourceBinding eviction tasks
    pytest.param(rb({"purgeMode": "Directly"}),
                 [f"{TASK}.fromCluster: Required value", f"{TASK}.producer: Required value",
                  f"{TASK}.reason: Required value"], id="E-required-fields"),
    pytest.param(rb(task(reason="Taint Untolerated")),
                 [f'{TASK}.reason: Invalid value: "Taint Untolerated": {TASK}.reason in body should match '
                  f"'{REASON_PATTERN}'"], id="E-reason-pattern-space"),
    pytest.param(rb(task(reason="TaintUntolerated,")),
                 [f'{TASK}.reason: Invalid value: "TaintUntolerated,": {TASK}.reason in body should match '
                  f"'{REASON_PATTERN}'"], id="E-reason-pattern-last-char"),
    pytest.param(rb(task(reason="1Taint")),
                 [f'{TASK}.reason: Invalid value: "1Taint": {TASK}.reason in body should match \'{REASON_PATTERN}\''],
                 id="E-reason-pattern-first-char"),
    pytest.param(rb(task(reason="")),
                 [f'{TASK}.reason: Invalid value: "": {TASK}.reason in body should be at least 1 chars long',
                  f'{TASK}.reason: Invalid value: "": {TASK}.reason in body should match \'{REASON_PATTERN}\''],
                 id="E-reason-empty"),
    pytest.param(rb(task(purgeMode="Graciously")),
                 [f'{TASK}.purgeMode: Unsupported value: "Graciously": supported values: "Directly", "Gracefully", '
                  '"Never"'], id="E-purgeMode-Graciously-removed"),
    pytest.param(cluster({"key": "k", "value": "-" * 64, "effect": "NoSchedule"}),
                 [f'spec.taints[0].value: Invalid value: "{"-" * 64}": must be no more than 63 bytes;{LABEL_VALUE}'],
                 id="C-value-messages-joined"),
    pytest.param(rb(task(reason="R" * 33)), [f"{TASK}.reason: Too long: may not be more than 32 bytes"],
                 id="E-reason-too-long"),
    pytest.param(rb(task(message="m" * 1025)), [f"{TASK}.message: Too long: may not be more than 1024 bytes"],
                 id="E-message-too-long"),
    pytest.param(rb(task(purgeMode="Immediately")),
                 [f'{TASK}.purgeMode: Unsupported value: "Immediately": supported values: "Directly", "Gracefully", '
                  '"Never"'], id="E-purgeMode-enum"),
]


@pytest.mark.parametrize(("obj", "expected"), INVALID)
def test_invalid_write_gets_the_rules_message(obj: dict[str, Any], expected: list[str]) -> None:
    assert write(obj).errors == expected


# A valid boundary value next to each rule: proves the rule does not fire too early.
VALID: list[Any] = [
    pytest.param(pp(propagateDeps=True, failover=app_failover(decisionConditions={"tolerationSeconds": 0})),
                 id="V5-zero-tolerationSeconds"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(gracePeriodSeconds=1)), id="V8-one-second"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Directly", statePreservation=rules("flink.apache.org/job-id",
                                                                                      "a" * 63))),
                 id="V9-prefixed-and-63-byte-names"),
    pytest.param(pp(placement=ONE_CLUSTER, failover={"cluster": {"purgeMode": "Directly",
                                                                 "statePreservation": {"rules": []}}}),
                 id="S5-empty-rules"),
    pytest.param(pp(placement={**ONE_CLUSTER, "clusterTolerations": [
        {"operator": "Exists"}, {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute",
                                 "tolerationSeconds": 30}, {"key": "k2", "effect": "NoSchedule"}]}),
                 id="V11-empty-Exists-Equal"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByLabel": "rack", "minGroups": 3}]}),
                 id="V16-maxGroups-unset-not-compared"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "region", "maxGroups": 2},
                                                     {"spreadByField": "cluster", "maxGroups": 2}]}),
                 id="V17-V18-region-with-cluster"),
    pytest.param(ctp({"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}),
                 id="T2-same-key-other-effect"),
    pytest.param(ctp({"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}),
                 id="D1-no-execute-policy-allowed-by-default"),
    pytest.param(cluster({"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"}),
                 id="C-same-key-other-effect"),
    pytest.param(rb(task(reason="A"), task(fromCluster="m2", reason="Taint_Untolerated,x:y", message="m" * 1024,
                                          purgeMode="Never")), id="E-boundaries"),
    pytest.param(rb(task(reason="R" * 32)), id="E-reason-32-characters"),
]


@pytest.mark.parametrize("obj", VALID)
def test_valid_boundary_is_admitted(obj: dict[str, Any]) -> None:
    assert write(obj).errors == []


# ---------------------------------------------------------------------------------------------- T1 and D1


def test_t1_no_execute_policy_refused_with_karmadas_message_when_not_allowed() -> None:
    policy = ctp({"key": "a", "effect": "NoSchedule"}, {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"})
    assert write(policy, allow_no_execute=False).errors == [f"spec.taints[1]: {T1}"]
    assert write(policy).errors == []  # D1: allowed unless the API server says otherwise


def test_t1_and_t2_together() -> None:
    policy = ctp({"key": "a", "effect": "NoExecute"}, {"key": "a", "effect": "NoExecute", "value": "x"})
    assert write(policy, allow_no_execute=False).errors == [
        f"spec.taints[0]: {T1}",
        'spec.taints[0]: Duplicate value: "Duplicate taint with the same key(a) and effect(NoExecute) is not allowed"',
        f"spec.taints[1]: {T1}",
    ]


def test_t1_t2_apply_on_update_too() -> None:
    old = ctp({"key": "a", "effect": "NoSchedule"})
    new = ctp({"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule", "value": "x"},
              {"key": "b", "effect": "NoExecute"})
    assert write(new, old, allow_no_execute=False).errors == [
        'spec.taints[0]: Duplicate value: "Duplicate taint with the same key(a) and effect(NoSchedule) is not allowed"',
        f"spec.taints[2]: {T1}",
    ]


# ---------------------------------------------------------------------------------------------- V1-V3, V7


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    outcome = write(obj)
    assert outcome.errors == []
    return outcome.obj


@pytest.mark.parametrize("kind", ["PropagationPolicy", "ClusterPropagationPolicy"])
def test_v1_scheduler_name_is_immutable(kind: str) -> None:
    old = stored(pp(kind))
    new = copy.deepcopy(old)
    new["spec"]["schedulerName"] = "other-scheduler"
    assert write(new, old).errors == ["spec.schedulerName: Forbidden: the schedulerName should not be updated"]


@pytest.mark.parametrize(("kind", "label"), [
    ("PropagationPolicy", L.PROPAGATION_POLICY_PERMANENT_ID_LABEL),
    ("ClusterPropagationPolicy", L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL),
])
def test_v2_v3_permanent_id_label(kind: str, label: str) -> None:
    old = stored(pp(kind))
    forged = copy.deepcopy(old)
    forged["metadata"]["labels"][label] = "forged"
    assert write(forged, old).errors == [
        f"metadata.labels: Forbidden: label {label} is immutable, it can only be set by the system during creation"]
    removed = copy.deepcopy(old)
    del removed["metadata"]["labels"][label]
    assert write(removed, old).errors == [
        f"metadata.labels: Forbidden: label {label} is immutable, it can only be set by the system during creation",
        f"metadata.labels: Required value: label {label} is required, it should be set by the mutating admission "
        "webhook during creation",
    ]


def test_v7_missing_grace_period_with_gracefully_when_nothing_defaulted_it() -> None:
    """Unreachable through the server (M5 defaults it); Karmada's validation function still has the rule."""
    spec = {"propagateDeps": True, "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns"}],
            "failover": {"application": {"decisionConditions": {"tolerationSeconds": 300}, "purgeMode": "Gracefully"}}}
    assert [f"{c.field}: {c.message}" for c in validate_propagation_spec(spec, "ns")] == [
        "spec.failover.application.gracePeriodSeconds: Invalid value: null: should not be empty when purgeMode is "
        "gracefully"]


# ---------------------------------------------------------------------------------------------- defaults (S, M)


DEFAULTS: list[Any] = [
    pytest.param(pp(propagateDeps=True, failover=app_failover()), ("failover", "application"),
                 {"decisionConditions": {"tolerationSeconds": 300}, "purgeMode": "Gracefully",
                  "gracePeriodSeconds": 600}, id="S2-M5-application-failover"),
    pytest.param(pp(propagateDeps=True, failover=app_failover(purgeMode="Directly")), ("failover", "application"),
                 {"decisionConditions": {"tolerationSeconds": 300}, "purgeMode": "Directly"},
                 id="M5-no-grace-period-for-Directly"),
    pytest.param(pp(failover={"cluster": {}}), ("failover", "cluster"), {"purgeMode": "Gracefully"},
                 id="S4-cluster-purgeMode"),
    pytest.param(pp(), ("resourceSelectors",),
                 [{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "name": "flink",
                   "namespace": "ns"}], id="M1-selector-namespace"),
    pytest.param(pp("ClusterPropagationPolicy"), ("resourceSelectors",),
                 [{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "name": "flink"}],
                 id="M1-not-for-cluster-propagation-policy"),
    pytest.param(pp(placement={"spreadConstraints": [{"maxGroups": 1}, {"spreadByLabel": "rack"}]}),
                 ("placement", "spreadConstraints"),
                 [{"maxGroups": 1, "spreadByField": "cluster", "minGroups": 1}, {"spreadByLabel": "rack", "minGroups": 1}],
                 id="M2-spread-constraints"),
    pytest.param(pp(resourceSelectors=[{"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
                                        "name": "svc"}]), ("propagateDeps",), True, id="M3-service-import"),
    pytest.param(pp(placement={"replicaScheduling": {}}), ("placement", "replicaScheduling"),
                 {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}, id="M4-divided-weighted"),
    pytest.param(pp(placement={"clusterAffinity": {"clusterNames": ["m1"]}}), ("placement",),
                 {"clusterAffinity": {"clusterNames": ["m1"]}}, id="no-default-cluster-tolerations"),
]


@pytest.mark.parametrize(("obj", "path", "expected"), DEFAULTS)
def test_defaults_are_applied(obj: dict[str, Any], path: tuple[str, ...], expected: Any) -> None:
    outcome = write(obj)
    assert outcome.errors == []
    value: Any = outcome.obj["spec"]
    for key in path:
        value = value[key]
    assert value == expected


@pytest.mark.parametrize(("kind", "label", "finalizer"), [
    ("PropagationPolicy", L.PROPAGATION_POLICY_PERMANENT_ID_LABEL, L.PROPAGATION_POLICY_CONTROLLER_FINALIZER),
    ("ClusterPropagationPolicy", L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
     L.CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER),
])
def test_m6_create_adds_permanent_id_and_finalizer(kind: str, label: str, finalizer: str) -> None:
    obj = stored(pp(kind))
    assert len(obj["metadata"]["labels"][label]) == 36  # a UUID
    assert obj["metadata"]["finalizers"] == [finalizer]
    again = write(obj, obj).obj  # an update keeps the id
    assert again["metadata"]["labels"][label] == obj["metadata"]["labels"][label]


def test_c_no_execute_taint_gets_time_added() -> None:
    obj = stored(cluster({"key": "fence", "effect": "NoExecute"}, {"key": "cordon", "effect": "NoSchedule"}))
    no_execute, no_schedule = obj["spec"]["taints"]
    assert no_execute["timeAdded"].endswith("Z")
    assert "timeAdded" not in no_schedule


# ---------------------------------------------------------------------------------------------- D3 warnings


WARNINGS: list[Any] = [
    pytest.param(pp(placement=ONE_CLUSTER, failover={"cluster": {"statePreservation": rules("job-id")}}),
                 ["spec.failover.cluster.statePreservation: the preserved state is injected only with purgeMode "
                  "Directly; with purgeMode Gracefully it is extracted but never reaches the new workload (set "
                  "spec.failover.cluster.purgeMode: Directly)"], id="D3-cluster-Gracefully"),
    pytest.param(pp(propagateDeps=True, placement=ONE_CLUSTER,
                    failover=app_failover(purgeMode="Never", statePreservation=rules("job-id"))),
                 ["spec.failover.application.statePreservation: the preserved state is injected only with purgeMode "
                  "Directly; with purgeMode Never it is extracted but never reaches the new workload (set "
                  "spec.failover.application.purgeMode: Directly)"], id="D3-application-Never"),
    pytest.param(pp(placement={"clusterAffinity": {"clusterNames": ["m1", "m2"]}},
                    failover={"cluster": {"purgeMode": "Directly", "statePreservation": rules("job-id")}}),
                 ["spec.failover.cluster.statePreservation: the preserved state is injected only when the workload "
                  "runs in exactly one cluster, but this Duplicated placement runs a copy in every matching cluster "
                  "(add the spread constraint {spreadByField: cluster, maxGroups: 1})"], id="D3-duplicated-placement"),
    pytest.param(pp(placement={"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2}]},
                    failover={"cluster": {"purgeMode": "Directly", "statePreservation": rules("job-id")}}),
                 ["spec.failover.cluster.statePreservation: the preserved state is injected only when the workload "
                  "runs in exactly one cluster, but its cluster spread constraint allows up to 2 clusters (add the "
                  "spread constraint {spreadByField: cluster, maxGroups: 1})"], id="D3-two-clusters"),
    pytest.param(pp(placement=ONE_CLUSTER,
                    failover={"cluster": {"purgeMode": "Directly", "statePreservation": rules("job-id")}}),
                 [], id="D3-no-warning-for-Directly-on-one-cluster"),
    pytest.param(pp(placement={"clusterAffinity": {"clusterNames": ["m1"]}},
                    failover={"cluster": {"purgeMode": "Directly", "statePreservation": rules("job-id")}}),
                 [], id="D3-no-warning-when-pinned-to-one-cluster"),
]


@pytest.mark.parametrize(("obj", "expected"), WARNINGS)
def test_d3_warnings(obj: dict[str, Any], expected: list[str]) -> None:
    outcome = write(obj)
    assert outcome.errors == []
    assert outcome.warnings == expected


# ---------------------------------------------------------------------------------------------- flags


FLAGS: list[Any] = [
    pytest.param({"cluster_status_update_frequency": 0.0},
                 ['Options.ClusterStatusUpdateFrequency: Invalid value: "0s": must be greater than 0'],
                 id="F-status-update-frequency-zero"),
    pytest.param({"cluster_status_update_frequency": -1.5},
                 ['Options.ClusterStatusUpdateFrequency: Invalid value: "-1.5s": must be greater than 0'],
                 id="F-status-update-frequency-negative"),
    pytest.param({"no_execute_taint_eviction_purge_mode": "Never"},
                 ['ClusterFailoverOptions.NoExecuteTaintEvictionPurgeMode: Invalid value: "Never": Invalid mode'],
                 id="F-purge-mode"),
    pytest.param({"no_execute_taint_eviction_purge_mode": "Immediately", "enable_no_execute_taint_eviction": False},
                 [], id="F-purge-mode-unchecked-while-eviction-disabled"),
    pytest.param({"resource_eviction_rate": -0.5},
                 ["ClusterFailoverOptions.ResourceEvictionRate: Invalid value: -0.5: must be non-negative"],
                 id="F-eviction-rate-negative"),
    pytest.param({"resource_eviction_rate": 0.0}, [], id="F-eviction-rate-zero-allowed"),
    pytest.param({"secondary_resource_eviction_rate": -1.0},
                 ["ClusterFailoverOptions.SecondaryResourceEvictionRate: Invalid value: -1: must be non-negative"],
                 id="F-D10-secondary-rate-negative"),
    pytest.param({"unhealthy_cluster_threshold": 1.5},
                 ["ClusterFailoverOptions.UnhealthyClusterThreshold: Invalid value: 1.5: must be between 0 and 1"],
                 id="F-D10-threshold-above-one"),
    pytest.param({"state_preservation_timeout": -60.0},
                 ['Options.StatePreservationTimeout: Invalid value: "-1m0s": must be greater than or equal to 0'],
                 id="F-D6-timeout-negative"),
    pytest.param({"graceful_eviction_timeout": 0.0}, [], id="F-graceful-eviction-timeout-not-validated"),
    pytest.param({}, [], id="F-defaults-valid"),
]


@pytest.mark.parametrize(("values", "expected"), FLAGS)
def test_controller_manager_flag_validation(values: dict[str, Any], expected: list[str]) -> None:
    assert ControllerOptions(**values).validate() == expected


def test_nan_never_passes_a_flag_check() -> None:
    nan = float("nan")
    assert [e.split(":")[0] for e in ControllerOptions(
        cluster_status_update_frequency=nan, resource_eviction_rate=nan, unhealthy_cluster_threshold=nan).validate()
    ] == ["Options.ClusterStatusUpdateFrequency", "ClusterFailoverOptions.ResourceEvictionRate",
          "ClusterFailoverOptions.UnhealthyClusterThreshold"]
