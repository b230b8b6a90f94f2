"""The text of ``flotilla describe cluster|binding``, computed from the objects alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from flotilla.cli.describe_command import describe_binding, describe_cluster, render_events
from flotilla.main import build_parser

NOW = datetime(2026, 1, 2, 10, 10, 0, tzinfo=UTC)


def cluster(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "member1", "labels": {"region": "eu", "env": "prod"}},
            "spec": {"apiEndpoint": "https://member1.example:6443", **spec},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ClusterNotReachable",
                                       "message": "cluster is not reachable",
                                       "lastTransitionTime": "2026-01-02T10:08:00Z"}]}}


def event(reason: str, at: str, type_: str = "Normal", count: int = 1) -> dict[str, Any]:
    return {"type": type_, "reason": reason, "message": f"{reason} happened", "lastTimestamp": at,
            "firstTimestamp": "2026-01-02T10:00:00Z", "count": count, "source": {"component": "cluster-controller"}}


def value(text: str, key: str) -> str:
    line = next(line for line in text.splitlines() if line.startswith(f"{key}:"))
    return line.split(":", 1)[1].strip()


def test_cluster_shows_name_mode_endpoint_and_ready_condition_with_reason_and_age() -> None:
    text = describe_cluster(cluster(), now=NOW)
    assert value(text, "Name") == "member1"
    assert value(text, "Mode") == "Push"
    assert value(text, "API Endpoint") == "https://member1.example:6443"
    ready = value(text, "Ready")
    assert ready.startswith("False, reason ClusterNotReachable, cluster is not reachable")
    assert "(2m ago)" in ready


def test_cluster_values_are_aligned_and_labels_one_per_line() -> None:
    lines = describe_cluster(cluster(), now=NOW).splitlines()
    starts = {len(line) - len(line.split(":", 1)[1].lstrip()) for line in lines[:4] if ":" in line}
    assert len(starts) == 1
    labels = lines.index(next(line for line in lines if line.startswith("Labels:")))
    assert lines[labels].endswith("env=prod") and lines[labels + 1].strip() == "region=eu"


def test_cluster_taints_one_per_line_or_none() -> None:
    assert value(describe_cluster(cluster(), now=NOW), "Taints") == "<none>"
    text = describe_cluster(cluster(taints=[{"key": "k", "value": "v", "effect": "NoSchedule"},
                                            {"key": "gone", "effect": "NoExecute"}]), now=NOW)
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("Taints:"))
    assert lines[i].endswith("k=v:NoSchedule") and lines[i + 1].strip() == "gone:NoExecute"


def test_cluster_fenced_says_no_or_yes_with_the_conditions_reason_and_message() -> None:
    assert value(describe_cluster(cluster(), now=NOW), "Fenced") == "no"
    c = cluster(taints=[{"key": "cluster.flotilla.io/out-of-service", "effect": "NoExecute"}])
    c["status"]["conditions"].append({"type": "Fenced", "status": "True", "reason": "LeaseExpired",
                                      "message": "the agent's lease expired"})
    text = describe_cluster(c, now=NOW)
    assert value(text, "Fenced") == "yes (LeaseExpired)"
    assert "Fenced condition: True, LeaseExpired, the agent's lease expired" in text


def test_cluster_resource_summary_lists_allocatable_and_allocated() -> None:
    c = cluster()
    c["status"]["resourceSummary"] = {"allocatable": {"cpu": "8", "pods": "110"}, "allocated": {"cpu": "2"}}
    text = describe_cluster(c, now=NOW)
    assert value(text, "Resource Summary") == "allocatable: cpu=8, pods=110"
    assert "allocated: cpu=2" in text
    assert value(describe_cluster(cluster(), now=NOW), "Resource Summary") == "<none>"


def test_pull_cluster_shows_the_agent_lease_age_and_push_cluster_does_not() -> None:
    lease = {"spec": {"renewTime": "2026-01-02T10:09:30.000000Z"}}
    text = describe_cluster(cluster(syncMode="Pull"), lease=lease, now=NOW)
    assert value(text, "Mode") == "Pull"
    assert value(text, "Agent Lease") == "renewed 30s ago (karmada-cluster/member1)"
    assert value(describe_cluster(cluster(syncMode="Pull"), now=NOW), "Agent Lease") == "<none>"
    assert "Agent Lease" not in describe_cluster(cluster(), lease=lease, now=NOW)


def test_events_are_a_table_newest_last_with_repeat_counts() -> None:
    lines = render_events([event("Late", "2026-01-02T10:09:00Z", "Warning", count=3),
                           event("Early", "2026-01-02T10:05:00Z")], now=NOW)
    assert lines[0] == "Events:"
    assert lines[1].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert lines[2].split() == ["----", "------", "---", "----", "-------"]
    assert lines[3].split()[:2] == ["Normal", "Early"]
    assert lines[4].split()[:5] == ["Warning", "Late", "60s", "(x3", "over"]
    assert "cluster-controller" in lines[4] and lines[4].endswith("Late happened")


def test_no_events_prints_events_none() -> None:
    assert render_events([]) == ["Events:  <none>"]
    assert describe_cluster(cluster(), now=NOW).splitlines()[-1] == "Events:  <none>"


def binding(**extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web-deployment", "namespace": "default", **extra},
            "spec": {"resource": {"kind": "Deployment", "name": "web"},
                     "clusters": [{"name": "member2", "replicas": 2}, {"name": "member3"}],
                     "gracefulEvictionTasks": [{"fromCluster": "member1", "producer": "TaintManager",
                                                "reason": "TaintUntolerated",
                                                "preservedLabelState": {"app.example/replicas": "2"}}]},
            "status": {"conditions": [{"type": "Scheduled", "status": "True", "reason": "Success"}]}}


def test_binding_shows_resource_clusters_with_replicas_tasks_and_conditions() -> None:
    text = describe_binding(binding(), [event("ScheduleBindingSucceed", "2026-01-02T10:09:00Z")], now=NOW)
    assert value(text, "Name") == "web-deployment" and value(text, "Namespace") == "default"
    assert value(text, "Resource") == "Deployment/web"
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("Clusters:"))
    assert lines[i].endswith(" member2:2") and lines[i + 1].strip() == "member3:0"
    assert lines[i + 1].index("member3") == lines[i].index("member2")  # under the first value
    assert value(text, "Graceful Eviction Tasks") == ("from member1, producer TaintManager, reason "
                                                      "TaintUntolerated, preserved app.example/replicas=2")
    assert value(text, "Conditions") == "Scheduled: True, reason Success"
    assert "Failover History" not in text
    assert "ScheduleBindingSucceed" in text.split("Events:", 1)[1]


def test_binding_failover_history_one_line_per_entry() -> None:
    history = [{"phase": "Completed", "from": "member1", "to": "member2", "trigger": "ClusterTaint"},
               {"phase": "InProgress", "from": "member2", "to": None, "trigger": "PlannedMove"}]
    text = describe_binding(binding(annotations={"failover.flotilla.io/history": json.dumps(history)}), now=NOW)
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("Failover History:"))
    assert lines[i].endswith("Completed: member1 -> member2, trigger ClusterTaint")
    assert lines[i + 1].strip() == "InProgress: member2 -> <pending>, trigger PlannedMove"


def test_describe_parser_takes_the_same_control_plane_flags_as_get() -> None:
    args = build_parser().parse_args(["describe", "binding", "web", "-n", "prod", "--kubeconfig", "k",
                                      "--context", "c"])
    assert (args.kind, args.name, args.namespace, args.kubeconfig, args.karmada_context) == (
        "binding", "web", "prod", "k", "c")


def test_unreachable_control_plane_exits_1_and_says_to_pass_kubeconfig(tmp_path: Any, capsys: Any) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "users": [{"name": "u", "user": {}}]}))
    args = build_parser().parse_args(["describe", "cluster", "m1", "--kubeconfig", str(kubeconfig)])
    assert args.fn(args) == 1
    assert "--kubeconfig" in capsys.readouterr().err
