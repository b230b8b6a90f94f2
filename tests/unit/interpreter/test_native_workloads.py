"""Native rules: GetReplicas, ReviseReplica and Retain for the Kubernetes kinds."""

from __future__ import annotations

import copy

import pytest

from flotilla.interpreter import HookNotFoundError, InterpreterError, Operation, ReplicaResult, native
from flotilla.interpreter.operations import GVK

from .objects import deployment, obj, workload

# ------------------------------------------------------------------------------- GetReplicas


def test_deployment_replicas_and_requirements() -> None:
    d = deployment(4, pod_spec={
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}},
        ],
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}],
        "overhead": {"cpu": "100m"},
    })
    result = native.get_replicas(d)
    assert result.replicas == 4
    assert result.requirements == {
        "nodeClaim": {
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "hardNodeAffinity": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
        },
        # cpu: max(0.25 + 1, 2 init) + 0.1 overhead; memory: 128Mi + 1Gi (limit as request) > 64Mi
        "resourceRequest": {"cpu": "2100m", "memory": "1152Mi", "nvidia.com/gpu": "1"},
    }


def test_nil_replicas_count_as_zero_and_empty_requirements_are_none() -> None:
    assert native.get_replicas(deployment(None)) == ReplicaResult(0, None)


def test_unknown_resource_names_are_ignored() -> None:
    d = deployment(1, pod_spec={"containers": [{"name": "a", "resources": {"requests": {"foo": "3"}}}]})
    assert native.get_replicas(d).requirements is None


def test_statefulset_and_replicaset_replicas() -> None:
    assert native.get_replicas(workload("StatefulSet", replicas=2)).replicas == 2
    assert native.get_replicas(workload("ReplicaSet", replicas=5)).replicas == 5


@pytest.mark.parametrize(
    ("parallelism", "completions", "expected"),
    [(3, 2, 2), (2, 5, 2), (None, 4, 0), (4, None, 4), (None, None, 0)],
)
def test_job_replicas_are_min_of_parallelism_and_completions(parallelism: int | None, completions: int | None,
                                                              expected: int) -> None:
    spec: dict = {"template": {"spec": {"containers": [{"name": "c"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    assert native.get_replicas(obj("batch/v1", "Job", spec=spec)).replicas == expected


def test_pod_is_one_replica() -> None:
    pod = obj("v1", "Pod", spec={"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]})
    assert native.get_replicas(pod) == ReplicaResult(1, {"resourceRequest": {"cpu": "1"}})


def test_daemonset_has_no_replica_rule() -> None:
    assert not native.has_hook(GVK("apps/v1", "DaemonSet"), Operation.INTERPRET_REPLICA)
    with pytest.raises(HookNotFoundError):
        native.get_replicas(workload("DaemonSet"))


def test_bad_replicas_field_is_an_error() -> None:
    with pytest.raises(InterpreterError, match=r"spec\.replicas must be an integer"):
        native.get_replicas(deployment("three"))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- ReviseReplica


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "ReplicaSet"])
def test_revise_sets_spec_replicas(kind: str) -> None:
    d = workload(kind, replicas=3)
    before = copy.deepcopy(d)
    revised = native.revise_replica(d, 7)
    assert revised["spec"]["replicas"] == 7
    assert d == before  # pure


def test_revise_job_sets_parallelism() -> None:
    job = obj("batch/v1", "Job", spec={"parallelism": 4, "completions": 8})
    assert native.revise_replica(job, 2)["spec"] == {"parallelism": 2, "completions": 8}


def test_revise_leaves_a_missing_field_alone() -> None:
    assert "replicas" not in native.revise_replica(deployment(None), 2)["spec"]


# ------------------------------------------------------------------------------------ Retain


def test_deployment_keeps_member_replicas_only_with_the_label() -> None:
    member = deployment(9)
    assert native.retain(deployment(3), member)["spec"]["replicas"] == 3
    labelled = deployment(3, labels={"resourcetemplate.karmada.io/retain-replicas": "true"})
    assert native.retain(labelled, member)["spec"]["replicas"] == 9
    with pytest.raises(InterpreterError, match="no integer spec.replicas"):
        native.retain(labelled, deployment(None))


def test_service_keeps_cluster_ip_and_health_check_node_port() -> None:
    desired = obj("v1", "Service", spec={"type": "LoadBalancer", "ports": [{"port": 80}]})
    member = obj("v1", "Service", spec={"type": "LoadBalancer", "clusterIP": "10.0.0.7", "healthCheckNodePort": 31000})
    retained = native.retain(desired, member)
    assert retained["spec"] == {"type": "LoadBalancer", "ports": [{"port": 80}], "clusterIP": "10.0.0.7",
                                "healthCheckNodePort": 31000}
    member["spec"] = {"clusterIP": "", "healthCheckNodePort": 0}
    assert native.retain(desired, member)["spec"] == desired["spec"]


def test_pod_keeps_member_placement_fields() -> None:
    desired = obj("v1", "Pod", spec={"containers": [{"name": "a", "image": "x"}, {"name": "b"}],
                                     "initContainers": [{"name": "i"}], "serviceAccountName": "mine"})
    member = obj("v1", "Pod", spec={
        "nodeName": "node-1", "serviceAccountName": "default",
        "volumes": [{"name": "token", "projected": {"sources": []}}],
        "containers": [{"name": "a", "volumeMounts": [{"name": "token", "mountPath": "/var/run"}]}],
        "initContainers": [{"name": "i", "volumeMounts": [{"name": "token", "mountPath": "/t"}]}]})
    spec = native.retain(desired, member)["spec"]
    assert spec["nodeName"] == "node-1"
    assert spec["serviceAccountName"] == "default"
    assert spec["volumes"] == member["spec"]["volumes"]
    assert spec["containers"][0] == {"name": "a", "image": "x",
                                     "volumeMounts": [{"name": "token", "mountPath": "/var/run"}]}
    assert spec["containers"][1] == {"name": "b"}
    assert spec["initContainers"][0]["volumeMounts"] == [{"name": "token", "mountPath": "/t"}]


def test_service_account_unions_secrets() -> None:
    desired = obj("v1", "ServiceAccount", secrets=[{"name": "a"}], imagePullSecrets=[{"name": "p"}])
    member = obj("v1", "ServiceAccount", secrets=[{"name": "sa-token-x"}, {"name": "a"}])
    retained = native.retain(desired, member)
    assert retained["secrets"] == [{"name": "a"}, {"name": "sa-token-x"}]
    assert retained["imagePullSecrets"] == [{"name": "p"}]


def test_pvc_pv_job_and_secret_retention() -> None:
    pvc = native.retain(obj("v1", "PersistentVolumeClaim", spec={}),
                        obj("v1", "PersistentVolumeClaim", spec={"volumeName": "pv-1"}))
    assert pvc["spec"]["volumeName"] == "pv-1"
    ref = {"name": "claim", "namespace": "default"}
    pv = native.retain(obj("v1", "PersistentVolume", spec={}), obj("v1", "PersistentVolume", spec={"claimRef": ref}))
    assert pv["spec"]["claimRef"] == ref
    job = native.retain(
        obj("batch/v1", "Job", spec={"template": {"metadata": {"labels": {"app": "x"}}}}),
        obj("batch/v1", "Job", spec={"selector": {"matchLabels": {"controller-uid": "u"}},
                                     "template": {"metadata": {"labels": {"app": "x", "controller-uid": "u"}}}}))
    assert job["spec"]["selector"]["matchLabels"] == {"controller-uid": "u"}
    assert job["spec"]["template"]["metadata"]["labels"] == {"app": "x", "controller-uid": "u"}
    token = native.retain(obj("v1", "Secret", type="kubernetes.io/service-account-token"),
                          obj("v1", "Secret", data={"token": "dA=="}))
    assert token["data"] == {"token": "dA=="}
    opaque = native.retain(obj("v1", "Secret", type="Opaque", data={"a": "Yg=="}), obj("v1", "Secret", data={"a": "Yw=="}))
    assert opaque["data"] == {"a": "Yg=="}


def test_statefulset_has_no_retain_rule() -> None:
    assert not native.has_hook(GVK("apps/v1", "StatefulSet"), Operation.RETAIN)


# ------------------------------------------------------------------------------------- prune


def test_prune_removes_server_fields_and_status() -> None:
    d = deployment(3, status={"replicas": 3})
    d["metadata"].update({"uid": "u", "resourceVersion": "9", "creationTimestamp": "t", "managedFields": [],
                          "ownerReferences": [], "finalizers": ["f"]})
    d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "4"
    pruned = native.prune_irrelevant_fields(d)
    assert "status" not in pruned
    assert set(pruned["metadata"]) == {"name", "namespace", "annotations"}
    assert pruned["metadata"]["annotations"] == {"resourcetemplate.karmada.io/generation": "1"}


def test_prune_per_kind() -> None:
    svc = native.prune_irrelevant_fields(obj("v1", "Service", spec={"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"]}))
    assert svc["spec"] == {}
    headless = native.prune_irrelevant_fields(obj("v1", "Service", spec={"clusterIP": "None"}))
    assert headless["spec"] == {"clusterIP": "None"}
    job = native.prune_irrelevant_fields(obj("batch/v1", "Job", spec={
        "ttlSecondsAfterFinished": 5, "selector": {"matchLabels": {"controller-uid": "u", "app": "a"}},
        "template": {"metadata": {"labels": {"job-name": "x", "batch.kubernetes.io/job-name": "x", "app": "a"}}}}))
    assert job["spec"] == {"selector": {"matchLabels": {"app": "a"}},
                           "template": {"metadata": {"labels": {"app": "a"}}}}
    sa = native.prune_irrelevant_fields(obj("v1", "ServiceAccount", name="sa",
                                            secrets=[{"name": "sa-token-1"}, {"name": "sa-token-2"}, {"name": "keep"}]))
    assert sa["secrets"] == [{"name": "keep"}]
    pvc = native.prune_irrelevant_fields(obj("v1", "PersistentVolumeClaim",
                                             metadata={"annotations": {"volume.kubernetes.io/selected-node": "n1"}}))
    assert pvc["metadata"]["annotations"] == {}
