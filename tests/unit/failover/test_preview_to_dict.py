"""The machine-readable form of a failover preview (``flotilla failover preview -o json|yaml``)."""

from __future__ import annotations

import json
from typing import Any

from flotilla.failover.preview import preview

STATUS: dict[str, Any] = {"jobStatus": {"jobId": "cafebabe0123456789abcdef01234567", "state": "RUNNING"}}
SPEC: dict[str, Any] = {"clusters": [{"name": "member1"}]}


def _failover(mode: str, *paths: str) -> dict[str, Any]:
    rules = [{"aliasLabelName": f"flink.apache.org/r{i}", "jsonPath": p} for i, p in enumerate(paths)]
    return {"cluster": {"purgeMode": mode, "statePreservation": {"rules": rules}}}


def test_report_dict_has_the_values_state_and_injection_verdict() -> None:
    doc = preview(_failover("Directly", "{.jobStatus.jobId}"), STATUS, SPEC, "member2").to_dict()
    assert doc["fromCluster"] == "member1" and doc["targetCluster"] == "member2"
    assert doc["statusCollected"] is True and doc["ok"] is True
    assert doc["featureGates"] == {"StatefulFailoverInjection": True}
    cluster, application = doc["triggers"]
    assert cluster["trigger"] == "cluster" and cluster["configured"] and cluster["purgeMode"] == "Directly"
    assert cluster["rules"] == [{"aliasLabelName": "flink.apache.org/r0", "jsonPath": "{.jobStatus.jobId}",
                                 "ok": True, "value": "cafebabe0123456789abcdef01234567", "error": None,
                                 "hint": None}]
    assert cluster["state"] == {"flink.apache.org/r0": "cafebabe0123456789abcdef01234567"}
    assert cluster["injection"]["inject"] is True
    assert application["configured"] is False and application["purgeMode"] is None
    assert json.loads(json.dumps(doc)) == doc


def test_report_dict_of_a_failing_rule_carries_the_error_and_hint() -> None:
    report = preview(_failover("Directly", "{.jobStatus.jobID}"), STATUS, SPEC)
    doc = report.to_dict()
    assert doc["ok"] is False and doc["targetCluster"] is None
    rule = doc["triggers"][0]["rules"][0]
    assert rule["ok"] is False and rule["value"] is None
    assert rule["error"]["failure"] == "MissingKey" and rule["error"]["reason"] == "jobID is not found"
    assert rule["error"]["missingKey"] == "jobID" and "jobID is not found" in rule["error"]["message"]
    assert "jobId" in rule["hint"]
    assert doc["triggers"][0]["state"] is None and doc["triggers"][0]["injection"]["inject"] is False
    assert [r.alias for r in report.failing_rules] == ["flink.apache.org/r0"]


def test_report_dict_says_why_gracefully_does_not_inject() -> None:
    doc = preview(_failover("Gracefully", "{.jobStatus.jobId}"), STATUS, SPEC, "member2").to_dict()
    cluster = doc["triggers"][0]
    assert cluster["ok"] is True and cluster["injection"]["inject"] is False
    assert "purgeMode Gracefully" in cluster["injection"]["reason"]
    assert any("never injected" in w for w in cluster["warnings"])
