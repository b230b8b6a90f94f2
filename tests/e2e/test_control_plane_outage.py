"""Availability: every control-plane process killed for longer than permit-hold + fence-after stops no guarded
workload and moves nothing, with real processes over 127.0.0.1 and the real kubectl.

``flotilla apiserver`` (SQLite) and ``flotilla controller-manager`` run as processes, three simulated members
(``flotilla member --count 3``, each running the guard) and one ``flotilla agent --guard --peer-listen`` per
member. A FlinkDeployment placed on edge1 with ``purgeMode: Directly`` is guarded. Then the API server and the
controller-manager are killed with ``kill -9``, left down for several times permit-hold + fence-after, and started
again on the same data:

* during the outage every agent keeps its run permit through its peers (each reports the control plane
  unreachable: 3 of 3), so the guard never stops the job: the member's running history has one unbroken run;
* after the restart nobody is fence-pending or fenced, and the job still runs where it was.

Without the peer protocol the guard would stop the job ``permit-hold + fence-after`` into the outage.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from flotilla.client.kubeconfig import write_kubeconfig
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.history import read_history
from flotilla.storage.etcd_launcher import free_ports
from tests.e2e.test_member_cli import start_members, stop
from tests.e2e.test_pull_resilience import ApiServer
from tests.support.apiserver import Kubectl
from tests.support.pipeline import FLOTILLA, NS, flink_deployment, policy, tail
from tests.support.processes import LoggedProcess

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(300)]

T = TypeVar("T")
EDGES = ("edge1", "edge2", "edge3")
JOB = "outage-wc"
FENCE_AFTER, PERMIT_HOLD, MARGIN = 2.0, 3.0, 2.0
OUTAGE = 3 * (PERMIT_HOLD + FENCE_AFTER)  # far past the point where a lone agent's guard stops the job
AGENT_FLAGS = ("--cluster-lease-duration", "4s", "--cluster-lease-renew-interval-fraction", "0.25",
               "--cluster-status-update-frequency", "1s", "--cluster-api-timeout", "2s",
               "--cluster-success-threshold", "1s", "--cluster-failure-threshold", "2s",
               "--guard", "--fence-after", f"{FENCE_AFTER:g}s", "--permit-hold", f"{PERMIT_HOLD:g}s",
               "--permit-renew-interval", "0.5s", "--peer-listen", "127.0.0.1:0", "--peer-report-ttl", "1s",
               "--peer-poll-interval", "200ms")


class Outage:
    def __init__(self, root: Path) -> None:
        self.root = root
        (port,) = free_ports(1)
        self.server = ApiServer("apiserver", "sqlite://", root / "apiserver", port).start()
        self.home = root / "home"
        self.home.mkdir()
        kubeconfig = root / "cp.kubeconfig"
        write_kubeconfig(kubeconfig, server=self.server.url)
        self.kubeconfig = kubeconfig
        self.cp = Kubectl(kubeconfig, self.home)
        self.cm = self.start_cm()
        self.members_dir = root / "members"
        self.members = start_members(self.members_dir, "--count", "3", "--name-prefix", "edge", "--port", "0",
                                     "--sim-option", f"guard={FENCE_AFTER:g}s", "--sim-option", "guard_poll=0.2",
                                     names=list(EDGES))
        self.agents = {e: LoggedProcess.start(
            [FLOTILLA, "--log-level", "info", "agent", "--karmada-kubeconfig", str(kubeconfig), "--cluster-name", e,
             "--kubeconfig", str(self.members_dir / e / "kubeconfig"), *AGENT_FLAGS], root / f"agent-{e}.log")
            for e in EDGES}
        self.member = Kubectl(self.members_dir / "edge1" / "kubeconfig", self.home)

    def start_cm(self) -> LoggedProcess:
        return LoggedProcess.start([FLOTILLA, "controller-manager", "--kubeconfig", str(self.kubeconfig),
                                    "--metrics-bind-address", "0", "--fence-margin", f"{MARGIN:g}s",
                                    "--cluster-monitor-period", "500ms", "--cluster-monitor-grace-period", "4s"],
                                   self.root / "controller-manager.log")

    def close(self) -> None:
        for a in self.agents.values():
            a.kill()
        self.cm.kill()
        stop(self.members)
        self.server.kill()

    def eventually(self, check: Callable[[], T], what: str, timeout: float = 60.0) -> T:
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                return check()
            except (AssertionError, KeyError, ValueError, TypeError, subprocess.CalledProcessError) as e:
                last = e
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}: {last}\n--- agent-edge1.log:\n"
                             f"{tail(self.root / 'agent-edge1.log')}\n--- controller-manager.log:\n"
                             f"{tail(self.root / 'controller-manager.log')}")

    def cluster(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.cp.run("get", "cluster", name, "-o", "json").stdout)
        return out

    def job_state(self) -> str | None:
        r = self.member.run("get", "flinkdeployments", JOB, "-n", NS, "-o", "json", check=False)
        if r.returncode != 0:
            return None
        return ((json.loads(r.stdout).get("status") or {}).get("jobStatus") or {}).get("state")

    def job_runs(self) -> list[Any]:
        return [iv for iv in read_history(self.members_dir / "history.jsonl")
                if iv.kind == "FlinkDeployment" and iv.name == JOB]


@pytest.fixture
def outage(tmp_path: Path) -> Iterator[Outage]:
    o = Outage(tmp_path)
    try:
        yield o
    finally:
        o.close()


def test_d19_every_control_plane_process_down_stops_no_guarded_workload_and_moves_nothing(
        outage: Outage) -> None:
    o = outage

    def peers_announced() -> None:
        for e in EDGES:
            annotations = o.cluster(e)["metadata"].get("annotations") or {}
            assert annotations.get("guard.flotilla.io/peer-endpoint"), (e, annotations)
            ready = [c for c in (o.cluster(e).get("status") or {}).get("conditions") or [] if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True", (e, ready)

    o.eventually(peers_announced, "three Pull clusters Ready, announcing guard and peers")
    o.cp.run("apply", "-f", "-", input=json.dumps(flink_deployment_crd()))
    o.cp.run("wait", "--for=condition=Established", "crd/flinkdeployments.flink.apache.org", "--timeout=20s")
    o.cp.run("apply", "-f", "-", input="\n---\n".join(json.dumps(x) for x in (
        flink_deployment(JOB),
        policy(JOB, "FlinkDeployment", "flink.apache.org/v1beta1", {"clusterAffinity": {"clusterNames": ["edge1"]}},
               failover={"cluster": {"purgeMode": "Directly"}}))))

    def running() -> None:
        assert o.job_state() == "RUNNING", o.job_state()

    o.eventually(running, "the guarded job RUNNING on edge1")
    time.sleep(PERMIT_HOLD)  # the permits renewed for a while through the control plane
    runs_before = o.job_runs()
    assert len(runs_before) == 1 and runs_before[0].end is None, runs_before

    o.server.kill()
    o.cm.kill()
    deadline = time.monotonic() + OUTAGE
    while time.monotonic() < deadline:
        assert o.job_state() == "RUNNING", (f"the guarded job stopped during the control-plane outage\n"
                                            f"{tail(o.root / 'agent-edge1.log')}")
        time.sleep(0.5)
    runs = o.job_runs()
    assert len(runs) == 1 and runs[0].end is None, f"the job's run was broken during the outage: {runs}"
    log = (o.root / "agent-edge1.log").read_text()
    assert "report the control plane unreachable" in log, tail(o.root / "agent-edge1.log")

    o.server.start()
    o.cm = o.start_cm()
    time.sleep(PERMIT_HOLD + FENCE_AFTER + MARGIN + 2.0)  # a fence, if any were coming, would have landed
    for e in EDGES:
        c = o.cluster(e)
        assert not any(t.get("key") == "cluster.flotilla.io/out-of-service" for t in c["spec"].get("taints") or []), c
        assert "guard.flotilla.io/fence-pending" not in (c["metadata"].get("annotations") or {}), c
    assert o.job_state() == "RUNNING"
    runs = o.job_runs()
    assert len(runs) == 1 and runs[0].end is None, runs
