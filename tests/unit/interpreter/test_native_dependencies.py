"""Native GetDependencies: what a pod template refers to, per kind."""

from __future__ import annotations

import pytest

from flotilla.interpreter import InterpreterError, native

from .objects import deployment, obj, workload

POD_SPEC = {
    "serviceAccountName": "runner",
    "imagePullSecrets": [{"name": "registry"}],
    "initContainers": [{"name": "init", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "init-cm",
                                                                                                  "key": "a"}}}]}],
    "containers": [{
        "name": "app",
        "envFrom": [{"configMapRef": {"name": "app-cm"}}, {"secretRef": {"name": "app-secret"}}],
        "env": [{"name": "B", "valueFrom": {"secretKeyRef": {"name": "key-secret", "key": "b"}}},
                {"name": "C", "value": "plain"}],
    }],
    "volumes": [
        {"name": "cfg", "configMap": {"name": "vol-cm"}},
        {"name": "sec", "secret": {"secretName": "vol-secret"}},
        {"name": "proj", "projected": {"sources": [{"configMap": {"name": "proj-cm"}},
                                                   {"secret": {"name": "proj-secret"}},
                                                   {"serviceAccountToken": {"path": "t"}}]}},
        {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-secret"}}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "cache", "persistentVolumeClaim": {"claimName": "cache"}},
        {"name": "tmp", "emptyDir": {}},
    ],
}


def names(deps: list[dict], kind: str) -> list[str]:
    return [d["name"] for d in deps if d["kind"] == kind]


def test_pod_template_dependencies() -> None:
    deps = native.get_dependencies(deployment(1, pod_spec=POD_SPEC))
    assert names(deps, "ConfigMap") == ["app-cm", "init-cm", "proj-cm", "vol-cm"]
    assert names(deps, "Secret") == ["app-secret", "csi-secret", "key-secret", "proj-secret", "registry", "vol-secret"]
    assert names(deps, "ServiceAccount") == ["runner"]
    assert names(deps, "PersistentVolumeClaim") == ["cache", "data"]
    assert all(d["apiVersion"] == "v1" and d["namespace"] == "default" for d in deps)
    assert [d["kind"] for d in deps][:1] == ["ConfigMap"]


def test_default_service_account_is_not_a_dependency() -> None:
    deps = native.get_dependencies(deployment(1, pod_spec={"serviceAccountName": "default", "containers": []}))
    assert deps == []


@pytest.mark.parametrize("kind", ["ReplicaSet", "DaemonSet", "StatefulSet"])
def test_other_workloads(kind: str) -> None:
    assert names(native.get_dependencies(workload(kind, pod_spec=POD_SPEC)), "ServiceAccount") == ["runner"]


def test_statefulset_skips_claims_of_its_volume_claim_templates() -> None:
    sts = workload("StatefulSet", pod_spec=POD_SPEC)
    sts["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}}]
    assert names(native.get_dependencies(sts), "PersistentVolumeClaim") == ["cache"]


def test_job_cronjob_pod() -> None:
    job = obj("batch/v1", "Job", namespace="batch", spec={"template": {"spec": POD_SPEC}})
    assert names(native.get_dependencies(job), "ServiceAccount") == ["runner"]
    assert native.get_dependencies(job)[0]["namespace"] == "batch"
    cron = obj("batch/v1", "CronJob", spec={"jobTemplate": {"spec": {"template": {"spec": POD_SPEC}}}})
    assert names(native.get_dependencies(cron), "PersistentVolumeClaim") == ["cache", "data"]
    pod = obj("v1", "Pod", spec=POD_SPEC)
    assert names(native.get_dependencies(pod), "Secret")[0] == "app-secret"


def test_ingress_tls_secrets() -> None:
    ing = obj("networking.k8s.io/v1", "Ingress", spec={"tls": [{"secretName": "tls-a"}, {"secretName": "tls-b"}]})
    assert native.get_dependencies(ing) == [
        {"apiVersion": "v1", "kind": "Secret", "name": "tls-a", "namespace": "default"},
        {"apiVersion": "v1", "kind": "Secret", "name": "tls-b", "namespace": "default"}]
    with pytest.raises(InterpreterError, match="name or a labelSelector"):
        native.get_dependencies(obj("networking.k8s.io/v1", "Ingress", spec={"tls": [{"hosts": ["a"]}]}))


def test_service_import() -> None:
    si = obj("multicluster.x-k8s.io/v1alpha1", "ServiceImport", name="web", namespace="shop")
    assert native.get_dependencies(si) == [
        {"apiVersion": "v1", "kind": "Service", "name": "derived-web", "namespace": "shop"},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "namespace": "shop",
         "labelSelector": {"matchLabels": {"kubernetes.io/service-name": "derived-web"}}}]


def test_verify_dependencies() -> None:
    native.verify_dependencies([{"apiVersion": "v1", "kind": "Secret", "labelSelector": {
        "matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}}])
    with pytest.raises(InterpreterError, match="invalid label key"):
        native.verify_dependencies([{"apiVersion": "v1", "kind": "Secret",
                                     "labelSelector": {"matchLabels": {"bad key": "x"}}}])
    with pytest.raises(InterpreterError, match="In and NotIn need at least one value"):
        native.verify_dependencies([{"apiVersion": "v1", "kind": "Secret", "labelSelector": {
            "matchExpressions": [{"key": "app", "operator": "In"}]}}])
