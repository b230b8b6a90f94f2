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


def test_d20_member_redeploy_nonce_is_retained_with_the_path() -> None:
    desired = _flink({"jarURI": "local:///job.jar", "upgradeMode": "stateless"})
    observed = _flink({"jarURI": "local:///job.jar", "upgradeMode": "savepoint", "savepointRedeployNonce": 4,
                       "initialSavepointPath": "s3://b/ck/abc/chk-7"})
    out = ResourceInterpreter().retain(desired, observed)
    assert out["spec"]["job"] == {"jarURI": "local:///job.jar", "upgradeMode": "savepoint",
                                  "initialSavepointPath": "s3://b/ck/abc/chk-7", "savepointRedeployNonce": 4}


def test_d20_member_redeploy_nonce_is_retained_when_the_template_sets_the_path_but_no_nonce() -> None:
    desired = _flink({"initialSavepointPath": "s3://b/ck/new/chk-2", "upgradeMode": "savepoint"})
    observed = _flink({"initialSavepointPath": "s3://b/ck/old/chk-9", "upgradeMode": "savepoint",
                       "savepointRedeployNonce": 2})
    out = ResourceInterpreter().retain(desired, observed)
    assert out["spec"]["job"] == {"initialSavepointPath": "s3://b/ck/new/chk-2", "upgradeMode": "savepoint",
                                  "savepointRedeployNonce": 2}


def test_d20_template_redeploy_nonce_wins_over_the_members() -> None:
    desired = _flink({"initialSavepointPath": "s3://b/ck/new/chk-2", "savepointRedeployNonce": 5})
    observed = _flink({"initialSavepointPath": "s3://b/ck/old/chk-9", "savepointRedeployNonce": 2})
    out = ResourceInterpreter().retain(desired, observed)
    assert out["spec"]["job"] == {"initialSavepointPath": "s3://b/ck/new/chk-2", "savepointRedeployNonce": 5}


def test_retain_keeps_the_rest_of_the_desired_object() -> None:
    desired = _flink({"jarURI": "local:///v2.jar", "parallelism": 4})
    desired["spec"]["flinkConfiguration"] = {"execution.checkpointing.dir": "s3://b/ck"}
    observed = _flink({"jarURI": "local:///v1.jar", "parallelism": 2, "initialSavepointPath": "s3://b/ck/a/chk-1"})
    observed["status"] = {"jobStatus": {"state": "RUNNING"}}
    out = ResourceInterpreter().retain(desired, observed)
    assert out["spec"]["job"] == {"jarURI": "local:///v2.jar", "parallelism": 4,
                                  "initialSavepointPath": "s3://b/ck/a/chk-1"}
    assert out["spec"]["flinkConfiguration"] == desired["spec"]["flinkConfiguration"]
    assert "status" not in out


def test_d20_path_written_by_restore_state_survives_a_later_apply_of_a_template_without_it() -> None:
    interp = ResourceInterpreter()
    template = _flink({"jarURI": "local:///job.jar", "upgradeMode": "stateless"})
    restored = interp.restore_state(template, {"path": "s3://b/ck/abc/chk-7", "kind": "checkpoint",
                                               "jobId": "abc", "checkpointId": 7, "existed": True, "nonce": 3})
    again = interp.retain(template, restored)  # the member object now holds what RestoreState wrote
    assert again["spec"]["job"] == restored["spec"]["job"]
