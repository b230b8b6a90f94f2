"""The Pull-mode agent's resilience, with real processes over 127.0.0.1 and the real kubectl.

Every test runs ``flotilla apiserver``, ``flotilla controller-manager``, a simulated member (``flotilla member``)
and a ``flotilla agent`` for it (member ``edge1``), with a Deployment propagated to ``edge1``. The control plane
never calls the member: whatever reaches it was applied by the agent. Each test breaks one thing and checks that
the agent keeps its Lease renewed (or resumes renewing), applies a change made to the Work meanwhile or afterwards,
and never deletes or re-creates the member's Deployment (same uid):

* HA: two API servers on one etcd; the one the agent talks to is killed with ``kill -9``;
* restart: the only API server (SQLite) stopped and started again on the same port and data;
* 410 Gone: the agent cut off from the control plane while the store is compacted past its watches'
  resourceVersion (``--compaction-interval 1``), then reconnected: it re-lists;
* member API outage (``flotilla sim fault edge1 --mode down``): Ready False, the Lease still renewed, then Ready True;
* no busy loop: 10 s without a control plane cost the agent little CPU and few log lines.

The agent reaches the SQLite control plane through a :class:`~flotilla.local.links.Link` (a TCP forwarder, run
here on a thread of the test process) that the 410 test cuts and heals, as ``flotilla sim fault --mode partition``
does for ``flotilla up``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from flotilla.client.kubeconfig import write_kubeconfig
from flotilla.local.links import Link
from flotilla.storage.etcd_launcher import EtcdProcess, free_ports, start_etcd
from tests.e2e.test_member_cli import start_members, stop
from tests.support.apiserver import Kubectl
from tests.support.pipeline import FLOTILLA, NS, deployment, policy, tail
from tests.support.processes import LoggedProcess

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(300)]

T = TypeVar("T")
EDGE = "edge1"
LEASE_NS = "karmada-cluster"
AGENT_FLAGS = ("--cluster-lease-duration", "4s", "--cluster-lease-renew-interval-fraction", "0.25",
               "--cluster-status-update-frequency", "1s", "--cluster-success-threshold", "1s",
               "--cluster-failure-threshold", "2s")


class LinkThread:
    """A cuttable TCP forwarder to ``target`` on an event loop of its own (a daemon thread)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.link = self._call(Link("agent-to-control-plane", target).start())

    def _call(self, coro: Any) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(10)

    @property
    def url(self) -> str:
        return f"http://{self.link.url_host}"

    def cut(self) -> None:
        self.loop.call_soon_threadsafe(self.link.cut)

    def heal(self) -> None:
        self.loop.call_soon_threadsafe(self.link.heal)

    def close(self) -> None:
        self._call(self.link.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class ApiServer:
    """``flotilla apiserver`` as a child process with its log in a file; ``restart`` keeps its port and data."""

    def __init__(self, name: str, storage: str, data_dir: Path, port: int, *extra: str) -> None:
        self.name = name
        # plain http: the kubeconfigs here are written by hand, with fallback servers and links in between
        self.argv = [FLOTILLA, "apiserver", "--insecure", "--storage", storage, "--data-dir", str(data_dir),
                     "--port", str(port), *extra]
        self.data_dir = data_dir
        self.url = f"http://127.0.0.1:{port}"
        self.proc: LoggedProcess | None = None

    def start(self) -> ApiServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = LoggedProcess.start(self.argv, self.data_dir.parent / f"{self.name}.log")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.alive(), f"{self.name} exited:\n{self.proc.output()}"
            try:
                urllib.request.urlopen(self.url + "/readyz", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready in 30 s:\n{self.proc.output()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.alive():
            self.proc.popen.terminate()
            try:
                self.proc.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()


class Plane:
    """The control plane's processes, the member and its agent; kubectl on the control plane and on the member."""

    def __init__(self, root: Path, servers: list[ApiServer], agent_servers: list[str]) -> None:
        self.root = root
        self.servers = servers
        home = root / "home"
        home.mkdir(exist_ok=True)
        self.home = home
        self.cp = self.kubectl_for(servers[0])
        self.cm_kubeconfig = root / "cm.kubeconfig"
        write_kubeconfig(self.cm_kubeconfig, server=servers[0].url,
                         fallback_servers=tuple(s.url for s in servers[1:]))
        self.cm = LoggedProcess.start([FLOTILLA, "controller-manager", "--kubeconfig", str(self.cm_kubeconfig),
                                       "--metrics-bind-address", "0"], root / "controller-manager.log")
        self.members_dir = root / "members"
        self.member_proc = start_members(self.members_dir, "--name", EDGE, "--port", "0", names=[EDGE])
        self.member = Kubectl(self.members_dir / EDGE / "kubeconfig", home)
        agent_kubeconfig = root / "agent.kubeconfig"
        write_kubeconfig(agent_kubeconfig, server=agent_servers[0], fallback_servers=tuple(agent_servers[1:]))
        self.agent_log = root / "agent.log"
        self.agent = LoggedProcess.start(
            [FLOTILLA, "--log-level", "info", "agent", "--karmada-kubeconfig", str(agent_kubeconfig),
             "--cluster-name", EDGE, "--kubeconfig", str(self.members_dir / EDGE / "kubeconfig"), *AGENT_FLAGS],
            self.agent_log)

    def kubectl_for(self, server: ApiServer) -> Kubectl:
        path = self.root / f"{server.name}.kubeconfig"
        write_kubeconfig(path, server=server.url)
        return Kubectl(path, self.home)

    def close(self) -> None:
        self.agent.kill()
        self.cm.kill()
        stop(self.member_proc)
        for s in self.servers:
            s.kill()

    # ------------------------------------------------------------------ reading
    def eventually(self, check: Callable[[], T], what: str, timeout: float = 40.0) -> T:
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                return check()
            except (AssertionError, KeyError, ValueError, TypeError, subprocess.CalledProcessError) as e:
                last = e
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}: {last}\n--- agent.log:\n{tail(self.agent_log)}\n"
                             f"--- controller-manager.log:\n{tail(self.root / 'controller-manager.log')}")

    def cp_get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.cp.run("get", *args, "-o", "json").stdout)

    def renew_time(self) -> datetime:
        lease = self.cp_get("lease", EDGE, "-n", LEASE_NS)
        return datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))

    def ready(self) -> str:
        conds = (self.cp_get("cluster", EDGE).get("status") or {}).get("conditions") or []
        found = [c["status"] for c in conds if c["type"] == "Ready"]
        assert found, conds
        return str(found[0])

    def member_web(self) -> dict[str, Any]:
        return json.loads(self.member.run("get", "deployment", "web", "-n", NS, "-o", "json").stdout)

    def uid(self) -> str:
        return str(self.member_web()["metadata"]["uid"])

    def replicas_in_member(self, want: int) -> None:
        got = self.member_web()["spec"]["replicas"]
        assert got == want, f"replicas {got} in {EDGE}, want {want}"

    def scale(self, replicas: int) -> None:
        self.cp.run("scale", "deployment", "web", "-n", NS, "--replicas", str(replicas))

    def renewed_after(self, when: datetime) -> datetime:
        renewed = self.renew_time()
        assert renewed > when, f"Lease renewed last at {renewed}, not after {when}"
        return renewed

    # ------------------------------------------------------------------ setting up
    def propagate_web(self) -> str:
        """The Deployment ``web`` (1 replica) propagated to edge1 once edge1 is Ready; its uid in the member."""
        self.eventually(lambda: _equal(self.ready(), "True"), f"{EDGE} registered by its agent and Ready", 60)
        objs = [deployment("web", 1), policy("web", "Deployment", "apps/v1",
                                             {"clusterAffinity": {"clusterNames": [EDGE]}})]
        self.cp.run("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))
        self.eventually(lambda: self.replicas_in_member(1), f"web applied to {EDGE} by the agent", 60)
        return self.uid()


def _equal(got: object, want: object) -> None:
    assert got == want, f"{got!r}, want {want!r}"


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (from /proc/<pid>/stat), in seconds."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_lines(path: Path) -> int:
    return len(path.read_text(errors="replace").splitlines())


# ---------------------------------------------------------------------------------------------------- HA on etcd
@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    root = tmp_path_factory.mktemp("pull-ha")
    etcd: EtcdProcess = start_etcd(root / "etcd")
    servers: list[ApiServer] = []
    plane: Plane | None = None
    try:
        storage = f"etcd://{etcd.endpoint}"
        servers = [ApiServer(f"apiserver-{n}", storage, root / f"apiserver-{n}", port).start()
                   for n, port in zip("ab", free_ports(2), strict=True)]
        plane = Plane(root, servers, [s.url for s in servers])
        yield plane
    finally:
        if plane is not None:
            plane.close()
        for s in servers:
            s.kill()
        etcd.stop()


def test_agent_keeps_renewing_and_applying_when_the_api_server_it_uses_is_killed(ha: Plane) -> None:
    """kill -9 of the API server the agent talks to (the first of its kubeconfig's two): the agent moves to the
    other one, its Lease is renewed again within a few renew intervals, a replicas change made afterwards reaches
    the member, and the member's Deployment is the same object."""
    uid = ha.propagate_web()
    first, second = ha.servers
    killed_at = ha.eventually(ha.renew_time, "the agent's Lease in karmada-cluster")
    first.kill()
    started = time.monotonic()
    ha.cp = ha.kubectl_for(second)
    ha.eventually(lambda: ha.renewed_after(killed_at), "the Lease renewed through the surviving API server", 15)
    assert time.monotonic() - started < 15
    ha.scale(3)
    ha.eventually(lambda: ha.replicas_in_member(3), "the scale made after the kill applied in the member")
    assert ha.uid() == uid
    assert ha.agent.alive(), ha.agent.output()
    assert "now using " + second.url in ha.agent.output()


# ---------------------------------------------------------------------------------------------- SQLite, one server
@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Plane, LinkThread]]:
    root = tmp_path_factory.mktemp("pull-resil")
    (port,) = free_ports(1)
    server = ApiServer("apiserver", "sqlite://", root / "apiserver", port, "--compaction-interval", "1").start()
    link = LinkThread(("127.0.0.1", port))
    p: Plane | None = None
    try:
        p = Plane(root, [server], [link.url])
        p.uid_of_web = p.propagate_web()  # type: ignore[attr-defined]
        # the agent's first renewals fail until the cluster controller has made karmada-cluster (backoff)
        p.eventually(p.renew_time, "the agent's Lease in karmada-cluster")
        yield p, link
    finally:
        if p is not None:
            p.close()
        server.kill()
        link.close()


def test_agent_reconnects_after_a_control_plane_restart_and_applies_later_changes(
        plane: tuple[Plane, LinkThread]) -> None:
    p, _ = plane
    before = p.renew_time()
    server = p.servers[0]
    server.stop()
    time.sleep(3)
    server.start()
    restarted = time.monotonic()
    p.eventually(lambda: p.renewed_after(before), "the Lease renewed after the restart", 30)
    p.scale(2)
    p.eventually(lambda: p.replicas_in_member(2), "the scale made after the restart applied in the member")
    assert time.monotonic() - restarted < 45
    assert p.uid() == p.uid_of_web  # type: ignore[attr-defined]
    assert p.agent.alive(), p.agent.output()


def test_agent_relists_after_410_gone_and_applies_the_latest_work(plane: tuple[Plane, LinkThread]) -> None:
    """Cut off, the agent's watches keep their resourceVersion while writes advance the store and the 1 s
    compactor drops that history: once healed, its watches get 410 Gone, it re-lists and applies the latest Work
    (replicas 5, written during the cut), deleting nothing."""
    p, link = plane
    p.eventually(lambda: p.replicas_in_member(2), "replicas 2 from the previous test")
    link.cut()
    try:
        p.scale(4)
        churn = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"churn-{i}", "namespace": NS},
                  "data": {"i": str(i)}} for i in range(20)]  # history the compactor drops while the agent is away
        p.cp.run("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in churn))
        p.scale(5)
        time.sleep(4)  # more than two compaction intervals: the store is compacted past everything before the cut
        p.replicas_in_member(2)  # the member got nothing while cut off
    finally:
        marker = log_lines(p.agent_log)
        link.heal()
    p.eventually(lambda: p.replicas_in_member(5), "the latest Work applied after the reconnect", 60)
    after = p.agent_log.read_text(errors="replace").splitlines()[marker:]
    assert any(re.search(r"work.*is gone", line, re.I) for line in after), "\n".join(after[-40:])
    assert p.uid() == p.uid_of_web  # type: ignore[attr-defined]


def test_member_api_outage_turns_ready_false_while_the_lease_is_renewed_then_ready_true(
        plane: tuple[Plane, LinkThread]) -> None:
    p, _ = plane
    p.eventually(lambda: _equal(p.ready(), "True"), f"{EDGE} Ready before the outage")
    fault = [FLOTILLA, "sim", "fault", EDGE, "--data-dir", str(p.members_dir), "--mode"]
    assert subprocess.run([*fault, "down"], capture_output=True, text=True, timeout=30).returncode == 0
    try:
        down_at = p.renew_time()
        p.eventually(lambda: _equal(p.ready(), "False"), f"{EDGE} Ready False while its API is down", 30)
        p.eventually(lambda: p.renewed_after(down_at), "the Lease renewed during the outage", 10)
        assert p.agent.alive(), p.agent.output()
    finally:
        assert subprocess.run([*fault, "recover"], capture_output=True, text=True, timeout=30).returncode == 0
    p.eventually(lambda: _equal(p.ready(), "True"), f"{EDGE} Ready True after recover", 30)
    assert p.uid() == p.uid_of_web  # type: ignore[attr-defined]


def test_agent_backs_off_without_a_busy_loop_while_the_control_plane_is_down(
        plane: tuple[Plane, LinkThread]) -> None:
    p, _ = plane
    server = p.servers[0]
    pid = p.agent.popen.pid
    before = p.renew_time()
    server.stop()
    time.sleep(1)  # the first failures of every loop happen right away
    cpu, lines = cpu_seconds(pid), log_lines(p.agent_log)
    time.sleep(10)
    spent, logged = cpu_seconds(pid) - cpu, log_lines(p.agent_log) - lines
    recent = "\n".join(p.agent_log.read_text(errors="replace").splitlines()[-logged:]) if logged else ""
    server.start()
    assert spent < 0.5, f"the agent used {spent:.2f} s of CPU in 10 s without a control plane"
    assert logged < 60, f"{logged} log lines in 10 s:\n{recent[-4000:]}"
    p.eventually(lambda: p.renewed_after(before), "the Lease renewed once the control plane is back", 40)
