"""Automatic fencing end to end, under a real partition: ``flotilla up --guard`` driven by the real kubectl.

``flotilla up --detach --members 3 --pull-members 1 --guard --fence-after 4 --permit-hold 12 --fence-margin 4``:
member3 is a Pull member whose agent keeps the run permit and whose member runs the guard; the control plane
fences it once it has seen no Lease renewal for 12 + 4 + 4 = 20 s. A FlinkDeployment is placed on member3 first,
failing over with ``purgeMode: Directly`` and its job id preserved (the policy of ``examples/failover``); a
Deployment without failover (unguarded) runs on member3 too. Then ``flotilla sim fault member3 --mode partition``
and nothing else typed:

1. liveness: the guard stops member3's job (the object is still there, its running history closes), the control
   plane fences member3 by itself (taint, ``Fenced`` LeaseExpired, Event ``ClusterFencedAutomatically``) and the
   job runs in member1 or member2 with the old job id, within the bound this page's settings give;
2. safety: over the whole trial, the members' running history never has the job in two members at once;
3. heal: ``--mode recover``: member3's stale copy is deleted without running again, member3 stays fenced until
   ``flotilla unfence``, then it is Ready and untainted;
4. the unguarded Deployment keeps all its pods ready in member3 through the partition.

A second stack, ``--members 3 --pull-members 3 --guard``, partitions two Pull members at once: the control plane
then sees one cluster of three live, not a majority, and fences nobody.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from flotilla.local.layout import Layout
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.history import Interval, overlaps, read_history
from tests.support.apiserver import Kubectl
from tests.support.pipeline import FLOTILLA, NOT_READY, deployment, flink_deployment, policy, tail

pytestmark = pytest.mark.kubectl

T = TypeVar("T")
NS = "default"
PULL = "member3"
PUSH = ("member1", "member2")
JOB, WEB = "fenced-wc", "fenced-web"
JOB_LABEL = "failover.flink.io/job-id"
GUARDED = "guard.flotilla.io/guarded"
OUT_OF_SERVICE = "cluster.flotilla.io/out-of-service"
FENCE_AFTER, PERMIT_HOLD, FENCE_MARGIN, MONITOR_PERIOD = 4.0, 12.0, 4.0, 1.0
BOUND = PERMIT_HOLD + FENCE_AFTER + FENCE_MARGIN  # seconds without a renewal seen before the fence
FAILOVER_SLACK = 20.0  # the eviction, the released Work, the new copy's creation and its job reaching RUNNING
GUARD_FLAGS = ("--guard", "--fence-after", str(FENCE_AFTER), "--permit-hold", str(PERMIT_HOLD),
               "--fence-margin", str(FENCE_MARGIN))


@dataclass
class Up:
    root: Path
    cp: Kubectl
    members: dict[str, Kubectl]

    @property
    def layout(self) -> Layout:
        return Layout(self.root)

    @property
    def history(self) -> Path:
        return self.layout.members / "history.jsonl"

    def fault(self, member: str, mode: str) -> None:
        r = subprocess.run([FLOTILLA, "sim", "fault", member, "--mode", mode, "--data-dir", str(self.layout.members)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr

    def faults(self, members: tuple[str, ...], mode: str) -> None:
        """The same fault on several members at the same moment (their commands run side by side)."""
        procs = [subprocess.Popen([FLOTILLA, "sim", "fault", m, "--mode", mode, "--data-dir",
                                   str(self.layout.members)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for m in members]
        for proc in procs:
            _out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err

    def flotilla(self, *args: str) -> str:
        r = subprocess.run([FLOTILLA, *args, "--kubeconfig", str(self.root / "kubeconfig")], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def eventually(self, check: Callable[[], T], what: str, timeout: float = 40.0) -> T:
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                return check()
            except (AssertionError, KeyError, ValueError) as e:
                last = e
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what}: {last}\n--- up.log:\n"
                             f"{tail(self.layout.log_file)}")

    def cp_get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.cp.run("get", *args, "-o", "json").stdout)

    def cluster(self, name: str) -> dict[str, Any]:
        return self.cp_get("cluster", name)

    def member_get(self, member: str, resource: str, name: str) -> dict[str, Any] | None:
        r = self.members[member].run("get", resource, name, "-n", NS, "-o", "json", check=False)
        if r.returncode != 0:
            assert "NotFound" in r.stderr, f"{member}: {r.stderr.strip()}"
            return None
        out: dict[str, Any] = json.loads(r.stdout)
        return out

    def job_state(self, member: str) -> str | None:
        obj = self.member_get(member, "flinkdeployments", JOB)
        return (((obj or {}).get("status") or {}).get("jobStatus") or {}).get("state")

    def apply(self, *objs: dict[str, Any]) -> None:
        self.cp.run("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))

    def set_taints(self, cluster: str, taints: list[dict[str, Any]]) -> None:
        self.cp.run("patch", "cluster", cluster, "--type", "merge", "-p", json.dumps({"spec": {"taints": taints}}))


def start(root: Path, *argv: str) -> Up:
    home = root.parent / f"{root.name}-home"
    home.mkdir()
    r = subprocess.run([FLOTILLA, "up", "--detach", "--port", "0", "--data-dir", str(root),
                        "--metrics-bind-address", "0", *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"flotilla up failed:\n{r.stdout}\n{r.stderr}"
    names = [f"member{i}" for i in range(1, 4)]
    return Up(root, Kubectl(root / "kubeconfig", home),
              {m: Kubectl(root / "members" / m / "kubeconfig", home) for m in names})


def stop(root: Path) -> None:
    subprocess.run([FLOTILLA, "down", "--data-dir", str(root)], capture_output=True, text=True, timeout=60)


def fenced(cluster: dict[str, Any]) -> bool:
    return any(t.get("key") == OUT_OF_SERVICE and t.get("effect") == "NoExecute"
               for t in (cluster.get("spec") or {}).get("taints") or [])


def condition(cluster: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (cluster.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def announced(up: Up, name: str) -> None:
    annotations = up.cluster(name)["metadata"].get("annotations") or {}
    assert annotations.get("guard.flotilla.io/fence-after") == f"{FENCE_AFTER:g}s", annotations
    assert annotations.get("guard.flotilla.io/permit-hold") == f"{PERMIT_HOLD:g}s", annotations
    ready = condition(up.cluster(name), "Ready")
    assert ready is not None and ready["status"] == "True", ready


def wall(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def job_runs(history: Path) -> list[Interval]:
    return [iv for iv in read_history(history) if iv.kind == "FlinkDeployment" and iv.name == JOB]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("fencing") / "flotilla"
    try:
        u = start(root, "--members", "3", "--pull-members", "1", *GUARD_FLAGS)
        crd = flink_deployment_crd()
        u.cp.run("apply", "-f", "-", input=json.dumps(crd))
        u.cp.run("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=20s")
        yield u
    finally:
        stop(root)


def test_a_partitioned_guarded_pull_member_is_fenced_by_itself_and_its_job_moves_never_running_twice(
        up: Up) -> None:
    up.eventually(lambda: announced(up, PULL), f"{PULL} Ready, announcing its guard (fence-after, permit-hold)")
    # the scheduler must pick the Pull member first: the Push members are closed to new placements meanwhile
    for m in PUSH:
        up.set_taints(m, [{"key": "not-yet", "effect": "NoSchedule"}])
    tolerate_not_ready = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]
    one_cluster = [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    up.apply(
        flink_deployment(JOB),
        policy(JOB, "FlinkDeployment", "flink.apache.org/v1beta1",
               {"clusterAffinity": {"clusterNames": [PULL, *PUSH]}, "spreadConstraints": one_cluster,
                "clusterTolerations": tolerate_not_ready},  # only the fence moves it
               failover={"cluster": {"purgeMode": "Directly", "statePreservation": {
                   "rules": [{"aliasLabelName": JOB_LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}}),
        deployment(WEB, 2),
        policy(WEB, "Deployment", "apps/v1",  # no failover: unguarded; it tolerates the fence and stays
               {"clusterAffinity": {"clusterNames": [PULL]}, "clusterTolerations": [
                   *tolerate_not_ready, {"key": OUT_OF_SERVICE, "operator": "Exists", "effect": "NoExecute"}]}))

    def placed() -> str:
        obj = up.member_get(PULL, "flinkdeployments", JOB)
        assert obj is not None and obj["metadata"]["labels"].get(GUARDED) == "true", obj and obj["metadata"]
        assert obj["status"]["jobStatus"]["state"] == "RUNNING", obj["status"]
        rb = up.cp_get("rb", f"{JOB}-flinkdeployment", "-n", NS)
        items = {i["clusterName"]: i for i in (rb.get("status") or {}).get("aggregatedStatus") or []}
        job_id = items[PULL]["status"]["jobStatus"]["jobId"]  # what the state preservation rule reads
        assert job_id
        web = up.member_get(PULL, "deployments", WEB)
        assert web is not None and (web.get("status") or {}).get("readyReplicas") == 2, web and web.get("status")
        assert GUARDED not in (web["metadata"].get("labels") or {}), web["metadata"]
        return str(job_id)

    job_id = up.eventually(placed, f"{JOB} RUNNING in {PULL} (guarded) and {WEB} ready there (unguarded)",
                           timeout=60)
    for m in PUSH:
        up.set_taints(m, [])
    for m in PUSH:
        assert up.member_get(m, "flinkdeployments", JOB) is None

    # 1. the partition, and nothing else typed
    cut = time.monotonic()
    cut_wall = time.time()
    up.fault(PULL, "partition")
    seen: dict[str, float] = {}  # what, seconds after the cut
    web_ready: list[int] = []
    new_home: str | None = None
    deadline = cut + BOUND + MONITOR_PERIOD + FAILOVER_SLACK
    while new_home is None and time.monotonic() < deadline:
        pull_state = up.job_state(PULL)
        if pull_state != "RUNNING" and up.member_get(PULL, "flinkdeployments", JOB) is not None:
            seen.setdefault("pull job stopped, object still there", time.monotonic() - cut)
        web = up.member_get(PULL, "deployments", WEB)
        web_ready.append(int(((web or {}).get("status") or {}).get("readyReplicas") or 0))
        if "fenced" not in seen and fenced(up.cluster(PULL)):
            seen["fenced"] = time.monotonic() - cut
        for m in PUSH:
            if up.job_state(m) == "RUNNING":
                new_home = m
                seen["new copy RUNNING"] = time.monotonic() - cut
        time.sleep(0.3)
    took = seen.get("new copy RUNNING")
    print(f"automatic fencing: {json.dumps({k: round(v, 1) for k, v in seen.items()})} (bound {BOUND:g}s)")
    assert new_home is not None and took is not None, f"no new copy within {deadline - cut:.0f}s: {seen}\n" \
        f"{tail(up.layout.log_file)}"
    assert took <= BOUND + MONITOR_PERIOD + FAILOVER_SLACK, seen
    assert "pull job stopped, object still there" in seen, seen  # the guard stopped it: nobody deleted it
    assert "fenced" in seen, seen

    cluster = up.cluster(PULL)
    assert fenced(cluster), cluster["spec"]
    cond = condition(cluster, "Fenced")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "LeaseExpired"), cond
    assert f"No renewal of Lease karmada-cluster/{PULL} seen for" in cond["message"], cond["message"]
    assert f"= {BOUND:g}s" in cond["message"] and "2 of 3 clusters live" in cond["message"], cond["message"]
    events = json.loads(up.cp.run("get", "events", "-A", "-o", "json").stdout)["items"]
    fence_events = [e for e in events if e.get("reason") == "ClusterFencedAutomatically"
                    and (e.get("involvedObject") or {}).get("name") == PULL]
    assert len(fence_events) == 1 and fence_events[0]["type"] == "Warning", fence_events
    new_copy = up.member_get(new_home, "flinkdeployments", JOB)
    assert new_copy is not None and new_copy["metadata"]["labels"].get(JOB_LABEL) == job_id, new_copy

    # the guard's stop is in the running history, before the control plane fenced the cluster
    pull_runs = [iv for iv in job_runs(up.history) if iv.member == PULL]
    assert pull_runs and all(iv.end is not None for iv in pull_runs), pull_runs
    stopped_at = max(iv.end for iv in pull_runs if iv.end is not None)
    assert stopped_at > cut_wall, "the job in member3 stopped before the partition"
    assert stopped_at < wall(cond["lastTransitionTime"]) + 1.0, (stopped_at, cond)  # (seconds resolution)
    assert "guard stops guarded workloads" in up.layout.log_file.read_text(), tail(up.layout.log_file)

    # 4. the unguarded Deployment kept its pods ready throughout
    assert web_ready and min(web_ready) == 2, web_ready

    # 3. heal: the stale copy goes without running again; the fence stays until unfence
    renewed = up.cp_get("lease", PULL, "-n", "karmada-cluster")["spec"]["renewTime"]
    up.fault(PULL, "recover")
    up.eventually(lambda: _equal(up.member_get(PULL, "flinkdeployments", JOB), None),
                  f"the stale copy deleted in {PULL}", timeout=40)
    time.sleep(2)
    assert fenced(up.cluster(PULL)), f"{PULL} unfenced without flotilla unfence"
    assert [iv for iv in job_runs(up.history) if iv.member == PULL and iv.start > stopped_at] == [], \
        "the stale copy ran again after the guard stopped it"
    assert up.job_state(new_home) == "RUNNING"
    web = up.member_get(PULL, "deployments", WEB)
    assert web is not None and web["status"].get("readyReplicas") == 2, web

    # 2. safety over the whole trial
    runs = job_runs(up.history)
    assert {iv.member for iv in runs} == {PULL, new_home}, runs
    assert overlaps(runs) == [], f"two copies of {JOB} ran at once: {overlaps(runs)}"

    # unfenced only once its agent renews the Lease again: before that the rule would fence it again at once
    up.eventually(lambda: _differ(up.cp_get("lease", PULL, "-n", "karmada-cluster")["spec"]["renewTime"], renewed),
                  f"{PULL}'s Lease renewed again after recover", timeout=30)
    up.flotilla("unfence", PULL)

    def ready_untainted() -> None:
        c = up.cluster(PULL)
        ready = condition(c, "Ready")
        assert ready is not None and ready["status"] == "True" and not (c["spec"].get("taints") or []), c
    up.eventually(ready_untainted, f"{PULL} Ready and untainted after flotilla unfence", timeout=40)
    assert overlaps(job_runs(up.history)) == []


def _differ(got: object, old: object) -> None:
    assert got != old, f"still {old!r}"


def _equal(got: object, want: object) -> None:
    assert got == want, f"{got!r}, want {want!r}"


@pytest.mark.timeout(180)
def test_two_of_three_pull_members_cut_off_nobody_is_fenced_until_a_majority_is_back(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Partitioning member2 and member3 at once leaves the control plane one live cluster of three: past both
    bounds neither is fenced (the control plane may be the one cut off), and it says so in its log. Once member2
    is back, two of three are live and member3, still cut off, is fenced."""
    root = tmp_path_factory.mktemp("minority") / "flotilla"
    try:
        up = start(root, "--members", "3", "--pull-members", "3", *GUARD_FLAGS)
        for m in ("member1", "member2", "member3"):
            up.eventually(lambda m=m: announced(up, m), f"{m} Ready, announcing its guard", timeout=60)
        cut = time.monotonic()
        up.faults(("member2", "member3"), "partition")  # at once: one cut seconds before the other is another case
        while time.monotonic() < cut + BOUND + MONITOR_PERIOD + 8:
            for m in ("member2", "member3"):
                c = up.cluster(m)
                # the fence may be marked pending (that fences nothing), never written
                assert not fenced(c) and (condition(c, "Fenced") or {}).get("status") != "True", \
                    f"{m} fenced by a minority: {c}"
            time.sleep(1)
        log = up.layout.log_file.read_text()
        assert "but only 1 of 3 clusters live: not fenced without a strict majority" in log, tail(up.layout.log_file)
        events = json.loads(up.cp.run("get", "events", "-A", "-o", "json").stdout)["items"]
        assert not [e for e in events if e.get("reason") == "ClusterFencedAutomatically"], events

        up.fault("member2", "recover")
        up.eventually(lambda: _equal(fenced(up.cluster("member3")), True),
                      "member3 fenced once member2 is back (2 of 3 live)", timeout=40)
        assert not fenced(up.cluster("member2"))
        cond = condition(up.cluster("member3"), "Fenced")
        assert cond is not None and "2 of 3 clusters live" in cond["message"], cond
    finally:
        stop(root)
