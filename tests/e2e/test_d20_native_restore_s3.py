"""D20 (native restore) end to end on a real S3-compatible server (moto's server mode, started here with IAM authentication).

``flotilla apiserver``, ``flotilla member --count 2`` (nothing installed in them: the member-side savepoint rule is
off) and ``flotilla controller-manager --restore-hold-timeout 15s``. The FlinkDeployment's ``flinkConfiguration``
names an ``s3://`` checkpoint directory on the server, so the simulated job writes its checkpoints there, in Flink's
layout, through fsspec/s3fs, and the control plane reads them back the same way.

1. A NoExecute taint moves the job: the new copy's ``initialSavepointPath`` is the newest complete ``chk-N`` of
   the old job id in the bucket (a half-written one beside it is skipped), and the job resumes at its offset.
2. With the server down, a second failover holds the new copy's Work (a Warning ``StateRestoreFailed`` Event,
   ``StorageUnreachable``, the condition ``StateRestored=False``, no copy anywhere), then after the hold timeout
   starts the job from empty state and says so (``StateRestoreTimedOut``).
3. ``flotilla get failovers`` lists both, the first with its restored path and state gap, the second ``Fresh``.

A taint on a Ready member would be a planned move (D21: a savepoint first); the policy turns that off, as this
test is about the unplanned path.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.pipeline import (
    NS,
    STARTUP_TIMEOUT,
    Pipeline,
    docs,
    flink_deployment,
    policy,
    start_control_plane,
)
from tests.support.s3 import S3Server

pytestmark = pytest.mark.kubectl

MEMBERS = ("member1", "member2")
NAME = "wc-s3"
BINDING = f"{NAME}-flinkdeployment"
JOB_LABEL = "failover.flink.io/job-id"
TAINT = {"key": "example.io/maintenance", "effect": "NoExecute"}
HOLD = 15.0
TIMEOUT = 60.0


class Env(Pipeline):
    s3: S3Server

    def flink(self, member: str) -> dict[str, Any] | None:
        return self.member_get(member, "flinkdeployments", NAME)

    def job(self, member: str) -> dict[str, Any]:
        obj = self.flink(member)
        return ((obj or {}).get("status") or {}).get("jobStatus") or {}

    def checkpoints(self, job_id: str) -> list[int]:
        """The ids of the complete checkpoints of ``job_id`` in the bucket (a ``chk-N`` with its ``_metadata``)."""
        listing = self.s3.client().list_objects_v2(Bucket=self.s3.bucket, Prefix=f"flink/checkpoints/{job_id}/")
        out = set()
        for item in listing.get("Contents") or []:
            parts = item["Key"].split("/")
            if len(parts) == 5 and parts[3].startswith("chk-") and parts[4] == "_metadata":
                out.add(int(parts[3][4:]))
        return sorted(out)

    def record(self) -> dict[str, Any]:
        raw = (self.cp_get("rb", BINDING)["metadata"].get("annotations") or {}).get("failover.flotilla.io/restore")
        assert raw, "no restore record on the binding yet"
        out: dict[str, Any] = json.loads(raw)
        return out

    def events(self, reason: str) -> list[str]:
        items = json.loads(self.cp.run("get", "events", "-n", NS, "-o", "json").stdout)["items"]
        return [e.get("message") or "" for e in items
                if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == BINDING]

    def condition(self) -> dict[str, Any]:
        for c in (self.cp_get("rb", BINDING).get("status") or {}).get("conditions") or []:
            if c.get("type") == "StateRestored":
                return dict(c)
        raise AssertionError("no StateRestored condition on the binding")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("restore-s3")
    with contextlib.ExitStack() as stack:
        s3 = S3Server.start(root)
        stack.callback(s3.stop)
        s3.new_bucket()
        (root / "stack").mkdir()
        p = start_control_plane(stack, root / "stack", MEMBERS, Env)
        p.s3 = s3
        p.start_members("members", "--count", "2", extra=[
            "--sim-option", "flink_checkpoint_interval=1", "--sim-option", "flink_progress_interval=0.5"])
        p.wait_members_up()
        p.install_flink_crd()
        p.join_members()
        p.start_controller_manager(
            "--cluster-status-update-frequency", "0.5s", "--cluster-success-threshold", "1s",
            "--cluster-failure-threshold", "1s", "--graceful-eviction-timeout", "30s",
            "--restore-hold-timeout", f"{HOLD:g}s", "--restore-storage-timeout", "3s")
        p.wait_clusters_ready()
        pp = policy(NAME, "FlinkDeployment", "flink.apache.org/v1beta1", {
            "clusterAffinity": {"clusterNames": list(MEMBERS)},
            "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]},
            failover={"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
                {"aliasLabelName": JOB_LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}})
        pp["metadata"]["annotations"] = {"restore.flotilla.io/savepoint-on-move": "false"}
        fd = flink_deployment(NAME)
        fd["spec"]["flinkConfiguration"] = {**s3.flink_configuration("flink/checkpoints"),
                                            "state.checkpoints.num-retained": "3"}
        p.apply(NAME, docs(pp, fd))
        yield p


def running_in_one(p: Env) -> str:
    found = [m for m in MEMBERS if p.job(m).get("state") == "RUNNING"]
    assert len(found) == 1, f"{NAME} RUNNING in {found}"
    return found[0]


def checkpointed(p: Env, member: str) -> str:
    """The job id in ``member`` once the bucket holds a complete checkpoint of it and the binding has its status."""
    job_id = p.job(member).get("jobId")
    assert job_id, f"no job id in {member} yet"
    assert p.checkpoints(job_id), f"no complete checkpoint of {job_id} in the bucket yet"
    items = {i.get("clusterName"): i for i in (p.cp_get("rb", BINDING).get("status") or {}).get("aggregatedStatus")
             or []}
    item = items.get(member) or {}
    assert item.get("health") == "Healthy", item
    assert ((item.get("status") or {}).get("jobStatus") or {}).get("jobId") == job_id, item
    return str(job_id)


@pytest.mark.timeout(420)
def test_d20_checkpoints_on_s3_restore_and_storage_down_holds_then_starts_fresh(env: Env) -> None:
    p = env
    p.applied(NAME)
    a = p.eventually(lambda: running_in_one(p), f"{NAME} RUNNING in one member", f"rb {BINDING} -n {NS}",
                     timeout=STARTUP_TIMEOUT)
    b = p.other(a)
    first_job = p.eventually(lambda: checkpointed(p, a), f"a checkpoint of {NAME} in the bucket", timeout=TIMEOUT)

    # 1. the first failover, A -> B, restored from the bucket; a chk-N without _metadata is skipped
    p.s3.client().put_object(Bucket=p.s3.bucket, Key=f"flink/checkpoints/{first_job}/chk-999999/state", Body=b"x")
    p.set_taints(a, [TAINT])

    def restored_in_b() -> dict[str, Any]:
        assert p.flink(a) is None, f"{NAME} still in {a}"
        obj = p.flink(b)
        assert obj is not None and p.job(b).get("state") == "RUNNING", f"{b}: {p.job(b)}"
        assert "sim.flotilla.io/restored-offset" in (obj["metadata"].get("annotations") or {}), "not restored yet"
        return obj

    obj = p.eventually(restored_in_b, f"{NAME} restored in {b}", f"rb {BINDING} -n {NS}", timeout=TIMEOUT)
    path = obj["spec"]["job"]["initialSavepointPath"]
    prefix = f"s3://{p.s3.bucket}/flink/checkpoints/{first_job}/chk-"
    assert path.startswith(prefix) and "chk-999999" not in path, path
    assert int(path.removeprefix(prefix)) in p.checkpoints(first_job)
    assert obj["metadata"]["annotations"]["sim.flotilla.io/restored-from"] == path
    assert obj["metadata"]["labels"][JOB_LABEL] == first_job
    assert "savepoint-rule.flotilla.io/restored-from" not in obj["metadata"]["annotations"]  # nothing in members
    record = p.record()
    assert (record["outcome"], record["cluster"], record["jobId"], record["path"]) == ("Restored", b, first_job, path)
    assert p.events("StateRestored"), "no StateRestored Event"
    # what the control plane writes names no credential (the job's own status does carry its configuration, in
    # the operator's lastReconciledSpec, as a real operator's does)
    assert p.s3.secret_key not in json.dumps(record) and p.s3.secret_key not in json.dumps(p.condition())
    assert p.s3.secret_key not in " ".join(p.events("StateRestored"))

    # 2. B's own job checkpoints; then the storage goes down and B fails: hold, then fresh after the hold timeout
    p.set_taints(a, [])
    p.eventually(lambda: checkpointed(p, b), f"a checkpoint of the new job in {b}", timeout=TIMEOUT)
    p.s3.stop()
    p.set_taints(b, [TAINT])
    held_since = time.monotonic()

    def holding() -> None:
        assert p.flink(b) is None, f"{NAME} still in {b}"
        record = p.record()
        assert (record["outcome"], record["cluster"]) == ("Holding", a), record
        failed = p.events("StateRestoreFailed")
        assert any("StorageUnreachable" in m or "unreachable" in m for m in failed), failed
        assert p.condition()["status"] == "False", p.condition()

    p.eventually(holding, f"the Work for {a} held while the storage is down", f"rb {BINDING} -n {NS}",
                 timeout=TIMEOUT)
    assert p.flink(a) is None, f"{NAME} started in {a} while its restore was held"

    def fresh_in_a() -> dict[str, Any]:
        obj = p.flink(a)
        assert obj is not None, f"{NAME} not in {a} yet"
        return obj

    obj = p.eventually(fresh_in_a, f"{NAME} started fresh in {a} after the hold timeout", f"rb {BINDING} -n {NS}",
                       timeout=HOLD + TIMEOUT)
    assert time.monotonic() - held_since >= HOLD - 1, "started before the hold timeout"
    assert not obj["spec"]["job"].get("initialSavepointPath"), obj["spec"]["job"]
    record = p.record()
    assert (record["outcome"], record["cluster"]) == ("Fresh", a), record
    timed_out = p.events("StateRestoreTimedOut")
    assert timed_out and "empty state" in timed_out[0], timed_out
    assert p.condition()["reason"] == "StateRestoreTimedOut", p.condition()

    # 3. the failover history lists both
    def listed() -> list[dict[str, Any]]:
        items = [i for i in json.loads(p.flotilla("get", "failovers", "-n", NS, "-o", "json").stdout)["items"]
                 if i["workload"]["name"] == NAME]
        assert len(items) == 2 and items[1]["phase"] == "Completed", items
        return items

    second, first = p.eventually(listed, "both failovers in the history", timeout=TIMEOUT)
    assert (first["from"], first["to"], first["restoredPath"], first["restoreOutcome"]) == (a, b, path, "Restored")
    assert isinstance(first["stateGap"]["ageAtFault"], (int, float)), first["stateGap"]
    assert (second["from"], second["restoreOutcome"], second["restoredPath"]) == (b, "Fresh", None), second
    p.set_taints(b, [])
