"""A ``flotilla up --guard`` stack driven the way an operator would (real processes, the real kubectl, the
``flotilla sim`` commands), for the fault-matrix trials of automatic fencing.

Every timing the trials rely on is here, so that a change of the product's timeline is one edit:
``BOUND`` is the documented ``permit-hold + fence-after + fence-margin``; a fence may land up to
``FENCE_LATE`` after it (the monitor period, a fence-pending phase that waits for the other agents, a loaded
machine), and one renewal may still land after a one-way cut (``RENEW_INTERVAL``).
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from flotilla.local.layout import Layout
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.history import Interval, overlaps, read_history
from flotilla.member.runner import read_admin_file, send_admin
from tests.support.apiserver import Kubectl
from tests.support.pipeline import FLOTILLA, NOT_READY, flink_deployment, tail

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------- timings (seconds)
FENCE_AFTER, PERMIT_HOLD, FENCE_MARGIN = 4.0, 12.0, 4.0
BOUND = PERMIT_HOLD + FENCE_AFTER + FENCE_MARGIN  # no Lease change seen for this long: fenced
MONITOR_PERIOD = 1.0  # flotilla up's --cluster-monitor-period
RENEW_INTERVAL = 10.0  # the agents' Lease renew interval (40 s x 0.25)
PENDING = RENEW_INTERVAL + 5.0  # a fence-pending phase waiting for the other agents' acknowledgements
LOAD_SLACK = 5.0  # kubectl polling and a machine shared with other tests
FENCE_LATE = MONITOR_PERIOD + PENDING + LOAD_SLACK  # how long after its bound a fence may land
FAILOVER = 20.0  # from the fence to the new copy RUNNING: eviction, released Work, creation, the job starting
# the short faults end this long after the control plane last saw a renewal: before the bound by more than a step
# takes on a loaded machine (a frozen agent's guard stops the job fence-after in; the cut heals once the permit has
# lapsed, in the bound's last seconds)
THAW_AT = BOUND - 8
HEAL_AT = PERMIT_HOLD + 2
RESTART_AFTER = BOUND / 4  # the controller-manager restarts this long into a partitioned member's bound
GUARD_FLAGS = ("--guard", "--fence-after", str(FENCE_AFTER), "--permit-hold", str(PERMIT_HOLD),
               "--fence-margin", str(FENCE_MARGIN))

NS = "default"
JOB_LABEL = "failover.flink.io/job-id"
GUARDED = "guard.flotilla.io/guarded"
OUT_OF_SERVICE = "cluster.flotilla.io/out-of-service"
FENCE_EVENT = "ClusterFencedAutomatically"


@dataclass
class Stack:
    root: Path
    cp: Kubectl
    members: dict[str, Kubectl]
    pull: list[str]
    push: list[str]
    jobs: dict[str, str] = field(default_factory=dict)  # job -> the member it was placed on

    @property
    def layout(self) -> Layout:
        return Layout(self.root)

    @property
    def history(self) -> Path:
        return self.layout.members / "history.jsonl"

    # ------------------------------------------------------------------ the operator's commands
    def sim(self, *args: str) -> dict[str, Any]:
        r = subprocess.run([FLOTILLA, "sim", *args, "--data-dir", str(self.layout.members)], capture_output=True,
                           text=True, timeout=90)
        assert r.returncode == 0, f"flotilla sim {' '.join(args)}: {r.stderr}"
        out: dict[str, Any] = json.loads(r.stdout)
        return out

    def admin(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """What ``flotilla sim`` sends, posted straight to the members' admin endpoint: for a step that must land
        on time, without a command's start-up on a loaded machine."""
        url = read_admin_file(self.layout.members, self.pull[0])["admin_url"]
        return send_admin(url, path, body, what=path)

    def fault(self, member: str, mode: str) -> dict[str, Any]:
        return self.sim("fault", member, "--mode", mode)

    def agent(self, member: str, mode: str) -> dict[str, Any]:
        return self.sim("agent", member, "--mode", mode)

    def unfence(self, *names: str) -> None:
        for name in names:
            r = subprocess.run([FLOTILLA, "unfence", name, "--kubeconfig", str(self.root / "kubeconfig")],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr

    # ------------------------------------------------------------------ reading
    def eventually(self, check: Callable[[], T], what: str, timeout: float = 40.0) -> T:
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                return check()
            except (AssertionError, KeyError, ValueError, TypeError) as e:
                last = e
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what}: {last}\n--- up.log:\n"
                             f"{tail(self.layout.log_file)}")

    def cp_get(self, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.cp.run("get", *args, "-o", "json").stdout)
        return out

    def clusters(self) -> dict[str, dict[str, Any]]:
        return {c["metadata"]["name"]: c for c in self.cp_get("clusters")["items"]}

    def fenced(self) -> set[str]:
        return {name for name, c in self.clusters().items() if fenced(c)}

    def renew_times(self) -> dict[str, str]:
        leases = self.cp_get("leases", "-n", "karmada-cluster")["items"]
        return {item["metadata"]["name"]: (item.get("spec") or {}).get("renewTime") or "" for item in leases}

    def fence_events(self) -> list[dict[str, Any]]:
        return [e for e in self.cp_get("events", "-A")["items"] if e.get("reason") == FENCE_EVENT]

    def job_state(self, member: str, job: str) -> str | None:
        """The job's state in ``member``'s copy, None when the member has no copy ("" when it has no state)."""
        r = self.members[member].run("get", "flinkdeployments", job, "-n", NS, "-o", "json", check=False)
        if r.returncode != 0:
            assert "NotFound" in r.stderr, f"{member}: {r.stderr.strip()}"
            return None
        obj = json.loads(r.stdout)
        return str(((obj.get("status") or {}).get("jobStatus") or {}).get("state") or "")

    def states(self) -> dict[str, dict[str, str] | None]:
        """Every member's FlinkDeployments: member -> job -> state ("" before it has one); None for a member
        whose API does not answer (down, powered off)."""
        out: dict[str, dict[str, str] | None] = {}
        for m, kubectl in self.members.items():
            r = kubectl.run("get", "flinkdeployments", "-n", NS, "-o", "json", "--request-timeout=5s", check=False)
            if r.returncode != 0:
                out[m] = None
                continue
            items = json.loads(r.stdout)["items"]
            out[m] = {i["metadata"]["name"]: str(((i.get("status") or {}).get("jobStatus") or {}).get("state") or "")
                      for i in items}
        return out

    def runs(self, job: str) -> list[Interval]:
        return [iv for iv in read_history(self.history) if iv.kind == "FlinkDeployment" and iv.name == job]

    def assert_never_twice(self, jobs: Iterable[str]) -> None:
        """Safety, from the members' running history: no two copies of a job ever ran at the same time."""
        for job in jobs:
            both = overlaps(self.runs(job))
            assert both == [], f"two copies of {job} ran at once: {both}"

    # ------------------------------------------------------------------ workloads
    def place_jobs(self, homes: dict[str, str]) -> None:
        """One guarded job (FlinkDeployment, purgeMode Directly, job id preserved) per entry, placed on its home
        member; its only other choice is a Push member, so only a fence moves it (it tolerates not-ready). Each is
        running and has completed a checkpoint on return: a job lost before its first checkpoint has nothing to
        resume from, and its new copy is held (D20) rather than started empty."""
        docs = []
        for job, home in homes.items():
            docs += [flink_deployment(job), job_policy(job, home, self.push)]
        self.cp.run("apply", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))
        for job, home in homes.items():
            self.eventually(lambda job=job, home=home: _equal(self.job_state(home, job), "RUNNING"),
                            f"{job} RUNNING in {home}", timeout=60)
            self.eventually(lambda job=job, home=home: _checkpointed(self.job_annotations(home, job)),
                            f"a checkpoint of {job} in {home}", timeout=60)
            self.jobs[job] = home

    def job_annotations(self, member: str, job: str) -> dict[str, str]:
        """The annotations of the job's copy in ``member`` ({} when it has none)."""
        r = self.members[member].run("get", "flinkdeployments", job, "-n", NS, "-o", "json", check=False)
        if r.returncode != 0:
            return {}
        return dict((json.loads(r.stdout).get("metadata") or {}).get("annotations") or {})

    def rehome(self, watch: Any) -> None:
        """The jobs a :class:`~tests.support.fencing_watch.Watch` saw move live in their new member from now on."""
        for job, (member, _) in watch.moved.items():
            self.jobs[job] = member

    def where_running(self, job: str) -> list[str]:
        return [m for m in self.members if self.job_state(m, job) == "RUNNING"]


def job_policy(job: str, home: str, elsewhere: list[str]) -> dict[str, Any]:
    """Placed on ``home`` first (the first affinity term), on one of ``elsewhere`` once ``home`` is fenced."""
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": job, "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "name": job}],
            "placement": {
                "clusterAffinities": [{"affinityName": "home", "clusterNames": [home]},
                                      {"affinityName": "elsewhere", "clusterNames": list(elsewhere)}],
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
                "clusterTolerations": [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]},
            "failover": {"cluster": {"purgeMode": "Directly", "statePreservation": {
                "rules": [{"aliasLabelName": JOB_LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}},
        },
    }


def start(root: Path, members: int, pull_members: int) -> Stack:
    home = root.parent / f"{root.name}-home"
    home.mkdir()
    r = subprocess.run([FLOTILLA, "up", "--detach", "--port", "0", "--data-dir", str(root),
                        "--metrics-bind-address", "0", "--members", str(members), "--pull-members",
                        str(pull_members), *GUARD_FLAGS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"flotilla up failed:\n{r.stdout}\n{r.stderr}"
    names = [f"member{i}" for i in range(1, members + 1)]
    stack = Stack(root, Kubectl(root / "kubeconfig", home),
                  {m: Kubectl(root / "members" / m / "kubeconfig", home) for m in names},
                  pull=names[members - pull_members:], push=names[:members - pull_members])
    crd = flink_deployment_crd()
    stack.cp.run("apply", "-f", "-", input=json.dumps(crd))
    stack.cp.run("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=20s")
    for m in stack.pull:
        stack.eventually(lambda m=m: announced(stack, m), f"{m} Ready, announcing its guard", timeout=60)
    return stack


def stop(root: Path) -> None:
    subprocess.run([FLOTILLA, "down", "--data-dir", str(root)], capture_output=True, text=True, timeout=60)


def announced(stack: Stack, name: str) -> None:
    cluster = stack.cp_get("cluster", name)
    annotations = cluster["metadata"].get("annotations") or {}
    assert annotations.get("guard.flotilla.io/fence-after") == f"{FENCE_AFTER:g}s", annotations
    ready = condition(cluster, "Ready")
    assert ready is not None and ready["status"] == "True", ready


def fenced(cluster: dict[str, Any]) -> bool:
    return any(t.get("key") == OUT_OF_SERVICE and t.get("effect") == "NoExecute"
               for t in (cluster.get("spec") or {}).get("taints") or [])


def condition(cluster: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (cluster.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def wait_for_renewal(stack: Stack, names: Iterable[str], timeout: float = RENEW_INTERVAL + 10) -> str:
    """Block until one of ``names`` renews its Lease (a new renewTime, seen through a watch, so at once); return
    which. A fault applied right after it starts when the control plane last saw a change, so its bound can be
    timed from the fault."""
    names = set(names)
    watch = stack.cp.popen("get", "leases", "-n", "karmada-cluster", "--watch",
                           "-o", "jsonpath={.metadata.name} {.spec.renewTime}{\"\\n\"}")
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in watch.stdout or []], daemon=True)
    reader.start()
    try:
        first: dict[str, str] = {}  # the listing's value, then every change
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                name, _, renewed = lines.get(timeout=0.5).strip().partition(" ")
            except queue.Empty:
                continue
            if name in names and name in first and renewed != first[name]:
                return name
            first.setdefault(name, renewed)
        raise AssertionError(f"none of {sorted(names)} renewed its Lease within {timeout:g}s")
    finally:
        watch.kill()
        watch.wait()


def heal_and_unfence(stack: Stack, names: Iterable[str]) -> None:
    """After the members' faults are undone: each one's agent renews its Lease again, then `flotilla unfence`,
    then Ready and untainted (the rule would fence it again at once while no renewal is seen)."""
    names = list(names)
    before = stack.renew_times()
    for name in names:
        stack.eventually(lambda name=name: _differ(stack.renew_times().get(name), before.get(name)),
                         f"{name}'s Lease renewed again", timeout=RENEW_INTERVAL + 30)
    stack.unfence(*names)

    def ready_untainted() -> None:
        clusters = stack.clusters()
        for name in names:
            ready = condition(clusters[name], "Ready")
            assert ready is not None and ready["status"] == "True", (name, ready)
            assert not (clusters[name]["spec"].get("taints") or []), (name, clusters[name]["spec"])
    stack.eventually(ready_untainted, f"{names} Ready and untainted after flotilla unfence", timeout=40)


def _checkpointed(annotations: dict[str, str]) -> None:
    last = annotations.get("sim.flotilla.io/last-checkpoint") or "none"
    assert last != "none", "no checkpoint completed yet"


def _equal(got: object, want: object) -> None:
    assert got == want, f"{got!r}, want {want!r}"


def _differ(got: object, old: object) -> None:
    assert got != old, f"still {old!r}"
