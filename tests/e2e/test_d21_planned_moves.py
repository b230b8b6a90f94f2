"""D21 end to end: planned moves take a savepoint first, and the new copy starts from it (nothing reprocessed).

One module-scoped fixture starts ``flotilla apiserver``, ``flotilla member --count 2`` (the member-side savepoint
rule off, 1 s checkpoints), joins both members and starts ``flotilla controller-manager``. Each FlinkDeployment
goes to ONE member (spreadConstraints cluster 1/1) with ``failover.cluster.purgeMode: Directly`` and the job id
preserved. Two ways to move a running job while its cluster is Ready:

* ``flotilla failover move flinkdeployment/NAME --to OTHER --wait``;
* ``flotilla cordon`` plus a NoExecute taint on its cluster (the taint manager evicts it).

Both times the old job stops with a savepoint, the new copy starts from that savepoint (its restored offset is the
old job's final offset: zero records processed again, though a checkpoint completed before), the copies never run
at once, and the scheduler keeps the workload where it was moved once the eviction is over.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from flotilla.member.history import overlaps, read_history
from tests.support.pipeline import (
    FLOTILLA,
    NS,
    STARTUP_TIMEOUT,
    Pipeline,
    docs,
    flink_deployment,
    policy,
    start_control_plane,
)

pytestmark = pytest.mark.kubectl

MEMBERS = ("member1", "member2")
JOB_LABEL = "failover.flink.io/job-id"
ANN_RECORDS = "sim.flotilla.io/records-processed"
ANN_RESTORED_FROM = "sim.flotilla.io/restored-from"
ANN_RESTORED_OFFSET = "sim.flotilla.io/restored-offset"
ANN_LAST_CHECKPOINT = "sim.flotilla.io/last-checkpoint"
MOVE_ANNOTATION = "failover.flotilla.io/move"
MOVED = ("wc-move", "wc-drain")
TIMEOUT = 45.0


def drain_taint(name: str) -> dict[str, str]:
    return {"key": f"drain-{name}", "effect": "NoExecute"}


def move_policy(name: str) -> dict[str, Any]:
    # each workload tolerates the other's hand-made taint, so a taint moves one workload only
    tolerations = [{"key": drain_taint(o)["key"], "operator": "Exists", "effect": "NoExecute"}
                   for o in MOVED if o != name]
    return policy(name, "FlinkDeployment", "flink.apache.org/v1beta1", {
        "clusterAffinity": {"clusterNames": list(MEMBERS)},
        "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
        "clusterTolerations": tolerations},
        failover={"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
            {"aliasLabelName": JOB_LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}})


class Env(Pipeline):
    pass


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with contextlib.ExitStack() as stack:
        p = start_control_plane(stack, tmp_path_factory.mktemp("moves"), MEMBERS, Env)
        p.start_members("members", "--count", "2", extra=[
            "--sim-option", "flink_checkpoint_interval=1", "--sim-option", "flink_progress_interval=0.5"])
        p.wait_members_up()
        p.install_flink_crd()
        p.join_members()
        p.start_controller_manager(
            "--cluster-status-update-frequency", "0.5s", "--cluster-success-threshold", "1s",
            "--cluster-failure-threshold", "1s", "--graceful-eviction-timeout", "30s",
            "--move-savepoint-timeout", "40s")
        p.wait_clusters_ready()
        for name in MOVED:
            p.apply(name, docs(move_policy(name), flink_deployment(name)))
        yield p


class Watch:
    """Follows the old copy of a job in its member through ``kubectl get -w`` (every change, none missed) and
    keeps the last sight of it: the old job's final offset is what its object says once the job stopped (before
    the control plane deletes it)."""

    def __init__(self, p: Env, member: str, name: str) -> None:
        self.last: dict[str, Any] | None = None
        self.stopped: dict[str, Any] | None = None
        self._proc = p.members[member].popen("get", "flinkdeployments", name, "-n", NS, "-w", "-o", "json")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        decoder = json.JSONDecoder()
        buffer = ""
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            buffer += line
            while True:
                buffer = buffer.lstrip()
                try:
                    obj, end = decoder.raw_decode(buffer)
                except ValueError:
                    break  # an object not complete yet
                buffer = buffer[end:]
                self.last = obj
                state = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
                if state in ("FINISHED", "SUSPENDED", "CANCELED"):
                    self.stopped = obj

    def close(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._thread.join(timeout=5)


def running_in_one(p: Env, name: str) -> tuple[str, dict[str, Any]]:
    found = p.placement("flinkdeployments", name)
    assert len(found) == 1, f"{name} is in {sorted(found)}"
    (member, obj), = found.items()
    state = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
    assert state == "RUNNING", f"{member}: {name} job state {state}"
    return member, obj


def checkpointed(p: Env, name: str, member: str) -> int:
    obj = p.member_get(member, "flinkdeployments", name)
    assert obj is not None, f"{name} not in {member}"
    ann = obj["metadata"].get("annotations", {})
    assert ann.get(ANN_LAST_CHECKPOINT) not in (None, "none"), f"{name}: no checkpoint yet"
    return int(ann[ANN_RECORDS])


def ready_for_a_move(p: Env, name: str) -> tuple[str, str]:
    """``(old, new)`` once ``name`` runs in one member, its status is on the binding and a checkpoint completed."""
    p.applied(name)
    old, _ = p.eventually(lambda: running_in_one(p, name), f"{name} RUNNING in one member",
                          f"rb {name}-flinkdeployment -n {NS}", timeout=STARTUP_TIMEOUT)

    def job_on_binding() -> None:
        rb = p.cp_get("rb", f"{name}-flinkdeployment")
        items = {i["clusterName"]: i for i in (rb.get("status") or {}).get("aggregatedStatus") or []}
        assert ((items.get(old) or {}).get("status") or {}).get("jobStatus", {}).get("jobId"), items

    p.eventually(job_on_binding, f"{name}'s job id on its binding", f"rb {name}-flinkdeployment -n {NS}")
    p.eventually(lambda: checkpointed(p, name, old), f"a completed checkpoint of {name}", timeout=15)
    return old, p.other(old)


def assert_moved_from_savepoint(p: Env, name: str, old: str, new: str, watch: Watch, since: float) -> None:
    """The new copy runs only in ``new``, started from the move's savepoint at the old job's final offset."""
    def moved() -> dict[str, Any]:
        found = p.placement("flinkdeployments", name)
        assert sorted(found) == [new], f"{name} is in {sorted(found)}"
        obj = found[new]
        state = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
        assert state == "RUNNING", f"{new}: state {state}"
        assert ANN_RESTORED_OFFSET in obj["metadata"].get("annotations", {}), "not restored yet"
        return obj

    obj = p.eventually(moved, f"{name} RUNNING only in {new}", f"rb {name}-flinkdeployment -n {NS}",
                       timeout=TIMEOUT)
    watch.close()
    rb = p.cp_get("rb", f"{name}-flinkdeployment")
    move = json.loads(rb["metadata"]["annotations"][MOVE_ANNOTATION])
    assert (move["fromCluster"], move["toCluster"], move["phase"]) == (old, new, "Done"), move
    path = move["path"]
    assert path and "/savepoints/savepoint-" in path, path
    ann = obj["metadata"]["annotations"]
    assert ann[ANN_RESTORED_FROM] == path, ann  # the new job started from the savepoint, not a checkpoint
    assert obj["spec"]["job"].get("initialSavepointPath") == path, obj["spec"]["job"]
    assert watch.stopped is not None, f"the old copy in {old} was never seen stopped: {watch.last}"
    final_old = int(watch.stopped["metadata"]["annotations"][ANN_RECORDS])
    restored = int(ann[ANN_RESTORED_OFFSET])
    assert final_old - restored == 0, f"records reprocessed: old job ended at {final_old}, new one resumed at {restored}"
    ivs = [iv for iv in read_history(p.members_dir / "history.jsonl") if iv.name == name
           and (iv.end is None or iv.end >= since)]
    assert overlaps(ivs) == [], f"two copies of {name} ran at once: {overlaps(ivs)}"

    def kept_there() -> None:  # once the eviction is over the scheduler keeps it where it was moved
        rb = p.cp_get("rb", f"{name}-flinkdeployment")
        assert not (rb["spec"].get("gracefulEvictionTasks") or []), rb["spec"].get("gracefulEvictionTasks")
        assert [c["name"] for c in rb["spec"]["clusters"]] == [new], rb["spec"]["clusters"]
        assert json.loads(rb["metadata"]["annotations"][MOVE_ANNOTATION]).get("completedAt"), "not completed"

    p.eventually(kept_there, f"{name}'s eviction over, still in {new}", f"rb {name}-flinkdeployment -n {NS}",
                 timeout=TIMEOUT)
    assert sorted(p.placement("flinkdeployments", name)) == [new]
    reasons = [e["reason"] for e in json.loads(p.cp.run("get", "events", "-n", NS, "-o", "json").stdout)["items"]
               if (e.get("involvedObject") or {}).get("name") == f"{name}-flinkdeployment"]
    for reason in ("PlannedMoveStarted", "SavepointTaken", "PlannedMoveCompleted"):
        assert reason in reasons, f"no {reason} Event on the binding: {reasons}"
    assert "PlannedMoveFailed" not in reasons, reasons

    def in_history() -> dict[str, Any]:  # the failover history (D22) has it, with nothing reprocessed
        r = p.flotilla("get", "failovers", "-n", NS, "-o", "json")
        entries = [i for i in json.loads(r.stdout)["items"] if i["workload"]["name"] == name]
        assert entries and entries[0]["phase"] == "Completed", entries
        return dict(entries[0])

    entry = p.eventually(in_history, f"{name}'s move completed in the failover history",
                         f"rb {name}-flinkdeployment -n {NS}", timeout=TIMEOUT)
    assert (entry["from"], entry["to"], entry["restoredPath"]) == (old, new, path), entry
    assert entry["stateGap"]["recordsReprocessed"] == 0, entry["stateGap"]
    row = [line for line in p.flotilla("get", "failovers", "-n", NS).stdout.splitlines()
           if f"FlinkDeployment/{name}" in line]
    assert row and "0 records" in row[0], row


def test_d21_failover_move_resumes_from_a_savepoint_with_nothing_reprocessed(env: Env) -> None:
    p = env
    old, new = ready_for_a_move(p, "wc-move")
    since = time.time()
    watch = Watch(p, old, "wc-move")
    try:
        r = p.flotilla("failover", "move", "flinkdeployment/wc-move", "-n", NS, "--to", new, "--wait",
                       "--timeout", "40s")
    except BaseException:
        watch.close()
        raise
    assert f"move from {old} to {new} requested" in r.stdout, r.stdout
    assert "savepoint taken:" in r.stdout and f"new copy Healthy in {new}" in r.stdout, r.stdout
    assert_moved_from_savepoint(p, "wc-move", old, new, watch, since)


def test_d21_failover_move_to_the_cluster_it_runs_in_is_refused(env: Env) -> None:
    p = env
    p.applied("wc-move")
    where, _ = p.eventually(lambda: running_in_one(p, "wc-move"), "wc-move RUNNING in one member", timeout=TIMEOUT)
    out = subprocess.run([FLOTILLA, "failover", "move", "flinkdeployment/wc-move", "-n", NS, "--to", where],
                         capture_output=True, text=True, timeout=60, env=p.cp.env())
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert f"already runs in {where}" in out.stderr, out.stderr


def test_d21_cordon_and_noexecute_taint_move_with_a_savepoint(env: Env) -> None:
    p = env
    old, new = ready_for_a_move(p, "wc-drain")
    since = time.time()
    watch = Watch(p, old, "wc-drain")
    p.flotilla("cordon", old)
    p.set_taints(old, [*p.taints(old), drain_taint("wc-drain")])
    try:
        assert_moved_from_savepoint(p, "wc-drain", old, new, watch, since)
    finally:
        watch.close()
        p.set_taints(old, [t for t in p.taints(old) if t.get("key") != drain_taint("wc-drain")["key"]])
        p.flotilla("uncordon", old)
