"""The binding the detector builds for a claimed template, and the patch that keeps it up to date."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.kube.patch import apply_merge_patch
from flotilla.propagation.binding_spec import (
    CRB_UPDATED_SPEC_FIELDS,
    RB_UPDATED_SPEC_FIELDS,
    OwnerConflict,
    binding_update_patch,
    build_binding,
    controller_owner,
    owner_conflict,
    resource_ref,
)

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "nginx", "namespace": "default", "uid": "dep-uid", "resourceVersion": "7",
                 "labels": {"app": "nginx"}},
    "spec": {"replicas": 3},
}
PP: dict[str, Any] = {
    "apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "PropagationPolicy",
    "metadata": {"name": "pp", "namespace": "default", "labels": {L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: "pp-id"}},
    "spec": {
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
        "placement": {"clusterAffinity": {"clusterNames": ["m1", "m2"]}},
        "schedulerName": "default-scheduler",
        "conflictResolution": "Abort",
    },
}
CPP: dict[str, Any] = {
    "apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "ClusterPropagationPolicy",
    "metadata": {"name": "cpp", "labels": {L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL: "cpp-id"}},
    "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Namespace"}], "placement": {}},
}
NAMESPACE: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": "team-a", "uid": "ns-uid", "resourceVersion": "3"}}


def with_spec(policy: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(policy)
    out["spec"].update(spec)
    return out


def stored(binding: dict[str, Any], **extra_spec: Any) -> dict[str, Any]:
    """``binding`` as the API server would hold it, plus fields other controllers wrote."""
    out = copy.deepcopy(binding)
    out["metadata"]["resourceVersion"] = "42"
    out["metadata"]["uid"] = "rb-uid"
    out["metadata"]["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL] = "rb-id"
    out["spec"].update(extra_spec)
    out["status"] = {"schedulerObservedGeneration": 1}
    return out


# ----------------------------------------------------------------------------------- build


def test_resource_binding_for_a_namespaced_template() -> None:
    b = build_binding(DEPLOYMENT, PP, replicas=3, replica_requirements={"resourceRequest": {"cpu": "100m"}})
    assert b["apiVersion"] == "work.karmada.io/v1alpha2"
    assert b["kind"] == "ResourceBinding"
    md = b["metadata"]
    assert (md["name"], md["namespace"]) == ("nginx-deployment", "default")
    assert md["labels"] == {L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: "pp-id"}
    assert md["annotations"] == {L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION: "default",
                                 L.PROPAGATION_POLICY_NAME_ANNOTATION: "pp"}
    assert md["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx",
                                      "uid": "dep-uid", "controller": True, "blockOwnerDeletion": True}]
    assert md["finalizers"] == [L.BINDING_CONTROLLER_FINALIZER]
    assert b["spec"] == {
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "nginx",
                     "uid": "dep-uid", "resourceVersion": "7"},
        "replicaRequirements": {"resourceRequest": {"cpu": "100m"}},
        "replicas": 3,
        "placement": {"clusterAffinity": {"clusterNames": ["m1", "m2"]}},
        "schedulerName": "default-scheduler",
        "conflictResolution": "Abort",
    }


def test_policy_fields_are_copied_and_zero_values_left_out() -> None:
    failover = {"cluster": {"purgeMode": "Directly"}}
    policy = with_spec(PP, propagateDeps=True, failover=failover, preserveResourcesOnDeletion=True,
                       suspension={"dispatching": True})
    spec = build_binding(DEPLOYMENT, policy, schedule_priority=7)["spec"]
    assert spec["propagateDeps"] is True
    assert spec["failover"] == failover and spec["failover"] is not failover
    assert spec["preserveResourcesOnDeletion"] is True
    assert spec["suspension"] == {"dispatching": True}
    assert spec["schedulePriority"] == {"priority": 7}
    assert "replicas" not in spec and "replicaRequirements" not in spec  # no InterpretReplica answer
    off = build_binding(DEPLOYMENT, with_spec(PP, propagateDeps=False))["spec"]
    assert "propagateDeps" not in off


def test_empty_placement_is_still_a_placement() -> None:
    # attached dependency bindings are the ones without a placement
    policy = copy.deepcopy(PP)
    del policy["spec"]["placement"]
    assert build_binding(DEPLOYMENT, policy)["spec"]["placement"] == {}


def test_cluster_scoped_template_gets_a_cluster_resource_binding() -> None:
    b = build_binding(NAMESPACE, CPP)
    assert b["kind"] == "ClusterResourceBinding"
    assert b["metadata"]["name"] == "team-a-namespace"
    assert "namespace" not in b["metadata"]
    assert b["metadata"]["finalizers"] == [L.CLUSTER_RESOURCE_BINDING_CONTROLLER_FINALIZER]
    assert b["metadata"]["labels"] == {L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL: "cpp-id"}
    assert b["spec"]["resource"] == {"apiVersion": "v1", "kind": "Namespace", "name": "team-a", "uid": "ns-uid",
                                     "resourceVersion": "3"}


def test_namespaced_template_claimed_by_a_cluster_policy_gets_a_resource_binding() -> None:
    b = build_binding(DEPLOYMENT, CPP)
    assert b["kind"] == "ResourceBinding"
    assert b["metadata"]["namespace"] == "default"
    assert b["metadata"]["annotations"] == {L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION: "cpp"}


def test_binding_name_replaces_colons() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:controller:x", "uid": "u"}}
    assert build_binding(role, CPP)["metadata"]["name"] == "system.controller.x-clusterrole"


def test_resource_ref_omits_what_is_unknown() -> None:
    assert resource_ref({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}) == {
        "apiVersion": "v1", "kind": "ConfigMap", "name": "c"}


# ----------------------------------------------------------------------------------- update


def test_up_to_date_binding_needs_no_patch() -> None:
    desired = build_binding(DEPLOYMENT, PP, replicas=3)
    assert binding_update_patch(stored(desired, clusters=[{"name": "m1", "replicas": 3}]), desired) is None


def test_template_change_only_touches_the_resource_version() -> None:
    existing = stored(build_binding(DEPLOYMENT, PP, replicas=3), clusters=[{"name": "m1", "replicas": 3}])
    template = copy.deepcopy(DEPLOYMENT)
    template["metadata"]["resourceVersion"] = "8"
    patch = binding_update_patch(existing, build_binding(template, PP, replicas=3))
    assert patch == {"metadata": {"resourceVersion": "42"}, "spec": {"resource": {"resourceVersion": "8"}}}


def test_update_keeps_fields_of_other_controllers() -> None:
    others = {
        "clusters": [{"name": "m2", "replicas": 3}],
        "gracefulEvictionTasks": [{"fromCluster": "m1", "reason": "TaintUntolerated", "producer": "TaintManager"}],
        "requiredBy": [{"namespace": "default", "name": "x-deployment"}],
        "rescheduleTriggeredAt": "2024-01-01T00:00:00Z",
    }
    existing = stored(build_binding(DEPLOYMENT, PP, replicas=3), **others)
    existing["metadata"]["labels"]["team"] = "a"
    existing["metadata"]["annotations"][L.POLICY_PLACEMENT_ANNOTATION] = "{}"
    existing["metadata"]["finalizers"].append(L.BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER)
    policy = with_spec(PP, placement={"clusterAffinity": {"clusterNames": ["m3"]}}, failover={"cluster": {}})
    patch = binding_update_patch(existing, build_binding(DEPLOYMENT, policy, replicas=5))
    assert patch is not None
    result = apply_merge_patch(existing, patch)
    for key, value in others.items():
        assert result["spec"][key] == value
    assert result["status"] == existing["status"]
    assert result["spec"]["placement"] == {"clusterAffinity": {"clusterNames": ["m3"]}}
    assert result["spec"]["replicas"] == 5
    assert result["spec"]["failover"] == {"cluster": {}}
    assert result["metadata"]["labels"]["team"] == "a"
    assert result["metadata"]["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL] == "rb-id"
    assert result["metadata"]["annotations"][L.POLICY_PLACEMENT_ANNOTATION] == "{}"
    assert result["metadata"]["finalizers"] == [L.BINDING_CONTROLLER_FINALIZER,
                                                L.BINDING_DEPENDENCIES_DISTRIBUTOR_FINALIZER]
    assert patch["metadata"]["resourceVersion"] == "42"


def test_fields_the_policy_dropped_are_removed() -> None:
    policy = with_spec(PP, failover={"application": {}}, preserveResourcesOnDeletion=True, propagateDeps=True)
    existing = stored(build_binding(DEPLOYMENT, policy, replicas=3,
                                   replica_requirements={"resourceRequest": {"cpu": "1"}}))
    patch = binding_update_patch(existing, build_binding(DEPLOYMENT, PP))
    assert patch is not None
    for key in ("failover", "preserveResourcesOnDeletion", "propagateDeps", "replicas", "replicaRequirements"):
        assert patch["spec"][key] is None
        assert key not in apply_merge_patch(existing, patch)["spec"]


def test_placement_is_replaced_not_merged() -> None:
    policy = with_spec(PP, placement={"clusterAffinity": {"clusterNames": ["m1"]}, "spreadConstraints": [
        {"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]})
    existing = stored(build_binding(DEPLOYMENT, policy))
    new_policy = with_spec(PP, placement={"clusterAffinity": {"labelSelector": {"matchLabels": {"a": "b"}}}})
    result = apply_merge_patch(existing, binding_update_patch(existing, build_binding(DEPLOYMENT, new_policy)) or {})
    assert result["spec"]["placement"] == {"clusterAffinity": {"labelSelector": {"matchLabels": {"a": "b"}}}}


def test_suspension_keeps_the_scheduling_flag_of_others() -> None:
    existing = stored(build_binding(DEPLOYMENT, with_spec(PP, suspension={"dispatching": True})))
    existing["spec"]["suspension"]["scheduling"] = True
    result = apply_merge_patch(existing, binding_update_patch(existing, build_binding(DEPLOYMENT, PP)) or {})
    assert result["spec"]["suspension"] == {"scheduling": True}
    existing["spec"]["suspension"] = {"dispatching": True}
    result = apply_merge_patch(existing, binding_update_patch(existing, build_binding(DEPLOYMENT, PP)) or {})
    assert "suspension" not in result["spec"]
    policy = with_spec(PP, suspension={"dispatchingOnClusters": {"clusterNames": ["m1"]}})
    result = apply_merge_patch(existing, binding_update_patch(existing, build_binding(DEPLOYMENT, policy)) or {})
    assert result["spec"]["suspension"] == {"dispatchingOnClusters": {"clusterNames": ["m1"]}}


def test_propagation_policy_claim_strips_a_cluster_policy_claim() -> None:
    existing = stored(build_binding(DEPLOYMENT, CPP))
    result = apply_merge_patch(existing, binding_update_patch(existing, build_binding(DEPLOYMENT, PP)) or {})
    labels, annotations = result["metadata"]["labels"], result["metadata"]["annotations"]
    assert labels[L.PROPAGATION_POLICY_PERMANENT_ID_LABEL] == "pp-id"
    assert L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL not in labels
    assert L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION not in annotations
    assert labels[L.RESOURCE_BINDING_PERMANENT_ID_LABEL] == "rb-id"


def test_cluster_policy_claim_keeps_a_propagation_policy_claim() -> None:
    existing = stored(build_binding(DEPLOYMENT, PP))
    result = apply_merge_patch(existing, binding_update_patch(existing, build_binding(DEPLOYMENT, CPP)) or {})
    assert result["metadata"]["labels"][L.PROPAGATION_POLICY_PERMANENT_ID_LABEL] == "pp-id"
    assert result["metadata"]["labels"][L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL] == "cpp-id"


def test_cluster_resource_binding_keeps_propagate_deps_from_creation() -> None:
    existing = stored(build_binding(NAMESPACE, with_spec(CPP, propagateDeps=True)))
    assert binding_update_patch(existing, build_binding(NAMESPACE, CPP)) is None
    assert "propagateDeps" not in CRB_UPDATED_SPEC_FIELDS and "propagateDeps" in RB_UPDATED_SPEC_FIELDS


def test_binding_owned_by_an_older_template_is_not_touched() -> None:
    existing = stored(build_binding(DEPLOYMENT, PP))
    existing["metadata"]["ownerReferences"][0]["uid"] = "old-uid"
    assert owner_conflict(existing, "dep-uid")
    with pytest.raises(OwnerConflict, match="garbage collector"):
        binding_update_patch(existing, build_binding(DEPLOYMENT, PP))


def test_binding_without_controller_is_adopted() -> None:
    existing = stored(build_binding(DEPLOYMENT, PP))
    existing["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"}]
    assert controller_owner(existing) is None and not owner_conflict(existing, "dep-uid")
    patch = binding_update_patch(existing, build_binding(DEPLOYMENT, PP))
    assert patch is not None
    assert apply_merge_patch(existing, patch)["metadata"]["ownerReferences"][0]["uid"] == "dep-uid"


def test_d20_policy_restore_annotations_go_to_the_binding_and_leave_with_the_policy() -> None:
    policy = copy.deepcopy(PP)
    policy["metadata"].setdefault("annotations", {}).update(
        {"restore.flotilla.io/native": "false", "restore.flotilla.io/max-checkpoint-age": "10m", "team": "x"})
    b = build_binding(DEPLOYMENT, policy)
    ann = b["metadata"]["annotations"]
    assert ann["restore.flotilla.io/native"] == "false" and ann["restore.flotilla.io/max-checkpoint-age"] == "10m"
    assert "team" not in ann
    existing = stored(b)
    del policy["metadata"]["annotations"]["restore.flotilla.io/native"]
    patch = binding_update_patch(existing, build_binding(DEPLOYMENT, policy))
    assert patch is not None
    after = apply_merge_patch(existing, patch)
    assert "restore.flotilla.io/native" not in after["metadata"]["annotations"]
    assert after["metadata"]["annotations"]["restore.flotilla.io/max-checkpoint-age"] == "10m"
