"""FlinkDeployment Retain: the member-side restore path survives re-application of the Work."""

from __future__ import annotations

from flotilla.interpreter import ResourceInterpreter


def _flink(job: dict) -> dict:
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": "wc", "namespace": "default"}, "spec": {"image": "flink:1.20", "job": job}}


def test_member_set_savepoint_path_is_retained_when_the_template_has_none() -> None:
    desired = _flink({"jarURI": "local:///job.jar", "upgradeMode": "last-state"})
    observed = _flink({"jarURI": "local:///job.jar", "upgradeMode": "savepoint",
                       "initialSavepointPath": "/ckpt/abc/chk-7"})
    out = ResourceInterpreter().retain(desired, observed)
    assert out["spec"]["job"]["initialSavepointPath"] == "/ckpt/abc/chk-7"
    assert out["spec"]["job"]["upgradeMode"] == "savepoint"
    assert "initialSavepointPath" not in desired["spec"]["job"]  # input untouched


def test_template_savepoint_path_wins_over_the_members() -> None:
    desired = _flink({"initialSavepointPath": "/ckpt/new/chk-1", "upgradeMode": "last-state"})
    observed = _flink({"initialSavepointPath": "/ckpt/old/chk-9", "upgradeMode": "savepoint"})
    out = ResourceInterpreter().retain(desired, observed)
    assert out["spec"]["job"] == {"initialSavepointPath": "/ckpt/new/chk-1", "upgradeMode": "last-state"}


def test_nothing_to_retain_without_a_member_path() -> None:
    desired = _flink({"upgradeMode": "last-state"})
    observed = _flink({"upgradeMode": "last-state"})
    assert ResourceInterpreter().retain(desired, observed) == desired
