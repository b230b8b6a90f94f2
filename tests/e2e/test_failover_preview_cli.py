"""``flotilla failover preview`` as a process against a real ``flotilla apiserver``.

The workloads and their bindings are written with the real kubectl, the bindings named as the detector names
them (``<name>-<kind>``) and their reflected status set through the status subresource, as the status
controller would: no controllers run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flotilla.member.flink_crd import flink_deployment_crd
from tests.support.apiserver import KUBECTL, Kubectl, ServerProcess
from tests.support.pipeline import apply_large

FLOTILLA = str(Path(sys.executable).parent / "flotilla")
NS = "shop"
JOB_ID = "cafebabe0123456789abcdef01234567"
DEPLOYMENT_STATUS = {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2}
FLINK_STATUS = {"jobManagerDeploymentStatus": "READY", "lifecycleState": "STABLE",
                "jobStatus": {"jobId": JOB_ID, "state": "RUNNING",
                              "checkpointInfo": {"lastCheckpoint": {"timeStamp": 1734462491693}}}}

pytestmark = [pytest.mark.kubectl, pytest.mark.skipif(not Path(KUBECTL).exists(), reason=f"no kubectl at {KUBECTL}")]


# ----------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    base = tmp_path_factory.mktemp("failover-preview")
    server = ServerProcess(base / "cp", storage_url="memory://").start()
    try:
        k = Kubectl(server.kubeconfig, base)
        apply(k, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for cluster in ("member1", "member2"):  # what --to-cluster may name
            apply(k, {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": cluster},
                      "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"}})
        crd = flink_deployment_crd()
        apply_large(k, json.dumps(crd))
        k.run("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=20s")
        yield k
    finally:
        server.stop()


def apply(k: Kubectl, obj: dict[str, Any]) -> None:
    k.run("apply", "-f", "-", input=json.dumps(obj))


def deployment(k: Kubectl, name: str) -> None:
    apply(k, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                       "template": {"metadata": {"labels": {"app": name}},
                                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})


def flink(k: Kubectl, name: str) -> None:
    apply(k, {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
              "metadata": {"name": name, "namespace": NS},
              "spec": {"image": "flink:1.20", "flinkVersion": "v1_20",
                       "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 2,
                               "upgradeMode": "last-state"}}})


def block(purge_mode: str, *rules: tuple[str, str]) -> dict[str, Any]:
    return {"purgeMode": purge_mode,
            "statePreservation": {"rules": [{"aliasLabelName": a, "jsonPath": p} for a, p in rules]}}


def binding(k: Kubectl, name: str, kind: str, api_version: str, failover: dict[str, Any] | None,
            status: dict[str, Any] | None, clusters: tuple[str, ...] = ("member1",)) -> None:
    """A ResourceBinding as the detector and scheduler write it, with ``status`` reflected from clusters[0]."""
    spec: dict[str, Any] = {"resource": {"apiVersion": api_version, "kind": kind, "namespace": NS, "name": name},
                            "clusters": [{"name": c, "replicas": 2} for c in clusters]}
    if failover is not None:
        spec["failover"] = failover
    rb_name = f"{name}-{kind.lower()}"
    apply(k, {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
              "metadata": {"name": rb_name, "namespace": NS,
                           "annotations": {"propagationpolicy.karmada.io/namespace": NS,
                                           "propagationpolicy.karmada.io/name": f"{name}-pp"}},
              "spec": spec})
    if status is not None:
        item = {"clusterName": clusters[0], "applied": True, "health": "Healthy", "status": status}
        k.run("patch", "resourcebinding", rb_name, "-n", NS, "--subresource=status", "--type=merge",
              "-p", json.dumps({"status": {"aggregatedStatus": [item]}}))


def preview(k: Kubectl, *argv: str) -> subprocess.CompletedProcess[str]:
    """``flotilla failover preview ARGV`` with $KUBECONFIG pointing at the control plane."""
    return subprocess.run([FLOTILLA, "failover", "preview", *argv], capture_output=True, text=True, env=k.env(),
                          timeout=60)


def show(r: subprocess.CompletedProcess[str]) -> str:
    return f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


# ----------------------------------------------------------------------------------------------- reports


def test_a_good_rule_prints_the_value_it_would_preserve_and_inject(kubectl: Kubectl) -> None:
    deployment(kubectl, "web")
    binding(kubectl, "web", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"))}, DEPLOYMENT_STATUS)
    r = preview(kubectl, "deployment/web", "-n", NS, "--to-cluster", "member2")
    assert r.returncode == 0, show(r)
    assert r.stdout.startswith("Deployment shop/web (ResourceBinding shop/web-deployment)\n"), show(r)
    assert "Failover preview: from cluster member1 to cluster member2" in r.stdout
    assert "Reflected status of cluster member1: collected" in r.stdout
    assert "rule example.io/ready: {.readyReplicas}\n    value: 2\n" in r.stdout
    assert "state: would preserve example.io/ready=2" in r.stdout
    assert "injection into cluster member2: yes" in r.stdout
    assert "application failover (unhealthy workload): not configured" in r.stdout
    assert "Result: every rule extracts a value (exit status 0)" in r.stdout and r.stderr == ""


@pytest.mark.parametrize("kind", ["deploy", "deployments", "deployments.apps", "Deployment", "deployments.v1.apps"])
def test_the_kind_is_resolved_as_kubectl_resolves_it(kubectl: Kubectl, kind: str) -> None:
    deployment(kubectl, "spelled")
    binding(kubectl, "spelled", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"))}, DEPLOYMENT_STATUS)
    r = preview(kubectl, f"{kind}/spelled", "-n", NS)
    assert r.returncode == 0, show(r)
    assert "(ResourceBinding shop/spelled-deployment)" in r.stdout and "value: 2" in r.stdout
    assert "injection into a new cluster: yes" in r.stdout


def test_a_wrong_case_rule_prints_the_error_and_hint_and_exits_1(kubectl: Kubectl) -> None:
    deployment(kubectl, "api")
    binding(kubectl, "api", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"),
                              ("example.io/updated", "{.updatedreplicas}"))}, DEPLOYMENT_STATUS)
    r = preview(kubectl, "deployment/api", "-n", NS, "--to-cluster", "member2")
    assert r.returncode == 1, show(r)
    assert "rule example.io/ready: {.readyReplicas}\n    value: 2\n" in r.stdout
    assert "rule example.io/updated: {.updatedreplicas}\n    error: updatedreplicas is not found\n" in r.stdout
    assert "hint: similar keys: updatedReplicas (at .updatedReplicas)" in r.stdout
    assert "extraction FAILS" in r.stdout and "StatePreservationFailed" in r.stdout
    assert "injection into cluster member2: no: the extraction fails now" in r.stdout
    assert "Result: 1 rule(s) fail now: an eviction would wait (exit status 1)" in r.stdout


def test_json_and_yaml_output_parse(kubectl: Kubectl) -> None:
    deployment(kubectl, "machine")
    binding(kubectl, "machine", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"),
                              ("example.io/updated", "{.updatedreplicas}"))}, DEPLOYMENT_STATUS)
    r = preview(kubectl, "deployment/machine", "-n", NS, "--to-cluster", "member2", "-o", "json")
    assert r.returncode == 1, show(r)
    doc = json.loads(r.stdout)
    assert doc["kind"] == "FailoverPreview" and doc["ok"] is False
    assert doc["workload"] == {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": NS, "name": "machine"}
    assert doc["binding"]["kind"] == "ResourceBinding" and doc["binding"]["name"] == "machine-deployment"
    assert doc["fromCluster"] == "member1" and doc["targetCluster"] == "member2" and doc["statusCollected"]
    cluster = doc["triggers"][0]
    assert cluster["trigger"] == "cluster" and cluster["purgeMode"] == "Directly" and cluster["state"] is None
    good, bad = cluster["rules"]
    assert good["ok"] and good["value"] == "2"
    assert bad["error"]["reason"] == "updatedreplicas is not found" and "updatedReplicas" in bad["hint"]
    assert cluster["injection"]["inject"] is False
    y = preview(kubectl, "deployment/machine", "-n", NS, "--to-cluster", "member2", "-o", "yaml")
    assert y.returncode == 1, show(y)
    assert yaml.safe_load(y.stdout) == doc


def test_gracefully_says_injection_would_not_apply_and_why(kubectl: Kubectl) -> None:
    deployment(kubectl, "graceful")
    binding(kubectl, "graceful", "Deployment", "apps/v1",
            {"cluster": block("Gracefully", ("example.io/ready", "{.readyReplicas}")),
             "application": {"decisionConditions": {"tolerationSeconds": 60},
                             **block("Directly", ("example.io/available", "{.availableReplicas}"))}},
            DEPLOYMENT_STATUS)
    r = preview(kubectl, "deployment/graceful", "-n", NS, "--to-cluster", "member2")
    assert r.returncode == 0, show(r)
    cluster_part, application_part = r.stdout.split("application failover (unhealthy workload)")
    assert "cluster failover (NoExecute taint eviction): purgeMode Gracefully" in cluster_part
    assert "warning: purgeMode Gracefully: the state is extracted" in cluster_part and "never injected" in cluster_part
    assert "value: 2" in cluster_part
    assert "injection into cluster member2: no:" in cluster_part and "purgeMode Gracefully" in \
        cluster_part.split("injection into cluster member2: no:")[1]
    assert ": purgeMode Directly" in application_part and "value: 2" in application_part
    assert "injection into cluster member2: yes" in application_part


def test_feature_gate_off_says_nothing_would_be_injected(kubectl: Kubectl) -> None:
    deployment(kubectl, "gated")
    binding(kubectl, "gated", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"))}, DEPLOYMENT_STATUS)
    r = preview(kubectl, "deployment/gated", "-n", NS, "--feature-gates", "StatefulFailoverInjection=false")
    assert r.returncode == 0, show(r)
    assert "the feature gate StatefulFailoverInjection is off" in r.stdout
    assert "injection into a new cluster: no: the feature gate StatefulFailoverInjection is disabled" in r.stdout
    bad = preview(kubectl, "deployment/gated", "-n", NS, "--feature-gates", "StatefulInjection=false")
    assert bad.returncode == 2 and "unknown gate 'StatefulInjection'" in bad.stderr, show(bad)


def test_namespace_defaults_to_the_kubeconfig_context(kubectl: Kubectl, tmp_path: Path) -> None:
    deployment(kubectl, "ctx")
    binding(kubectl, "ctx", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"))}, DEPLOYMENT_STATUS)
    config = tmp_path / "kubeconfig"
    shutil.copy(kubectl.kubeconfig, config)
    kubectl.run("config", "set-context", "--current", f"--namespace={NS}", "--kubeconfig", str(config))
    r = preview(kubectl, "deployment/ctx", "--kubeconfig", str(config))
    assert r.returncode == 0, show(r)
    assert r.stdout.startswith("Deployment shop/ctx ")
    plain = preview(kubectl, "deployment/ctx")  # $KUBECONFIG's context has no namespace: "default"
    assert plain.returncode == 2 and "Deployment ctx not found in namespace default" in plain.stderr, show(plain)


def test_flinkdeployment_job_id_rule(kubectl: Kubectl) -> None:
    flink(kubectl, "orders")
    binding(kubectl, "orders", "FlinkDeployment", "flink.apache.org/v1beta1",
            {"cluster": block("Directly", ("failover.flink.io/job-id", "{ .jobStatus.jobId }"),
                              ("failover.flink.io/checkpoint",
                               "{.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}"))}, FLINK_STATUS)
    r = preview(kubectl, "flinkdeployment/orders", "-n", NS, "--to-cluster", "member2")
    assert r.returncode == 0, show(r)
    assert "FlinkDeployment shop/orders (ResourceBinding shop/orders-flinkdeployment)" in r.stdout
    assert f"rule failover.flink.io/job-id: {{ .jobStatus.jobId }}\n    value: {JOB_ID}\n" in r.stdout
    assert "value: 1734462491693\n" in r.stdout
    assert "injection into cluster member2: yes" in r.stdout
    full = preview(kubectl, "flinkdeployments.flink.apache.org/orders", "-n", NS, "-o", "json")
    assert full.returncode == 0, show(full)
    assert json.loads(full.stdout)["triggers"][0]["state"]["failover.flink.io/job-id"] == JOB_ID


def test_flinkdeployment_wrong_case_job_id_is_caught(kubectl: Kubectl) -> None:
    flink(kubectl, "billing")
    binding(kubectl, "billing", "FlinkDeployment", "flink.apache.org/v1beta1",
            {"cluster": block("Directly", ("failover.flink.io/job-id", "{.jobStatus.jobID}"))}, FLINK_STATUS)
    r = preview(kubectl, "flinkdep/billing", "-n", NS)
    assert r.returncode == 1, show(r)
    assert "error: jobID is not found" in r.stdout
    assert "hint: similar keys: jobId (at .jobStatus.jobId)" in r.stdout


def test_a_cluster_scoped_kind_uses_its_cluster_resource_binding(kubectl: Kubectl) -> None:
    apply(kubectl, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant"}})
    apply(kubectl, {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
                    "metadata": {"name": "tenant-namespace"},
                    "spec": {"resource": {"apiVersion": "v1", "kind": "Namespace", "name": "tenant"},
                             "clusters": [{"name": "member1"}],
                             "failover": {"cluster": block("Directly", ("example.io/phase", "{.phase}"))}}})
    item = {"clusterName": "member1", "applied": True, "health": "Healthy", "status": {"phase": "Active"}}
    kubectl.run("patch", "clusterresourcebinding", "tenant-namespace", "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"aggregatedStatus": [item]}}))
    r = preview(kubectl, "ns/tenant", "-n", NS)  # -n is ignored for a cluster-scoped kind
    assert r.returncode == 0, show(r)
    assert r.stdout.startswith("Namespace tenant (ClusterResourceBinding tenant-namespace)\n")
    assert "value: Active" in r.stdout


# ----------------------------------------------------------------------------------------------- errors


def test_unknown_kind_is_a_usage_error_with_a_suggestion(kubectl: Kubectl) -> None:
    r = preview(kubectl, "deploymnt/web", "-n", NS)
    assert r.returncode == 2, show(r)
    assert 'error: the server doesn\'t have a resource type "deploymnt"; did you mean deployment' in r.stderr
    assert r.stdout == ""


def test_missing_workload_is_a_lookup_error(kubectl: Kubectl) -> None:
    r = preview(kubectl, "deployment/ghost", "-n", NS)
    assert r.returncode == 2, show(r)
    assert "error: Deployment ghost not found in namespace shop" in r.stderr and r.stdout == ""


def test_missing_binding_says_the_workload_is_not_propagated(kubectl: Kubectl) -> None:
    deployment(kubectl, "lonely")
    r = preview(kubectl, "deployment/lonely", "-n", NS)
    assert r.returncode == 2, show(r)
    assert "error: no ResourceBinding shop/lonely-deployment: Deployment shop/lonely is not propagated yet" in r.stderr
    assert "PropagationPolicy" in r.stderr and r.stdout == ""


def test_binding_without_failover_says_how_to_add_it(kubectl: Kubectl) -> None:
    deployment(kubectl, "plain")
    binding(kubectl, "plain", "Deployment", "apps/v1", None, DEPLOYMENT_STATUS)
    r = preview(kubectl, "deployment/plain", "-n", NS)
    assert r.returncode == 2, show(r)
    assert "has no failover block (spec.failover): there is nothing to preview" in r.stderr
    assert "Add one to PropagationPolicy shop/plain-pp" in r.stderr and "failover:" in r.stderr


def test_no_status_collected_yet_is_a_lookup_error(kubectl: Kubectl) -> None:
    deployment(kubectl, "fresh")
    binding(kubectl, "fresh", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"))}, None)
    r = preview(kubectl, "deployment/fresh", "-n", NS)
    assert r.returncode == 2, show(r)
    assert "holds no status from cluster member1 yet" in r.stderr and r.stdout == ""


def test_several_clusters_need_from_cluster(kubectl: Kubectl) -> None:
    deployment(kubectl, "spread")
    binding(kubectl, "spread", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"))}, DEPLOYMENT_STATUS,
            clusters=("member1", "member2"))
    r = preview(kubectl, "deployment/spread", "-n", NS)
    assert r.returncode == 2, show(r)
    assert "runs in 2 clusters (member1, member2)" in r.stderr and "--from-cluster" in r.stderr
    chosen = preview(kubectl, "deployment/spread", "-n", NS, "--from-cluster", "member1", "--to-cluster", "member2")
    assert chosen.returncode == 0, show(chosen)
    assert "value: 2" in chosen.stdout
    assert "injection into cluster member2: no:" in chosen.stdout and "already ran the workload" in chosen.stdout


def test_an_unknown_to_cluster_is_refused_with_the_known_clusters(kubectl: Kubectl) -> None:
    deployment(kubectl, "elsewhere")
    binding(kubectl, "elsewhere", "Deployment", "apps/v1",
            {"cluster": block("Directly", ("example.io/ready", "{.readyReplicas}"))}, DEPLOYMENT_STATUS)
    r = preview(kubectl, "deployment/elsewhere", "-n", NS, "--to-cluster", "membr2")
    assert r.returncode == 2, show(r)
    assert r.stderr == "error: --to-cluster membr2: no such cluster (known clusters: member1, member2); did you " \
                       "mean member2?\n", show(r)
    assert r.stdout == ""
    assert preview(kubectl, "deployment/elsewhere", "-n", NS, "--to-cluster", "member2").returncode == 0


def test_bad_target_is_a_usage_error(kubectl: Kubectl) -> None:
    r = preview(kubectl, "web", "-n", NS)
    assert r.returncode == 2, show(r)
    assert "expected KIND/NAME (e.g. deployment/web)" in r.stderr
