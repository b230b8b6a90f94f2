"""``flotilla taint clusters``, ``cordon``/``uncordon`` and ``get`` against a real API server process, checked with
the real kubectl (the cases of Karmada's e2e ``karmadactl_test.go``: dry-run, apply, refuse to overwrite without
``--overwrite``, overwrite, remove with ``-``, unknown flag, unknown cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.apiserver import Kubectl, ServerProcess

pytestmark = pytest.mark.kubectl

FLOTILLA = str(Path(sys.executable).parent / "flotilla")


class Env:
    def __init__(self, server: ServerProcess, home: Path) -> None:
        self.kubeconfig = server.data_dir / "kubeconfig"
        self.kubectl = Kubectl(self.kubeconfig, home)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([FLOTILLA, *args, "--kubeconfig", str(self.kubeconfig)], capture_output=True,
                              text=True, timeout=60)

    def taints(self, name: str) -> list[dict[str, Any]]:
        obj = json.loads(self.kubectl.run("get", "cluster", name, "-o", "json").stdout)
        return [{k: v for k, v in t.items() if k != "timeAdded"} for t in obj["spec"].get("taints") or []]


def cluster(name: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"apiEndpoint": f"https://{name}.example:6443", "syncMode": "Push"}}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("clustercli")
    server = ServerProcess(root / "cp", storage_url="memory://").start()
    try:
        e = Env(server, root)
        for name in ("m1", "m2"):
            e.kubectl.run("apply", "-f", "-", input=json.dumps(cluster(name)))
        yield e
    finally:
        server.stop()


def test_taint_clusters_adds_refuses_overwrite_overwrites_and_removes(env: Env) -> None:
    r = env.run("taint", "clusters", "m1", "dedicated=special-user:NoSchedule", "--dry-run")
    assert (r.returncode, r.stdout.strip()) == (0, "cluster/m1 tainted (dry run)"), r.stderr
    assert env.taints("m1") == []

    r = env.run("taint", "clusters", "m1", "dedicated=special-user:NoSchedule")
    assert (r.returncode, r.stdout.strip()) == (0, "cluster/m1 tainted"), r.stderr
    assert env.taints("m1") == [{"key": "dedicated", "value": "special-user", "effect": "NoSchedule"}]

    r = env.run("taint", "clusters", "m1", "dedicated=other:NoSchedule")
    assert r.returncode == 1
    assert "cluster m1 already has dedicated taint(s) with same effect(s) and --overwrite is false" in r.stderr

    r = env.run("taint", "clusters", "m1", "dedicated=other:NoSchedule", "--overwrite")
    assert (r.returncode, r.stdout.strip()) == (0, "cluster/m1 modified"), r.stderr
    assert env.taints("m1") == [{"key": "dedicated", "value": "other", "effect": "NoSchedule"}]

    r = env.run("taint", "clusters", "m1", "fail-test:NoExecute")
    assert r.returncode == 0, r.stderr
    obj = json.loads(env.kubectl.run("get", "cluster", "m1", "-o", "json").stdout)
    no_execute = [t for t in obj["spec"]["taints"] if t["effect"] == "NoExecute"]
    assert no_execute and no_execute[0].get("timeAdded"), obj["spec"]["taints"]  # stamped for the taint manager

    r = env.run("taint", "clusters", "m1", "dedicated:NoSchedule-", "fail-test-")
    assert (r.returncode, r.stdout.strip()) == (0, "cluster/m1 untainted"), r.stderr
    assert env.taints("m1") == []

    r = env.run("taint", "clusters", "m1", "dedicated-")
    assert r.returncode == 1 and 'taint "dedicated" not found' in r.stderr


def test_taint_clusters_errors_say_what_to_fix(env: Env) -> None:
    r = env.run("taint", "clusters", "nope", "a:NoSchedule")
    assert r.returncode == 1 and 'clusters.cluster.karmada.io "nope" not found' in r.stderr
    r = env.run("taint", "clusters", "m2", "a:PreferNoSchedule")
    assert r.returncode == 1 and 'Unsupported value: "PreferNoSchedule"' in r.stderr  # refused by the API server
    r = env.run("taint", "nodes", "m2", "a:NoSchedule")
    assert r.returncode == 1 and 'invalid resource type nodes, only ["cluster" "clusters"] are supported' in r.stderr
    r = env.run("taint", "clusters", "m2", "a:Sometimes")
    assert r.returncode == 1 and "invalid taint effect: Sometimes, unsupported taint effect" in r.stderr
    r = env.run("taint", "clusters", "m2", "a:NoSchedule", "--unknown-flag")
    assert r.returncode == 2 and "unrecognized arguments: --unknown-flag" in r.stderr
    r = env.run("taint", "clusters", "a:NoSchedule")
    assert r.returncode == 1 and "at least one resource name must be specified" in r.stderr
    assert env.taints("m2") == []


def test_cordon_and_uncordon_toggle_the_unschedulable_taint(env: Env) -> None:
    r = env.run("cordon", "m2")
    assert (r.returncode, r.stdout.strip()) == (0, "m2 cluster cordoned"), r.stderr
    assert env.taints("m2") == [{"key": "cluster.karmada.io/unschedulable", "effect": "NoSchedule"}]
    r = env.run("cordon", "m2")
    assert (r.returncode, r.stdout.strip()) == (0, "m2 cluster already cordoned")
    r = env.run("uncordon", "m2")
    assert (r.returncode, r.stdout.strip()) == (0, "m2 cluster uncordoned")
    assert env.taints("m2") == []
    r = env.run("uncordon", "m2")
    assert r.stdout.strip() == "m2 cluster already uncordoned"
    r = env.run("cordon", "ghost")
    assert r.returncode == 1 and '"ghost" not found' in r.stderr


def test_get_shows_clusters_bindings_and_works(env: Env) -> None:
    env.run("taint", "clusters", "m1", "x=y:NoSchedule")
    try:
        r = env.run("get", "clusters")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["NAME", "VERSION", "MODE", "READY", "TAINTS", "FENCED", "AGE"]
        m1 = next(line for line in lines if line.startswith("m1 "))
        assert "x=y:NoSchedule" in m1 and "Push" in m1
        r = env.run("get", "cluster", "m1", "-o", "json")
        assert json.loads(r.stdout)["metadata"]["name"] == "m1"
        r = env.run("get", "clusters", "-o", "yaml")
        assert "kind: List" in r.stdout and "name: m2" in r.stdout
        r = env.run("get", "clusters", "-o", "wide")
        assert "ENDPOINT" in r.stdout and "https://m2.example:6443" in r.stdout
    finally:
        env.run("taint", "clusters", "m1", "x-")

    binding = {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "web-deployment", "namespace": "default"},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"},
                 "clusters": [{"name": "m2", "replicas": 2}],
                 "gracefulEvictionTasks": [{"fromCluster": "m1", "purgeMode": "Directly", "producer": "TaintManager",
                                            "reason": "TaintUntolerated",
                                            "preservedLabelState": {"app.example/replicas": "2"}}]},
    }
    env.kubectl.run("apply", "-f", "-", input=json.dumps(binding))
    r = env.run("get", "bindings", "-n", "default")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "RESOURCE", "CLUSTERS", "EVICTING", "SCHEDULED", "FULLYAPPLIED", "AGE"]
    assert row.split()[:4] == ["web-deployment", "Deployment/web", "m2:2", "m1(Directly)"]
    r = env.run("get", "rb", "-A", "-o", "wide")
    assert "m1(Directly){app.example/replicas=2}" in r.stdout and r.stdout.startswith("NAMESPACE")
    r = env.run("get", "bindings", "missing", "-n", "default")
    assert r.returncode == 1 and "not found" in r.stderr
    r = env.run("get", "works")
    assert r.returncode == 0 and "No resources found" in r.stderr
    r = env.run("get", "pods")
    assert r.returncode == 1 and 'unknown kind "pods"' in r.stderr
