"""Native restore (D20) on a real control plane: the restore and binding controllers, checkpoints in a real directory
(``file://``) or on a real S3-compatible server (moto's server mode).

The test plays the scheduler and the taint manager: it writes the FlinkDeployment's binding as they leave it after a
``Directly`` failover from member1 to member2, with the old job id preserved. The clusters have no member behind
them: what is checked is the Work the binding controller writes for member2, the binding's record, Events,
condition and metrics.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flotilla.api import labels as L
from flotilla.checkpoints.config import StorageConfig, storage_config
from flotilla.checkpoints.storage import write_snapshot_sync
from flotilla.client import Resource
from flotilla.failover.restore import (
    CONDITION_STATE_RESTORED,
    CREDENTIALS_SECRET_ANNOTATION,
    MAX_CHECKPOINT_AGE_ANNOTATION,
    NATIVE_ANNOTATION,
    RESTORE_ANNOTATION,
)
from flotilla.kube.resources import NAMESPACES, SECRETS
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.policy.naming import generate_work_name
from flotilla.propagation.works import RESOURCE_BINDINGS, WORKS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import (
    ControlPlane,
    Eventually,
    events_by_reason,
    get_or_none,
    plane_with_clusters,
)
from tests.support.s3 import S3Server, s3_server, s3_server_process  # noqa: F401

CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
FLINK = Resource("flink.apache.org", "v1beta1", "flinkdeployments", "FlinkDeployment", True)
CONTROLLERS = ["restore", "binding"]
JOB = "0123456789abcdef0123456789abcdef"
JOB2 = "fedcba9876543210fedcba9876543210"
LABEL = "failover.flink.io/job-id"
BINDING = "wc-flinkdeployment"
WORK = generate_work_name("FlinkDeployment", "wc", "default")

eventually = Eventually(timeout=20.0)


def now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def metadata_bytes(checkpoint_id: int, offset: int) -> bytes:
    return json.dumps({"format": "flotilla-sim-snapshot/v1", "kind": "checkpoint", "jobId": JOB,
                       "checkpointId": checkpoint_id, "offset": offset, "timestamp": int(time.time() * 1000),
                       "restoredFrom": None}).encode()


def write_checkpoint(config: StorageConfig, n: int) -> str:
    directory = f"{config.checkpoint_dir}/{JOB}/chk-{n}"
    write_snapshot_sync(config, directory, metadata_bytes(n, n * 100), markers=("shared", "taskowned"))
    return directory


@dataclass
class Env:
    plane: ControlPlane

    @property
    def cp(self) -> Any:
        return self.plane.client

    async def start(self, **options: Any) -> ControllerManager:
        opts = ControllerOptions(**{"restore_storage_timeout": 3.0, **options})
        manager = await ControllerManager(self.cp, opts, controllers=CONTROLLERS).start()
        self.plane.managers.append(manager)
        return manager

    async def failed_over(self, flink_configuration: dict[str, str], annotations: dict[str, str] | None = None,
                          fault_at: str | None = None, *, job: str = JOB, from_cluster: str = "member1",
                          to_cluster: str = "member2") -> None:
        """The template, and its binding as the scheduler and taint manager leave it after member1 failed."""
        await self.cp.create(FLINK, {
            "apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": "wc", "namespace": "default"},
            "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                     "flinkConfiguration": flink_configuration,
                     "jobManager": {"resource": {"memory": "1024m", "cpu": 1}},
                     "taskManager": {"resource": {"memory": "1024m", "cpu": 1}},
                     "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 1,
                             "upgradeMode": "stateless"}}})
        template = await self.cp.get(FLINK, "wc", "default")
        task = {"fromCluster": from_cluster, "purgeMode": "Directly", "reason": "TaintUntolerated",
                "producer": "TaintManager", "preservedLabelState": {LABEL: job},
                "clustersBeforeFailover": [from_cluster], "creationTimestamp": fault_at or now_stamp()}
        await self.cp.create(RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": BINDING, "namespace": "default", "finalizers": [L.BINDING_CONTROLLER_FINALIZER],
                         "labels": {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: "11111111-2222-4333-8444-555555555555"},
                         "annotations": annotations or {}},
            "spec": {"resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                  "namespace": "default", "name": "wc", "uid": template["metadata"]["uid"]},
                     "replicas": 1, "clusters": [{"name": to_cluster, "replicas": 1}],
                     "failover": {"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
                         {"aliasLabelName": LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}},
                     "gracefulEvictionTasks": [task]}})

    async def binding(self) -> dict[str, Any]:
        return dict(await self.cp.get(RESOURCE_BINDINGS, BINDING, "default"))

    async def record(self) -> dict[str, Any] | None:
        raw = ((await self.binding())["metadata"].get("annotations") or {}).get(RESTORE_ANNOTATION)
        return json.loads(raw) if raw else None

    async def condition(self) -> dict[str, Any] | None:
        for c in (await self.binding()).get("status", {}).get("conditions") or []:
            if c.get("type") == CONDITION_STATE_RESTORED:
                return dict(c)
        return None

    async def work(self, cluster: str = "member2") -> dict[str, Any] | None:
        return await get_or_none(self.cp, WORKS, WORK, f"karmada-es-{cluster}")

    async def job_spec(self) -> dict[str, Any] | None:
        work = await self.work()
        if work is None:
            return None
        return dict(work["spec"]["workload"]["manifests"][0]["spec"]["job"])

    async def messages(self, reason: str) -> list[str]:
        return [e.get("message") or "" for e in await events_by_reason(self.cp, reason)]

    async def outcome(self, outcome: str) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            record = await self.record()
            return record if record and record.get("outcome") == outcome else None

        return await eventually(check, what=f"a {outcome} record")


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with plane_with_clusters(tmp_path, ControlPlane, "member1", "member2") as plane:
        await plane.client.create(CRDS, flink_deployment_crd())
        for cluster in ("member1", "member2"):  # the execution namespaces (the cluster controller's, not run here)
            await plane.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": f"karmada-es-{cluster}"}})
        yield Env(plane)


def file_configuration(tmp_path: Path) -> dict[str, str]:
    return {"execution.checkpointing.dir": (tmp_path / "ck").as_uri(),
            "execution.checkpointing.savepoint-dir": (tmp_path / "sp").as_uri()}


async def test_d20_newest_complete_checkpoint_goes_into_the_new_work_and_half_written_is_skipped(
        env: Env, tmp_path: Path) -> None:
    conf = file_configuration(tmp_path)
    config = storage_config(conf)
    write_checkpoint(config, 3)
    newest = write_checkpoint(config, 4)
    half = tmp_path / "ck" / JOB / "chk-5"
    half.mkdir(parents=True)
    (half / "some-state-file").write_bytes(b"x")  # no _metadata: a checkpoint still being written
    manager = await env.start()
    await env.failed_over(conf)

    async def restored() -> dict[str, Any] | None:
        job = await env.job_spec()
        return job if job and job.get("initialSavepointPath") else None

    job = await eventually(restored, what="member2's Work with initialSavepointPath")
    assert job["initialSavepointPath"] == newest and job["upgradeMode"] == "savepoint"
    assert "savepointRedeployNonce" not in job, json.dumps(await env.record())  # the object did not exist in member2
    labels = (await env.work())["spec"]["workload"]["manifests"][0]["metadata"]["labels"]  # type: ignore[index]
    assert labels[LABEL] == JOB  # Karmada's label injection still happens
    record = await env.record()
    assert record is not None
    assert (record["outcome"], record["cluster"], record["fromCluster"], record["jobId"], record["path"],
            record["kind"], record["checkpointId"]) == ("Restored", "member2", "member1", JOB, newest, "checkpoint", 4)
    assert record["ageAtFault"] >= 0 and record["faultAt"] and record["completedAt"] and record["resolvedAt"]
    condition = await env.condition()
    assert condition is not None and condition["status"] == "True" and condition["reason"] == "StateRestored"
    messages = await eventually(lambda: env.messages("StateRestored"), what="a StateRestored Event")
    assert any(newest in m and "checkpoint 4" in m for m in messages), messages
    failover = manager.metrics.failover
    assert failover.state_restores.value("Restored") == 1
    assert failover.state_restore_age.count() == 1

    # the template changes: the restore stays in the Work (the template never overwrites it)
    template = await env.cp.get(FLINK, "wc", "default")
    template["spec"]["job"]["parallelism"] = 2
    await env.cp.update(FLINK, template)

    async def rerendered() -> dict[str, Any] | None:
        job = await env.job_spec()
        return job if job and job.get("parallelism") == 2 else None

    job = await eventually(rerendered, what="the Work following the template")
    assert job["initialSavepointPath"] == newest


async def test_d20_native_restore_off_by_policy_annotation_keeps_karmadas_labels_only(
        env: Env, tmp_path: Path) -> None:
    conf = file_configuration(tmp_path)
    write_checkpoint(storage_config(conf), 4)
    await env.start()
    await env.failed_over(conf, annotations={NATIVE_ANNOTATION: "false"})

    async def written() -> dict[str, Any] | None:
        return await env.work()

    work = await eventually(written, what="member2's Work")
    manifest = work["spec"]["workload"]["manifests"][0]
    assert manifest["metadata"]["labels"][LABEL] == JOB
    assert "initialSavepointPath" not in manifest["spec"]["job"]
    assert await env.record() is None


async def test_d20_checkpoint_older_than_max_checkpoint_age_is_refused(env: Env, tmp_path: Path) -> None:
    conf = file_configuration(tmp_path)
    directory = write_checkpoint(storage_config(conf), 4)
    old = time.time() - 3600
    os.utime(Path(directory.removeprefix("file://")) / "_metadata", (old, old))
    manager = await env.start(restore_missing="fresh")
    await env.failed_over(conf, annotations={MAX_CHECKPOINT_AGE_ANNOTATION: "10m"})
    record = await env.outcome("Fresh")
    assert record["failure"] == "CheckpointTooOld"

    async def fresh_work() -> dict[str, Any] | None:
        return await env.job_spec()

    job = await eventually(fresh_work, what="member2's Work (fresh)")
    assert "initialSavepointPath" not in job
    messages = await env.messages("StateRestoreFailed")
    assert any(MAX_CHECKPOINT_AGE_ANNOTATION in m and "empty state" in m for m in messages), messages
    assert manager.metrics.failover.state_restore_failures.value("CheckpointTooOld") >= 1
    assert manager.metrics.failover.state_restores.value("Fresh") == 1


async def test_d20_checkpoints_on_s3_are_restored(env: Env, s3_server: S3Server) -> None:  # noqa: F811
    conf = s3_server.flink_configuration("flink/checkpoints")
    config = storage_config(conf)
    write_checkpoint(config, 7)
    newest = write_checkpoint(config, 8)
    await env.start()
    await env.failed_over(conf)

    async def restored() -> dict[str, Any] | None:
        job = await env.job_spec()
        return job if job and job.get("initialSavepointPath") else None

    job = await eventually(restored, what="member2's Work with an s3:// initialSavepointPath")
    assert job["initialSavepointPath"] == newest and newest.startswith(f"s3://{s3_server.bucket}/")
    binding = json.dumps(await env.binding())
    assert s3_server.secret_key not in binding  # nothing of the credentials in the record or condition


async def test_d20_credentials_refused_is_a_failure_that_names_no_credential(
        env: Env, s3_server: S3Server) -> None:  # noqa: F811
    wrong = "wrong-secret-key-0123456789"
    conf = s3_server.flink_configuration("flink/checkpoints")
    write_checkpoint(storage_config(conf), 3)
    conf = {k: v for k, v in conf.items() if k not in ("s3.access-key", "s3.secret-key")}
    await env.cp.create(SECRETS, {"apiVersion": "v1", "kind": "Secret",
                                  "metadata": {"name": "s3-creds", "namespace": "default"},
                                  "data": {"s3.access-key": base64.b64encode(s3_server.access_key.encode()).decode(),
                                           "s3.secret-key": base64.b64encode(wrong.encode()).decode()}})
    manager = await env.start(restore_missing="fresh")
    await env.failed_over(conf, annotations={CREDENTIALS_SECRET_ANNOTATION: "s3-creds"})
    record = await env.outcome("Fresh")
    assert record["failure"] == "CredentialsRefused"
    messages = await env.messages("StateRestoreFailed")
    assert messages and all(wrong not in m and s3_server.access_key not in m for m in messages), messages
    assert wrong not in json.dumps(await env.binding())
    assert manager.metrics.failover.state_restore_failures.value("CredentialsRefused") >= 1


async def test_d20_storage_down_holds_the_work_then_starts_fresh_after_the_hold_timeout(
        env: Env, tmp_path: Path) -> None:
    server = S3Server.start(tmp_path)
    try:
        server.new_bucket()
        conf = server.flink_configuration("flink/checkpoints")
        write_checkpoint(storage_config(conf), 2)
    finally:
        server.stop()  # the storage is unreachable from now on
    manager = await env.start(restore_hold_timeout=6.0, restore_storage_timeout=1.0)
    await env.failed_over(conf)
    holding = await env.outcome("Holding")
    assert holding["failure"] == "StorageUnreachable" and holding["holdingSince"]
    assert await env.work() is None  # held: no Work for member2 while the storage cannot be read
    condition = await env.condition()
    assert condition is not None and (condition["status"], condition["reason"]) == ("False", "StorageUnreachable")
    messages = await env.messages("StateRestoreFailed")
    assert messages and "held" in messages[0] and server.secret_key not in messages[0]
    assert manager.metrics.failover.state_restore_failures.value("StorageUnreachable") >= 1

    fresh = await env.outcome("Fresh")
    assert fresh["failure"] == "StorageUnreachable"

    async def fresh_work() -> dict[str, Any] | None:
        return await env.job_spec()

    job = await eventually(fresh_work, what="member2's Work after the hold timed out")
    assert "initialSavepointPath" not in job
    timed_out = await env.messages("StateRestoreTimedOut")
    assert timed_out and "empty state" in timed_out[0]
    condition = await env.condition()
    assert condition is not None and condition["reason"] == "StateRestoreTimedOut"
    assert manager.metrics.failover.state_restores.value("Fresh") == 1


async def test_d20_d5_copy_that_failed_before_its_first_checkpoint_restarts_from_where_it_started(
        env: Env, tmp_path: Path) -> None:
    """member2's copy was restored from JOB's chk-4 and ran as JOB2, then failed before checkpointing: the failover
    back to member1 restores chk-4 again (JOB2 has nothing)."""
    conf = file_configuration(tmp_path)
    config = storage_config(conf)
    started_from = write_checkpoint(config, 4)
    previous = {"cluster": "member2", "fromCluster": "member1", "jobId": JOB, "outcome": "Restored",
                "reason": "newest complete checkpoint", "path": started_from, "kind": "checkpoint",
                "checkpointId": 4, "resolvedAt": "2026-01-01T00:00:00Z"}
    await env.start()
    await env.failed_over(conf, {RESTORE_ANNOTATION: json.dumps(previous)}, job=JOB2, from_cluster="member2",
                          to_cluster="member1")

    async def restored() -> dict[str, Any] | None:
        record = await env.record()
        return record if record and record.get("cluster") == "member1" else None

    record = await eventually(restored, what="the record for member1")
    assert (record["outcome"], record["jobId"], record["path"]) == ("Restored", JOB2, started_from)
    assert "started from" in record["reason"]

    async def work() -> dict[str, Any] | None:
        w = await env.work("member1")
        return w

    manifest = (await eventually(work, what="member1's Work"))["spec"]["workload"]["manifests"][0]
    assert manifest["spec"]["job"]["initialSavepointPath"] == started_from


RIC = {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
       "metadata": {"name": "ledger-restore"},
       "spec": {"target": {"apiVersion": "apps/v1", "kind": "Deployment"},
                "customizations": {"restoreState": {"luaScript": """
function RestoreState(desiredObj, restore)
  desiredObj.metadata.annotations = desiredObj.metadata.annotations or {}
  desiredObj.metadata.annotations["example.io/restore-from"] = restore.path
  return desiredObj
end
"""}}}}


async def test_d20_another_kind_restores_through_its_customizations_restore_state(env: Env, tmp_path: Path) -> None:
    """A Deployment has no RestoreState of its own; a ResourceInterpreterCustomization's restoreState script gives it
    one, and the job's storage is the controller-manager's --restore-default-checkpoint-dir."""
    from flotilla.kube.resources import DEPLOYMENTS
    from flotilla.propagation.works import RESOURCE_INTERPRETER_CUSTOMIZATIONS

    root = (tmp_path / "ck").as_uri()
    newest = write_checkpoint(storage_config({}, default_checkpoint_dir=root), 6)
    await env.cp.create(RESOURCE_INTERPRETER_CUSTOMIZATIONS, RIC)
    await env.start(restore_default_checkpoint_dir=root)
    template = await env.cp.create(DEPLOYMENTS, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ledger", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "ledger"}},
                 "template": {"metadata": {"labels": {"app": "ledger"}},
                              "spec": {"containers": [{"name": "l", "image": "ledger:1"}]}}}})
    task = {"fromCluster": "member1", "purgeMode": "Directly", "reason": "TaintUntolerated", "producer": "TaintManager",
            "preservedLabelState": {"example.io/ledger-id": JOB}, "clustersBeforeFailover": ["member1"],
            "creationTimestamp": now_stamp()}
    await env.cp.create(RESOURCE_BINDINGS, {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "ledger-deployment", "namespace": "default",
                     "finalizers": [L.BINDING_CONTROLLER_FINALIZER],
                     "labels": {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: "21111111-2222-4333-8444-555555555555"}},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                              "name": "ledger", "uid": template["metadata"]["uid"]},
                 "replicas": 1, "clusters": [{"name": "member2", "replicas": 1}],
                 "gracefulEvictionTasks": [task]}})
    work_name = generate_work_name("Deployment", "ledger", "default")

    async def restored() -> dict[str, Any] | None:
        work = await get_or_none(env.cp, WORKS, work_name, "karmada-es-member2")
        if work is None:
            return None
        manifest: dict[str, Any] = work["spec"]["workload"]["manifests"][0]
        return manifest if (manifest["metadata"].get("annotations") or {}).get("example.io/restore-from") else None

    manifest = await eventually(restored, what="member2's Work restored by the customization")
    assert manifest["metadata"]["annotations"]["example.io/restore-from"] == newest
    assert manifest["metadata"]["labels"]["example.io/ledger-id"] == JOB


async def test_d20_lookup_waits_until_the_old_copys_work_is_gone(env: Env, tmp_path: Path) -> None:
    """The old copy's Work (purged Directly) is still terminating: its job may still checkpoint, so nothing is looked
    up yet; a checkpoint it completes meanwhile is the one restored once the Work is gone."""
    conf = file_configuration(tmp_path)
    config = storage_config(conf)
    write_checkpoint(config, 3)
    old_work = await env.cp.create(WORKS, {
        "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
        "metadata": {"name": WORK, "namespace": "karmada-es-member1", "finalizers": ["example.io/hold"],
                     "labels": {L.RESOURCE_BINDING_PERMANENT_ID_LABEL: "11111111-2222-4333-8444-555555555555"},
                     "annotations": {L.RESOURCE_BINDING_NAMESPACE_ANNOTATION: "default",
                                     L.RESOURCE_BINDING_NAME_ANNOTATION: BINDING}},
        "spec": {"workload": {"manifests": []}}})
    await env.start()
    await env.failed_over(conf)

    async def terminating() -> bool:
        work = await env.work("member1")
        return bool(work and work["metadata"].get("deletionTimestamp"))

    await eventually(terminating, what="the old Work deleted by the binding controller (held by a finalizer)")
    await asyncio.sleep(1.5)
    assert await env.record() is None  # nothing looked up while the old copy may still run
    last = write_checkpoint(config, 4)  # the old job's last checkpoint, completed while it was being stopped
    work = await env.work("member1")
    assert work is not None and work["metadata"]["uid"] == old_work["metadata"]["uid"]
    work["metadata"]["finalizers"] = []
    await env.cp.update(WORKS, work)
    record = await env.outcome("Restored")
    assert record["path"] == last and record["checkpointId"] == 4
