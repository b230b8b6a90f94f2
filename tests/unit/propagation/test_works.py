"""The Works a binding asks for (flotilla.propagation.works): manifests, metadata, orphans, merging."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.interpreter import ResourceInterpreter
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import (
    BindingRef,
    InterpreterCache,
    WorkBuildError,
    binding_ref,
    build_work_intent,
    conflict_resolution,
    directly_purge_pending,
    expected_clusters,
    inject_preserved_label_state,
    is_workload,
    job_completions,
    orphan_works,
    plan_works,
    render_work,
    should_suspend_dispatching,
    target_clusters,
    work_cluster,
    work_update,
)
from flotilla.scheduler.model import TargetCluster

RB_ID = "5f1e0b8c-0000-4000-8000-000000000001"
TEMPLATE_UID = "0d7f3a52-0000-4000-8000-0000000000aa"
INTERP = ResourceInterpreter()


def template() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "nginx", "namespace": "default", "uid": TEMPLATE_UID, "generation": 3,
            "resourceVersion": "42", "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": {"app": "nginx", L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: "pp-id"},
            "annotations": {"deployment.kubernetes.io/revision": "2", "team": "web"},
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                         "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}},
        },
        "status": {"replicas": 3, "readyReplicas": 3},
    }


def binding(clusters: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {"name": "nginx-deployment", "namespace": "default",
                     "labels": {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: RB_ID}},
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "nginx",
                         "uid": TEMPLATE_UID},
            "replicas": 3,
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}},
            "clusters": clusters if clusters is not None else [{"name": "member1", "replicas": 2},
                                                               {"name": "member2", "replicas": 1}],
            **spec,
        },
    }


def work(cluster: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "nginx-687f7fb96f", "namespace": f"karmada-es-{cluster}",
                         "labels": {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: RB_ID, **labels}}}


def image_override(name: str, cluster: str, tag: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
                 "overrideRules": [{"targetCluster": {"clusterNames": [cluster]},
                                    "overriders": {"imageOverrider": [{"component": "Tag", "operator": "replace",
                                                                       "value": tag}]}}]},
    }


# ------------------------------------------------------------------------------- the binding


def test_binding_ref_for_rb_and_crb() -> None:
    ref = binding_ref(binding())
    assert ref == BindingRef("ResourceBinding", "default", "nginx-deployment", RB_ID)
    assert ref.id_label == L.RESOURCE_BINDING_PERMANENT_ID_LABEL
    assert ref.annotations() == {L.RESOURCE_BINDING_NAMESPACE_ANNOTATION: "default",
                                 L.RESOURCE_BINDING_NAME_ANNOTATION: "nginx-deployment"}
    crb = {"kind": "ClusterResourceBinding",
           "metadata": {"name": "ns-a-namespace", "labels": {L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: "c1"}}}
    cref = binding_ref(crb)
    assert cref.cluster_scoped and cref.permanent_id == "c1" and cref.key == "ns-a-namespace"
    assert cref.annotations() == {L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION: "ns-a-namespace"}


def test_is_workload() -> None:
    assert is_workload({"replicas": 1})
    assert is_workload({"replicaRequirements": {}})
    assert is_workload({"components": [{"name": "a", "replicas": 0}]})
    assert not is_workload({"replicas": 0})


def test_target_clusters_adds_required_by_once() -> None:
    spec = {"clusters": [{"name": "m1", "replicas": 2}],
            "requiredBy": [{"name": "x", "clusters": [{"name": "m1", "replicas": 9}, {"name": "m3"}]},
                           {"name": "y", "clusters": [{"name": "m3"}, {"name": "m4", "replicas": 1}]}]}
    assert target_clusters(spec) == [TargetCluster("m1", 2), TargetCluster("m3", 0), TargetCluster("m4", 1)]


def test_expected_clusters_and_orphans_keep_gracefully_evicted_clusters() -> None:
    spec = {"clusters": [{"name": "m1"}],
            "gracefulEvictionTasks": [
                {"fromCluster": "m2", "purgeMode": "Gracefully", "producer": "p", "reason": "TaintUntolerated"},
                {"fromCluster": "m3", "producer": "p", "reason": "TaintUntolerated"},
                {"fromCluster": "m4", "purgeMode": "Directly", "producer": "p", "reason": "TaintUntolerated"},
            ]}
    assert expected_clusters(spec) == {"m1", "m2", "m3"}
    works = [work(c) for c in ("m1", "m2", "m3", "m4", "m5")]
    assert [work_cluster(w) for w in orphan_works(works, spec)] == ["m4", "m5"]
    # a Work still in a Directly-purged cluster blocks writing Works
    assert [work_cluster(w) for w in directly_purge_pending(works, spec)] == ["m4"]
    assert directly_purge_pending([work("m1")], spec) == []
    assert directly_purge_pending(works, {"clusters": [{"name": "m1"}]}) == []


def test_work_cluster() -> None:
    assert work_cluster(work("member1")) == "member1"
    assert work_cluster({"metadata": {"namespace": "default"}}) is None


def test_conflict_resolution_prefers_a_valid_template_annotation() -> None:
    t = template()
    assert conflict_resolution(t, {}) == "abort"
    assert conflict_resolution(t, {"conflictResolution": "Overwrite"}) == "overwrite"
    assert conflict_resolution(t, {"conflictResolution": "Abort"}) == "abort"
    t["metadata"]["annotations"][L.CONFLICT_RESOLUTION_ANNOTATION] = "abort"
    assert conflict_resolution(t, {"conflictResolution": "Overwrite"}) == "abort"
    t["metadata"]["annotations"][L.CONFLICT_RESOLUTION_ANNOTATION] = "bogus"  # ignored
    assert conflict_resolution(t, {"conflictResolution": "Overwrite"}) == "overwrite"


def test_suspend_dispatching() -> None:
    assert not should_suspend_dispatching({}, "m1")
    assert should_suspend_dispatching({"suspension": {"dispatching": True}}, "m1")
    spec = {"suspension": {"dispatchingOnClusters": {"clusterNames": ["m2"]}}}
    assert should_suspend_dispatching(spec, "m2") and not should_suspend_dispatching(spec, "m1")


# ------------------------------------------------------------------------------- one Work


def test_build_work_revises_replicas_prunes_and_labels() -> None:
    t = template()
    original = copy.deepcopy(t)
    intent = build_work_intent(t, binding(), TargetCluster("member1", 2), interpreter=INTERP)
    assert t == original  # inputs are not mutated
    assert intent.name == generate_work_name("Deployment", "nginx", "default") == "nginx-687f7fb96f"
    assert intent.namespace == "karmada-es-member1" and intent.cluster == "member1"
    m = intent.manifest
    assert m["spec"]["replicas"] == 2
    assert "status" not in m
    for server_field in ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"):
        assert server_field not in m["metadata"]
    assert m["metadata"]["labels"] == {
        "app": "nginx", L.PROPAGATION_POLICY_PERMANENT_ID_LABEL: "pp-id",
        L.RESOURCE_BINDING_PERMANENT_ID_LABEL: RB_ID, L.MANAGED_LABEL: "true"}
    assert m["metadata"]["annotations"] == {
        "team": "web",  # deployment.kubernetes.io/revision is pruned
        L.RESOURCE_TEMPLATE_GENERATION_ANNOTATION: "3",
        L.RESOURCE_BINDING_NAMESPACE_ANNOTATION: "default",
        L.RESOURCE_BINDING_NAME_ANNOTATION: "nginx-deployment",
        L.RESOURCE_TEMPLATE_UID_ANNOTATION: TEMPLATE_UID,
        L.WORK_NAME_ANNOTATION: "nginx-687f7fb96f",
        L.WORK_NAMESPACE_ANNOTATION: "karmada-es-member1",
        L.CONFLICT_RESOLUTION_ANNOTATION: "abort",
    }
    assert intent.labels == {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: RB_ID}
    assert intent.annotations == {L.RESOURCE_BINDING_NAMESPACE_ANNOTATION: "default",
                                  L.RESOURCE_BINDING_NAME_ANNOTATION: "nginx-deployment",
                                  L.CONFLICT_RESOLUTION_ANNOTATION: "abort"}
    assert intent.finalizers == [L.EXECUTION_CONTROLLER_FINALIZER]
    assert not intent.suspend_dispatching and not intent.preserve_resources_on_deletion


def test_non_workloads_are_not_revised() -> None:
    b = binding(replicas=0)
    intent = build_work_intent(template(), b, TargetCluster("member1", 1), interpreter=INTERP)
    assert intent.manifest["spec"]["replicas"] == 3


def test_overrides_apply_per_cluster_after_revision_and_are_recorded() -> None:
    op = image_override("image-m2", "member2", "1.26")
    intents, errors = plan_works(template(), binding(), interpreter=INTERP, override_policies=[op])
    assert errors == []
    by_cluster = {i.cluster: i for i in intents}
    assert [i.cluster for i in intents] == ["member1", "member2"]
    image = lambda i: i.manifest["spec"]["template"]["spec"]["containers"][0]["image"]  # noqa: E731
    assert image(by_cluster["member1"]) == "nginx:1.25"
    assert image(by_cluster["member2"]) == "nginx:1.26"
    assert L.APPLIED_OVERRIDES_ANNOTATION not in by_cluster["member1"].annotations
    recorded = json.loads(by_cluster["member2"].annotations[L.APPLIED_OVERRIDES_ANNOTATION])
    assert recorded == [{"policyName": "image-m2",
                         "overriders": {"imageOverrider": [{"component": "Tag", "operator": "replace",
                                                            "value": "1.26"}]}}]
    assert by_cluster["member1"].manifest["spec"]["replicas"] == 2
    assert by_cluster["member2"].manifest["spec"]["replicas"] == 1


def test_override_wins_over_revised_replicas() -> None:
    op = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
          "metadata": {"name": "replicas", "namespace": "default"},
          "spec": {"overrideRules": [{"overriders": {"plaintext": [
              {"path": "/spec/replicas", "operator": "replace", "value": 7}]}}]}}
    intent = build_work_intent(template(), binding(), TargetCluster("member1", 2), interpreter=INTERP,
                               override_policies=[op])
    assert intent.manifest["spec"]["replicas"] == 7


def test_a_failing_override_fails_only_that_cluster() -> None:
    op = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
          "metadata": {"name": "broken", "namespace": "default"},
          "spec": {"overrideRules": [{"targetCluster": {"clusterNames": ["member2"]}, "overriders": {"plaintext": [
              {"path": "/spec/missing/deep", "operator": "replace", "value": 1}]}}]}}
    intents, errors = plan_works(template(), binding(), interpreter=INTERP, override_policies=[op])
    assert [i.cluster for i in intents] == ["member1"]
    assert len(errors) == 1 and isinstance(errors[0], WorkBuildError) and errors[0].cluster == "member2"
    assert "broken" in errors[0].message


def test_cluster_affinity_of_overrides_uses_cluster_labels() -> None:
    op = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterOverridePolicy",
          "metadata": {"name": "eu"},
          "spec": {"overrideRules": [{"targetCluster": {"labelSelector": {"matchLabels": {"region": "eu"}}},
                                      "overriders": {"labelsOverrider": [{"operator": "add",
                                                                          "value": {"region": "eu"}}]}}]}}
    clusters = {"member1": {"metadata": {"name": "member1", "labels": {"region": "eu"}}},
                "member2": {"metadata": {"name": "member2", "labels": {"region": "us"}}}}
    intents, _ = plan_works(template(), binding(), interpreter=INTERP, clusters=clusters,
                            cluster_override_policies=[op])
    labels = {i.cluster: i.manifest["metadata"]["labels"] for i in intents}
    assert labels["member1"]["region"] == "eu" and "region" not in labels["member2"]
    assert L.APPLIED_CLUSTER_OVERRIDES_ANNOTATION in intents[0].annotations


def test_binding_options_reach_the_work() -> None:
    b = binding(conflictResolution="Overwrite", preserveResourcesOnDeletion=True,
                suspension={"dispatchingOnClusters": {"clusterNames": ["member2"]}})
    intents, _ = plan_works(template(), b, interpreter=INTERP)
    i1, i2 = intents
    assert i1.annotations[L.CONFLICT_RESOLUTION_ANNOTATION] == "overwrite"
    assert i1.manifest["metadata"]["annotations"][L.CONFLICT_RESOLUTION_ANNOTATION] == "overwrite"
    assert i1.preserve_resources_on_deletion and i2.preserve_resources_on_deletion
    assert not i1.suspend_dispatching and i2.suspend_dispatching


def test_cluster_resource_binding_metadata() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps", "uid": "u1"}}
    crb = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
           "metadata": {"name": "apps-namespace", "labels": {L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: "c1"}},
           "spec": {"resource": {"apiVersion": "v1", "kind": "Namespace", "name": "apps"},
                    "clusters": [{"name": "member1"}]}}
    (intent,), errors = plan_works(ns, crb, interpreter=INTERP)
    assert errors == []
    assert intent.name == generate_work_name("Namespace", "apps", "")
    assert intent.labels == {L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: "c1"}
    assert intent.annotations[L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION] == "apps-namespace"
    assert intent.manifest["metadata"]["labels"][L.CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL] == "c1"


def test_job_completions_are_divided_by_replicas() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "pi", "namespace": "default", "uid": "d43fdeeb-d750-4e2b-bee3-64eb94534f4c"},
           "spec": {"parallelism": 3, "completions": 9,
                    "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}}}
    b = binding([{"name": "member1", "replicas": 1}, {"name": "member2", "replicas": 2}])
    b["spec"]["resource"] = {"apiVersion": "batch/v1", "kind": "Job", "namespace": "default", "name": "pi"}
    assert job_completions(job, b["spec"], target_clusters(b["spec"])) == {"member1": 3, "member2": 6}
    intents, _ = plan_works(job, b, interpreter=INTERP)
    specs = {i.cluster: i.manifest["spec"] for i in intents}
    assert specs["member1"]["parallelism"] == 1 and specs["member1"]["completions"] == 3
    assert specs["member2"]["parallelism"] == 2 and specs["member2"]["completions"] == 6
    # Duplicated: not split
    dup = copy.deepcopy(b)
    dup["spec"]["placement"] = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    assert job_completions(job, dup["spec"], target_clusters(dup["spec"])) is None


def test_preserved_label_state_injection_rules() -> None:
    task = {"fromCluster": "m1", "purgeMode": "Directly", "producer": "p", "reason": "ApplicationFailure",
            "preservedLabelState": {"jobid": "abc"}, "clustersBeforeFailover": ["m1"]}
    m = {"metadata": {"name": "x", "labels": {"app": "x"}}}
    spec = {"gracefulEvictionTasks": [task]}
    assert inject_preserved_label_state(spec, "m2", m, 1)["metadata"]["labels"] == {"app": "x", "jobid": "abc"}
    assert m["metadata"]["labels"] == {"app": "x"}
    assert inject_preserved_label_state(spec, "m2", m, 2) is m  # more than one target
    assert inject_preserved_label_state(spec, "m1", m, 1) is m  # a cluster that ran it before
    graceful = {"gracefulEvictionTasks": [{**task, "purgeMode": "Gracefully"}]}
    assert inject_preserved_label_state(graceful, "m2", m, 1) is m
    last_not_directly = {"gracefulEvictionTasks": [task, {**task, "purgeMode": "Never"}]}
    assert inject_preserved_label_state(last_not_directly, "m2", m, 1) is m


def test_injection_is_gated() -> None:
    task = {"fromCluster": "member1", "purgeMode": "Directly", "producer": "p", "reason": "ApplicationFailure",
            "preservedLabelState": {"jobid": "abc"}, "clustersBeforeFailover": ["member1"]}
    b = binding([{"name": "member2", "replicas": 3}], gracefulEvictionTasks=[task])
    (on,), _ = plan_works(template(), b, interpreter=INTERP)
    (off,), _ = plan_works(template(), b, interpreter=INTERP, inject_preserved_labels=False)
    assert on.manifest["metadata"]["labels"]["jobid"] == "abc"
    assert "jobid" not in off.manifest["metadata"]["labels"]


def test_d4_injections_decided_by_the_caller_replace_karmadas_rule() -> None:
    task = {"fromCluster": "member1", "purgeMode": "Directly", "producer": "p", "reason": "ApplicationFailure",
            "preservedLabelState": {"jobid": "abc"}, "clustersBeforeFailover": ["member1"]}
    with_task = binding([{"name": "member2", "replicas": 3}], gracefulEvictionTasks=[task])
    without_task = binding([{"name": "member2", "replicas": 3}])
    # the task is gone, the recorded labels are still injected (D4)
    (kept,), _ = plan_works(template(), without_task, interpreter=INTERP, injections={"member2": {"jobid": "abc"}})
    assert kept.manifest["metadata"]["labels"]["jobid"] == "abc"
    assert kept.manifest["metadata"]["labels"]["app"] == "nginx"
    # a cluster the caller gives nothing gets nothing, whatever the task says
    (none,), _ = plan_works(template(), with_task, interpreter=INTERP, injections={})
    assert "jobid" not in none.manifest["metadata"]["labels"]
    # the gate off wins
    (off,), _ = plan_works(template(), without_task, interpreter=INTERP, inject_preserved_labels=False,
                           injections={"member2": {"jobid": "abc"}})
    assert "jobid" not in off.manifest["metadata"]["labels"]
    # build_work_intent alone, injected labels overwrite the template's label of the same key
    intent = build_work_intent(template(), without_task, TargetCluster("member2", 3), interpreter=INTERP,
                               injected_labels={"app": "restored"})
    assert intent.manifest["metadata"]["labels"]["app"] == "restored"


# ------------------------------------------------------------------------------- the Work as stored


def test_render_new_work_records_managed_keys_and_permanent_id() -> None:
    intent = build_work_intent(template(), binding(), TargetCluster("member1", 2), interpreter=INTERP)
    w = render_work(intent, None, "work-id-1")
    assert w["apiVersion"] == "work.karmada.io/v1alpha1" and w["kind"] == "Work"
    assert w["metadata"]["name"] == "nginx-687f7fb96f" and w["metadata"]["namespace"] == "karmada-es-member1"
    assert w["metadata"]["labels"] == {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: RB_ID, L.WORK_PERMANENT_ID_LABEL: "work-id-1"}
    assert w["metadata"]["finalizers"] == [L.EXECUTION_CONTROLLER_FINALIZER]
    assert w["spec"]["suspendDispatching"] is False and w["spec"]["preserveResourcesOnDeletion"] is False
    (m,) = w["spec"]["workload"]["manifests"]
    assert m["metadata"]["labels"][L.WORK_PERMANENT_ID_LABEL] == "work-id-1"
    annotations = m["metadata"]["annotations"]
    assert annotations[L.MANAGED_LABELS_ANNOTATION] == ",".join(sorted(m["metadata"]["labels"]))
    managed = annotations[L.MANAGED_ANNOTATIONS_ANNOTATION].split(",")
    assert managed == sorted(annotations)
    assert L.MANAGED_ANNOTATIONS_ANNOTATION in managed and L.MANAGED_LABELS_ANNOTATION in managed
    assert intent.manifest["metadata"]["labels"].get(L.WORK_PERMANENT_ID_LABEL) is None  # not mutated


def test_render_existing_work_merges_and_work_update_detects_changes() -> None:
    intent = build_work_intent(template(), binding(), TargetCluster("member1", 2), interpreter=INTERP)
    stored = render_work(intent, None, "id-1")
    stored["metadata"].update(resourceVersion="7", uid="w-uid")
    stored["metadata"]["labels"]["extra"] = "kept"
    stored["metadata"]["annotations"][L.APPLIED_OVERRIDES_ANNOTATION] = "[stale]"
    stored["metadata"]["finalizers"].append("example.com/other")
    stored["status"] = {"conditions": [{"type": "Applied", "status": "True"}]}
    again = render_work(intent, stored, "id-2")
    assert again["metadata"]["labels"][L.WORK_PERMANENT_ID_LABEL] == "id-1"  # the existing id stays
    assert again["metadata"]["labels"]["extra"] == "kept"
    assert L.APPLIED_OVERRIDES_ANNOTATION not in again["metadata"]["annotations"]  # stale record removed
    assert again["metadata"]["finalizers"] == [L.EXECUTION_CONTROLLER_FINALIZER, "example.com/other"]
    assert again["metadata"]["resourceVersion"] == "7" and again["status"] == stored["status"]
    assert work_update(stored, again) is not None  # the stale annotation goes
    assert work_update(again, render_work(intent, again, "id-3")) is None  # nothing to do
    other = build_work_intent(template(), binding(), TargetCluster("member1", 5), interpreter=INTERP)
    changed = work_update(again, render_work(other, again, "id-3"))
    assert changed is not None and changed["spec"]["workload"]["manifests"][0]["spec"]["replicas"] == 5


def test_interpreter_cache_rebuilds_on_change() -> None:
    cache = InterpreterCache()
    ric = {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
           "metadata": {"name": "r", "resourceVersion": "1"},
           "spec": {"target": {"apiVersion": "example.com/v1", "kind": "Widget"},
                    "customizations": {"replicaRevision": {"luaScript":
                                                           "function ReviseReplica(obj, r)\n"
                                                           "  obj.spec.size = r\n  return obj\nend"}}}}
    empty = cache.get([])
    assert cache.get([]) is empty
    with_ric = cache.get([ric])
    assert with_ric is not empty and cache.get([ric]) is with_ric
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"},
              "spec": {"size": 1}}
    b = binding([{"name": "member1", "replicas": 4}])
    intent = build_work_intent(widget, b, TargetCluster("member1", 4), interpreter=with_ric)
    assert intent.manifest["spec"]["size"] == 4
    broken = {**ric, "metadata": {"name": "bad", "resourceVersion": "1"}, "spec": {}}
    assert cache.get([ric, broken]) is not with_ric  # a RIC that does not parse is left out, no error


@pytest.mark.parametrize("name", ["system:controller:x"])
def test_work_name_uses_karmada_naming(name: str) -> None:
    t = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    b = binding([{"name": "member1"}], replicas=0)
    intent = build_work_intent(t, b, TargetCluster("member1", 0), interpreter=INTERP)
    assert intent.name == generate_work_name("ConfigMap", name, "default")
    assert intent.name.startswith("system.controller.x-")
