"""``flotilla failover preview``: the state each rule would preserve now and whether it would be injected."""

from __future__ import annotations

from typing import Any

from flotilla.failover.preview import UNKNOWN_TARGET, preview, preview_binding, render_preview
from flotilla.failover.state import ExtractionFailure

FLINK_STATUS: dict[str, Any] = {
    "jobManagerDeploymentStatus": "READY",
    "lifecycleState": "STABLE",
    "jobStatus": {
        "jobId": "cafebabe0123456789abcdef01234567",
        "state": "RUNNING",
        "checkpointInfo": {"lastCheckpoint": {"timeStamp": 1734462491693}},
    },
}


def _failover(mode: str, *rules: tuple[str, str], trigger: str = "cluster") -> dict[str, Any]:
    block: dict[str, Any] = {"purgeMode": mode,
                             "statePreservation": {"rules": [{"aliasLabelName": a, "jsonPath": p} for a, p in rules]}}
    return {trigger: block}


def _binding(failover: dict[str, Any], clusters: list[str], status: Any = FLINK_STATUS) -> dict[str, Any]:
    items = [{"clusterName": c, "applied": True, "health": "Healthy", **({"status": status} if status else {})}
             for c in clusters]
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"namespace": "shop", "name": "orders-flinkdeployment"},
            "spec": {"clusters": [{"name": c} for c in clusters], "failover": failover},
            "status": {"aggregatedStatus": items}}


def test_preview_shows_the_values_that_would_be_preserved_and_injected() -> None:
    failover = _failover("Directly", ("flink.apache.org/job-id", "{.jobStatus.jobId}"),
                         ("flink.apache.org/checkpoint", "{.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}"))
    report = preview_binding(_binding(failover, ["member1"]), "member2")
    assert report.ok and report.from_cluster == "member1" and report.status_collected
    cluster_block = report.blocks[0]
    assert cluster_block.trigger == "cluster" and cluster_block.purge_mode == "Directly"
    assert cluster_block.state == {"flink.apache.org/job-id": "cafebabe0123456789abcdef01234567",
                                   "flink.apache.org/checkpoint": "1734462491693"}
    assert cluster_block.inject and "preserved 2 label(s)" in cluster_block.inject_reason
    assert not report.blocks[1].configured
    text = render_preview(report)
    assert "Failover preview: from cluster member1 to cluster member2" in text
    assert "value: 1734462491693" in text
    assert "injection into cluster member2: yes" in text
    assert "application failover (unhealthy workload): not configured" in text


def test_preview_catches_the_wrong_case_job_id_with_a_hint() -> None:
    failover = _failover("Directly", ("flink.apache.org/job-id", "{.jobStatus.jobID}"))
    report = preview(failover, FLINK_STATUS, {"clusters": [{"name": "member1"}]}, "member2")
    assert not report.ok
    rule = report.blocks[0].rules[0]
    assert rule.error is not None and rule.error.failure is ExtractionFailure.MISSING_KEY
    assert rule.error.reason == "jobID is not found"
    assert "jobId" in rule.hint and ".jobStatus.jobId" in rule.hint
    assert not report.blocks[0].inject
    assert "once it succeeds, injection would apply" in report.blocks[0].inject_reason
    text = render_preview(report)
    assert "error: jobID is not found" in text
    assert "hint: similar keys: jobId (at .jobStatus.jobId)" in text
    assert "extraction FAILS" in text and "StatePreservationFailed" in text


def test_preview_hints_at_status_prefix_and_omitted_zero_fields() -> None:
    failover = _failover("Directly", ("a", "{.status.jobStatus.jobId}"), ("b", "{.readyReplicas}"))
    report = preview(failover, FLINK_STATUS, {"clusters": [{"name": "m1"}]}, "m2")
    first, second = report.blocks[0].rules
    assert "leave out .status (e.g. {.jobStatus.jobId})" in first.hint
    assert "readyReplicas: 0" in second.hint and "jobManagerDeploymentStatus" in second.hint


def test_preview_says_why_injection_would_not_apply() -> None:
    rules = ("job", "{.jobStatus.jobId}")
    spec = {"clusters": [{"name": "m1"}]}
    graceful = preview(_failover("Gracefully", rules), FLINK_STATUS, spec, "m2").blocks[0]
    assert not graceful.inject and "purgeMode Gracefully" in graceful.inject_reason
    assert any("never injected" in w for w in graceful.warnings)
    # D9: the target already runs the workload (Duplicated over two clusters)
    spread = preview(_failover("Directly", rules), FLINK_STATUS, {"clusters": [{"name": "m1"}, {"name": "m2"}]},
                     "m2", from_cluster="m1").blocks[0]
    assert not spread.inject and "already ran the workload" in spread.inject_reason
    # several clusters after the failover
    several = preview(_failover("Directly", rules), FLINK_STATUS,
                      {"clusters": [{"name": "m1"}, {"name": "m3"}]}, "m2", from_cluster="m1").blocks[0]
    assert not several.inject and "2 clusters" in several.inject_reason
    gate_off = preview(_failover("Directly", rules), FLINK_STATUS, spec, "m2", gate=False)
    assert not gate_off.blocks[0].inject and "StatefulFailoverInjection" in gate_off.blocks[0].inject_reason


def test_preview_without_a_collected_status() -> None:
    report = preview_binding(_binding(_failover("Directly", ("job", "{.jobStatus.jobId}")), ["m1"], status=None))
    assert not report.status_collected and report.target_cluster == UNKNOWN_TARGET
    rule = report.blocks[0].rules[0]
    assert rule.error is not None and rule.error.failure is ExtractionFailure.STATUS_NOT_COLLECTED
    text = render_preview(report)
    assert "Reflected status of cluster m1: NOT collected yet" in text
    assert "has not yet been collected from Cluster(m1)" in text
    assert "to a new cluster" in text


def test_preview_application_block_and_missing_cluster_block() -> None:
    failover = _failover("Directly", ("job", "{.jobStatus.jobId}"), trigger="application")
    report = preview(failover, FLINK_STATUS, {"clusters": [{"name": "m1"}]}, "m2")
    cluster_block, app_block = report.blocks
    assert not cluster_block.configured and cluster_block.purge_mode == "Gracefully"
    assert any("--no-execute-taint-eviction-purge-mode" in w for w in cluster_block.warnings)
    assert app_block.configured and app_block.inject and app_block.state == {"job": "cafebabe0123456789abcdef01234567"}
    directly_flag = preview(failover, FLINK_STATUS, {"clusters": [{"name": "m1"}]}, "m2",
                            no_execute_taint_eviction_purge_mode="Directly")
    assert directly_flag.blocks[0].purge_mode == "Directly"


def test_preview_accepts_a_policy_or_its_failover_block() -> None:
    failover = _failover("Directly", ("job", "{.jobStatus.jobId}"))
    policy = {"kind": "PropagationPolicy", "spec": {"failover": failover}}
    spec = {"clusters": [{"name": "m1"}]}
    assert preview(policy, FLINK_STATUS, spec, "m2") == preview(failover, FLINK_STATUS, spec, "m2")


def test_d7_preview_reports_invalid_label_values() -> None:
    failover = _failover("Directly", ("info", "{.jobStatus.checkpointInfo}"))
    rule = preview(failover, FLINK_STATUS, {"clusters": [{"name": "m1"}]}, "m2").blocks[0].rules[0]
    assert rule.error is not None and rule.error.failure is ExtractionFailure.INVALID_VALUE
    assert "selects an object" in rule.error.reason and "63 characters" in rule.hint
