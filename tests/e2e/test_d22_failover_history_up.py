"""D22 (the failover history) end to end: ``flotilla up``, a FlinkDeployment moved by a NoExecute taint, ``flotilla get failovers``.

Real processes and the real kubectl: the stack of ``flotilla up --detach`` (two simulated members whose Flink
operator reports its job's progress), a stateful PropagationPolicy (purgeMode Directly, the job id preserved),
a hand-made NoExecute taint on the job's member (the policy turns planned moves off, so the taint on a Ready member
is an ordinary failover restoring the newest checkpoint, with records reprocessed; planned moves are listed in
``test_d21_*``). The failover is then listed by
``flotilla get failovers -o json`` with its trigger, time to running and state gap (records reprocessed
measured from the simulated job).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.member.flink_crd import flink_deployment_crd
from tests.e2e.test_up_cli import eventually, flotilla, get
from tests.support.apiserver import Kubectl

pytestmark = pytest.mark.kubectl

NAME = "wc-history"
TAINT_KEY = "fail-wc-history"

POLICY = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
    "metadata": {"name": NAME, "namespace": "default",
                 "annotations": {"restore.flotilla.io/savepoint-on-move": "false"}},
    "spec": {"resourceSelectors": [{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                    "name": NAME}],
             "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                           "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1,
                                                  "minGroups": 1}]},
             "failover": {"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
                 {"aliasLabelName": "failover.flink.io/job-id", "jsonPath": "{ .jobStatus.jobId }"}]}}}},
}
FLINK = {
    "apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
    "metadata": {"name": NAME, "namespace": "default"},
    "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
             "jobManager": {"resource": {"memory": "2048m", "cpu": 1}},
             "taskManager": {"resource": {"memory": "2048m", "cpu": 1}},
             "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 2,
                     "upgradeMode": "last-state"}},
}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Path, Kubectl]]:
    data_dir = tmp_path / "flotilla"
    try:
        r = flotilla("up", "--detach", "--data-dir", str(data_dir), "--port", "0", "--members", "2")
        assert r.returncode == 0, r.stdout + r.stderr
        yield data_dir, Kubectl(data_dir / "kubeconfig", tmp_path)
    finally:
        flotilla("down", "--data-dir", str(data_dir))


def test_d22_a_flink_failover_by_taint_is_listed_with_its_state_gap(stack: tuple[Path, Kubectl]) -> None:
    data_dir, k = stack
    kubeconfig = str(data_dir / "kubeconfig")

    def ready() -> None:
        clusters = get(k, "clusters")["items"]
        up = [c for c in clusters if any(x["type"] == "Ready" and x["status"] == "True"
                                         for x in (c.get("status") or {}).get("conditions") or [])]
        assert len(up) == 2, [c["metadata"]["name"] for c in up]

    eventually(ready, "both members Ready", timeout=60)
    k.run("apply", "-f", "-", input=json.dumps(flink_deployment_crd()))
    k.run("wait", "--for=condition=Established", "crd/flinkdeployments.flink.apache.org", "--timeout=30s")
    k.run("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                "items": [POLICY, FLINK]}))

    def running_with_checkpoint() -> str:
        for member in ("member1", "member2"):
            r = k.run("--context", member, "get", "flinkdeployment", NAME, "-o", "json", check=False)
            if r.returncode != 0:
                continue
            obj = json.loads(r.stdout)
            assert obj["status"]["jobStatus"]["state"] == "RUNNING"
            assert obj["metadata"]["annotations"]["sim.flotilla.io/last-checkpoint"] != "none"
            return member
        raise AssertionError("not in any member yet")

    old = eventually(running_with_checkpoint, f"{NAME} RUNNING with a checkpoint", timeout=60)
    new = "member2" if old == "member1" else "member1"
    r = flotilla("taint", "clusters", old, f"{TAINT_KEY}=true:NoExecute", "--kubeconfig", kubeconfig)
    assert r.returncode == 0, r.stderr

    def completed() -> dict[str, Any]:
        r = flotilla("get", "failovers", "-n", "default", "-o", "json", "--kubeconfig", kubeconfig)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["kind"] == "List" and doc["items"], doc
        item = doc["items"][0]
        assert item["phase"] == "Completed", item
        return dict(item)

    item = eventually(completed, f"the failover of {NAME} completed in the history", timeout=90)
    assert item["workload"] == {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                "name": NAME}
    assert (item["from"], item["to"], item["trigger"], item["purgeMode"]) == (
        old, new, "ClusterTaint", "Directly")
    assert item["preservedState"].get("failover.flink.io/job-id"), item
    assert 0 < item["timeToRunning"] < 90, item
    gap = item["stateGap"]
    assert isinstance(gap["recordsReprocessed"], int) and gap["recordsReprocessed"] >= 0, gap
    assert isinstance(gap["recordsAtFault"], int) and gap["recordsAtFault"] > 0, gap
    binding = get(k, "rb", f"{NAME}-flinkdeployment", "-n", "default")
    if "failover.flotilla.io/restore" in (binding["metadata"].get("annotations") or {}):
        assert isinstance(gap["ageAtFault"], (int, float)), gap  # the restored checkpoint's age
    assert len(json.loads(flotilla("get", "failovers", "-A", "-o", "json", "--kubeconfig", kubeconfig).stdout)
               ["items"]) == 1

    r = flotilla("get", "failovers", "-n", "default", "--kubeconfig", kubeconfig)
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()[:2]
    assert header.split()[:5] == ["NAMESPACE", "WORKLOAD", "FROM", "TO", "TRIGGER"]
    assert row.split()[:5] == ["default", f"FlinkDeployment/{NAME}", old, new, "ClusterTaint"]
    assert f"{gap['recordsReprocessed']} records" in row

    events = get(k, "events", "-n", "default")["items"]
    done = [e for e in events if e["reason"] == "FailoverCompleted"]
    assert done and f"from {old} to {new} (ClusterTaint)" in done[0]["message"], done
