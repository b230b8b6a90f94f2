"""Restore continuity across two members sharing one checkpoint directory: a job deleted mid-run in member A
and re-created in member B with the preserved job id as a label; B's savepoint rule fills initialSavepointPath and
B's job continues from A's newest checkpoint. No record is lost; at most one interval's worth is processed twice."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.member.checkpoints import CheckpointStore
from flotilla.member.flink import FlinkDeploymentSimulator
from flotilla.member.history import HistoryRecorder, overlaps
from flotilla.member.savepoint_rule import APPLIED_ANNOTATION, DEFAULT_LABEL
from flotilla.member.simulated import MemberConfig
from tests.integration.member import MemberThread, kubectl_for
from tests.integration.member.test_flink_member import flink_deployment, get, status_of, wait_for
from tests.support.apiserver import Kubectl

pytestmark = pytest.mark.kubectl

INTERVAL = 0.4
RATE = 250
NS = "streaming"


class Pair:
    def __init__(self, a: MemberThread, b: MemberThread, ka: Kubectl, kb: Kubectl, store: CheckpointStore,
                 history: HistoryRecorder) -> None:
        self.a, self.b, self.ka, self.kb, self.store, self.history = a, b, ka, kb, store, history

    @staticmethod
    def sim(m: MemberThread) -> FlinkDeploymentSimulator:
        s = m.member.simulator("flinkdeployment")
        assert isinstance(s, FlinkDeploymentSimulator)
        return s


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("members")
    shared = root / "s3-bucket"
    history = HistoryRecorder(None)
    options = {"flink_checkpoint_interval": INTERVAL, "flink_records_per_second": RATE,
               "flink_progress_interval": 0.2, "savepoint_rule": True}
    members = [MemberThread(MemberConfig(name=n, data_dir=root, ready_delay=0.3, checkpoint_dir=shared,
                                         options=dict(options)), history).start() for n in ("a", "b")]
    try:
        kubectls = [kubectl_for(m, tmp_path_factory.mktemp(f"home-{m.member.name}")) for m in members]
        for k in kubectls:
            k.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n")
        yield Pair(members[0], members[1], kubectls[0], kubectls[1], CheckpointStore(shared), history)
    finally:
        for m in members:
            m.stop()


def running(kubectl: Kubectl, name: str) -> bool:
    return status_of(kubectl, NS, name).get("jobStatus", {}).get("state") == "RUNNING"


def with_label(name: str, job_id: str) -> str:
    return flink_deployment(name, labels=f"  labels:\n    {DEFAULT_LABEL}: {job_id}\n")


def test_job_continues_in_another_member_from_the_newest_checkpoint(pair: Pair) -> None:
    # 1. the job runs in A and checkpoints a few times into the shared directory
    pair.ka.run("apply", "-n", NS, "-f", "-", input=flink_deployment("orders"))
    wait_for(lambda: running(pair.ka, "orders"), msg="RUNNING in A")
    job_a = status_of(pair.ka, NS, "orders")["jobStatus"]["jobId"]
    wait_for(lambda: (c := pair.store.latest_checkpoint(job_a)) is not None and c.checkpoint_id >= 3,
             msg="three checkpoints in A")
    time.sleep(INTERVAL / 3)  # die somewhere between two checkpoints

    # 2. A's copy is deleted mid-run (Karmada's Directly purge): its job stops at once
    pair.ka.run("delete", "flinkdeployment", "orders", "-n", NS, "--timeout=15s")
    (run_a,) = Pair.sim(pair.a).runs_of(NS, "orders")
    assert run_a.stop is not None
    processed_in_a = run_a.offset_at(run_a.stop)  # records [0, processed_in_a) were processed in A
    newest = pair.store.latest_checkpoint(job_a)
    assert newest is not None

    # 3. re-created in B carrying the preserved job id: the member's savepoint rule adds the restore path
    applied = pair.kb.run("apply", "-n", NS, "-f", "-", input=with_label("orders", job_a))
    assert "Warning" not in applied.stderr
    obj = get(pair.kb, NS, "orders")
    assert obj["spec"]["job"]["initialSavepointPath"] == newest.path
    assert obj["spec"]["job"]["upgradeMode"] == "savepoint"
    assert obj["metadata"]["annotations"][APPLIED_ANNOTATION] == newest.path

    # 4. B's job resumes from A's newest checkpoint under a new job id
    wait_for(lambda: running(pair.kb, "orders"), msg="RUNNING in B")
    job_b = status_of(pair.kb, NS, "orders")["jobStatus"]["jobId"]
    assert job_b != job_a

    def annotations() -> dict[str, str]:
        return get(pair.kb, NS, "orders")["metadata"].get("annotations") or {}

    ann = wait_for(lambda: (a := annotations()).get("sim.flotilla.io/restored-from") == newest.path and a,
                   msg="B's restore annotations")
    restored = int(ann["sim.flotilla.io/restored-offset"])
    assert restored == newest.offset
    assert restored <= processed_in_a  # no record lost
    assert processed_in_a - restored <= RATE * INTERVAL  # at most one interval's worth processed again

    # 5. B checkpoints on from where A stopped: next checkpoint id, offsets beyond the restore point
    first_b = wait_for(lambda: pair.store.latest_checkpoint(job_b), msg="a checkpoint in B")
    assert first_b.checkpoint_id > newest.checkpoint_id and first_b.offset >= restored
    assert first_b.restored_from == newest.path
    meta = json.loads(Path(first_b.metadata_path).read_text())
    assert meta["writer"] == "b"
    wait_for(lambda: int(annotations().get("sim.flotilla.io/records-processed", "0")) > processed_in_a,
             msg="B past A's last record")

    # 6. the two copies never ran at the same time
    intervals = pair.history.intervals(kind="FlinkDeployment", namespace=NS, name="orders")
    assert [iv.member for iv in intervals] == ["a", "b"]
    assert intervals[0].end is not None and intervals[0].end <= intervals[1].start
    assert overlaps(intervals) == []

    # 7. and a second hop back to A continues from B's newest checkpoint
    pair.kb.run("delete", "flinkdeployment", "orders", "-n", NS, "--timeout=15s")
    (run_b,) = Pair.sim(pair.b).runs_of(NS, "orders")
    processed_in_b = run_b.offset_at(run_b.stop or 0)
    newest_b = pair.store.latest_checkpoint(job_b)
    assert newest_b is not None
    pair.ka.run("apply", "-n", NS, "-f", "-", input=with_label("orders", job_b))
    wait_for(lambda: running(pair.ka, "orders"), msg="RUNNING in A again")
    runs = Pair.sim(pair.a).runs_of(NS, "orders")
    assert runs[-1].restored_from == newest_b.path
    assert 0 <= processed_in_b - runs[-1].base_offset <= RATE * INTERVAL
    pair.ka.run("delete", "flinkdeployment", "orders", "-n", NS, "--timeout=15s")


def test_rule_warns_when_there_is_no_checkpoint(pair: Pair) -> None:
    unknown = "0123456789abcdef0123456789abcdef"
    out = pair.kb.run("apply", "-n", NS, "-f", "-", input=with_label("fresh", unknown))
    assert f"savepoint rule: no checkpoint of job {unknown}" in out.stderr
    obj = get(pair.kb, NS, "fresh")
    assert "initialSavepointPath" not in obj["spec"]["job"]
    assert obj["spec"]["job"]["upgradeMode"] == "last-state"
    wait_for(lambda: running(pair.kb, "fresh"), msg="RUNNING from empty state")
    ann: dict[str, Any] = wait_for(
        lambda: (a := get(pair.kb, NS, "fresh")["metadata"].get("annotations") or {}).get(
            "sim.flotilla.io/restored-from") and a, msg="annotations")
    assert ann["sim.flotilla.io/restored-from"] == "none" and ann["sim.flotilla.io/restored-offset"] == "0"
    pair.kb.run("delete", "flinkdeployment", "fresh", "-n", NS, "--timeout=15s")


def test_rule_leaves_an_explicit_path_and_updates_alone(pair: Pair) -> None:
    job = "abcdefabcdefabcdefabcdefabcdef12"
    older = pair.store.write_checkpoint(job, 1, 10, 1000, retained=5)
    pair.store.write_checkpoint(job, 2, 20, 2000, retained=5)
    manifest = flink_deployment("pinned", extra_job=f"    initialSavepointPath: {older.path}\n",
                                labels=f"  labels:\n    {DEFAULT_LABEL}: {job}\n")
    pair.kb.run("apply", "-n", NS, "-f", "-", input=manifest)
    obj = get(pair.kb, NS, "pinned")
    assert obj["spec"]["job"]["initialSavepointPath"] == older.path  # the user's choice stands
    assert APPLIED_ANNOTATION not in (obj["metadata"].get("annotations") or {})
    # an update is not a creation: the rule does not touch it
    pair.kb.run("patch", "flinkdeployment", "pinned", "-n", NS, "--type=json", "-p",
                '[{"op":"remove","path":"/spec/job/initialSavepointPath"}]')
    assert "initialSavepointPath" not in get(pair.kb, NS, "pinned")["spec"]["job"]
    pair.kb.run("delete", "flinkdeployment", "pinned", "-n", NS, "--timeout=15s")
