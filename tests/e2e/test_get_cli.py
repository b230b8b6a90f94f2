"""``flotilla get`` as kubectl users expect it: label selectors, ``-o name|json``, and ``--watch`` against a real API
server process (objects written with the real kubectl)."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cluster_cli import FLOTILLA, Env
from tests.support.apiserver import ServerProcess

pytestmark = pytest.mark.kubectl

HISTORY = "failover.flotilla.io/history"


def cluster(name: str, env: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"env": env}},
            "spec": {"apiEndpoint": f"https://{name}.example:6443", "syncMode": "Push"}}


def binding(name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-flinkdeployment", "namespace": "default",
                         "annotations": {HISTORY: json.dumps(entries)}},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                  "name": name, "namespace": "default"}}}


def entry(at: str, source: str, to: str) -> dict[str, Any]:
    return {"at": at, "from": source, "to": to, "trigger": "ClusterTaint", "purgeMode": "Directly",
            "phase": "InProgress"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("getcli")
    server = ServerProcess(root / "cp", storage_url="memory://").start()
    try:
        e = Env(server, root)
        for name, label in (("prod1", "prod"), ("prod2", "prod"), ("dev1", "dev")):
            e.kubectl.run("apply", "-f", "-", input=json.dumps(cluster(name, label)))
        e.kubectl.run("apply", "-f", "-", input=json.dumps(
            binding("orders", [entry("2026-01-01T12:00:00Z", "prod1", "prod2")])))
        yield e
    finally:
        server.stop()


class Lines:
    """The stdout of a running ``flotilla get --watch``, line by line, with a deadline per wait."""

    def __init__(self, env: Env, *args: str) -> None:
        self.proc = subprocess.Popen([FLOTILLA, *args, "--kubeconfig", str(env.kubeconfig)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        threading.Thread(target=lambda: [self.lines.put(line.rstrip("\n")) for line in stdout], daemon=True).start()

    def until(self, wanted: str, timeout: float = 20.0) -> list[str]:
        """Lines read until one containing ``wanted`` (included)."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line with {wanted!r} within {timeout}s; read {seen}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            seen.append(line)
            if wanted in line:
                return seen

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def test_get_selector_lists_only_the_matching_clusters(env: Env) -> None:
    r = env.run("get", "clusters", "-l", "env=prod")
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()[1:]]
    assert names == ["prod1", "prod2"]
    r = env.run("get", "clusters", "-l", "env notin (prod)", "-o", "name")
    assert r.stdout.split() == ["cluster.cluster.karmada.io/dev1"], r.stderr
    r = env.run("get", "clusters", "-l", "env=staging")
    assert (r.returncode, r.stdout) == (0, "") and "No resources found." in r.stderr


def test_get_selector_with_a_name_is_refused_as_kubectl_refuses_it(env: Env) -> None:
    r = env.run("get", "clusters", "prod1", "-l", "env=prod")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == "error: name cannot be provided when a selector is specified"


def test_get_output_json_is_a_list_and_name_is_kind_dot_group_slash_name(env: Env) -> None:
    doc = json.loads(env.run("get", "clusters", "-o", "json").stdout)
    assert doc["kind"] == "List" and sorted(i["metadata"]["name"] for i in doc["items"]) == ["dev1", "prod1", "prod2"]
    one = json.loads(env.run("get", "cluster", "dev1", "-o", "json").stdout)
    assert one["kind"] == "Cluster" and one["metadata"]["labels"] == {"env": "dev"}
    r = env.run("get", "rb", "-o", "name")
    assert r.stdout.split() == ["resourcebinding.work.karmada.io/orders-flinkdeployment"], r.stderr


def test_get_watch_prints_a_row_when_a_cluster_changes_and_when_it_goes(env: Env, tmp_path: Path) -> None:
    env.kubectl.run("apply", "-f", "-", input=json.dumps(cluster("temp1", "prod")))
    w = Lines(env, "get", "clusters", "-l", "env=prod", "--watch")
    try:
        first = w.until("temp1")
        assert first[0].split()[:4] == ["NAME", "VERSION", "MODE", "READY"]
        assert [line.split()[0] for line in first[1:]] == ["prod1", "prod2", "temp1"]
        env.kubectl.run("patch", "cluster", "temp1", "--type=merge", "-p",
                        json.dumps({"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}}))
        changed = w.until("maintenance:NoSchedule")
        assert changed[-1].split()[0] == "temp1" and not any("NAME" in line for line in changed)
        env.kubectl.run("label", "cluster", "dev1", "note=unrelated")  # not selected: prints nothing
        env.kubectl.run("delete", "cluster", "temp1")
        gone = w.until("temp1")
        assert all("dev1" not in line for line in gone)
    finally:
        w.close()
    assert w.proc.returncode is not None


def test_get_failovers_watch_only_prints_each_new_failover_once(env: Env) -> None:
    w = Lines(env, "get", "failovers", "-A", "--watch-only")
    try:
        # a failover is added until one is printed: one added before the watch opened is listed, not printed
        entries = [entry("2026-01-01T12:00:00Z", "prod1", "prod2")]
        printed: list[str] = []
        for i in range(20):
            entries.insert(0, entry(f"2026-01-01T13:{i:02d}:00Z", "prod2", f"dev{i}"))
            env.kubectl.run("annotate", "--overwrite", "rb", "orders-flinkdeployment", "-n", "default",
                            f"{HISTORY}={json.dumps(entries)}")
            try:
                printed = w.until(f"dev{i}", timeout=1.5)
                break
            except AssertionError:
                continue
        assert printed, "no failover was printed"
        assert printed[0].split()[:3] == ["NAMESPACE", "WORKLOAD", "FROM"]
        rows = [line.split()[2:4] for line in printed[1:]]
        assert rows and all(source == "prod2" and to.startswith("dev") for source, to in rows), printed
        assert ["prod1", "prod2"] not in rows, "what existed when the watch opened is not printed"
        env.kubectl.run("label", "rb", "orders-flinkdeployment", "-n", "default", "touched=yes")
        time.sleep(1.0)
        assert w.lines.empty(), "a change that leaves the failovers as they were prints nothing"
    finally:
        w.close()
