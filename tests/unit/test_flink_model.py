"""The pure FlinkDeployment model: transitions, status shapes, job ids, checkpoints, restores, error shapes."""

from __future__ import annotations

import copy
import json
import random
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.member.checkpoints import CheckpointStore
from flotilla.member.flink_model import (
    ANN_LAST_CHECKPOINT,
    ANN_RECORDS_PROCESSED,
    ANN_RESTORED_FROM,
    ANN_RESTORED_OFFSET,
    LAST_STATE_DUMMY_SP_PATH,
    FlinkJobModel,
    FlinkModelConfig,
    RunningChanged,
    WriteCheckpoint,
    WriteSavepoint,
    conf_get,
    image_pull_error,
    operator_error,
    parse_duration,
    parse_memory,
)

T0 = 1_734_462_400.0
HEX32 = re.compile(r"^[0-9a-f]{32}$")


def fdep(name: str = "orders", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "image": "flink:1.20",
        "flinkVersion": "v1_20",
        "serviceAccount": "flink",
        "jobManager": {"resource": {"memory": "2048m", "cpu": 1}},
        "taskManager": {"resource": {"memory": "2048m", "cpu": 1}},
        "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 2,
                "upgradeMode": "last-state"},
    }
    for k, v in spec.items():
        if k == "job":
            base["job"].update(v)
        else:
            base[k] = v
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": name, "namespace": "streaming", "uid": f"uid-{name}", "generation": 1},
            "spec": base}


class Driver:
    """Runs one model on a fake clock, carrying out its effects on a real store."""

    def __init__(self, store: CheckpointStore, obj: dict[str, Any], cfg: FlinkModelConfig | None = None,
                 t0: float = T0, seed: int = 1) -> None:
        self.store = store
        self.obj = copy.deepcopy(obj)
        self.t = t0
        self.running: list[RunningChanged] = []
        self.savepoints: list[WriteSavepoint] = []
        self.trace: list[tuple[str, str, str | None]] = []
        self.model = FlinkJobModel(self.obj, cfg or FlinkModelConfig(), store, self.t, rng=random.Random(seed))
        self._record()

    @property
    def status(self) -> dict[str, Any]:
        return self.model.status()

    def _record(self) -> None:
        s = self.model.status()
        row = (s["jobManagerDeploymentStatus"], s["lifecycleState"], s["jobStatus"].get("state"))
        if not self.trace or self.trace[-1] != row:
            self.trace.append(row)

    def apply(self, effects: list[Any]) -> None:
        for e in effects:
            if isinstance(e, WriteCheckpoint):
                snap = self.store.write_checkpoint(e.job_id, e.checkpoint_id, e.offset, e.timestamp,
                                                   retained=e.retained, restored_from=e.restored_from)
                self.model.checkpoint_completed(snap)
            elif isinstance(e, WriteSavepoint):
                self.store.write_savepoint(e.job_id, e.checkpoint_id, e.offset, e.timestamp, path=e.path,
                                           restored_from=e.restored_from)
                self.savepoints.append(e)
            elif isinstance(e, RunningChanged):
                self.running.append(e)
        self._record()

    def advance(self, seconds: float) -> None:
        end = self.t + seconds
        while True:
            wake = self.model.next_wakeup()
            if wake is None or wake > end:
                break
            self.t = max(self.t, wake)
            self.apply(self.model.tick(self.t))
        self.t = end
        self.apply(self.model.tick(self.t))

    def until(self, pred: Callable[[dict[str, Any]], bool], limit: float = 60.0) -> None:
        end = self.t + limit
        while not pred(self.status):
            wake = self.model.next_wakeup()
            assert wake is not None and wake <= end, f"stuck in {self.trace[-1]}"
            self.t = max(self.t, wake)
            self.apply(self.model.tick(self.t))

    def update(self, mutate: Callable[[dict[str, Any]], None]) -> None:
        mutate(self.obj["spec"])
        self.obj["metadata"]["generation"] += 1
        self.apply(self.model.observe(copy.deepcopy(self.obj), self.t))

    def offset(self) -> int:
        return self.model.offset_at(self.t)


def running(s: dict[str, Any]) -> bool:
    return s["jobStatus"].get("state") == "RUNNING"


@pytest.fixture
def store(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore(tmp_path / "ckpt")


# ------------------------------------------------------------------------------------------------ first deploy
def test_first_deploy_walks_the_operators_states(store: CheckpointStore) -> None:
    d = Driver(store, fdep())
    assert d.status["lifecycleState"] == "CREATED" and d.status["jobManagerDeploymentStatus"] == "MISSING"
    d.until(running)
    assert d.trace == [
        ("MISSING", "CREATED", None),
        ("DEPLOYING", "DEPLOYED", "RECONCILING"),
        ("DEPLOYED_NOT_READY", "DEPLOYED", "RECONCILING"),
        ("READY", "DEPLOYED", "CREATED"),
        ("READY", "STABLE", "RUNNING"),
    ]
    assert [r.running for r in d.running] == [True]


def test_running_status_shape(store: CheckpointStore) -> None:
    d = Driver(store, fdep())
    d.until(running)
    d.advance(2.5)
    s = d.status
    assert set(s) == {"jobStatus", "clusterInfo", "jobManagerDeploymentStatus", "reconciliationStatus",
                      "lifecycleState", "observedGeneration", "taskManager"}
    job = s["jobStatus"]
    assert HEX32.match(job["jobId"]) and job["jobName"] == "orders" and job["state"] == "RUNNING"
    for key in ("startTime", "updateTime"):
        assert isinstance(job[key], str) and job[key].isdigit() and len(job[key]) == 13  # epoch millis
    assert int(job["startTime"]) <= int(job["updateTime"])
    assert "upgradeSavepointPath" not in job
    lc = job["checkpointInfo"]["lastCheckpoint"]
    assert lc["triggerType"] == "PERIODIC" and lc["formatType"] == "FULL" and isinstance(lc["timeStamp"], int)
    assert job["checkpointInfo"]["lastPeriodicCheckpointTimestamp"] == lc["timeStamp"]
    assert job["savepointInfo"] == {"savepointHistory": [], "lastPeriodicSavepointTimestamp": 0}
    recon = s["reconciliationStatus"]
    assert recon["state"] == "DEPLOYED" and isinstance(recon["reconciliationTimestamp"], int)
    assert recon["lastStableSpec"] == recon["lastReconciledSpec"]
    reconciled = json.loads(recon["lastReconciledSpec"])
    assert reconciled["resource_metadata"] == {"apiVersion": "flink.apache.org/v1beta1", "firstDeployment": True}
    assert reconciled["spec"]["job"]["state"] == "running" and reconciled["spec"]["image"] == "flink:1.20"
    info = s["clusterInfo"]
    assert info["flink-version"] == "1.20.1" and info["total-cpu"] == "3.0"
    assert info["total-memory"] == str(3 * 2048 * 1024 * 1024)
    assert all(isinstance(v, str) for v in info.values())
    assert s["taskManager"] == {"labelSelector": "component=taskmanager,app=orders", "replicas": 2}
    assert s["observedGeneration"] == 1 and "error" not in s


def test_job_ids_are_random_per_fresh_deploy(store: CheckpointStore) -> None:
    a, b = Driver(store, fdep("a"), seed=1), Driver(store, fdep("b"), seed=2)
    a.until(running)
    b.until(running)
    assert HEX32.match(a.model.job_id or "") and a.model.job_id != b.model.job_id


@pytest.mark.parametrize("conf", [
    {"$internal.pipeline.job-id": "00000000000000000000000000000abc"},
    {"$internal": {"pipeline": {"job-id": "00000000000000000000000000000abc"}}},
])
def test_pinned_job_id(store: CheckpointStore, conf: dict[str, Any]) -> None:
    d = Driver(store, fdep(flinkConfiguration=conf))
    d.until(running)
    assert d.status["jobStatus"]["jobId"] == "00000000000000000000000000000abc"


def test_invalid_pinned_job_id_fails_before_first_deployment(store: CheckpointStore) -> None:
    d = Driver(store, fdep(flinkConfiguration={"$internal.pipeline.job-id": "nope"}))
    d.advance(5)
    s = d.status
    assert s["lifecycleState"] == "FAILED" and s["jobManagerDeploymentStatus"] == "MISSING"
    err = json.loads(s["error"])
    assert err["type"] == "java.lang.IllegalArgumentException" and '"nope"' in err["message"]
    d.update(lambda spec: spec["flinkConfiguration"].update({"$internal.pipeline.job-id": "f" * 32}))
    d.until(running)
    assert d.status["jobStatus"]["jobId"] == "f" * 32 and "error" not in d.status


# ------------------------------------------------------------------------------------------------ checkpoints
def test_checkpoints_every_interval_with_offsets(store: CheckpointStore) -> None:
    cfg = FlinkModelConfig(records_per_second=50)
    d = Driver(store, fdep(flinkConfiguration={"execution.checkpointing.interval": "1s",
                                               "state.checkpoints.num-retained": "2"}), cfg)
    d.until(running)
    job = d.model.job_id or ""
    d.advance(5.0)
    chks = store.checkpoints(job)
    assert [c.checkpoint_id for c in chks] == [4, 5]  # num-retained 2
    assert [c.offset for c in chks] == [200, 250]  # 50 records/s, every second
    start = d.model.runs[0].start
    assert [c.timestamp for c in chks] == [round((start + 4) * 1000), round((start + 5) * 1000)]
    ann = d.model.sim_annotations(d.t)
    assert ann[ANN_RECORDS_PROCESSED] == "250" and ann[ANN_RESTORED_FROM] == "none"
    assert ann[ANN_RESTORED_OFFSET] == "0" and ann[ANN_LAST_CHECKPOINT] == chks[-1].path


def test_speed_accelerates_rate_and_interval(store: CheckpointStore) -> None:
    cfg = FlinkModelConfig(records_per_second=10, checkpoint_interval=2.0, speed=10.0)
    d = Driver(store, fdep(), cfg)
    d.until(running)
    d.advance(1.0)  # 10 simulated seconds
    chks = store.checkpoints(d.model.job_id or "")
    assert len(chks) == 1 and chks[0].checkpoint_id == 5 and chks[0].offset == 100


def test_checkpointing_disabled_with_zero_interval(store: CheckpointStore) -> None:
    d = Driver(store, fdep(flinkConfiguration={"execution.checkpointing.interval": "0"}))
    d.until(running)
    d.advance(10)
    assert store.checkpoints(d.model.job_id or "") == [] and d.model.next_wakeup() is None
    assert d.offset() > 0


def test_records_per_second_annotation_overrides(store: CheckpointStore) -> None:
    obj = fdep()
    obj["metadata"]["annotations"] = {"sim.flotilla.io/records-per-second": "7"}
    d = Driver(store, obj)
    d.until(running)
    d.advance(2.0)
    assert d.offset() == 14


# ------------------------------------------------------------------------------------------------ restores
def test_initial_savepoint_path_resumes_offset_and_checkpoint_ids(store: CheckpointStore) -> None:
    old = "a" * 32
    snap = store.write_checkpoint(old, 7, 1400, 1000)
    d = Driver(store, fdep(job={"initialSavepointPath": snap.path, "upgradeMode": "savepoint"}))
    d.until(running)
    assert d.model.job_id != old  # a fresh deployment gets a new job id
    ann = d.model.sim_annotations(d.t)
    assert ann[ANN_RESTORED_FROM] == snap.path and ann[ANN_RESTORED_OFFSET] == "1400"
    d.advance(2.0)
    chks = store.checkpoints(d.model.job_id or "")
    assert [c.checkpoint_id for c in chks] == [8] and chks[0].offset == 1400 + 200
    assert chks[0].restored_from == snap.path


def test_missing_initial_savepoint_fails_the_job(store: CheckpointStore) -> None:
    path = str(store.root / ("b" * 32) / "chk-3")
    d = Driver(store, fdep(job={"initialSavepointPath": path}))
    d.advance(5)
    s = d.status
    assert s["jobStatus"]["state"] == "FAILED" and s["lifecycleState"] == "FAILED"
    assert s["jobManagerDeploymentStatus"] == "READY"
    err = json.loads(s["error"])
    assert err["type"] == "org.apache.flink.runtime.client.JobInitializationException"
    assert err["message"] == "Could not start the JobMaster."
    assert err["throwableList"] == [{
        "type": "java.io.FileNotFoundException",
        "message": f"Cannot find checkpoint or savepoint file/directory '{path}' on file system 'file'.",
        "additionalMetadata": {},
    }]
    assert d.running == [] and store.job_ids() == []


# ------------------------------------------------------------------------------------------------ broken images
def test_broken_image_error_shape_and_recovery(store: CheckpointStore) -> None:
    d = Driver(store, fdep(image="fake/flink:1.20"))
    d.advance(5)
    s = d.status
    assert s["jobManagerDeploymentStatus"] == "ERROR" and s["jobStatus"]["state"] == "RECONCILING"
    assert s["lifecycleState"] == "DEPLOYED"  # the operator's lifecycle for a DeploymentFailedException
    assert s["error"] == image_pull_error("fake/flink:1.20")
    err = json.loads(s["error"])
    assert err["type"] == "org.apache.flink.kubernetes.operator.exception.DeploymentFailedException"
    assert err["additionalMetadata"] == {"reason": "ImagePullBackOff"} and err["throwableList"] == []
    assert err["message"].startswith('[flink-main-container] Back-off pulling image "fake/flink:1.20"')
    for needle in ("ErrImagePull", "ImagePullBackOff"):  # Karmada's health Lua allowlist
        assert needle in s["error"]
    assert d.running == []
    d.update(lambda spec: spec.update(image="flink:1.20"))
    d.until(running)
    assert "error" not in d.status and d.status["lifecycleState"] == "STABLE"


def test_custom_broken_image_predicate(store: CheckpointStore) -> None:
    cfg = FlinkModelConfig(broken_image=lambda image: image.endswith(":broken"))
    d = Driver(store, fdep(image="flink:broken"), cfg)
    d.advance(5)
    assert d.status["jobManagerDeploymentStatus"] == "ERROR"


# ------------------------------------------------------------------------------------------------ spec changes
def test_suspend_with_savepoint_and_resume(store: CheckpointStore) -> None:
    d = Driver(store, fdep(job={"upgradeMode": "savepoint"}))
    d.until(running)
    first_job = d.model.job_id
    d.advance(3.3)
    at_suspend = d.offset()
    d.update(lambda spec: spec["job"].update(state="suspended"))
    s = d.status
    assert s["lifecycleState"] == "SUSPENDED" and s["jobManagerDeploymentStatus"] == "MISSING"
    assert s["jobStatus"]["state"] == "FINISHED" and s["observedGeneration"] == 2
    assert s["taskManager"] == {"labelSelector": "", "replicas": 0}
    sp_path = s["jobStatus"]["upgradeSavepointPath"]
    last = s["jobStatus"]["savepointInfo"]["lastSavepoint"]
    assert last["location"] == sp_path and last["triggerType"] == "UPGRADE" and last["formatType"] == "CANONICAL"
    assert s["jobStatus"]["savepointInfo"]["savepointHistory"] == [last]
    assert store.resolve(sp_path).offset == at_suspend
    assert [r.running for r in d.running] == [True, False]
    d.advance(10)
    assert store.latest_checkpoint(first_job or "").checkpoint_id == 1  # type: ignore[union-attr]
    d.update(lambda spec: spec["job"].update(state="running"))
    d.until(running)
    assert d.model.job_id != first_job  # a savepoint redeploy is a fresh job id
    assert d.model.sim_annotations(d.t)[ANN_RESTORED_FROM] == sp_path
    assert d.model.runs[-1].base_offset == at_suspend  # nothing lost, nothing processed twice


def test_last_state_image_upgrade_keeps_job_id(store: CheckpointStore) -> None:
    cfg = FlinkModelConfig(records_per_second=100, checkpoint_interval=1.0)
    d = Driver(store, fdep(job={"upgradeMode": "last-state"}), cfg)
    d.until(running)
    job = d.model.job_id
    d.advance(3.5)
    at_upgrade = d.offset()
    d.update(lambda spec: spec.update(image="flink:1.20.1"))
    assert d.status["lifecycleState"] == "UPGRADING"
    assert d.status["reconciliationStatus"]["state"] == "UPGRADING"
    d.until(running)
    s = d.status
    assert s["jobStatus"]["jobId"] == job
    assert s["jobStatus"]["upgradeSavepointPath"] == LAST_STATE_DUMMY_SP_PATH
    assert s["observedGeneration"] == 2 and s["lifecycleState"] == "STABLE"
    restored = d.model.runs[-1]
    assert restored.restored_from == str(store.root / job / "chk-3")  # type: ignore[operator]
    assert 0 <= at_upgrade - restored.base_offset <= 100  # at most one interval reprocessed
    d.advance(1.0)
    assert store.latest_checkpoint(job or "").checkpoint_id == 4  # type: ignore[union-attr]


def test_stateless_upgrade_starts_empty_with_new_job_id(store: CheckpointStore) -> None:
    d = Driver(store, fdep(job={"upgradeMode": "stateless"}))
    d.until(running)
    job = d.model.job_id
    d.advance(3)
    d.update(lambda spec: spec["job"].update(parallelism=4))
    d.until(running)
    assert d.model.job_id != job and d.model.runs[-1].base_offset == 0
    assert d.status["taskManager"]["replicas"] == 4


def test_ignored_spec_change_does_not_redeploy(store: CheckpointStore) -> None:
    d = Driver(store, fdep())
    d.until(running)
    run = d.model.run
    d.update(lambda spec: spec["job"].update(upgradeMode="savepoint"))
    assert d.model.run is run and d.model.running
    s = d.status
    assert s["observedGeneration"] == 2 and s["lifecycleState"] == "STABLE"
    assert json.loads(s["reconciliationStatus"]["lastReconciledSpec"])["spec"]["job"]["upgradeMode"] == "savepoint"


def test_created_suspended_deploys_nothing_until_resumed(store: CheckpointStore) -> None:
    snap = store.write_checkpoint("c" * 32, 2, 77, 1000)
    d = Driver(store, fdep(job={"state": "suspended", "initialSavepointPath": snap.path}))
    d.advance(3)
    assert d.status["lifecycleState"] == "SUSPENDED" and d.status["jobManagerDeploymentStatus"] == "MISSING"
    assert d.running == []
    d.update(lambda spec: spec["job"].update(state="running"))
    d.until(running)
    assert d.model.runs[-1].base_offset == 77  # the first deployment honours initialSavepointPath


def test_session_cluster_has_no_job(store: CheckpointStore) -> None:
    obj = fdep()
    del obj["spec"]["job"]
    d = Driver(store, obj)
    d.advance(3)
    s = d.status
    assert s["jobManagerDeploymentStatus"] == "READY" and s["lifecycleState"] == "STABLE"
    assert "state" not in s["jobStatus"] and "jobId" not in s["jobStatus"]


# ------------------------------------------------------------------------------------------------ kill / restore
def test_delete_stops_the_job(store: CheckpointStore) -> None:
    d = Driver(store, fdep())
    d.until(running)
    d.advance(4.1)
    job = d.model.job_id or ""
    d.apply(d.model.stop(d.t, deleted=True))
    assert d.status["lifecycleState"] == "DELETING"
    assert [r.running for r in d.running] == [True, False] and d.running[-1].at == d.t
    frozen = d.model.offset_at(d.t)
    d.advance(10)
    assert d.model.offset_at(d.t) == frozen and d.model.next_wakeup() is None
    assert store.latest_checkpoint(job).checkpoint_id == 2  # type: ignore[union-attr]


def test_stop_completes_checkpoints_that_were_due(store: CheckpointStore) -> None:
    d = Driver(store, fdep())
    d.until(running)
    start = d.model.runs[0].start
    # the loop missed its wake-up: the checkpoint due at start+2 s has not been written when the kill comes
    d.apply(d.model.stop(start + 2.5, deleted=False))
    snap = store.latest_checkpoint(d.model.job_id or "")
    assert snap is not None and snap.checkpoint_id == 1 and snap.offset == 200


@settings(max_examples=40, deadline=None)
@given(kill_after=st.floats(min_value=0.0, max_value=20.0), rate=st.sampled_from([1, 7, 100, 1000]),
       interval=st.sampled_from([0.5, 1.0, 2.0, 3.0]), hops=st.integers(min_value=1, max_value=3))
def test_kill_and_restore_elsewhere_never_loses_records(kill_after: float, rate: int, interval: float,
                                                        hops: int) -> None:
    """Killed at any moment and re-created from the newest checkpoint (hops times): every record is processed,
    and at most one checkpoint interval's worth twice."""
    with tempfile.TemporaryDirectory() as tmp:
        store = CheckpointStore(tmp)
        cfg = FlinkModelConfig(records_per_second=rate, checkpoint_interval=interval)
        d = Driver(store, fdep("j0"), cfg)
        d.until(running)
        for hop in range(1, hops + 1):
            d.advance(kill_after / hops)
            killed_at = d.model.offset_at(d.t)
            d.apply(d.model.stop(d.t, deleted=True))
            newest = store.latest_checkpoint(d.model.job_id or "")
            path = newest.path if newest else None
            restored_offset = newest.offset if newest else 0
            assert restored_offset <= killed_at  # nothing skipped
            assert killed_at - restored_offset <= rate * interval  # at most one interval reprocessed
            previous = d.model.runs[-1].restored_from
            job: dict[str, Any] = {"upgradeMode": "savepoint"}
            if path or previous:
                job["initialSavepointPath"] = path or previous
            d = Driver(store, fdep(f"j{hop}", job=job), cfg, t0=d.t, seed=hop + 1)
            d.until(running)
            assert d.model.runs[-1].base_offset == restored_offset


def test_recovers_from_status_after_a_simulator_restart(store: CheckpointStore) -> None:
    d = Driver(store, fdep())
    d.until(running)
    d.advance(4.5)
    obj = copy.deepcopy(d.obj)
    obj["status"] = d.status
    obj["metadata"]["annotations"] = d.model.sim_annotations(d.t)
    job = d.model.job_id
    again = Driver(store, obj, t0=d.t + 1)
    again.until(running)
    assert again.model.job_id == job  # HA: the same job, restored from its newest checkpoint
    assert again.model.runs[-1].restored_from == str(store.root / job / "chk-2")  # type: ignore[operator]


# ------------------------------------------------------------------------------------------------ helpers
def test_operator_error_is_compact_jackson_json() -> None:
    text = operator_error("a.B", "boom", reason="R", causes=[("c.D", "why")])
    assert text == ('{"type":"a.B","message":"boom","additionalMetadata":{"reason":"R"},'
                    '"throwableList":[{"type":"c.D","message":"why","additionalMetadata":{}}]}')


@pytest.mark.parametrize(("raw", "secs"), [
    ("2s", 2.0), ("2 s", 2.0), ("500ms", 0.5), ("1 min", 60.0), ("1m", 60.0), ("2000", 2.0), (1500, 1.5),
    ("PT2S", 2.0), ("PT1M30S", 90.0), ("3 seconds", 3.0), ("1h", 3600.0), ("bogus", None), ("5 parsecs", None),
])
def test_parse_duration(raw: Any, secs: float | None) -> None:
    assert parse_duration(raw) == secs


def test_parse_memory_and_conf_get() -> None:
    assert parse_memory("2048m") == 2048 * 1024**2 and parse_memory("2g") == 2 * 1024**3
    assert parse_memory("2Gi") == 2 * 1024**3 and parse_memory("junk", 5) == 5
    conf = {"execution.checkpointing.interval": "5s", "state": {"checkpoints": {"num-retained": 3}}}
    assert conf_get(conf, "execution.checkpointing.interval") == "5s"
    assert conf_get(conf, "state.checkpoints.num-retained") == 3
    assert conf_get(conf, "state.checkpoints") is None and conf_get(None, "x") is None


def test_crash_loop_and_recovery_under_ha(store: CheckpointStore) -> None:
    cfg = FlinkModelConfig(records_per_second=100, checkpoint_interval=1.0)
    d = Driver(store, fdep(), cfg)
    d.until(running)
    job = d.model.job_id
    d.advance(2.5)
    crashed_at = d.offset()
    d.apply(d.model.set_crashed(True, d.t))
    s = d.status
    assert s["jobManagerDeploymentStatus"] == "ERROR" and s["jobStatus"]["state"] == "RECONCILING"
    err = json.loads(s["error"])
    assert err["additionalMetadata"] == {"reason": "CrashLoopBackOff"} and "CrashLoopBackOff" in s["error"]
    assert [r.running for r in d.running] == [True, False]
    d.advance(5)
    assert store.latest_checkpoint(job or "").checkpoint_id == 2  # type: ignore[union-attr]
    d.apply(d.model.set_crashed(False, d.t))
    d.until(running)
    assert d.model.job_id == job and "error" not in d.status
    assert d.model.runs[-1].base_offset == 200 and crashed_at - 200 <= 100
    d.advance(1.0)
    assert store.latest_checkpoint(job or "").checkpoint_id == 3  # type: ignore[union-attr]


def test_crash_before_the_job_runs_waits_for_the_switch(store: CheckpointStore) -> None:
    d = Driver(store, fdep())
    d.apply(d.model.set_crashed(True, d.t))
    d.advance(5)
    assert d.status["jobManagerDeploymentStatus"] == "ERROR" and d.running == []
    d.apply(d.model.set_crashed(False, d.t))
    d.until(running)
    assert d.model.runs[-1].base_offset == 0


def test_settings_from_member_config(tmp_path: Path) -> None:
    from flotilla.member.flink import FlinkSimSettings
    from flotilla.member.simulated import MemberConfig

    cfg = MemberConfig(name="m", data_dir=tmp_path, ready_delay=1.0, broken_image_pattern=r"^bad/",
                       options={"flink_records_per_second": "42", "flink_speed": "5", "savepoint_rule": "true",
                                "savepoint_rule_label": "x.io/job", "flink_checkpoint_interval": "0.5",
                                "flink_finalizer": "false"})
    s = FlinkSimSettings.from_member_config(cfg)
    assert s.checkpoint_dir == tmp_path / "checkpoints"
    assert s.model.records_per_second == 42 and s.model.speed == 5 and s.model.checkpoint_interval == 0.5
    assert s.savepoint_rule and s.savepoint_rule_label == "x.io/job" and not s.finalizer
    assert s.model.image_is_broken("bad/flink:1") and not s.model.image_is_broken("fake/flink:1")
    assert s.model.deploy_delay + s.model.ready_delay + s.model.job_start_delay == pytest.approx(1.0)
    defaults = FlinkSimSettings.from_member_config(MemberConfig(name="n", data_dir=tmp_path))
    assert not defaults.savepoint_rule and defaults.finalizer and defaults.model.image_is_broken("fake/x")


def test_savepoint_rule_admission(store: CheckpointStore) -> None:
    from flotilla.apiserver.admission import Admission
    from flotilla.member.savepoint_rule import APPLIED_ANNOTATION, DEFAULT_LABEL, install_savepoint_rule

    admission = Admission()
    install_savepoint_rule(admission, store)
    job = "d" * 32
    store.write_checkpoint(job, 4, 40, 1000)
    obj = fdep()
    obj["metadata"]["labels"] = {DEFAULT_LABEL: job}
    result = admission.admit("flink.apache.org", "FlinkDeployment", obj, None, "CREATE")
    assert result.causes == [] and result.warnings == []
    assert obj["spec"]["job"]["initialSavepointPath"] == str(store.root / job / "chk-4")
    assert obj["spec"]["job"]["upgradeMode"] == "savepoint"
    assert obj["metadata"]["annotations"][APPLIED_ANNOTATION] == str(store.root / job / "chk-4")
    # a savepoint newer than the newest checkpoint wins
    sp = store.write_savepoint(job, 5, 45, 1100)
    obj2 = fdep()
    obj2["metadata"]["labels"] = {DEFAULT_LABEL: job}
    admission.admit("flink.apache.org", "FlinkDeployment", obj2, None, "CREATE")
    assert obj2["spec"]["job"]["initialSavepointPath"] == sp.path
    # not a job id: unchanged, with a warning
    bad = fdep()
    bad["metadata"]["labels"] = {DEFAULT_LABEL: "not-a-job"}
    result = admission.admit("flink.apache.org", "FlinkDeployment", bad, None, "CREATE")
    assert "initialSavepointPath" not in bad["spec"]["job"] and "not a Flink job id" in result.warnings[0]
    # updates are left alone
    upd = fdep()
    upd["metadata"]["labels"] = {DEFAULT_LABEL: job}
    result = admission.admit("flink.apache.org", "FlinkDeployment", upd, fdep(), "UPDATE")
    assert "initialSavepointPath" not in upd["spec"]["job"] and result.warnings == []
