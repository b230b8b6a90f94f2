"""Attached (dependency) bindings: dependencies follow the workload (D15)."""

from __future__ import annotations

import copy
import json
from typing import Any

from flotilla.api import labels as L
from flotilla.kube.patch import apply_merge_patch
from flotilla.policy.naming import depended_by_label_key
from flotilla.propagation.attached_bindings import (
    attach_update,
    build_attached_binding,
    dependencies_annotation,
    dependency_matches,
    detach_update,
    effective_conflict_resolution,
    effective_preserve_on_deletion,
    is_attached_only,
    is_orphan,
    parse_dependencies_annotation,
    required_clusters,
)


def independent(name: str = "web-deployment", *, clusters: list[dict[str, Any]] | None = None,
                tasks: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                         "name": name.removesuffix("-deployment")},
                            "placement": {}, "propagateDeps": True, **spec}
    if clusters is not None:
        body["clusters"] = clusters
    if tasks is not None:
        body["gracefulEvictionTasks"] = tasks
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "10",
                         "labels": {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: f"{name}-id"}},
            "spec": body}


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cfg", "namespace": "default", "uid": "cm-uid", "resourceVersion": "3",
                          "labels": {"app": "web"}}}


def stored(binding: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(binding)
    out["metadata"]["resourceVersion"] = "77"
    out["metadata"]["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL] = "attached-id"
    return out


# ----------------------------------------------------------------------------------- clusters


def test_required_clusters_are_the_scheduled_clusters() -> None:
    rb = independent(clusters=[{"name": "m1", "replicas": 2}, {"name": "m2"}])
    assert required_clusters(rb) == [{"name": "m1", "replicas": 2}, {"name": "m2"}]
    assert required_clusters(independent()) == []


def test_d15_dependencies_stay_where_the_old_copy_is_kept() -> None:
    rb = independent(clusters=[{"name": "m2", "replicas": 1}], tasks=[
        {"fromCluster": "m1", "purgeMode": "Gracefully", "replicas": 1, "reason": "TaintUntolerated",
         "producer": "TaintManager"},
        {"fromCluster": "m3", "purgeMode": "Never", "reason": "ApplicationFailure", "producer": "x"},
        {"fromCluster": "m4", "purgeMode": "Directly", "reason": "TaintUntolerated", "producer": "TaintManager"},
        {"fromCluster": "m2", "purgeMode": "Gracefully", "reason": "TaintUntolerated", "producer": "TaintManager"},
    ])
    # Gracefully and Never keep the old copy: the dependencies stay with it; Directly removes it first
    assert required_clusters(rb) == [{"name": "m2", "replicas": 1}, {"name": "m1", "replicas": 1}, {"name": "m3"}]


# ----------------------------------------------------------------------------------- build


def test_attached_binding() -> None:
    rb = independent(clusters=[{"name": "m1", "replicas": 2}], conflictResolution="Overwrite",
                     preserveResourcesOnDeletion=True)
    b = build_attached_binding(rb, CONFIGMAP)
    assert b["kind"] == "ResourceBinding"
    md = b["metadata"]
    assert (md["name"], md["namespace"]) == ("cfg-configmap", "default")
    assert md["labels"] == {depended_by_label_key("default", "web-deployment"): "web-deployment-id"}
    assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "uid": "cm-uid",
                                      "controller": True, "blockOwnerDeletion": True}]
    assert md["finalizers"] == [L.BINDING_CONTROLLER_FINALIZER]
    assert b["spec"] == {
        "resource": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg",
                     "uid": "cm-uid", "resourceVersion": "3"},
        "requiredBy": [{"namespace": "default", "name": "web-deployment", "clusters": [{"name": "m1", "replicas": 2}]}],
        "preserveResourcesOnDeletion": True,
        "conflictResolution": "Overwrite",
    }
    assert is_attached_only(b)


# ----------------------------------------------------------------------------------- attach


def test_rescheduled_workload_moves_its_entry() -> None:
    first = independent(clusters=[{"name": "m1"}])
    existing = stored(build_attached_binding(first, CONFIGMAP))
    moved = independent(clusters=[{"name": "m2"}])
    update = attach_update(existing, build_attached_binding(moved, CONFIGMAP), [moved])
    assert update.patch is not None and update.patch["metadata"]["resourceVersion"] == "77"
    result = apply_merge_patch(existing, update.patch)
    assert result["spec"]["requiredBy"] == [{"namespace": "default", "name": "web-deployment",
                                             "clusters": [{"name": "m2"}]}]
    assert attach_update(result, build_attached_binding(moved, CONFIGMAP), [moved]).patch is None


def test_second_workload_adds_its_entry_and_label() -> None:
    web = independent(clusters=[{"name": "m1"}])
    api = independent("api-deployment", clusters=[{"name": "m2"}], conflictResolution="Overwrite")
    existing = stored(build_attached_binding(web, CONFIGMAP))
    update = attach_update(existing, build_attached_binding(api, CONFIGMAP), [web, api])
    assert update.conflicts and "conflictResolution" in update.conflicts[0]
    result = apply_merge_patch(existing, update.patch or {})
    assert [r["name"] for r in result["spec"]["requiredBy"]] == ["web-deployment", "api-deployment"]
    assert result["metadata"]["labels"][depended_by_label_key("default", "web-deployment")] == "web-deployment-id"
    assert result["metadata"]["labels"][depended_by_label_key("default", "api-deployment")] == "api-deployment-id"
    assert result["metadata"]["labels"][L.RESOURCE_BINDING_PERMANENT_ID_LABEL] == "attached-id"
    assert result["spec"]["conflictResolution"] == "Overwrite"
    assert result["spec"]["preserveResourcesOnDeletion"] is False


def test_policy_made_binding_keeps_its_own_strategy() -> None:
    policy_made = stored(build_attached_binding(independent(), CONFIGMAP))
    policy_made["spec"] = {"resource": policy_made["spec"]["resource"], "placement": {},
                           "clusters": [{"name": "m9"}], "conflictResolution": "Abort"}
    api = independent("api-deployment", clusters=[{"name": "m2"}], conflictResolution="Overwrite")
    result = apply_merge_patch(policy_made, attach_update(policy_made, build_attached_binding(api, CONFIGMAP),
                                                          [api]).patch or {})
    assert result["spec"]["conflictResolution"] == "Abort"
    assert result["spec"]["clusters"] == [{"name": "m9"}]
    assert result["spec"]["requiredBy"][0]["name"] == "api-deployment"


def test_effective_strategy() -> None:
    assert effective_conflict_resolution([]) == ("Abort", False)
    assert effective_conflict_resolution([{"spec": {}}, {"spec": {"conflictResolution": "Abort"}}]) == ("Abort", False)
    assert effective_conflict_resolution([{"spec": {"conflictResolution": "Overwrite"}}, {"spec": {}}]) == (
        "Overwrite", True)
    assert effective_preserve_on_deletion([{"spec": {}}]) == (False, False)
    assert effective_preserve_on_deletion([{"spec": {"preserveResourcesOnDeletion": True}}, {"spec": {}}]) == (
        True, True)


# ----------------------------------------------------------------------------------- detach


def test_last_referrer_gone_deletes_a_purely_attached_binding() -> None:
    existing = stored(build_attached_binding(independent(clusters=[{"name": "m1"}]), CONFIGMAP))
    assert detach_update(existing, "default", "web-deployment", []).delete


def test_detaching_one_of_two_referrers() -> None:
    web = independent(clusters=[{"name": "m1"}], conflictResolution="Overwrite")
    api = independent("api-deployment", clusters=[{"name": "m2"}])
    existing = stored(build_attached_binding(web, CONFIGMAP))
    existing = apply_merge_patch(existing, attach_update(existing, build_attached_binding(api, CONFIGMAP),
                                                         [web, api]).patch or {})
    update = detach_update(existing, "default", "web-deployment", [api])
    assert not update.delete
    result = apply_merge_patch(existing, update.patch or {})
    assert [r["name"] for r in result["spec"]["requiredBy"]] == ["api-deployment"]
    assert depended_by_label_key("default", "web-deployment") not in result["metadata"]["labels"]
    assert result["spec"]["conflictResolution"] == "Abort"


def test_detaching_from_a_policy_made_binding_keeps_it() -> None:
    existing = stored(build_attached_binding(independent(), CONFIGMAP))
    existing["spec"]["placement"] = {}
    update = detach_update(existing, "default", "web-deployment", [])
    assert not update.delete
    result = apply_merge_patch(existing, update.patch or {})
    assert "requiredBy" not in result["spec"] and result["spec"]["placement"] == {}
    assert detach_update(result, "default", "web-deployment", []).patch is None


# ----------------------------------------------------------------------------------- matching


def test_dependency_matching() -> None:
    by_name = [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg"}]
    by_label = [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default",
                 "labelSelector": {"matchLabels": {"app": "web"}}}]
    assert dependency_matches(by_name, CONFIGMAP)
    assert dependency_matches(by_label, CONFIGMAP)
    other_ns = copy.deepcopy(CONFIGMAP)
    other_ns["metadata"]["namespace"] = "prod"
    assert not dependency_matches(by_name, other_ns)
    secret = dict(CONFIGMAP, kind="Secret")
    assert not dependency_matches(by_name, secret)
    assert not dependency_matches([{**by_label[0], "labelSelector": {"matchLabels": {"app": "db"}}}], CONFIGMAP)


def test_orphans() -> None:
    attached = build_attached_binding(independent(), CONFIGMAP)
    by_name = [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg"}]
    assert not is_orphan(attached, by_name, lambda *a: None)
    assert is_orphan(attached, [{**by_name[0], "name": "other"}], lambda *a: None)
    assert is_orphan(attached, [], lambda *a: None)
    by_label = [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default",
                 "labelSelector": {"matchLabels": {"app": "web"}}}]
    assert not is_orphan(attached, by_label, lambda *a: CONFIGMAP)
    assert is_orphan(attached, by_label, lambda *a: None)


def test_dependencies_annotation_round_trip() -> None:
    deps = [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg"},
            {"apiVersion": "v1", "kind": "Secret", "namespace": "default",
             "labelSelector": {"matchLabels": {"a": "b"}}}]
    value = dependencies_annotation(deps)
    assert json.loads(value) == deps
    assert value.startswith('[{"apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"cfg"}')
    binding = {"metadata": {"annotations": {L.DEPENDENCIES_ANNOTATION: value}}}
    assert parse_dependencies_annotation(binding) == deps
    assert parse_dependencies_annotation({"metadata": {"annotations": {L.DEPENDENCIES_ANNOTATION: "{"}}}) == []
    assert parse_dependencies_annotation({}) == []
