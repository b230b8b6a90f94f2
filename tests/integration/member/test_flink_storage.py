"""A simulated member's Flink job writes its checkpoints and savepoints where its own flinkConfiguration says: an
S3 bucket (a real S3-compatible server) with Flink's layout; a new job resumes from one of them by its s3:// URI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from flotilla.checkpoints import list_snapshots, newest, read_metadata
from flotilla.member.checkpoints import CheckpointStore
from flotilla.member.history import HistoryRecorder
from flotilla.member.simulated import MemberConfig
from tests.integration.member import MemberThread
from tests.integration.member.test_flink_member import INTERVAL, OPTIONS, get, status_of, wait_for
from tests.support.apiserver import Kubectl
from tests.support.s3 import S3Server, s3_server, s3_server_process  # noqa: F401

pytestmark = pytest.mark.kubectl


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemberThread]:
    cfg = MemberConfig(name="flinks3", data_dir=tmp_path_factory.mktemp("members"), ready_delay=0.3,
                       options=dict(OPTIONS))
    m = MemberThread(cfg, HistoryRecorder(None)).start()
    yield m
    m.stop()


def deployment(name: str, conf: dict[str, str], *, upgrade_mode: str = "last-state",
               initial: str | None = None) -> str:
    job: dict[str, Any] = {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 2,
                           "upgradeMode": upgrade_mode}
    if initial:
        job["initialSavepointPath"] = initial
    return yaml.safe_dump({
        "apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "metadata": {"name": name},
        "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                 "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "2", "state.checkpoints.num-retained": "2",
                                        **conf},
                 "jobManager": {"resource": {"memory": "2048m", "cpu": 1}},
                 "taskManager": {"resource": {"memory": "2048m", "cpu": 1}}, "job": job}})


def keys(server: S3Server, prefix: str) -> list[str]:
    out = server.client().list_objects_v2(Bucket=server.bucket, Prefix=prefix)
    return sorted(o["Key"] for o in out.get("Contents", []))


def running_job(kubectl: Kubectl, ns: str, name: str) -> str:
    wait_for(lambda: status_of(kubectl, ns, name).get("jobStatus", {}).get("state") == "RUNNING", timeout=20,
             msg=f"{name} RUNNING")
    return str(status_of(kubectl, ns, name)["jobStatus"]["jobId"])


async def test_checkpoints_go_to_the_configured_bucket_and_a_new_job_resumes_from_one(
        kubectl: Kubectl, ns: str, s3_server: S3Server, member: MemberThread) -> None:  # noqa: F811
    conf = s3_server.flink_configuration("flink/checkpoints")
    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("orders", conf))
    job_id = running_job(kubectl, ns, "orders")
    prefix = f"flink/checkpoints/{job_id}/"
    wait_for(lambda: len([k for k in keys(s3_server, prefix) if k.endswith("/_metadata")]) >= 2,
             timeout=10 * INTERVAL + 10, msg="two checkpoints in the bucket")
    found = keys(s3_server, prefix)
    assert f"{prefix}shared/.keep" in found and f"{prefix}taskowned/.keep" in found
    assert all(k.startswith((f"{prefix}chk-", f"{prefix}shared/", f"{prefix}taskowned/")) for k in found)
    # the member's shared directory holds nothing of this job
    assert member.member.config.checkpoint_dir is not None
    assert CheckpointStore(member.member.config.checkpoint_dir).latest_checkpoint(job_id) is None

    kubectl.run("delete", "flinkdeployment", "orders", "-n", ns, "--timeout=15s")  # the job stops: offsets freeze
    config = s3_server.storage_config("flink/checkpoints")
    snaps = await list_snapshots(config, job_id)
    assert 1 <= len([s for s in snaps if s.kind == "checkpoint"]) <= 2  # num-retained: 2
    best = newest(snaps)
    assert best is not None and best.path.startswith(f"s3://{s3_server.bucket}/{prefix}chk-")
    meta = json.loads((await read_metadata(config, best.path))[1])
    assert meta["jobId"] == job_id and meta["checkpointId"] == best.checkpoint_id

    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("orders-2", conf, initial=best.path))
    new_job = running_job(kubectl, ns, "orders-2")
    assert new_job != job_id
    ann = wait_for(lambda: (a := get(kubectl, ns, "orders-2")["metadata"].get("annotations") or {})
                   .get("sim.flotilla.io/restored-from") == best.path and a, msg="restored-from annotation")
    assert ann["sim.flotilla.io/restored-offset"] == str(meta["offset"])
    # it goes on checkpointing with the next checkpoint id, under its own job id in the same bucket
    wait_for(lambda: any(k.endswith(f"/chk-{best.checkpoint_id + 1}/_metadata")
                         for k in keys(s3_server, f"flink/checkpoints/{new_job}/")), msg="next checkpoint id")


def test_savepoint_of_a_suspended_job_lands_in_the_savepoint_dir(kubectl: Kubectl, ns: str,
                                                                 s3_server: S3Server) -> None:  # noqa: F811
    conf = s3_server.flink_configuration("flink/checkpoints", savepoints="flink/savepoints")
    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("pay", conf, upgrade_mode="savepoint"))
    job_id = running_job(kubectl, ns, "pay")
    kubectl.run("patch", "flinkdeployment", "pay", "-n", ns, "--type=merge", "-p",
                '{"spec":{"job":{"state":"suspended"}}}')
    st = wait_for(lambda: (s := status_of(kubectl, ns, "pay")).get("lifecycleState") == "SUSPENDED" and s,
                  msg="SUSPENDED")
    location = st["jobStatus"]["savepointInfo"]["lastSavepoint"]["location"]
    assert location.startswith(f"s3://{s3_server.bucket}/flink/savepoints/savepoint-{job_id[:6]}-")
    assert f"{location.split('/', 3)[3]}/_metadata" in keys(s3_server, "flink/savepoints/")
    kubectl.run("patch", "flinkdeployment", "pay", "-n", ns, "--type=merge", "-p",
                '{"spec":{"job":{"state":"running"}}}')
    running_job(kubectl, ns, "pay")
    wait_for(lambda: get(kubectl, ns, "pay")["metadata"]["annotations"].get("sim.flotilla.io/restored-from")
             == location, msg="resumed from the s3 savepoint")


def test_restore_from_a_missing_s3_path_fails_the_job(kubectl: Kubectl, ns: str,
                                                      s3_server: S3Server) -> None:  # noqa: F811
    conf = s3_server.flink_configuration("flink/checkpoints")
    missing = f"s3://{s3_server.bucket}/flink/checkpoints/{'ab' * 16}/chk-9"
    kubectl.run("apply", "-n", ns, "-f", "-", input=deployment("lost", conf, initial=missing))
    st = wait_for(lambda: (s := status_of(kubectl, ns, "lost")).get("jobStatus", {}).get("state") == "FAILED" and s,
                  timeout=20, msg="FAILED")
    assert missing in st["error"] and "FileNotFoundException" in st["error"]
    assert s3_server.secret_key not in st["error"]


def test_unusable_storage_configuration_fails_the_job_naming_the_key(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-",
                input=deployment("typo", {"execution.checkpointing.dir": "flink/checkpoints"}))
    st = wait_for(lambda: (s := status_of(kubectl, ns, "typo")).get("jobStatus", {}).get("state") == "FAILED" and s,
                  timeout=20, msg="FAILED")
    assert "IllegalConfigurationException" in st["error"] and "execution.checkpointing.dir" in st["error"]
