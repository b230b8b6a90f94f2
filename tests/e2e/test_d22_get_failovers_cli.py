"""D22, the failover history: ``flotilla get failovers`` against a real API server process (bindings written with kubectl)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_cluster_cli import Env
from tests.support.apiserver import ServerProcess

pytestmark = pytest.mark.kubectl

HISTORY = "failover.flotilla.io/history"


def entry(at: str, source: str, to: str, **fields: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"at": at, "from": source, "to": to, "trigger": "ClusterTaint",
                         "purgeMode": "Directly", "preservedState": {"jobid": "4f2c"}, "restoredPath": f"s3://ck/flink/4f2c/chk-{len(at)}",
                         "restoreOutcome": "Restored", "runningAt": at, "timeToRunning": 21.5,
                         "stateGap": {"ageAtFault": 1.5, "recordsReprocessed": 150}, "phase": "Completed"}
    e.update(fields)
    return e


def binding(name: str, namespace: str, workload: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {HISTORY: json.dumps(entries)} if entries else {}},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                  "name": workload, "namespace": namespace}}}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("failovers")
    server = ServerProcess(root / "cp", storage_url="memory://").start()
    try:
        e = Env(server, root)
        for ns in ("streaming", "batch"):
            e.kubectl.run("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                                "metadata": {"name": ns}}))
        orders = [entry("2026-01-01T12:10:00Z", "member2", "member3", phase="InProgress", runningAt=None,
                        timeToRunning=None, stateGap={"ageAtFault": None, "recordsReprocessed": None}),
                  entry("2026-01-01T12:00:00Z", "member1", "member2")]
        for b in (binding("orders-flinkdeployment", "streaming", "orders", orders),
                  binding("quiet-flinkdeployment", "streaming", "quiet", []),
                  binding("etl-flinkdeployment", "batch", "etl",
                          [entry("2026-01-01T11:00:00Z", "member3", "member1",
                                 trigger="ApplicationFailure")])):
            e.kubectl.run("apply", "-f", "-", input=json.dumps(b))
        garbled = binding("garbled-flinkdeployment", "batch", "garbled", [])
        garbled["metadata"]["annotations"] = {HISTORY: "{not a list"}
        e.kubectl.run("apply", "-f", "-", input=json.dumps(garbled))
        yield e
    finally:
        server.stop()


def test_d22_get_failovers_lists_each_entry_with_its_state_gap(env: Env) -> None:
    r = env.run("get", "failovers", "-n", "streaming")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "WORKLOAD", "FROM", "TO", "TRIGGER", "STARTED",
                                "TIME-TO-RUNNING", "STATE-GAP"]
    assert len(lines) == 3, r.stdout
    assert lines[1].split()[:5] == ["streaming", "FlinkDeployment/orders", "member2", "member3",
                                    "ClusterTaint"]
    assert "<in progress>" in lines[1]
    assert "21.5s" in lines[2] and "1.5s / 150 records" in lines[2]


def test_d22_get_failovers_json_is_a_list_that_parses(env: Env) -> None:
    r = env.run("get", "failovers", "-A", "-o", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "List"
    rows = [(i["namespace"], i["workload"]["name"], i["from"], i["to"], i["phase"]) for i in doc["items"]]
    assert sorted(rows) == sorted([("streaming", "orders", "member2", "member3", "InProgress"),
                                   ("streaming", "orders", "member1", "member2", "Completed"),
                                   ("batch", "etl", "member3", "member1", "Completed")])
    etl = next(i for i in doc["items"] if i["workload"]["name"] == "etl")
    assert etl["trigger"] == "ApplicationFailure"
    assert etl["stateGap"] == {"ageAtFault": 1.5, "recordsReprocessed": 150}
    r = env.run("get", "failovers", "-A", "-o", "yaml")
    assert r.returncode == 0 and "kind: List" in r.stdout and "ApplicationFailure" in r.stdout


def test_d22_get_failovers_wide_name_and_filters(env: Env) -> None:
    r = env.run("get", "failovers", "orders", "-n", "streaming", "-o", "wide")
    assert r.returncode == 0, r.stderr
    assert "PURGE-MODE" in r.stdout and "s3://ck/flink/4f2c/chk-20" in r.stdout and "jobid=4f2c" in r.stdout
    r = env.run("get", "failovers", "etl-flinkdeployment", "-n", "batch", "-o", "name")
    assert r.stdout.split() == ["failover/etl-flinkdeployment/member3@2026-01-01T11:00:00Z"]
    r = env.run("get", "failovers", "quiet", "-n", "streaming")
    assert r.returncode == 0 and r.stdout == "" and "No failovers recorded for quiet in streaming" in r.stderr
    r = env.run("get", "rb", "-n", "streaming", "-o", "name")
    assert sorted(r.stdout.split()) == ["resourcebinding.work.karmada.io/orders-flinkdeployment",
                                        "resourcebinding.work.karmada.io/quiet-flinkdeployment"]


def test_d22_get_failovers_says_which_history_it_cannot_read(env: Env) -> None:
    r = env.run("get", "failovers", "-n", "batch")
    assert r.returncode == 0, r.stderr
    assert "FlinkDeployment/etl" in r.stdout and "garbled" not in r.stdout
    assert "batch/garbled-flinkdeployment" in r.stderr and "not a JSON list" in r.stderr
