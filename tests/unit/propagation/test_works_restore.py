"""Works of a natively restored target (D20): held until resolved, the restore written in on every render."""

from __future__ import annotations

from typing import Any

from flotilla.api import labels as L
from flotilla.interpreter import ResourceInterpreter
from flotilla.propagation.works import apply_restore_state, plan_works, restore_state_enabled

INTERP = ResourceInterpreter()
RESTORE = {"path": "s3://b/ck/" + "a" * 32 + "/chk-7", "kind": "checkpoint", "jobId": "a" * 32,
           "checkpointId": 7, "existed": False, "nonce": 99}


def flink(upgrade: str = "stateless") -> dict[str, Any]:
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": "wc", "namespace": "default", "uid": "u1"},
            "spec": {"image": "flink:1.20", "job": {"jarURI": "local:///job.jar", "upgradeMode": upgrade,
                                                    "parallelism": 1}}}


def binding(clusters: list[str]) -> dict[str, Any]:
    return {"kind": "ResourceBinding",
            "metadata": {"name": "wc-flinkdeployment", "namespace": "default",
                         "labels": {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: "rb-id"}},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                  "name": "wc", "namespace": "default"},
                     "clusters": [{"name": c} for c in clusters]}}


def test_d20_flinkdeployment_has_restore_state_and_a_deployment_does_not() -> None:
    assert restore_state_enabled(INTERP, flink())
    assert not restore_state_enabled(INTERP, {"apiVersion": "apps/v1", "kind": "Deployment"})


def test_d20_restore_state_writes_path_upgrade_mode_and_nonce_only_when_the_object_existed() -> None:
    out = apply_restore_state(INTERP, flink(), RESTORE)
    job = out["spec"]["job"]
    assert job["initialSavepointPath"] == RESTORE["path"] and job["upgradeMode"] == "savepoint"
    assert "savepointRedeployNonce" not in job
    kept = apply_restore_state(INTERP, flink("last-state"), {**RESTORE, "existed": True})["spec"]["job"]
    assert kept["upgradeMode"] == "last-state" and kept["savepointRedeployNonce"] == 99


def test_d20_held_target_gets_no_work_and_restored_target_gets_the_path() -> None:
    intents, errors = plan_works(flink(), binding(["member2", "member3"]), interpreter=INTERP,
                                 restores={"member2": RESTORE}, held={"member3"})
    assert errors == []
    assert [i.cluster for i in intents] == ["member2"]
    assert intents[0].manifest["spec"]["job"]["initialSavepointPath"] == RESTORE["path"]
    plain, _ = plan_works(flink(), binding(["member2"]), interpreter=INTERP)
    assert "initialSavepointPath" not in plain[0].manifest["spec"]["job"]


def test_d20_restore_survives_an_override_of_the_job() -> None:
    override = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
                "metadata": {"name": "op", "namespace": "default"},
                "spec": {"resourceSelectors": [{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment"}],
                         "overrideRules": [{"overriders": {"plaintext": [
                             {"path": "/spec/job/initialSavepointPath", "operator": "add", "value": "s3://wrong"}]}}]}}
    intents, errors = plan_works(flink(), binding(["member2"]), interpreter=INTERP, override_policies=[override],
                                 restores={"member2": RESTORE})
    assert errors == []
    assert intents[0].manifest["spec"]["job"]["initialSavepointPath"] == RESTORE["path"]
