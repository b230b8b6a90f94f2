"""Pull mode end to end: ``flotilla up --detach --members 2 --pull-members 1`` driven by the real kubectl.

member1 is a Push member, member2 a Pull member with its own ``flotilla agent`` process (started and restarted by
``flotilla up``). The control plane never calls member2's API: whatever reaches member2 was applied by its agent.

* A Deployment, a StatefulSet and a FlinkDeployment propagate to the Pull member, their status comes back and
  aggregates Healthy on the bindings.
* The proposal's Flink case on a Pull member: a NoExecute taint on member2 moves the FlinkDeployment to member1
  with the old job id as its label, as it does from a Push member.
* The agent killed with ``kill -9`` is started again; then member2 is partitioned from the control plane for 60 s
  (``flotilla sim fault member2 --mode partition``), the acceptance's minute. Past the Lease's 40 s grace the
  control plane turns member2 Ready Unknown and the ``not-ready`` ClusterTaintPolicy taints it NoExecute; the
  workloads tolerate that taint, so no failover fires. A replicas change made during the partition is applied after
  the reconnect, member2 is Ready and untainted again, and no member object is deleted or re-created across both
  (same uids).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from flotilla.local.layout import Layout
from flotilla.member.flink_crd import flink_deployment_crd
from tests.support.apiserver import Kubectl
from tests.support.pipeline import FLOTILLA, NOT_READY, NS, deployment, flink_deployment, policy, tail

pytestmark = pytest.mark.kubectl

T = TypeVar("T")
PUSH, PULL = "member1", "member2"
JOB_LABEL = "failover.flink.io/job-id"
PARTITION_SECONDS = 60.0


@dataclass
class Up:
    root: Path
    cp: Kubectl
    members: dict[str, Kubectl]

    @property
    def layout(self) -> Layout:
        return Layout(self.root)

    def flotilla(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([FLOTILLA, *args], capture_output=True, text=True, timeout=timeout)

    def fault(self, member: str, mode: str) -> dict[str, Any]:
        r = self.flotilla("sim", "fault", member, "--mode", mode, "--data-dir", str(self.layout.members))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def eventually(self, check: Callable[[], T], what: str, timeout: float = 30.0) -> T:
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                return check()
            except (AssertionError, KeyError, ValueError, subprocess.CalledProcessError) as e:
                last = e
            time.sleep(0.3)
        agent_log = self.layout.agent_dir(PULL) / "agent.log"
        raise AssertionError(f"timed out waiting for {what}: {last}\n--- up.log:\n{tail(self.layout.log_file)}\n"
                             f"--- agent.log:\n{tail(agent_log)}")

    def cp_get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.cp.run("get", *args, "-o", "json").stdout)

    def member_get(self, member: str, resource: str, name: str) -> dict[str, Any] | None:
        r = self.members[member].run("get", resource, name, "-n", NS, "-o", "json", check=False)
        if r.returncode != 0:
            if "NotFound" in r.stderr:
                return None
            raise AssertionError(f"{member}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def apply(self, *objs: dict[str, Any]) -> None:
        self.cp.run("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))

    def set_taints(self, cluster: str, taints: list[dict[str, Any]]) -> None:
        self.cp.run("patch", "cluster", cluster, "--type", "merge", "-p", json.dumps({"spec": {"taints": taints}}))


def on_pull(name: str, kind: str, api_version: str, *, clusters: tuple[str, ...] = (PULL,),
            tolerate: tuple[str, ...] = (NOT_READY,), **spec: Any) -> dict[str, Any]:
    """A PropagationPolicy of ``kind/name`` to one of ``clusters``, tolerating the NoExecute taints ``tolerate``."""
    placement: dict[str, Any] = {
        "clusterAffinity": {"clusterNames": list(clusters)},
        "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
        "clusterTolerations": [{"key": k, "operator": "Exists", "effect": "NoExecute"} for k in tolerate]}
    return policy(name, kind, api_version, placement, **spec)


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
            "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}}


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("pull") / "flotilla"
    home = root.parent / "home"
    home.mkdir()
    r = subprocess.run([FLOTILLA, "up", "--detach", "--members", "2", "--pull-members", "1", "--port", "0",
                        "--data-dir", str(root), "--metrics-bind-address", "0"],
                       capture_output=True, text=True, timeout=120)
    try:
        assert r.returncode == 0, f"flotilla up failed:\n{r.stdout}\n{r.stderr}"
        kubeconfig = root / "kubeconfig"
        cp = Kubectl(kubeconfig, home)
        members = {m: Kubectl(root / "members" / m / "kubeconfig", home) for m in (PUSH, PULL)}
        u = Up(root, cp, members)
        crd = flink_deployment_crd()
        cp.run("apply", "-f", "-", input=json.dumps(crd))
        cp.run("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=20s")
        yield u
    finally:
        subprocess.run([FLOTILLA, "down", "--data-dir", str(root)], capture_output=True, text=True, timeout=60)


def test_pull_and_push_clusters_side_by_side_with_their_lease(up: Up) -> None:
    """``kubectl get clusters`` shows MODE Push and Pull, both Ready; the Pull cluster has no secretRef and its agent
    holds its Lease in karmada-cluster."""
    def ready() -> str:
        out = up.cp.run("get", "clusters").stdout
        rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
        assert rows[PUSH][2:4] == ["Push", "True"] and rows[PULL][2:4] == ["Pull", "True"], out
        return out

    up.eventually(ready, "member1 Push and member2 Pull, both Ready")
    cluster = up.cp_get("cluster", PULL)
    assert "secretRef" not in cluster["spec"], cluster["spec"]
    lease = up.eventually(lambda: up.cp_get("lease", PULL, "-n", "karmada-cluster"), "member2's Lease")
    assert lease["spec"]["holderIdentity"] == PULL


def test_deployment_statefulset_and_flinkdeployment_propagate_to_the_pull_member_and_aggregate_healthy(
        up: Up) -> None:
    up.apply(deployment("p-web", 2), on_pull("p-web", "Deployment", "apps/v1"),
             statefulset("p-db", 2), on_pull("p-db", "StatefulSet", "apps/v1"),
             flink_deployment("p-wc"), on_pull("p-wc", "FlinkDeployment", "flink.apache.org/v1beta1"))
    for resource, name in (("deployments", "p-web"), ("statefulsets", "p-db"), ("flinkdeployments", "p-wc")):
        def healthy(resource: str = resource, name: str = name) -> None:
            assert up.member_get(PULL, resource, name) is not None, f"{name} not in {PULL}"
            assert up.member_get(PUSH, resource, name) is None, f"{name} in {PUSH} too"
            rb = up.cp_get("rb", f"{name}-{resource.removesuffix('s')}", "-n", NS)
            items = (rb.get("status") or {}).get("aggregatedStatus") or []
            assert [(i["clusterName"], i.get("applied"), i.get("health")) for i in items] == \
                [(PULL, True, "Healthy")], items

        up.eventually(healthy, f"{resource}/{name} applied to {PULL} and Healthy", timeout=40)
    assert up.cp_get("deployment", "p-web", "-n", NS)["status"].get("readyReplicas") == 2
    flink = up.cp_get("flinkdeployment", "p-wc", "-n", NS)
    assert (flink.get("status") or {}).get("jobStatus", {}).get("state") == "RUNNING", flink.get("status")


def test_flinkdeployment_moves_off_a_tainted_pull_member_with_its_job_id(up: Up) -> None:
    name = "p-move"
    # both members qualify: the scheduler must pick the Pull member for the case to mean anything
    up.set_taints(PUSH, [{"key": "not-yet", "effect": "NoSchedule"}])
    up.apply(flink_deployment(name), on_pull(
        name, "FlinkDeployment", "flink.apache.org/v1beta1", clusters=(PULL, PUSH), tolerate=(NOT_READY,),
        failover={"cluster": {"purgeMode": "Directly", "statePreservation": {
            "rules": [{"aliasLabelName": JOB_LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}}))

    def running_on_pull() -> str:
        obj = up.member_get(PULL, "flinkdeployments", name)
        assert obj is not None, f"{name} not in {PULL}"
        assert obj["metadata"].get("annotations", {}).get("sim.flotilla.io/last-checkpoint", "none") != "none"
        rb = up.cp_get("rb", f"{name}-flinkdeployment", "-n", NS)
        items = {i["clusterName"]: i for i in (rb.get("status") or {}).get("aggregatedStatus") or []}
        job_id = items[PULL]["status"]["jobStatus"]["jobId"]
        assert job_id
        return str(job_id)

    job_id = up.eventually(running_on_pull, f"{name} running and checkpointed in {PULL}", timeout=40)
    up.set_taints(PUSH, [])
    up.set_taints(PULL, [{"key": "move-it", "effect": "NoExecute"}])
    try:
        def moved() -> dict[str, Any]:
            obj = up.member_get(PUSH, "flinkdeployments", name)
            assert obj is not None, f"{name} not in {PUSH} yet"
            assert up.member_get(PULL, "flinkdeployments", name) is None, f"{name} still in {PULL}"
            return obj

        obj = up.eventually(moved, f"{name} moved from {PULL} to {PUSH}", timeout=40)
        assert obj["metadata"].get("labels", {}).get(JOB_LABEL) == job_id, obj["metadata"]
    finally:
        up.set_taints(PULL, [])


def test_agent_kill_and_partition_keep_member_objects_and_apply_changes_after_reconnect(up: Up) -> None:
    up.apply(deployment("p-keep", 1), on_pull("p-keep", "Deployment", "apps/v1"),
             statefulset("p-keepdb", 1), on_pull("p-keepdb", "StatefulSet", "apps/v1"))

    def uids() -> dict[str, str]:
        out = {}
        for resource, name in (("deployments", "p-keep"), ("statefulsets", "p-keepdb")):
            obj = up.member_get(PULL, resource, name)
            assert obj is not None and (obj.get("status") or {}).get("readyReplicas") == 1, f"{name}: {obj}"
            out[name] = obj["metadata"]["uid"]
        return out

    before = up.eventually(uids, "p-keep and p-keepdb ready in member2", timeout=40)

    # kill -9 of the agent: flotilla up starts a new one, which takes over without touching the member's objects
    pid = up.layout.agent_pid(PULL)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    new_pid = up.eventually(lambda: _new_pid(up, pid), "a new agent process")
    up.cp.run("scale", "deployment", "p-keep", "--replicas", "2", "-n", NS)
    up.eventually(lambda: _replicas(up, "p-keep", 2), "the scale applied by the restarted agent", timeout=40)
    assert uids_now(up) == before

    # partition: the agent cannot reach the control plane, the member keeps running
    assert up.fault(PULL, "partition")["mode"] == "partition"
    seen: dict[str, float] = {}
    try:
        started = time.monotonic()
        up.cp.run("scale", "deployment", "p-keep", "--replicas", "3", "-n", NS)
        while time.monotonic() - started < PARTITION_SECONDS:
            obj = up.member_get(PULL, "deployments", "p-keep")  # the member answers kubectl throughout
            assert obj is not None and obj["spec"]["replicas"] == 2, "the change reached a partitioned member"
            cluster = up.cp_get("cluster", PULL)
            if _ready_status(cluster) == "Unknown":
                seen.setdefault("unknown", time.monotonic() - started)
            if _not_ready_noexecute(cluster):
                seen.setdefault("tainted", time.monotonic() - started)
            time.sleep(2)
    finally:
        up.fault(PULL, "recover")
    # the Lease is renewed every 10 s and its grace is 40 s: Unknown 30-41 s into the partition, then the taint
    assert "unknown" in seen and "tainted" in seen, f"member2 during a {PARTITION_SECONDS:g} s partition: {seen}"
    assert seen["unknown"] >= 25, seen
    assert up.layout.agent_pid(PULL) == new_pid, "the agent restarted during the partition"
    up.eventually(lambda: _replicas(up, "p-keep", 3), "the change made during the partition applied", timeout=60)
    up.eventually(lambda: _equal(_ready_status(up.cp_get("cluster", PULL)), "True"), "member2 Ready again",
                  timeout=30)
    up.eventually(lambda: _equal(_not_ready_noexecute(up.cp_get("cluster", PULL)), False),
                  "the not-ready NoExecute taint removed", timeout=30)
    assert uids_now(up) == before


def _ready_status(cluster: dict[str, Any]) -> str | None:
    conds = (cluster.get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conds if c["type"] == "Ready"), None)


def _not_ready_noexecute(cluster: dict[str, Any]) -> bool:
    return any(t.get("key") == NOT_READY and t.get("effect") == "NoExecute"
               for t in (cluster.get("spec") or {}).get("taints") or [])


def _equal(got: object, want: object) -> None:
    assert got == want, f"{got!r}, want {want!r}"


def uids_now(up: Up) -> dict[str, str]:
    out = {}
    for resource, name in (("deployments", "p-keep"), ("statefulsets", "p-keepdb")):
        obj = up.member_get(PULL, resource, name)
        assert obj is not None, f"{name} is gone from {PULL}"
        out[name] = obj["metadata"]["uid"]
    return out


def _new_pid(up: Up, old: int) -> int:
    pid = up.layout.agent_pid(PULL)
    assert pid is not None and pid != old, f"agent pid {pid}"
    return pid


def _replicas(up: Up, name: str, want: int) -> None:
    obj = up.member_get(PULL, "deployments", name)
    assert obj is not None and obj["spec"]["replicas"] == want, obj and obj["spec"]


def test_partition_of_a_push_member_cuts_the_control_plane_off_its_api_only(up: Up) -> None:
    """A partitioned Push member turns Ready False on the control plane (the controller-manager cannot reach it)
    while kubectl reaches it directly; recover brings it back Ready."""
    assert up.fault(PUSH, "partition")["mode"] == "partition"
    try:
        def not_ready() -> None:
            conds = up.cp_get("cluster", PUSH)["status"]["conditions"]
            assert [c["status"] for c in conds if c["type"] == "Ready"] == ["False"], conds

        up.eventually(not_ready, "member1 Ready False while partitioned", timeout=20)
        up.members[PUSH].run("get", "namespaces")  # the member itself answers
    finally:
        up.fault(PUSH, "recover")

    def ready() -> None:
        conds = up.cp_get("cluster", PUSH)["status"]["conditions"]
        assert [c["status"] for c in conds if c["type"] == "Ready"] == ["True"], conds

    up.eventually(ready, "member1 Ready again after recover", timeout=20)



def test_up_refuses_to_resume_a_data_dir_with_other_pull_members(tmp_path: Path) -> None:
    """A member joined in Push mode is not silently turned into a Pull member: ``up`` exits 1 saying what to do."""
    root = tmp_path / "flotilla"
    base = [FLOTILLA, "up", "--detach", "--members", "1", "--port", "0", "--data-dir", str(root),
            "--metrics-bind-address", "0"]
    try:
        first = subprocess.run(base, capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        subprocess.run([FLOTILLA, "down", "--data-dir", str(root)], capture_output=True, text=True, timeout=60)
        again = subprocess.run([*base, "--pull-members", "1"], capture_output=True, text=True, timeout=120)
        assert again.returncode == 1, again.stdout
        assert "cluster member1 was joined in Push mode" in again.stderr, again.stderr
        assert "--pull-members" in again.stderr, again.stderr
    finally:
        subprocess.run([FLOTILLA, "down", "--data-dir", str(root)], capture_output=True, text=True, timeout=60)


def test_a_frozen_agent_makes_its_pull_member_unknown_within_the_grace_then_tainted_noexecute(
        tmp_path: Path) -> None:
    """The agent frozen (SIGSTOP: alive, renewing nothing; ``flotilla up`` restarts only agents that exit): the
    control plane turns the Pull member Ready Unknown once ``--cluster-monitor-grace-period`` (12 s here, above the
    agent's 10 s renew interval) has passed since its last Lease renewal, and no later than grace + period + slack;
    the ``not-ready`` ClusterTaintPolicy then taints it NoExecute, exactly as a Push member. Thawed, the agent posts
    Ready True again and the taint goes."""
    root = tmp_path / "flotilla"
    home = tmp_path / "home"
    home.mkdir()
    grace = 12.0
    r = subprocess.run([FLOTILLA, "up", "--detach", "--members", "2", "--pull-members", "1", "--port", "0",
                        "--data-dir", str(root), "--metrics-bind-address", "0",
                        "--cluster-monitor-grace-period", str(grace)],
                       capture_output=True, text=True, timeout=120)
    pid = None
    try:
        assert r.returncode == 0, f"flotilla up failed:\n{r.stdout}\n{r.stderr}"
        u = Up(root, Kubectl(root / "kubeconfig", home), {})

        def ready_is(value: str) -> dict[str, Any]:
            cluster = u.cp_get("cluster", PULL)
            conds = (cluster.get("status") or {}).get("conditions") or []
            assert [c["status"] for c in conds if c["type"] == "Ready"] == [value], conds
            return cluster

        u.eventually(lambda: ready_is("True"), "member2 Ready through its agent")
        pid = u.layout.agent_pid(PULL)
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        frozen = time.monotonic()
        renewed = u.cp_get("lease", "-n", "karmada-cluster", PULL)["spec"]["renewTime"]
        unknown = u.eventually(lambda: ready_is("Unknown"), "member2 Ready Unknown", timeout=grace + 25)
        took = time.monotonic() - frozen
        assert took <= grace + 1 + 15, took  # the monitor's period is 1 s in flotilla up; 15 s of slack
        assert u.cp_get("lease", "-n", "karmada-cluster", PULL)["spec"]["renewTime"] == renewed  # frozen: no renewal
        assert [c["reason"] for c in unknown["status"]["conditions"] if c["type"] == "Ready"] == [
            "ClusterStatusUnknown"]

        def tainted() -> None:
            taints = u.cp_get("cluster", PULL)["spec"].get("taints") or []
            assert {"key": NOT_READY, "effect": "NoExecute"} in [
                {"key": t["key"], "effect": t["effect"]} for t in taints], taints

        u.eventually(tainted, "the not-ready policy's NoExecute taint on member2", timeout=15)
        assert u.cp_get("cluster", PUSH)["spec"].get("taints") in (None, [])
        os.kill(pid, signal.SIGCONT)
        pid = None
        u.eventually(lambda: ready_is("True"), "member2 Ready again once its agent is thawed", timeout=30)

        def untainted() -> None:
            taints = u.cp_get("cluster", PULL)["spec"].get("taints") or []
            assert all(t["key"] != NOT_READY for t in taints), taints

        u.eventually(untainted, "the NoExecute taint removed", timeout=15)
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        subprocess.run([FLOTILLA, "down", "--data-dir", str(root)], capture_output=True, text=True, timeout=60)
