"""``flotilla soak partition``: randomized fault trials against guarded Pull members, checked from the history.

One ``flotilla up --detach --guard`` stack (every member a Pull member with its agent, short fencing timings) runs
every trial. A trial places a few workloads (FlinkDeployments and StatefulSets failing over with
``purgeMode: Directly`` and their state preserved) on the members it is about to fault, applies one fault or two
from :data:`FAULTS` (drawn from the seed), heals each after its hold time, waits until the fleet settles (a
fenced member unfenced once its agent renews its Lease again, every cluster Ready and untainted, every workload
running exactly once), and checks :mod:`flotilla.reliability.trial_checks` against the members' running history.

The faults are a table of small named functions, so another fault is a few lines: a :class:`Fault` with what it
does (``inject``), how it is undone (``heal``) and how long it lasts (``hold``, drawn from the trial's random
generator). Every fault acts through the same tools a person would use: ``flotilla sim fault``, signals to the
agent's pid (``D/agents/<member>/agent.pid``), ``flotilla unfence``.

The control plane cannot be restarted in place here (``flotilla up`` runs it in the members' process), so a
control-plane restart is not among the faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shlex
import signal
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from flotilla.api.agents import LEASE_NAMESPACE
from flotilla.bench.workloads import JOB_LABEL
from flotilla.failover.fencing import is_fenced
from flotilla.member.flink_model import ANN_RESTORED_FROM
from flotilla.reliability.fault_names import FAULT_WHAT
from flotilla.reliability.trial_checks import (
    WorkloadOutcome,
    counts_by_member,
    loss_problems,
    trial_problems,
    workload_timeline,
)

__all__ = ["FAULTS", "Fault", "FaultPlan", "PartitionParams", "Timings", "TrialPlan", "plan_trials",
           "run_partition_command", "run_partition_trials"]

NAMESPACE: Final = "soak"
STATE_LABEL: Final = "failover.example.io/last-replicas"
POLL: Final = 0.5


@dataclass(frozen=True)
class Timings:
    """The stack's fencing settings and what the trial allows on top of them (seconds), in one place."""

    fence_after: float = 4.0
    permit_hold: float = 12.0
    fence_margin: float = 4.0
    monitor_period: float = 1.0  # the controller-manager's --cluster-monitor-period under flotilla up
    renew_interval: float = 10.0  # the agents' Lease renew interval
    fence_pending: float = 15.0  # a fence may land up to renew-interval + 5 s after the bound (fence-pending phase)
    failover_slack: float = 20.0  # eviction, the released Work, the new copy created and running
    place_timeout: float = 90.0  # until the trial's workloads run in their first member
    settle_timeout: float = 150.0  # after the last heal, until the fleet has settled

    @property
    def bound(self) -> float:
        """No Lease change seen for this long: the control plane fences (permit-hold + fence-after + margin)."""
        return self.permit_hold + self.fence_after + self.fence_margin

    @property
    def move_deadline(self) -> float:
        """From the cut until a workload of a fenced member runs elsewhere, at the latest."""
        return self.bound + self.monitor_period + self.fence_pending + self.failover_slack


# ------------------------------------------------------------------------------------------------ the faults


class Fleet:
    """What the faults act on: the ``flotilla up`` stack's data directory, its agents and members."""

    def __init__(self, root: Path) -> None:
        from flotilla.local.layout import Layout

        self.root = root
        self.layout = Layout(root)
        self.frozen: dict[str, int] = {}  # member -> the agent pid SIGSTOPped

    async def sim_fault(self, member: str, mode: str) -> None:
        """What ``flotilla sim fault MEMBER --mode MODE --data-dir D/members`` does, without starting a process (so
        that two members healed together are healed within milliseconds, and a heal lands when it is due)."""
        from flotilla.member.runner import send_fault

        await asyncio.to_thread(send_fault, self.layout.members, member, mode)

    def agent_pid(self, member: str) -> int:
        pid = self.layout.agent_pid(member)
        if pid is None:
            raise RuntimeError(f"no agent pid for {member} in {self.layout.agent_dir(member)}")
        return pid

    def signal_agent(self, member: str, sig: int, pid: int | None = None) -> int:
        pid = self.agent_pid(member) if pid is None else pid
        os.kill(pid, sig)
        return pid


FaultStep = Callable[[Fleet, tuple[str, ...]], Awaitable[None]]
HoldRule = Callable[[random.Random, Timings], float]


@dataclass(frozen=True)
class Fault:
    """One kind of fault: what it does to ``members`` members, how it is undone, how long it lasts."""

    name: str
    what: str
    members: int
    inject: FaultStep
    heal: FaultStep
    hold: HoldRule
    weight: int = 1
    until_moved: bool = True  # healed early once every workload of its members runs elsewhere


def _sim_fault(mode: str) -> FaultStep:
    """``flotilla sim fault MEMBER --mode MODE`` for each member."""

    async def step(fleet: Fleet, members: tuple[str, ...]) -> None:
        for m in members:
            await fleet.sim_fault(m, mode)

    return step


_partition = _sim_fault("partition")
_recover = _sim_fault("recover")
_down = _sim_fault("down")
_off = _sim_fault("off")


async def _kill_agent(fleet: Fleet, members: tuple[str, ...]) -> None:
    for m in members:
        fleet.signal_agent(m, signal.SIGKILL)  # flotilla up's supervisor starts it again


async def _nothing(fleet: Fleet, members: tuple[str, ...]) -> None:
    return None


async def _freeze_agent(fleet: Fleet, members: tuple[str, ...]) -> None:
    for m in members:
        fleet.frozen[m] = fleet.signal_agent(m, signal.SIGSTOP)


async def _thaw_agent(fleet: Fleet, members: tuple[str, ...]) -> None:
    for m in members:
        pid = fleet.frozen.pop(m, None)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                fleet.signal_agent(m, signal.SIGCONT, pid)


def _past_failover(rng: random.Random, t: Timings) -> float:
    return t.move_deadline


def _around_bound(rng: random.Random, t: Timings) -> float:
    # the fence lands between bound - renew-interval (the last renewal came just before the cut) and the bound
    # (plus the fence-pending phase) after the cut: heal anywhere from well before to just after that window
    return rng.uniform(t.bound - t.renew_interval, t.bound + t.monitor_period + 2.0)


def _beyond_bound(rng: random.Random, t: Timings) -> float:
    return t.bound + t.monitor_period + t.fence_pending + rng.uniform(0.0, 5.0)


def _brief(rng: random.Random, t: Timings) -> float:
    return rng.uniform(2.0, t.fence_after + 6.0)


def _up_to_failover(rng: random.Random, t: Timings) -> float:
    return rng.uniform(2.0, t.move_deadline)


def _api_outage(rng: random.Random, t: Timings) -> float:
    return rng.uniform(5.0, t.bound + 10.0)


#: The faults a trial draws from: name -> Fault. ``members`` members are chosen for it from the seed.
FAULTS: Final[dict[str, Fault]] = {f.name: f for f in (
    Fault("partition", FAULT_WHAT["partition"], 1, _partition, _recover,
          _past_failover, weight=4),
    Fault("partition-near-bound", FAULT_WHAT["partition-near-bound"], 1, _partition,
          _recover, _around_bound, weight=2, until_moved=False),
    Fault("partition-two", FAULT_WHAT["partition-two"], 2, _partition, _recover, _beyond_bound),
    Fault("agent-kill", FAULT_WHAT["agent-kill"], 1, _kill_agent, _nothing,
          _brief, until_moved=False),
    Fault("agent-freeze", FAULT_WHAT["agent-freeze"], 1, _freeze_agent, _thaw_agent,
          _up_to_failover),
    Fault("member-down", FAULT_WHAT["member-down"], 1, _down, _recover,
          _api_outage),
    Fault("member-off", FAULT_WHAT["member-off"], 1, _off, _recover, _api_outage),
)}


@dataclass(frozen=True)
class FaultPlan:
    fault: str
    members: tuple[str, ...]
    hold: float  # seconds from the cut until it is healed (at the latest, with until_moved)


@dataclass(frozen=True)
class TrialPlan:
    index: int
    faults: tuple[FaultPlan, ...]

    @property
    def targets(self) -> list[str]:
        return [m for f in self.faults for m in f.members]

    def describe(self) -> str:
        return " + ".join(f"{f.fault}({','.join(f.members)}) {f.hold:.1f}s" for f in self.faults)


def plan_trials(seed: int, trials: int, members: Sequence[str], faults: Mapping[str, Fault],
                timings: Timings) -> list[TrialPlan]:
    """Each trial's faults, members and hold times, from ``seed`` alone (pure; the same seed, the same plan).

    One fault or two together (half the trials each, when two fit); at least one member is never faulted, so a
    workload always has somewhere to go. The first fault of the first trials takes every fault that fits in turn
    (in an order drawn from the seed), so that as many trials as there are faults try each of them at least once;
    after that the faults are drawn by their weights."""
    rng = random.Random(seed)
    names = sorted(faults)
    every = [n for n in names if faults[n].members <= len(members) - 1]
    rng.shuffle(every)
    plans: list[TrialPlan] = []
    for index in range(1, trials + 1):
        free = list(members)
        chosen: list[FaultPlan] = []
        for slot in range(1 if rng.random() < 0.5 else 2):
            fits = [n for n in names if faults[n].members <= len(free) - 1]
            if not fits:
                break
            if slot == 0 and index <= len(every):
                name = every[index - 1]
            else:
                name = rng.choices(fits, weights=[faults[n].weight for n in fits])[0]
            picked = tuple(sorted(rng.sample(free, faults[name].members)))
            free = [m for m in free if m not in picked]
            chosen.append(FaultPlan(name, picked, round(faults[name].hold(rng, timings), 1)))
        if not chosen:
            raise ValueError(f"no fault fits {len(members)} members (one must stay unfaulted)")
        plans.append(TrialPlan(index, tuple(chosen)))
    return plans


# ------------------------------------------------------------------------------------------------ the stack


async def run_flotilla(*argv: str, limit: float = 120.0) -> str:
    """Run ``flotilla ARGV`` (this Python's) and return its stdout; RuntimeError when it fails."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "flotilla.main", *argv,
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), limit)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"`flotilla {shlex.join(argv)}` did not finish within {limit:g}s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"`flotilla {shlex.join(argv)}` exited with {proc.returncode}: "
                           f"{err.decode(errors='replace').strip()[-2000:]}")
    return out.decode(errors="replace")


def _kinds() -> dict[str, Any]:
    from flotilla.bench.workloads import FLINK
    from flotilla.kube.resources import STATEFULSETS

    return {"FlinkDeployment": FLINK, "StatefulSet": STATEFULSETS}


def workload_manifest(kind: str, name: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": NAMESPACE, "labels": {"app": name}}
    if kind == "FlinkDeployment":
        return {"apiVersion": "flink.apache.org/v1beta1", "kind": kind, "metadata": meta,
                "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                         "jobManager": {"resource": {"memory": "1024m", "cpu": 0.5}},
                         "taskManager": {"resource": {"memory": "1024m", "cpu": 0.5}},
                         "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 1,
                                 "upgradeMode": "last-state"}}}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
            "spec": {"replicas": 1, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}}


def state_rule(kind: str) -> tuple[str, str, tuple[str, ...]]:
    """(aliasLabelName, jsonPath, where the rule reads in the reflected status) of ``kind``'s state rule."""
    if kind == "FlinkDeployment":
        return JOB_LABEL, "{ .jobStatus.jobId }", ("jobStatus", "jobId")
    return STATE_LABEL, "{.replicas}", ("replicas",)


def policy_manifest(kind: str, name: str, home: str, others: Sequence[str]) -> dict[str, Any]:
    """Run in ``home`` first (affinity ``primary``), in one of ``others`` when it fails; Directly with state."""
    label, path, _ = state_rule(kind)
    api_version = "flink.apache.org/v1beta1" if kind == "FlinkDeployment" else "apps/v1"
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "resourceSelectors": [{"apiVersion": api_version, "kind": kind, "name": name}],
            "placement": {
                "clusterAffinities": [{"affinityName": "primary", "clusterNames": [home]},
                                      {"affinityName": "fallback", "clusterNames": list(others)}],
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
            },
            "failover": {"cluster": {"purgeMode": "Directly", "statePreservation": {
                "rules": [{"aliasLabelName": label, "jsonPath": path}]}}},
        },
    }


def binding_name(kind: str, name: str) -> str:
    return f"{name}-{kind.lower()}"


def _reflected(status: Any, path: tuple[str, ...]) -> str | None:
    value = status
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if value is None or value == "" or isinstance(value, (dict, list, bool)):
        return None
    return str(value)


def ready_untainted(cluster: Mapping[str, Any]) -> bool:
    ready = next((c for c in (cluster.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
                 None)
    return ready is not None and ready.get("status") == "True" and not (cluster.get("spec") or {}).get("taints")


@dataclass
class PartitionParams:
    trials: int = 10
    workloads: int = 4
    members: int = 3
    seed: int = 1
    faults: list[str] = field(default_factory=lambda: sorted(FAULTS))
    fence_after: float = 4.0
    permit_hold: float = 12.0
    fence_margin: float = 4.0
    settle_timeout: float = 150.0
    json: str = ""
    data_dir: str = ""

    def timings(self) -> Timings:
        return Timings(fence_after=self.fence_after, permit_hold=self.permit_hold, fence_margin=self.fence_margin,
                       settle_timeout=self.settle_timeout)

    def member_names(self) -> list[str]:
        return [f"member{i}" for i in range(1, self.members + 1)]

    def command_line(self) -> str:
        cmd = ["flotilla", "soak", "partition", "--trials", str(self.trials), "--workloads", str(self.workloads),
               "--members", str(self.members), "--seed", str(self.seed), "--faults", ",".join(self.faults),
               "--fence-after", f"{self.fence_after:g}", "--permit-hold", f"{self.permit_hold:g}",
               "--fence-margin", f"{self.fence_margin:g}", "--settle-timeout", f"{self.settle_timeout:g}"]
        if self.json:
            cmd += ["--json", self.json]
        return shlex.join(cmd)


class Stack:
    """A ``flotilla up --detach --guard`` with every member in Pull mode, and clients to it and its members."""

    def __init__(self, root: Path, p: PartitionParams) -> None:
        self.root = root
        self.p = p
        self.fleet = Fleet(root)
        self.cp: Any = None
        self.members: dict[str, Any] = {}
        self.started = False

    @property
    def history(self) -> Path:
        return self.fleet.layout.members / "history.jsonl"

    async def start(self) -> None:
        from flotilla.client import Client

        p = self.p
        self.started = True
        await run_flotilla("up", "--detach", "--port", "0", "--data-dir", str(self.root), "--metrics-bind-address", "0",
                       "--members", str(p.members), "--pull-members", str(p.members), "--guard",
                       "--fence-after", repr(p.fence_after), "--permit-hold", repr(p.permit_hold),
                       "--fence-margin", repr(p.fence_margin), limit=150.0)
        self.cp = Client.from_kubeconfig(str(self.root / "kubeconfig"), "flotilla")
        for m in p.member_names():
            self.members[m] = Client.from_kubeconfig(str(self.fleet.layout.members / m / "kubeconfig"))
        await self._prepare()

    async def _prepare(self) -> None:
        from flotilla.api.resources import CLUSTERS
        from flotilla.cli.control_plane import create_unless_exists
        from flotilla.cluster.join import namespace_object
        from flotilla.kube.resources import CRDS, NAMESPACES
        from flotilla.member.flink_crd import flink_deployment_crd

        for res, obj in ((CRDS, flink_deployment_crd()), (NAMESPACES, namespace_object(NAMESPACE))):
            await create_unless_exists(self.cp, res, obj)

        async def announced() -> list[str]:
            waiting = []
            for m in self.p.member_names():
                c = await self.cp.get_or_none(CLUSTERS, m)
                ann = ((c or {}).get("metadata") or {}).get("annotations") or {}
                if c is None or not ready_untainted(c) or "guard.flotilla.io/permit-hold" not in ann:
                    waiting.append(m)
            return waiting

        await wait_until(announced, 120.0, "every member Ready and announcing its guard")

    async def stop(self) -> None:
        for client in [self.cp, *self.members.values()]:
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
        for pid in list(self.fleet.frozen.values()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if self.started:
            with contextlib.suppress(RuntimeError):
                await run_flotilla("down", "--data-dir", str(self.root), limit=60.0)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.fleet.layout.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


async def wait_until(pending: Callable[[], Awaitable[list[str]]], within: float, what: str) -> float:
    """Poll ``pending`` (what is still missing) until it is empty; seconds it took, RuntimeError after ``within``."""
    t0 = time.monotonic()
    missing: list[str] = []
    while time.monotonic() - t0 < within:
        missing = await pending()
        if not missing:
            return time.monotonic() - t0
        await asyncio.sleep(POLL)
    raise RuntimeError(f"timed out after {within:g}s waiting for {what}: still {'; '.join(missing[:5])}")


# ------------------------------------------------------------------------------------------------ one trial


@dataclass
class Placed:
    kind: str
    name: str
    home: str
    expected_state: str | None = None


def _open_in(intervals: Sequence[Any], kind: str, name: str) -> set[str]:
    return {iv.member for iv in intervals if iv.kind == kind and iv.namespace == NAMESPACE and iv.name == name
            and iv.end is None}


class Trial:
    def __init__(self, stack: Stack, plan: TrialPlan, p: PartitionParams) -> None:
        self.stack = stack
        self.plan = plan
        self.p = p
        self.timings = p.timings()
        targets = plan.targets
        kinds = ("FlinkDeployment", "StatefulSet")
        self._t0 = time.monotonic()  # the trial's cut (set when the faults are applied)
        self._fenced_at: dict[str, float] = {}  # cluster -> seconds after the cut it was first seen fenced
        self.placed = [Placed(kinds[(plan.index + i) % 2], f"t{plan.index}-w{i + 1}", targets[i % len(targets)])
                       for i in range(p.workloads)]

    def _history(self) -> list[Any]:
        from flotilla.member.history import read_history

        return read_history(self.stack.history)

    async def place(self) -> float:
        from flotilla.api.resources import PROPAGATION_POLICIES, RESOURCE_BINDINGS

        cp, kinds, names = self.stack.cp, _kinds(), self.p.member_names()
        for w in self.placed:
            await cp.create(PROPAGATION_POLICIES, policy_manifest(w.kind, w.name, w.home,
                                                                  [m for m in names if m != w.home]), NAMESPACE)
            await cp.create(kinds[w.kind], workload_manifest(w.kind, w.name), NAMESPACE)

        async def pending() -> list[str]:
            history = self._history()
            missing = []
            for w in self.placed:
                if w.home not in _open_in(history, w.kind, w.name):
                    missing.append(f"{w.name} not running in {w.home}")
                    continue
                rb = await cp.get_or_none(RESOURCE_BINDINGS, binding_name(w.kind, w.name), NAMESPACE)
                items = {i.get("clusterName"): i for i in ((rb or {}).get("status") or {}).get("aggregatedStatus")
                         or []}
                w.expected_state = _reflected((items.get(w.home) or {}).get("status"), state_rule(w.kind)[2])
                if w.expected_state is None:
                    missing.append(f"{w.name}: no state reported from {w.home} yet")
            return missing

        return await wait_until(pending, self.timings.place_timeout, "the trial's workloads running in their "
                                                                     "first member with their state reported")

    async def _clusters(self) -> dict[str, dict[str, Any]]:
        from flotilla.api.resources import CLUSTERS

        items = (await self.stack.cp.list(CLUSTERS)).get("items") or []
        return {str(c["metadata"]["name"]): c for c in items}

    def _moved(self, members: tuple[str, ...]) -> bool:
        history = self._history()
        mine = [w for w in self.placed if w.home in members]
        return bool(mine) and all(_open_in(history, w.kind, w.name) - {w.home} for w in mine)

    async def fault_window(self, result: dict[str, Any]) -> float:
        """Inject every fault, heal each after its hold (or once its workloads run elsewhere); the wall-clock cut."""
        fleet = self.stack.fleet
        cut_wall = time.time()
        t0 = time.monotonic()
        injected: list[float] = []
        for f in self.plan.faults:
            await FAULTS[f.fault].inject(fleet, f.members)
            injected.append(round(time.monotonic() - t0, 2))
        healed: dict[int, float] = {}
        fenced_at: dict[str, float] = {}
        while len(healed) < len(self.plan.faults):
            now = time.monotonic() - t0
            for name, c in (await self._clusters()).items():
                if is_fenced(c):
                    fenced_at.setdefault(name, round(time.monotonic() - t0, 2))
            for i, f in enumerate(self.plan.faults):
                if i in healed:
                    continue
                moved_early = FAULTS[f.fault].until_moved and self._moved(f.members)
                if now >= f.hold or moved_early:
                    await FAULTS[f.fault].heal(fleet, f.members)
                    healed[i] = round(time.monotonic() - t0, 2)
            await asyncio.sleep(POLL)
        result["faults"] = [{"fault": f.fault, "members": list(f.members), "hold_s": f.hold,
                             "injected_s": injected[i], "healed_s": healed[i]} for i, f in enumerate(self.plan.faults)]
        result["fenced_s"] = fenced_at
        self._t0 = t0
        self._fenced_at = fenced_at
        return cut_wall

    async def _leases(self) -> dict[str, str]:
        from flotilla.kube.resources import LEASES

        out = {}
        for m in self.p.member_names():
            lease = await self.stack.cp.get_or_none(LEASES, m, LEASE_NAMESPACE)
            out[m] = str(((lease or {}).get("spec") or {}).get("renewTime") or "")
        return out

    async def outcomes(self) -> list[WorkloadOutcome]:
        from flotilla.api.resources import RESOURCE_BINDINGS

        kinds = _kinds()
        out = []
        for w in self.placed:
            rb = await self.stack.cp.get_or_none(RESOURCE_BINDINGS, binding_name(w.kind, w.name), NAMESPACE)
            clusters = [str(c.get("name")) for c in ((rb or {}).get("spec") or {}).get("clusters") or []]
            objects: dict[str, dict[str, str]] = {}
            restored: dict[str, str] = {}
            for m, client in self.stack.members.items():
                try:
                    obj = await client.get_or_none(kinds[w.kind], w.name, NAMESPACE)
                except Exception as e:  # an unreachable member: its copy cannot be ruled out
                    objects[m] = {"<unreadable>": str(e)[:200]}
                    continue
                if obj is not None:
                    meta = obj.get("metadata") or {}
                    objects[m] = dict(meta.get("labels") or {})
                    restored[m] = str((meta.get("annotations") or {}).get(ANN_RESTORED_FROM) or "")
            out.append(WorkloadOutcome(kind=w.kind, namespace=NAMESPACE, name=w.name, home=w.home,
                                       state_label=state_rule(w.kind)[0], expected_state=w.expected_state,
                                       clusters=clusters, objects=objects, restored_from=restored))
        return out

    async def settle(self, result: dict[str, Any]) -> list[str]:
        """Until every cluster is Ready and untainted (a fenced one unfenced once its agent renews its Lease again)
        and every workload runs exactly once; then the trial's problems (those left at the timeout if any)."""
        from flotilla.cli.fence_commands import unfence_cluster

        t0 = time.monotonic()
        leases_at_heal = await self._leases()
        unfenced: list[str] = []
        problems: list[str] = ["not checked"]
        while time.monotonic() - t0 < self.timings.settle_timeout:
            clusters = await self._clusters()
            leases = await self._leases()
            for name, c in clusters.items():
                if is_fenced(c):  # a fence may land after the heal: the control plane saw no renewal yet
                    self._fenced_at.setdefault(name, round(time.monotonic() - self._t0, 2))
                if is_fenced(c) and leases.get(name) != leases_at_heal.get(name):
                    await unfence_cluster(self.stack.cp, name, out=lambda _m: None)
                    unfenced.append(name)
                    leases_at_heal[name] = leases.get(name, "")
            outcomes, history = await self.outcomes(), self._history()
            problems = trial_problems(outcomes, history)
            if not loss_problems(outcomes, history) and all(ready_untainted(c) for c in clusters.values()):
                result["settled_s"] = round(time.monotonic() - t0, 2)
                break
            await asyncio.sleep(1.0)
        else:
            clusters = await self._clusters()
            unsettled = [n for n, c in clusters.items() if not ready_untainted(c)]
            if unsettled:
                problems = [*problems, f"clusters not Ready and untainted {self.timings.settle_timeout:g}s after "
                                       f"the heal: {unsettled}"]
            result["settled_s"] = None
        result["unfenced"] = unfenced
        return problems

    async def heal_all(self) -> None:
        """After a trial that could not finish: every faulted member recovered, every frozen agent thawed."""
        fleet = self.stack.fleet
        await _thaw_agent(fleet, tuple(fleet.frozen))
        for m in self.plan.targets:
            with contextlib.suppress(RuntimeError):
                await fleet.sim_fault(m, "recover")

    async def cleanup(self) -> None:
        from flotilla.api.resources import PROPAGATION_POLICIES

        kinds = _kinds()
        for w in self.placed:
            for res in (kinds[w.kind], PROPAGATION_POLICIES):
                with contextlib.suppress(Exception):
                    await self.stack.cp.delete(res, w.name, NAMESPACE)

        async def pending() -> list[str]:
            left = []
            for w in self.placed:
                for m, client in self.stack.members.items():
                    with contextlib.suppress(Exception):
                        if await client.get_or_none(kinds[w.kind], w.name, NAMESPACE) is not None:
                            left.append(f"{w.name} in {m}")
            return left

        with contextlib.suppress(RuntimeError):
            await wait_until(pending, 60.0, "the trial's workloads deleted")

    async def run(self) -> dict[str, Any]:
        result: dict[str, Any] = {"trial": self.plan.index, "plan": self.plan.describe(),
                                  "workloads": [], "problems": []}
        try:
            result["placed_s"] = round(await self.place(), 2)
            cut_wall = await self.fault_window(result)
            problems = await self.settle(result)
            history = self._history()
            outcomes = await self.outcomes()
            for w in outcomes:
                end = w.clusters[0] if len(w.clusters) == 1 else None
                line: dict[str, Any] = {"name": w.name, "kind": w.kind, "home": w.home, "end": end,
                                        "moved": end is not None and end != w.home,
                                        "runs_seen": dict(counts_by_member(w, history))}
                line.update(workload_timeline(w, history, cut_wall))
                result["workloads"].append(line)
            result["problems"] = problems
        except (RuntimeError, OSError) as e:
            result["problems"] = [f"trial could not run: {e}"]
            tail = self.stack.log_tail()
            if tail:
                result["log_tail"] = tail
            await self.heal_all()
        finally:
            await self.cleanup()
        result["passed"] = not result["problems"]
        return result


# ------------------------------------------------------------------------------------------------ the run


async def run_partition_trials(p: PartitionParams) -> dict[str, Any]:
    from flotilla.bench.harness import say, workdir_for
    from flotilla.cli.progress import Progress

    timings = p.timings()
    plans = plan_trials(p.seed, p.trials, p.member_names(), {n: FAULTS[n] for n in p.faults}, timings)
    root, cleanup = workdir_for(p.data_dir, "flotilla-soak-partition-")
    stack = Stack(root / "stack", p)
    trials: list[dict[str, Any]] = []
    try:
        say(f"starting flotilla up --guard with {p.members} Pull members in {root / 'stack'} ...")
        await stack.start()
        with Progress("soak partition: trials", total=p.trials) as line:
            for plan in plans:
                say(f"trial {plan.index}/{p.trials}: {plan.describe()} ...")
                trial = await Trial(stack, plan, p).run()
                trials.append(trial)
                say(trial_line(trial))
                line.update(plan.index)
    finally:
        await stack.stop()
        if cleanup is not None:
            cleanup.cleanup()
    return {"command": p.command_line(), "params": asdict(p),
            "timings": {**asdict(timings), "bound": timings.bound, "move_deadline": timings.move_deadline},
            "trials": trials, "failed_trials": sum(1 for t in trials if t["problems"]), "summary": summarize(trials),
            "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0]}}


def summarize(trials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    moved = [w for t in trials for w in t.get("workloads") or [] if w.get("moved")]
    elsewhere = [float(w["running_elsewhere_s"]) for w in moved if w.get("running_elsewhere_s") is not None]
    fences = [float(s) for t in trials for s in (t.get("fenced_s") or {}).values()]
    return {"trials": len(trials), "passed": sum(1 for t in trials if not t.get("problems")),
            "workloads": sum(len(t.get("workloads") or []) for t in trials), "moved": len(moved),
            "fences": len(fences),
            "fenced_median_s": round(statistics.median(fences), 2) if fences else None,
            "running_elsewhere_median_s": round(statistics.median(elsewhere), 2) if elsewhere else None,
            "running_elsewhere_max_s": round(max(elsewhere), 2) if elsewhere else None}


def _s(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}s"


def trial_line(t: Mapping[str, Any]) -> str:
    lines = [f"  trial {t['trial']}: {t['plan']}: {'ok' if not t['problems'] else 'FAILED'}"]
    fenced_s = t.get("fenced_s") or {}
    if t.get("faults"):
        healed = "; ".join(f"{f['fault']}({','.join(f['members'])}) healed at {_s(f['healed_s'])}"
                           for f in t["faults"])
        fences = ", ".join(f"{m} at {_s(v)}" for m, v in sorted(fenced_s.items())) or "none"
        lines.append(f"    {healed}; fenced: {fences}; settled {_s(t.get('settled_s'))} after the heal")
    for w in t.get("workloads") or []:
        fence = fenced_s.get(w["home"])
        lines.append(f"    {w['kind']} {w['name']} {w['home']} -> {w['end'] or '?'}: cut -> stopped "
                     f"{_s(w.get('stopped_s'))} -> fenced {_s(fence)} -> running elsewhere "
                     f"{_s(w.get('running_elsewhere_s'))}")
    for problem in t["problems"]:
        lines.append(f"    problem: {problem}")
    return "\n".join(lines)


def render_report(r: Mapping[str, Any]) -> str:
    tm, s = r["timings"], r["summary"]
    lines = [f"flotilla soak partition: {s['trials']} trials, fence bound {tm['bound']:g}s (permit-hold "
             f"{tm['permit_hold']:g} + fence-after {tm['fence_after']:g} + margin {tm['fence_margin']:g})"]
    lines += [trial_line(t) for t in r["trials"]]
    lines.append(f"{s['passed']} of {s['trials']} trials held every invariant; {s['moved']} of {s['workloads']} "
                 f"workloads moved, {s['fences']} fences (median {_s(s['fenced_median_s'])} after the cut); running "
                 f"elsewhere median {_s(s['running_elsewhere_median_s'])}, max {_s(s['running_elsewhere_max_s'])}")
    return "\n".join(lines)


def _all_problems(result: Mapping[str, Any]) -> list[str]:
    return [f"trial {t['trial']}: {problem}" for t in result["trials"] for problem in t.get("problems") or []]


def parse_faults(text: str) -> list[str]:
    """``--faults``: comma-separated names of :data:`FAULTS` (ValueError naming the unknown ones)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAULTS]
    if unknown or not names:
        raise ValueError(f"unknown fault {', '.join(unknown) or '(none given)'}; choose from {', '.join(FAULTS)}")
    return list(dict.fromkeys(names))


def validate(p: PartitionParams) -> list[str]:
    """What is wrong with the parameters (usage errors)."""
    from flotilla.agent.runtime import AgentConfig

    errs = []
    if p.members < 3:
        errs.append("--members must be at least 3 (a fence needs a strict majority of the clusters live)")
    errs += AgentConfig(cluster_name="member1", guard=True, fence_after=p.fence_after,
                        permit_hold=p.permit_hold).validate()
    if p.fence_margin <= 0:
        errs.append("--fence-margin must be greater than 0")
    if p.settle_timeout <= 0:
        errs.append("--settle-timeout must be greater than 0")
    if p.members >= 3 and not any(FAULTS[n].members <= p.members - 1 for n in p.faults):
        errs.append(f"none of --faults fits {p.members} members")
    return errs


def run_partition_command(args: Any) -> int:
    from flotilla.bench.harness import Ending, finish_command
    from flotilla.cli.flags import usage_error

    try:
        faults = parse_faults(args.faults) if args.faults else sorted(FAULTS)
    except ValueError as e:
        return usage_error(args, str(e), "flotilla soak partition")
    p = PartitionParams(trials=args.trials, workloads=args.workloads, members=args.members, seed=args.seed,
                        faults=faults, fence_after=args.fence_after, permit_hold=args.permit_hold,
                        fence_margin=args.fence_margin, settle_timeout=args.settle_timeout, json=args.json or "",
                        data_dir=args.data_dir or "")
    errs = validate(p)
    if errs:
        return usage_error(args, "; ".join(errs), "flotilla soak partition")
    print(f"command: {p.command_line()}", flush=True)
    ending = Ending("soak partition", _all_problems, render_report, p.json)
    return finish_command(ending, lambda: run_partition_trials(p))


