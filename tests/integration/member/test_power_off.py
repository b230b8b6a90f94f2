"""The ``off`` fault (power off) seen from clients and from the running-interval history: the API goes away AND
the member's workloads stop (their intervals end at that moment, no checkpoint after it); ``recover`` brings the
API back at once and, after the boot delay, resumes what the member's store holds as a restarted cluster does
(pods start again, a Flink job restarts under HA with its job id from its newest checkpoint)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.member.checkpoints import CheckpointStore, Snapshot
from flotilla.member.faults import FaultError
from flotilla.member.history import Interval, overlaps
from flotilla.member.simulated import MemberConfig
from tests.integration.member import MemberThread, kubectl_for
from tests.integration.member.test_flink_member import flink_deployment, wait_for
from tests.support.apiserver import Kubectl

pytestmark = pytest.mark.kubectl

INTERVAL = 0.3  # Flink checkpoint interval (s)
READY_DELAY = 0.4
OPTIONS = {"flink_checkpoint_interval": INTERVAL, "flink_records_per_second": 200, "flink_progress_interval": 0.2}
STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "postgres:16"}]}
"""


class Powered:
    """A member with a StatefulSet (one Ready pod) and a FlinkDeployment (job RUNNING, checkpointed)."""

    def __init__(self, member: MemberThread, kubectl: Kubectl) -> None:
        self.member = member
        self.kubectl = kubectl
        assert member.member.config.checkpoint_dir is not None
        self.store = CheckpointStore(member.member.config.checkpoint_dir)
        self.job_id = ""

    def get(self, resource: str, name: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl.run("get", resource, name, "-o", "json").stdout)
        return out

    def job_state(self) -> str | None:
        state = ((self.get("flinkdeployment", "wc").get("status") or {}).get("jobStatus") or {}).get("state")
        return None if state is None else str(state)

    def sts_ready(self) -> int:
        return int((self.get("statefulset", "db").get("status") or {}).get("readyReplicas") or 0)

    def intervals(self, name: str) -> list[Interval]:
        return self.member.member.history.intervals(name=name)

    def latest(self) -> Snapshot:
        snap = self.store.latest_checkpoint(self.job_id)
        assert snap is not None, f"no checkpoint of job {self.job_id}"
        return snap

    def power(self, mode: str, boot_delay: float | None = None) -> dict[str, Any]:
        state: dict[str, Any] = self.member.call(self.member.member.set_fault(mode, boot_delay=boot_delay))
        return state


@pytest.fixture
def powered(tmp_path: Path) -> Iterator[Powered]:
    cfg = MemberConfig(name="p1", data_dir=tmp_path, ready_delay=READY_DELAY, options=dict(OPTIONS))
    m = MemberThread(cfg).start()
    try:
        p = Powered(m, kubectl_for(m, tmp_path / "home"))
        p.kubectl.run("apply", "-f", "-", input=STATEFULSET)
        p.kubectl.run("apply", "-f", "-", input=flink_deployment("wc"))
        wait_for(lambda: p.job_state() == "RUNNING", msg="the Flink job RUNNING")
        p.job_id = p.get("flinkdeployment", "wc")["status"]["jobStatus"]["jobId"]
        wait_for(lambda: (c := p.store.latest_checkpoint(p.job_id)) is not None and c.checkpoint_id >= 2,
                 msg="two checkpoints")
        wait_for(lambda: p.sts_ready() == 1, msg="the StatefulSet's pod Ready")
        yield p
    finally:
        m.stop()


def refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def test_off_refuses_connections_and_ends_every_running_interval_at_once(powered: Powered) -> None:
    p = powered
    port = p.member.member.port
    before = time.time()
    state = p.power("off")
    after = time.time()
    assert state["mode"] == "off" and state["ready"] is False and state["workloads"] == "stopped"
    assert refused(port)
    assert p.member.member.simulators == []
    for name in ("db", "wc"):
        (iv,) = p.intervals(name)
        assert iv.end is not None and before <= iv.end <= after, (name, iv, before, after)
    last = p.latest()
    time.sleep(4 * INTERVAL)
    assert p.latest() == last, "the job checkpointed after the power-off"
    assert p.member.member.history.open_intervals() == []


def test_recover_after_off_resumes_the_stored_workloads_like_a_restarted_cluster(powered: Powered) -> None:
    p = powered
    port = p.member.member.port
    uid = p.get("flinkdeployment", "wc")["metadata"]["uid"]
    p.power("off")
    newest = p.latest()  # no checkpoint comes after the power-off: this is what the restart must resume from
    on = time.time()
    state = p.power("recover")
    assert state["mode"] == "normal" and state["ready"] is True and state["workloads"] == "running"
    assert p.member.member.port == port

    # the job restarts under HA: same object, same job id, from the newest checkpoint, no record lost
    wait_for(lambda: p.job_state() == "RUNNING", msg="the job RUNNING again")
    obj = p.get("flinkdeployment", "wc")
    assert obj["metadata"]["uid"] == uid
    assert obj["status"]["jobStatus"]["jobId"] == p.job_id

    def restored() -> bool:
        ann = p.get("flinkdeployment", "wc")["metadata"].get("annotations") or {}
        return ann.get("sim.flotilla.io/restored-from") == newest.path

    wait_for(restored, msg=f"restored from {newest.path}")
    ann = p.get("flinkdeployment", "wc")["metadata"]["annotations"]
    assert int(ann["sim.flotilla.io/restored-offset"]) == newest.offset
    # the StatefulSet's pod had died with the member: it starts again, Ready after the ready delay
    wait_for(lambda: p.sts_ready() == 1, msg="the StatefulSet's pod Ready again")
    for name in ("db", "wc"):
        first, second = p.intervals(name)
        assert first.end is not None and first.end <= on, (name, first)
        assert second.start >= on + READY_DELAY * 0.75 and second.end is None, (name, second, on)
        assert first.uid == second.uid
    assert overlaps(p.member.member.history.intervals()) == []


def test_workloads_wait_for_the_boot_delay_while_the_api_answers(powered: Powered) -> None:
    p = powered
    p.power("off")
    on = time.time()
    state = p.power("recover", boot_delay=1.5)
    assert state["mode"] == "normal" and state["ready"] is True and state["workloads"] == "booting"
    assert p.job_state() == "RUNNING"  # the API answers with what the store held when the power went
    time.sleep(1.0)
    assert [len(p.intervals(n)) for n in ("db", "wc")] == [1, 1], "a workload ran before the boot delay was over"
    assert p.member.member.simulators == []
    wait_for(lambda: p.member.member.state()["workloads"] == "running", msg="booted")
    wait_for(lambda: all(len(p.intervals(n)) == 2 for n in ("db", "wc")), msg="both running again")
    for name in ("db", "wc"):
        assert p.intervals(name)[1].start >= on + 1.5, name


def test_a_flinkdeployment_deleted_before_the_boot_never_runs_again(powered: Powered) -> None:
    """What a control plane's recovery purge relies on: deleted while the member boots, the stale copy's job is
    not restarted; the operator releases its finalizer once it runs."""
    p = powered
    p.power("off")
    p.power("recover", boot_delay=1.0)
    p.kubectl.run("delete", "flinkdeployment", "wc", "--wait=false")
    obj = p.get("flinkdeployment", "wc")
    assert obj["metadata"].get("deletionTimestamp"), "the operator's finalizer holds it until the operator runs"
    wait_for(lambda: p.kubectl.run("get", "flinkdeployment", "-o", "name").stdout.strip() == "",
             msg="the FlinkDeployment gone once the member booted")
    assert p.member.member.state()["workloads"] == "running"
    time.sleep(2 * READY_DELAY)
    (iv,) = p.intervals("wc")
    assert iv.end is not None


def test_off_again_while_booting_cancels_the_boot(powered: Powered) -> None:
    p = powered
    p.power("off")
    assert p.power("recover", boot_delay=0.5)["workloads"] == "booting"
    state = p.power("off")
    assert state["mode"] == "off" and state["workloads"] == "stopped"
    time.sleep(1.2)
    assert p.member.member.simulators == [] and p.member.member.state()["workloads"] == "stopped"
    assert [len(p.intervals(n)) for n in ("db", "wc")] == [1, 1]
    # powered on without delay: running again (the boot delay given last time is kept: pass 0)
    assert p.power("recover", boot_delay=0)["workloads"] == "running"
    wait_for(lambda: p.job_state() == "RUNNING" and len(p.intervals("wc")) == 2, msg="the job running again")


def test_down_while_off_powers_on_but_stays_unreachable(powered: Powered) -> None:
    p = powered
    port = p.member.member.port
    p.power("off")
    state = p.power("down", boot_delay=0)
    assert state["mode"] == "down" and state["workloads"] == "running"
    assert refused(port)
    wait_for(lambda: len(p.intervals("wc")) == 2, msg="the job running again inside the partitioned member")
    assert p.power("recover")["mode"] == "normal"
    assert p.job_state() == "RUNNING"


def test_bad_boot_delay_is_rejected(powered: Powered) -> None:
    m = powered.member
    for bad in (-1, "soon", True):
        with pytest.raises(FaultError, match="boot delay"):
            m.call(m.member.set_fault("off", boot_delay=bad))
    state = m.member.state()
    assert state["mode"] == "normal" and state["workloads"] == "running"
