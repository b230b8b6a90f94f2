"""PropagationPolicy / ClusterPropagationPolicy admission: Karmada's webhooks, D3 (state-preservation
checks) and D12 (no empty ``cluster`` spread)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.apiserver.webhooks.propagation_policy import (
    PropagationPolicyAdmission,
    default_propagation_spec,
    multi_cluster_reason,
    state_preservation_warnings,
    validate_propagation_spec,
)
from flotilla.kube.validation import Cause

PP_ID = L.PROPAGATION_POLICY_PERMANENT_ID_LABEL


def spec(**extra: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "ns"}]
    }
    s.update(extra)
    return s


def policy(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": spec(**extra),
    }


def errors(s: dict[str, Any], namespace: str = "ns") -> list[str]:
    """``field: message`` of every cause, after defaulting (as the webhooks run)."""
    s = copy.deepcopy(s)
    default_propagation_spec(s, namespace)
    return [f"{c.field}: {c.message}" for c in validate_propagation_spec(s, namespace)]


def one_cluster() -> dict[str, Any]:
    return {"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1}]}


# ------------------------------------------------------------------------------------- defaults


def test_defaults_follow_the_mutating_webhook() -> None:
    s = spec(
        resourceSelectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}],
        placement={
            "spreadConstraints": [{"maxGroups": 2}, {"spreadByLabel": "zone-label", "minGroups": 2}],
            "replicaScheduling": {"replicaSchedulingType": "Divided"},
        },
        failover={"application": {"decisionConditions": {}}, "cluster": {}},
    )
    default_propagation_spec(s, "ns")
    assert s["resourceSelectors"][0]["namespace"] == "ns"
    assert s["placement"]["spreadConstraints"] == [
        {"maxGroups": 2, "spreadByField": "cluster", "minGroups": 1},
        {"spreadByLabel": "zone-label", "minGroups": 2},
    ]
    assert s["placement"]["replicaScheduling"]["replicaDivisionPreference"] == "Weighted"
    assert s["failover"]["application"] == {
        "decisionConditions": {"tolerationSeconds": 300},
        "purgeMode": "Gracefully",
        "gracePeriodSeconds": 600,
    }
    assert s["failover"]["cluster"] == {"purgeMode": "Gracefully"}
    assert "clusterTolerations" not in s["placement"]  # no default NoExecute tolerations any more
    assert (s["schedulerName"], s["priority"], s["preemption"], s["conflictResolution"]) == (
        "default-scheduler", 0, "Never", "Abort")
    assert "propagateDeps" not in s


@pytest.mark.parametrize("mode", ["Directly", "Never"])
def test_grace_period_only_defaulted_for_gracefully(mode: str) -> None:
    s = spec(failover={"application": {"decisionConditions": {"tolerationSeconds": 10}, "purgeMode": mode}})
    default_propagation_spec(s, "ns")
    assert "gracePeriodSeconds" not in s["failover"]["application"]
    assert s["failover"]["application"]["decisionConditions"]["tolerationSeconds"] == 10


def test_existing_values_are_kept() -> None:
    s = spec(
        placement={"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
                   "spreadConstraints": [{"spreadByField": "region", "minGroups": 3}]},
        failover={"application": {"decisionConditions": {}, "purgeMode": "Gracefully", "gracePeriodSeconds": 30}},
    )
    default_propagation_spec(s, "ns")
    assert s["placement"]["replicaScheduling"]["replicaDivisionPreference"] == "Aggregated"
    assert s["placement"]["spreadConstraints"] == [{"spreadByField": "region", "minGroups": 3}]
    assert s["failover"]["application"]["gracePeriodSeconds"] == 30


def test_service_import_forces_propagate_deps() -> None:
    s = spec(resourceSelectors=[{"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport"}])
    default_propagation_spec(s, "ns")
    assert s["propagateDeps"] is True


def test_duplicated_placement_gets_no_division_preference() -> None:
    s = spec(placement={"replicaScheduling": {"replicaSchedulingType": "Duplicated"}})
    default_propagation_spec(s, "ns")
    assert "replicaDivisionPreference" not in s["placement"]["replicaScheduling"]


def test_create_adds_permanent_id_and_finalizer() -> None:
    plugin = PropagationPolicyAdmission(cluster_scoped=False, new_id=lambda: "id-1")
    obj = policy()
    obj["metadata"]["labels"] = {PP_ID: "chosen-by-user", "app": "x"}
    plugin.default(obj, None, "CREATE")
    assert obj["metadata"]["labels"] == {PP_ID: "id-1", "app": "x"}  # merged, the system id wins
    assert obj["metadata"]["finalizers"] == [L.PROPAGATION_POLICY_CONTROLLER_FINALIZER]
    assert plugin.validate(obj, None, "CREATE") == []


def test_cluster_propagation_policy_uses_its_own_keys_and_no_namespace() -> None:
    plugin = PropagationPolicyAdmission(cluster_scoped=True, new_id=lambda: "id-2")
    obj = {"metadata": {"name": "c"}, "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Namespace"}]}}
    plugin.default(obj, None, "CREATE")
    assert obj["metadata"]["labels"] == {L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL: "id-2"}
    assert obj["metadata"]["finalizers"] == [L.CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER]
    assert "namespace" not in obj["spec"]["resourceSelectors"][0]
    assert plugin.validate(obj, None, "CREATE") == []


def test_finalizer_can_be_left_out() -> None:
    plugin = PropagationPolicyAdmission(cluster_scoped=False, add_finalizer=False)
    obj = policy()
    plugin.default(obj, None, "CREATE")
    assert "finalizers" not in obj["metadata"]


# ------------------------------------------------------------------------------ update rules


def created(**extra: Any) -> dict[str, Any]:
    plugin = PropagationPolicyAdmission(cluster_scoped=False, new_id=lambda: "id-1")
    obj = policy(**extra)
    plugin.default(obj, None, "CREATE")
    return obj


def test_scheduler_name_and_permanent_id_are_immutable() -> None:
    plugin = PropagationPolicyAdmission(cluster_scoped=False)
    old = created()
    new = copy.deepcopy(old)
    new["spec"]["schedulerName"] = "other"
    new["metadata"]["labels"][PP_ID] = "forged"
    plugin.default(new, old, "UPDATE")
    msgs = [f"{c.field}: {c.message}" for c in plugin.validate(new, old, "UPDATE")]
    assert msgs == [
        "spec.schedulerName: Forbidden: the schedulerName should not be updated",
        f"metadata.labels: Forbidden: label {PP_ID} is immutable, it can only be set by the system during creation",
    ]


def test_removing_the_permanent_id_is_refused() -> None:
    plugin = PropagationPolicyAdmission(cluster_scoped=False)
    old = created()
    new = copy.deepcopy(old)
    del new["metadata"]["labels"][PP_ID]
    plugin.default(new, old, "UPDATE")
    msgs = [c.message for c in plugin.validate(new, old, "UPDATE")]
    assert any("is immutable" in m for m in msgs)
    assert f"Required value: label {PP_ID} is required, it should be set by the mutating admission webhook during creation" in msgs


def test_policy_stored_before_admission_gets_an_id_on_update() -> None:
    plugin = PropagationPolicyAdmission(cluster_scoped=False, new_id=lambda: "late")
    old = policy()
    new = copy.deepcopy(old)
    plugin.default(new, old, "UPDATE")
    assert new["metadata"]["labels"][PP_ID] == "late"
    assert plugin.validate(new, old, "UPDATE") == []


def test_update_that_keeps_the_spec_is_not_revalidated() -> None:
    """Ratcheting: a policy stored before a rule existed can still lose its finalizer."""
    plugin = PropagationPolicyAdmission(cluster_scoped=False)
    old = created(placement={"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1}]})  # D12-invalid
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []
    plugin.default(new, old, "UPDATE")
    assert new["spec"] == old["spec"]
    assert plugin.validate(new, old, "UPDATE") == []
    changed = copy.deepcopy(old)
    changed["spec"]["priority"] = 5
    assert [c.field for c in plugin.validate(changed, old, "UPDATE")] == ["spec.placement.spreadConstraints[0].maxGroups"]


# -------------------------------------------------------------------------- Karmada's V-rules


def test_v4_application_failover_needs_propagate_deps() -> None:
    s = spec(failover={"application": {"decisionConditions": {}}})
    assert errors(s) == [
        "spec.propagateDeps: Invalid value: false: application failover is set, propagateDeps must be true"
    ]
    assert errors(spec(propagateDeps=True, failover={"application": {"decisionConditions": {}}})) == []


def test_v5_to_v8_application_failover_numbers() -> None:
    def app(**fields: Any) -> list[str]:
        return errors(spec(propagateDeps=True, failover={"application": {"decisionConditions": {}, **fields}}))

    assert app(decisionConditions={"tolerationSeconds": -1}) == [
        "spec.failover.application.decisionConditions.tolerationSeconds: Invalid value: -1: "
        "must be greater than or equal to 0"
    ]
    assert app(purgeMode="Directly", gracePeriodSeconds=10) == [
        "spec.failover.application.gracePeriodSeconds: Invalid value: 10: only takes effect when purgeMode is gracefully"
    ]
    assert app(purgeMode="Never", gracePeriodSeconds=0) == [
        "spec.failover.application.gracePeriodSeconds: Invalid value: 0: only takes effect when purgeMode is gracefully",
        "spec.failover.application.gracePeriodSeconds: Invalid value: 0: must be greater than 0",
    ]
    assert app(purgeMode="Gracefully", gracePeriodSeconds=-5) == [
        "spec.failover.application.gracePeriodSeconds: Invalid value: -5: must be greater than 0"
    ]


def test_v7_missing_grace_period_without_defaulting() -> None:
    s = spec(propagateDeps=True,
             failover={"application": {"decisionConditions": {"tolerationSeconds": 1}, "purgeMode": "Gracefully"}})
    assert [f"{c.field}: {c.message}" for c in validate_propagation_spec(s, "ns")] == [
        "spec.failover.application.gracePeriodSeconds: Invalid value: null: should not be empty when purgeMode is gracefully"
    ]


def test_v9_v10_alias_label_names_are_label_keys() -> None:
    rules = {"rules": [{"aliasLabelName": "bad key", "jsonPath": "{.a}"}]}
    s = spec(placement=one_cluster(), failover={"cluster": {"purgeMode": "Directly", "statePreservation": rules}})
    (msg,) = errors(s)
    assert msg.startswith('spec.failover.cluster.statePreservation.rules[0].aliasLabelName: Invalid value: "bad key": '
                          "name part must consist of alphanumeric characters")
    s = spec(propagateDeps=True, failover={"application": {"decisionConditions": {}, "statePreservation": {
        "rules": [{"aliasLabelName": "", "jsonPath": "{.a}"}]}}})
    assert errors(s) == [
        'spec.failover.application.statePreservation.rules[0].aliasLabelName: Invalid value: "": '
        "name part must be non-empty",
        'spec.failover.application.statePreservation.rules[0].aliasLabelName: Invalid value: "": '
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ]


@pytest.mark.parametrize("operator", ["Lt", "Gt", "Sometimes"])
def test_v11_toleration_operators(operator: str) -> None:
    s = spec(placement={"clusterTolerations": [{"key": "a", "operator": operator}]})
    assert errors(s) == [
        f'spec.placement.clusterTolerations[0].operator: Unsupported value: "{operator}": '
        'supported values: "", "Exists", "Equal"'
    ]


def test_toleration_effects() -> None:
    ok = [{"operator": "Exists"}, {"key": "a", "effect": "NoExecute", "tolerationSeconds": 30},
          {"key": "b", "operator": "Equal", "value": "v", "effect": "PreferNoSchedule"}]
    assert errors(spec(placement={"clusterTolerations": ok})) == []
    assert errors(spec(placement={"clusterTolerations": [{"key": "a", "effect": "Never"}]})) == [
        'spec.placement.clusterTolerations[0].effect: Unsupported value: "Never": '
        'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'
    ]


def test_v12_affinity_and_affinities_exclusive() -> None:
    s = spec(placement={"clusterAffinity": {"clusterNames": ["a"]},
                        "clusterAffinities": [{"affinityName": "g", "clusterNames": ["b"]}]})
    (msg,) = errors(s)
    assert msg.startswith("spec.placement: Invalid value: {")
    assert msg.endswith("clusterAffinities cannot co-exist with clusterAffinity")


def test_v13_to_v16_spread_constraint_numbers() -> None:
    def sc(**c: Any) -> list[str]:
        return errors(spec(placement={"spreadConstraints": [c]}))

    (msg,) = sc(spreadByField="cluster", spreadByLabel="x", maxGroups=1)
    assert msg.startswith("spec.placement.spreadConstraints[0]: Invalid value: {")
    assert msg.endswith("spreadByLabel should not co-exist with spreadByField")
    assert sc(spreadByLabel="x", minGroups=-1)[0].endswith("minGroups lower than 0 is not allowed")
    assert sc(spreadByLabel="x", maxGroups=-1)[0].endswith("maxGroups lower than 0 is not allowed")
    assert sc(spreadByField="cluster", maxGroups=1, minGroups=2) == [
        'spec.placement.spreadConstraints[0]: Invalid value: {"spreadByField":"cluster","maxGroups":1,"minGroups":2}: '
        "maxGroups lower than minGroups is not allowed"
    ]
    assert sc(spreadByLabel="rack", minGroups=2) == []  # maxGroups 0 is not compared (and not D12: not cluster)


def test_v17_v18_spread_field_rules() -> None:
    two = errors(spec(placement={"spreadConstraints": [
        {"spreadByField": "cluster", "maxGroups": 1}, {"spreadByField": "cluster", "maxGroups": 2},
        {"spreadByField": "cluster", "maxGroups": 3}]}))
    assert len(two) == 1 and two[0].startswith("spec.placement.spreadConstraints: Invalid value: [")
    assert two[0].endswith("multiple cluster spread constraints are not allowed")
    (msg,) = errors(spec(placement={"spreadConstraints": [{"spreadByField": "region", "maxGroups": 1}]}))
    assert msg.endswith(
        "the cluster spread constraint must be enabled in one of the constraints in case of SpreadByField is enabled"
    )


def test_cluster_affinities_names_and_overflow() -> None:
    terms = [{"affinityName": "g", "clusterNames": ["a"]}, {"affinityName": "g", "clusterNames": ["b"]},
             {"affinityName": "bad name", "clusterNames": ["c"]}]
    msgs = errors(spec(placement={"clusterAffinities": terms}))
    assert any(m.startswith("spec.placement.clusterAffinities: Invalid value: [") and
               m.endswith("each affinity term in a policy must have a unique name") for m in msgs)
    assert any(m.startswith('spec.placement.clusterAffinities[2]: Invalid value: "bad name": name part') for m in msgs)

    overflow = [{"affinityName": "g", "clusterNames": ["a"], "overflowAffinities": [{"affinityName": "g"}]}]
    msgs = errors(spec(placement={"clusterAffinities": overflow}))
    assert msgs[0].endswith("overflowAffinities can only be used together with dynamic weight or aggregated scheduling")
    assert msgs[1] == (
        'spec.placement.clusterAffinities[0].overflowAffinities[0].affinityName: Invalid value: "g": overflow '
        "affinity name must be unique and must not duplicate the primary group's affinityName"
    )
    aggregated = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
                  "clusterAffinities": [{"affinityName": "g", "overflowAffinities": [{"affinityName": "h"}]}]}
    assert errors(spec(placement=aggregated)) == [
        "spec.placement.clusterAffinities[0].overflowAffinities: Invalid value: "
        '[{"affinityName":"h"}]: overflowAffinities can only be used together with the inline ClusterAffinity'
    ]


def test_field_and_label_selectors_of_cluster_affinity() -> None:
    s = spec(placement={"clusterAffinity": {
        "fieldSelector": {"matchExpressions": [{"key": "name", "operator": "In", "values": ["a"]}]},
        "labelSelector": {"matchLabels": {"env": "not ok"}}}})
    msgs = errors(s)
    assert msgs[0].startswith("spec.placement.clusterAffinity.fieldSelector: Invalid value: {")
    assert msgs[0].endswith('unsupported key "name", must be provider, region, or zone')
    assert msgs[1].startswith('spec.placement.clusterAffinity.labelSelector.matchLabels: Invalid value: "not ok"')


def test_resource_selectors() -> None:
    s = spec(resourceSelectors=[{"apiVersion": "", "kind": "Deployment", "namespace": "other",
                                 "labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}])
    assert errors(s) == [
        "spec.resourceSelectors[0].apiVersion: Required value",
        'spec.resourceSelectors[0].namespace: Invalid value: "other": namespace of resource selector must be the '
        "same as the namespace of the policy",
        "spec.resourceSelectors[0].labelSelector.matchExpressions[0].values: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn'",
    ]
    # a ClusterPropagationPolicy may select any namespace
    assert errors(spec(resourceSelectors=[{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "other"}]), "") == []


def test_preemption_always_needs_names() -> None:
    s = spec(preemption="Always", resourceSelectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}])
    assert errors(s) == [
        'spec.resourceSelectors[0].name: Invalid value: "": name cannot be empty if preemption is Always, the empty '
        "name may cause unexpected resources preemption"
    ]
    assert errors(spec(preemption="Always", priority=10)) == []


def test_suspension() -> None:
    s = spec(suspension={"dispatching": True, "dispatchingOnClusters": {"clusterNames": ["a"]}})
    (msg,) = errors(s)
    assert msg.startswith("spec.suspension: Invalid value: {")
    assert msg.endswith("suspension dispatching cannot co-exist with dispatchingOnClusters.clusterNames")


def test_workload_affinity_keys() -> None:
    s = spec(placement={"workloadAffinity": {"affinity": {"groupByLabelKey": "app"},
                                             "antiAffinity": {"groupByLabelKey": "app"}}})
    (msg,) = errors(s)
    assert msg.endswith("affinity and antiAffinity must not use the same groupByLabelKey")


# ---------------------------------------------------------------------------------------- D12


def test_d12_cluster_spread_constraint_needs_max_groups() -> None:
    assert errors(spec(placement={"spreadConstraints": [{"spreadByField": "cluster"}]})) == [
        "spec.placement.spreadConstraints[0].maxGroups: Required value: a cluster spread constraint must set "
        "maxGroups, the most clusters to select (e.g. 1 to keep the workload in a single cluster); with maxGroups "
        "unset or 0 no cluster is ever selected"
    ]
    # a constraint with neither field nor label becomes a cluster constraint first
    (msg,) = errors(spec(placement={"spreadConstraints": [{"maxGroups": 0}]}))
    assert msg.startswith("spec.placement.spreadConstraints[0].maxGroups: Invalid value: 0: a cluster spread")
    assert errors(spec(placement=one_cluster())) == []


def test_d12_applies_next_to_a_region_constraint() -> None:
    s = spec(placement={"spreadConstraints": [{"spreadByField": "region", "maxGroups": 2}, {"spreadByField": "cluster"}]})
    assert [m.split(":")[0] for m in errors(s)] == ["spec.placement.spreadConstraints[1].maxGroups"]


# ----------------------------------------------------------------------------------------- D3


def cluster_failover(rules: list[dict[str, Any]], purge_mode: str = "Directly") -> dict[str, Any]:
    return {"cluster": {"purgeMode": purge_mode, "statePreservation": {"rules": rules}}}


def test_d3_jsonpath_syntax_errors_rejected() -> None:
    s = spec(placement=one_cluster(), failover=cluster_failover([{"aliasLabelName": "a", "jsonPath": "{ %health }"},
                                                                 {"aliasLabelName": "b", "jsonPath": "{.a"}]))
    assert errors(s) == [
        'spec.failover.cluster.statePreservation.rules[0].jsonPath: Invalid value: "{ %health }": not a valid '
        "JSONPath template: unrecognized character in action: U+0025 '%' (at position 2)",
        'spec.failover.cluster.statePreservation.rules[1].jsonPath: Invalid value: "{.a": not a valid JSONPath '
        "template: unclosed action: missing '}' (at position 0)",
    ]


@pytest.mark.parametrize(
    "json_path",
    ["{ .jobStatus.jobId }", "{.replicas}", "{.a}-{.b}", "{.items[?(@.x==\"y\")].name}", "{range .a[*]}{.b}{end}",
     "{ ['kind'] }", "{ ..resourceVersion }"],
)
def test_d3_valid_jsonpath_templates_accepted(json_path: str) -> None:
    s = spec(placement=one_cluster(), failover=cluster_failover([{"aliasLabelName": "a", "jsonPath": json_path}]))
    assert errors(s) == []


def test_d3_empty_jsonpath_and_duplicate_alias_rejected() -> None:
    s = spec(propagateDeps=True, placement=one_cluster(), failover={"application": {
        "decisionConditions": {}, "purgeMode": "Directly",
        "statePreservation": {"rules": [{"aliasLabelName": "job", "jsonPath": "{.a}"},
                                        {"aliasLabelName": "job", "jsonPath": ""}]}}})
    assert errors(s) == [
        'spec.failover.application.statePreservation.rules[1].aliasLabelName: Duplicate value: "job": rules[0] '
        "already writes this label; each rule must use its own aliasLabelName",
        "spec.failover.application.statePreservation.rules[1].jsonPath: Required value: a JSONPath template such as "
        "'{.jobStatus.jobId}'",
    ]


def test_d3_same_alias_in_application_and_cluster_blocks_is_fine() -> None:
    rule = [{"aliasLabelName": "job", "jsonPath": "{.a}"}]
    s = spec(propagateDeps=True, placement=one_cluster(), failover={
        "application": {"decisionConditions": {}, "purgeMode": "Directly", "statePreservation": {"rules": rule}},
        **cluster_failover(rule)})
    assert errors(s) == []


def warnings_of(s: dict[str, Any]) -> list[str]:
    s = copy.deepcopy(s)
    default_propagation_spec(s, "ns")
    return state_preservation_warnings(s)


def test_d3_no_warning_for_directly_on_one_cluster() -> None:
    assert warnings_of(spec(placement=one_cluster(), failover=cluster_failover([{"aliasLabelName": "a", "jsonPath": "{.a}"}]))) == []


def test_d3_warning_for_purge_modes_other_than_directly() -> None:
    rules = [{"aliasLabelName": "a", "jsonPath": "{.a}"}]
    (w,) = warnings_of(spec(placement=one_cluster(), failover=cluster_failover(rules, "Gracefully")))
    assert w.startswith("spec.failover.cluster.statePreservation: the preserved state is injected only with "
                        "purgeMode Directly; with purgeMode Gracefully")
    # the application block defaults to Gracefully
    (w,) = warnings_of(spec(propagateDeps=True, placement=one_cluster(), failover={"application": {
        "decisionConditions": {}, "statePreservation": {"rules": rules}}}))
    assert "spec.failover.application.purgeMode: Directly" in w


def test_d3_no_warning_without_rules() -> None:
    assert warnings_of(spec(failover={"cluster": {"purgeMode": "Gracefully", "statePreservation": {"rules": []}}})) == []
    assert warnings_of(spec(failover={"cluster": {"purgeMode": "Gracefully"}})) == []


def test_d3_warning_for_placements_over_several_clusters() -> None:
    rules = [{"aliasLabelName": "a", "jsonPath": "{.a}"}]

    def warn(placement: dict[str, Any]) -> list[str]:
        return warnings_of(spec(placement=placement, failover=cluster_failover(rules)))

    (w,) = warn({})
    assert w.startswith("spec.failover.cluster.statePreservation: the preserved state is injected only when the "
                        "workload runs in exactly one cluster, but this Duplicated placement runs a copy in every "
                        "matching cluster")
    (w,) = warn({"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}})
    assert "this Divided placement can spread the replicas over several clusters" in w
    (w,) = warn({"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 3}]})
    assert "its cluster spread constraint allows up to 3 clusters" in w
    # static weights make the scheduler ignore spread constraints
    (w,) = warn({"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1}],
                 "replicaScheduling": {"replicaSchedulingType": "Divided"}})
    assert "static weights ignores spread constraints" in w
    # pinned to one cluster by name: no warning
    assert warn({"clusterAffinity": {"clusterNames": ["m1"]}}) == []
    assert warn({"clusterAffinities": [{"affinityName": "a", "clusterNames": ["m1"]},
                                       {"affinityName": "b", "clusterNames": ["m2"]}]}) == []
    assert warn({"clusterAffinity": {"clusterNames": ["m1", "m2"]}}) != []


def test_multi_cluster_reason_dynamic_weight_honours_spread_constraints() -> None:
    placement = {"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1}],
                 "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                       "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}
    assert multi_cluster_reason(placement) is None


def test_plugin_warnings_only_when_spec_changes() -> None:
    plugin = PropagationPolicyAdmission(cluster_scoped=False)
    obj = policy(failover=cluster_failover([{"aliasLabelName": "a", "jsonPath": "{.a}"}], "Gracefully"),
                 placement=one_cluster())
    plugin.default(obj, None, "CREATE")
    assert len(plugin.warnings(obj, None, "CREATE")) == 1
    assert plugin.warnings(copy.deepcopy(obj), obj, "UPDATE") == []


def test_ill_typed_objects_do_not_crash() -> None:
    plugin = PropagationPolicyAdmission(cluster_scoped=False)
    for bad_spec in (None, "x", {"placement": "x", "failover": [1], "resourceSelectors": "y"},
                     {"placement": {"spreadConstraints": ["x", {"maxGroups": "1"}], "clusterAffinities": [None]},
                      "failover": {"application": {"decisionConditions": None, "statePreservation": {"rules": [None, {"jsonPath": 3}]}}}}):
        obj = {"metadata": {"name": "p", "namespace": "ns"}, "spec": bad_spec}
        plugin.default(obj, None, "CREATE")
        result = plugin.validate(obj, None, "CREATE")
        assert all(isinstance(c, Cause) for c in result)
        plugin.warnings(obj, None, "CREATE")
