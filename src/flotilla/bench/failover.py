"""``flotilla bench failover``: how fast the control plane moves N stateful workloads off a failed member.

Three kinds of process, so that each one's CPU and memory are its own:

* the control plane (``flotilla bench control-plane``: API server + every controller, on ``--storage``);
* the members (``flotilla member --count M --ready-delay 0``: workloads are ready at once, so the control plane
  is what is measured; large simulated nodes so capacity never decides);
* this driver, which sets up through the API, fails ``member1`` and watches (informers, no polling) the bindings,
  Works, the failed Cluster and the members' workloads, stamping each workload's stages.

Steps: join the members, apply the ``not-ready`` ClusterTaintPolicy, one PropagationPolicy per kind pinning its
workloads to member1 (:mod:`flotilla.bench.workloads`), create N workloads and wait until all are Healthy on
member1 (with ``--state``: until the binding holds the state to preserve). Then, in the same run, the store
ceiling (:mod:`flotilla.bench.ceiling`) with values the size of a real binding, and the background write rate.
Then the fault (``taint``: a NoExecute taint on member1, nothing tolerates it; ``down``: member1 is powered off,
its API and workloads gone, and with ``Directly`` it is fenced as soon as the ``not-ready`` taint appears, as an
operator would after checking: fencing, D2) and the wait until every workload is Healthy elsewhere.

With ``--pull`` member1 (the one that fails) is a Pull member: it is not joined; a ``flotilla agent`` process of
its own registers it and applies its Works (and, after the fault, deletes them), so the control plane never calls
it. The agent's CPU seconds are reported beside the control plane's.

``--fault partition`` (Pull implied) makes member1 a guarded Pull member (:mod:`flotilla.bench.partition`): its
agent runs ``--guard`` and the peer protocol, the other members get lease-only agents (``--lease-only --guard``,
peers: they acknowledge member1's pending fence, as under ``flotilla up --guard``), the members run the guard
(``--sim-option guard=<fence-after>``), member1's agent reaches the control plane through a ``flotilla bench
link`` process, and the fault cuts that link. Nothing else is done: the guard stops the workloads,
the control plane fences member1 by itself and the failovers create the new copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import statistics
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp

from flotilla.bench import stats
from flotilla.bench.harness import (
    CONTROL_PLANE_READY,
    Ending,
    Profiler,
    close_all,
    clusters_ready,
    control_plane_endpoints,
    control_plane_process,
    finish_command,
    machine_cpu_seconds,
    poll_until,
    run_in_workdir,
    say,
    start_storage,
)
from flotilla.bench.partition import (
    DEFAULT_TIMINGS,
    PartitionTimings,
    partition_problems,
    partition_summary,
    timing_errors,
)
from flotilla.bench.processes import ChildProcess, peak_rss_mb, proc_cpu_seconds, rss_mb
from flotilla.bench.workloads import FLINK, NAMESPACE, kinds_for, policy, workload, workload_kinds

__all__ = ["FailoverParams", "run_failover_bench"]

FAULT_TAINT = {"key": "bench.flotilla.io/fault", "effect": "NoExecute"}
NOT_READY_TAINT = "cluster.karmada.io/not-ready"
#: Members' settings: capacity so large that it never decides, the Flink simulator's periodic writes rare
#: plain http (``--insecure``), as the control plane here: the benchmarks measure Flotilla's work, not TLS and token
#: checks, and stay comparable with the numbers recorded in docs/benchmarks.md
MEMBER_ARGS = ("--insecure", "--nodes", "3", "--node-cpu", "100000", "--node-memory", "100000Gi", "--node-pods",
               "1000000")
FLINK_QUIET = ("flink_checkpoint_interval=60", "flink_progress_interval=60")
SETTLE_QUIET_SECONDS = 1.0
#: before the fault: the write rate (per second) of a control plane at rest, and the longest wait for it
QUIET_WRITES_PER_S = 20.0
QUIET_MAX_SECONDS = 120.0
SETTLE_MAX_SECONDS = 15.0
#: the numbers ``--repeat`` tabulates (run by run, and their median)
SUMMARY: Final = ("total_seconds", "throughput_per_s", "latency_ms.p50", "latency_ms.p90", "latency_ms.p99",
                  "cpu_seconds", "peak_rss_mb", "writes_per_workload", "store_ceiling_writes_per_s", "ceiling_ratio",
                  "cpu_cores.other")
#: what ``--repeat`` tabulates with ``--fault partition`` (seconds from the cut)
PARTITION_SUMMARY: Final = ("partition.guard_stopped_s.max", "partition.guard_stopped_history_s.max",
                            "partition.fenced_s", "partition.new_copy_running_s.p50",
                            "partition.new_copy_running_s.p95", "partition.new_copy_running_s.max",
                            "partition.all_running_s", "partition.healthy_s.max", "cpu_seconds", "cpu_cores.other")


@dataclass
class FailoverParams:
    workloads: int = 1000
    members: int = 3
    kind: str = "mix"
    purge_mode: str = "Directly"
    state: bool = True
    storage: str = "sqlite"
    fault: str = "taint"
    json: str = ""
    plot: str = ""
    resource_eviction_rate: float = 1_000_000.0
    controller_flags: list[str] = field(default_factory=list)
    transport: str = "inprocess"
    timeout: float = 600.0
    setup_timeout: float = 900.0
    ceiling_writes: int = 5000
    create_concurrency: int = 16
    profile: str = ""
    data_dir: str = ""
    repeat: int = 1
    pull: bool = False  # member1 in Pull mode, with its own agent process
    #: --fault partition: the agent's and the controller-manager's settings that decide the fence
    timings: PartitionTimings = DEFAULT_TIMINGS

    @property
    def partition(self) -> bool:
        return self.fault == "partition"

    def command_line(self) -> str:
        cmd = ["flotilla", "bench", "failover", "--workloads", str(self.workloads), "--members", str(self.members),
               "--kind", self.kind, "--purge-mode", self.purge_mode, "--state" if self.state else "--no-state",
               "--storage", self.storage, "--fault", self.fault,
               "--resource-eviction-rate", f"{self.resource_eviction_rate:g}", "--transport", self.transport]
        for flag in self.controller_flags:
            cmd.append(f"--controller-flag={flag}")
        if self.json:
            cmd += ["--json", self.json]
        if self.plot:
            cmd += ["--plot", self.plot]
        if self.profile:
            cmd += ["--profile", self.profile]
        if self.repeat > 1:
            cmd += ["--repeat", str(self.repeat)]
        if self.pull and not self.partition:
            cmd.append("--pull")
        if self.partition:
            t = self.timings
            cmd += ["--fence-after", f"{t.fence_after:g}", "--permit-hold", f"{t.permit_hold:g}",
                    "--fence-margin", f"{t.fence_margin:g}", "--cluster-monitor-period", f"{t.monitor_period:g}",
                    "--lease-duration", f"{t.lease_duration:g}"]
        return shlex.join(cmd)


class Run:
    """One benchmark run: the processes, the clients, the observer; :meth:`execute` returns the result."""

    def __init__(self, p: FailoverParams, workdir: Path) -> None:
        self.p = p
        self.workdir = workdir
        self.members_dir = workdir / "members"
        self.names = [f"member{i}" for i in range(1, p.members + 1)]
        self.failed = self.names[0]
        self.run_id = str(int(time.time()))
        self.kinds = workload_kinds(p.kind, p.workloads)
        self.cp_proc: ChildProcess | None = None
        self.members_proc: ChildProcess | None = None
        self.agent_proc: ChildProcess | None = None  # with --pull: member1's agent
        self.link_proc: ChildProcess | None = None  # with --fault partition: the agent's link to the control plane
        self.lease_only_agents: list[ChildProcess] = []  # with --fault partition: the Push members' agents
        self.cp_kubeconfig = ""
        self.etcd: Any = None
        self.cp: Any = None
        self.member_clients: dict[str, Any] = {}
        self.observer: Any = None
        self.metrics_url = ""
        self.admin_url = ""
        self.storage_url = ""
        self.http: aiohttp.ClientSession | None = None
        self.profiler: Profiler | None = None
        self.result: dict[str, Any] = {}
        self.cp_port = 0  # the control plane's API port (0: a free one; a crash trial fixes it to restart on it)

    # ------------------------------------------------------------------ processes
    async def start_processes(self) -> None:
        p = self.p
        self.etcd, self.storage_url = await start_storage(p.storage, self.workdir)
        flags = ["--resource-eviction-rate", f"{p.resource_eviction_rate:g}", *p.controller_flags]
        if p.partition:
            flags += ["--fence-margin", f"{p.timings.fence_margin:g}s",
                      "--cluster-monitor-period", f"{p.timings.monitor_period:g}s"]
        self.cp_proc = control_plane_process(self.workdir, self.storage_url, p.transport, flags,
                                             "--port", str(self.cp_port))
        line, _ = await asyncio.gather(self.cp_proc.start(CONTROL_PLANE_READY), self.start_members())
        self.cp_kubeconfig, self.metrics_url = control_plane_endpoints(line)
        from flotilla.client import Client

        self.cp = Client.from_kubeconfig(self.cp_kubeconfig)
        self.http = aiohttp.ClientSession()

    async def start_members(self) -> None:
        """The simulated members (one process, ready delay 0) and a client for each."""
        members_args = ["member", "--count", str(self.p.members), "--data-dir", str(self.members_dir),
                        "--ready-delay", "0", "--storage", "memory://", *MEMBER_ARGS]
        for option in FLINK_QUIET:
            members_args += ["--sim-option", option]
        if self.p.partition:  # member1's guard (the others have no agent keeping a permit: theirs stop nothing)
            members_args += ["--sim-option", f"guard={self.p.timings.fence_after:g}s"]
        self.members_proc = ChildProcess("members", members_args, self.workdir / "members.log")
        mline = await self.members_proc.start(r"admin endpoint")
        admin = re.search(r"admin endpoint (\S+)", mline)
        self.admin_url = admin.group(1) if admin else ""
        from flotilla.client import Client

        for name in self.names:
            self.member_clients[name] = Client.from_kubeconfig(str(self.members_dir / name / "kubeconfig"))

    async def stop(self) -> None:
        if self.profiler is not None:
            await self.profiler.kill()
        if self.observer is not None:
            await self.observer.stop()
        await close_all([self.cp, *self.member_clients.values(), self.http])
        for proc in (self.agent_proc, *self.lease_only_agents, self.link_proc, self.cp_proc, self.members_proc):
            if proc is not None:
                await proc.stop()
        if self.etcd is not None:
            await asyncio.to_thread(self.etcd.stop)

    async def scrape(self) -> stats.Samples:
        assert self.http is not None
        async with self.http.get(f"{self.metrics_url}/metrics") as resp:
            return stats.parse_prometheus(await resp.text())

    # ------------------------------------------------------------------ set-up
    async def setup(self) -> None:
        from flotilla.api import resources as R
        from flotilla.bench.observer import FailoverObserver
        from flotilla.cli.cluster_commands import join_cluster, join_spec_from_credentials
        from flotilla.client.kubeconfig import load_kubeconfig
        from flotilla.kube.resources import CRDS, NAMESPACES
        from flotilla.local.stack import default_taint_policy

        p, cp = self.p, self.cp
        specs = kinds_for(p.kind)
        if any(s.resource == FLINK for s in specs):
            from flotilla.member.flink_crd import flink_deployment_crd

            await cp.create(CRDS, flink_deployment_crd())
        await cp.create(R.CLUSTER_TAINT_POLICIES, default_taint_policy(self.names))
        for name in self.names:
            if p.pull and name == self.failed:
                await self.start_agent(name)
                continue
            creds = load_kubeconfig(str(self.members_dir / name / "kubeconfig"))
            await join_cluster(cp, join_spec_from_credentials(name, creds))
            if p.partition:  # as under `flotilla up --guard`: a lease-only agent keeps its permit and answers peers
                await self.start_lease_only_agent(name)
        await poll_until(lambda: clusters_ready(cp, len(self.names)), "every member Ready and untainted", 120, 0.2)
        if p.partition:
            await poll_until(self._guard_announced, f"{self.failed}'s guard announced and its run permit kept",
                             60, 0.2)
        await cp.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        if any(s.resource == FLINK for s in specs):
            await poll_until(self._flink_served, "the FlinkDeployment CRD to be served", 60, 0.2)
        for spec in specs:
            await cp.create(R.PROPAGATION_POLICIES, policy(spec, self.names, purge_mode=p.purge_mode,
                                                           state=p.state, run=self.run_id), NAMESPACE)
        names = [(f"w{i:05d}", spec) for i, spec in enumerate(self.kinds)]
        self.observer = FailoverObserver(cp, self.member_clients, self.failed, names, state=p.state)
        self.observer.start()
        t0 = time.monotonic()
        say(f"creating {p.workloads} workloads ({p.kind}) pinned to {self.failed} ...")
        queue = iter(names)

        async def creator() -> None:
            for name, spec in queue:
                await cp.create(spec.resource, workload(spec, name, self.run_id), NAMESPACE)

        await asyncio.gather(*(creator() for _ in range(max(1, min(p.create_concurrency, p.workloads)))))
        created_s = time.monotonic() - t0
        ok = await self.observer.wait_for(self.observer.all_placed, p.setup_timeout,
                                          lambda: f"{len(self.observer.placed)}/{p.workloads}",
                                          what=f"placed and Healthy on {self.failed}:")
        if not ok:
            raise RuntimeError(f"only {len(self.observer.placed)} of {p.workloads} workloads were Healthy on "
                               f"{self.failed} after {p.setup_timeout:.0f}s")
        if p.partition:
            await self._check_guarded()
        self.result["setup"] = {"create_seconds": round(created_s, 1),
                                "placed_seconds": round(time.monotonic() - t0, 1)}
        say(f"all {p.workloads} Healthy on {self.failed} after {time.monotonic() - t0:.1f}s")

    async def start_agent(self, name: str) -> None:
        """``flotilla agent`` for Pull member ``name`` (its Lease's namespace first); it registers the Cluster."""
        from flotilla.agent.lease import LEASE_NAMESPACE
        from flotilla.kube.resources import NAMESPACES

        await self.cp.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": LEASE_NAMESPACE}})
        kubeconfig = self.cp_kubeconfig
        extra: list[str] = []
        if self.p.partition:
            kubeconfig = await self.start_link(name)
            t = self.p.timings
            extra = ["--guard", "--fence-after", f"{t.fence_after:g}s", "--permit-hold", f"{t.permit_hold:g}s",
                     "--cluster-lease-duration", f"{t.lease_duration:g}s", "--peer-listen", "127.0.0.1:0"]
        self.agent_proc = ChildProcess("agent", [
            "--log-level", "info", "agent", "--karmada-kubeconfig", kubeconfig, "--cluster-name", name,
            "--kubeconfig", str(self.members_dir / name / "kubeconfig"),
            "--cluster-status-update-frequency", "1s", "--metrics-bind-address", "0", *extra],
            self.workdir / "agent.log")
        await self.agent_proc.start(None)  # ready once its Cluster is Ready (below)

    async def start_lease_only_agent(self, name: str) -> None:
        """``flotilla agent --lease-only`` beside Push member ``name``: the Lease, the permit and the peer protocol,
        so member1's pending fence is acknowledged as in a fleet where every member runs an agent."""
        t = self.p.timings
        proc = ChildProcess(f"agent-{name}", [
            "--log-level", "info", "agent", "--lease-only", "--karmada-kubeconfig", self.cp_kubeconfig,
            "--cluster-name", name, "--kubeconfig", str(self.members_dir / name / "kubeconfig"),
            "--guard", "--fence-after", f"{t.fence_after:g}s", "--permit-hold", f"{t.permit_hold:g}s",
            "--cluster-lease-duration", f"{t.lease_duration:g}s", "--peer-listen", "127.0.0.1:0"],
            self.workdir / f"agent-{name}.log")
        await proc.start(None)
        self.lease_only_agents.append(proc)

    async def start_link(self, name: str) -> str:
        """``flotilla bench link`` in front of the control plane's API for member ``name``'s agent; the path of a
        control-plane kubeconfig naming it."""
        from urllib.parse import urlsplit

        from flotilla.bench.link import READY_LINE
        from flotilla.client.kubeconfig import load_kubeconfig, write_kubeconfig

        creds = load_kubeconfig(self.cp_kubeconfig)
        server = urlsplit(creds.server)
        if server.hostname is None or server.port is None:
            raise RuntimeError(f"cannot tell the control plane's port from {creds.server!r}")
        self.link_proc = ChildProcess("link", ["bench", "link", "--name", name,
                                               "--target", f"{server.hostname}:{server.port}"],
                                      self.workdir / "link.log")
        line = await self.link_proc.start(READY_LINE)
        found = re.search(r"serving (\S+) ->", line)
        if found is None:
            raise RuntimeError(f"cannot read the link's ready line: {line!r}")
        path = self.workdir / "agent" / "karmada.kubeconfig"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_kubeconfig(path, server=f"{server.scheme}://{found.group(1)}", context="karmada", token=creds.token,
                         ca_pem=creds.ca_pem)
        return str(path)

    async def _guard_announced(self) -> bool:
        """member1's Cluster announces the guard (what the control plane fences by) and its permit exists."""
        from flotilla.api import resources as R
        from flotilla.failover.peer_quorum import ANNOTATION_PEER_ENDPOINT
        from flotilla.failover.run_permit import (
            ANNOTATION_FENCE_AFTER,
            ANNOTATION_PERMIT_HOLD,
            PERMIT_NAME,
            PERMIT_NAMESPACE,
        )
        from flotilla.kube.resources import LEASES

        for name in self.names:  # every agent announces its guard and its peer endpoint
            cluster = await self.cp.get(R.CLUSTERS, name)
            annotations = (cluster.get("metadata") or {}).get("annotations") or {}
            if not (annotations.get(ANNOTATION_FENCE_AFTER) and annotations.get(ANNOTATION_PERMIT_HOLD)
                    and annotations.get(ANNOTATION_PEER_ENDPOINT)):
                return False
        permit = await self.member_clients[self.failed].get_or_none(LEASES, PERMIT_NAME, PERMIT_NAMESPACE)
        return permit is not None

    async def _check_guarded(self) -> None:
        """Every workload's copy in member1 carries the guarded label (purgeMode Directly), or the run is void."""
        from flotilla.failover.run_permit import GUARDED_LABEL, GUARDED_LABEL_VALUE

        client = self.member_clients[self.failed]
        guarded = 0
        for spec in kinds_for(self.p.kind):
            items = (await client.list(spec.resource, NAMESPACE,
                                       label_selector=f"{GUARDED_LABEL}={GUARDED_LABEL_VALUE}")).get("items") or []
            guarded += len(items)
        if guarded != self.p.workloads:
            raise RuntimeError(f"{guarded} of {self.p.workloads} workloads in {self.failed} carry "
                               f"{GUARDED_LABEL}={GUARDED_LABEL_VALUE}: the guard would not stop the others")

    async def _flink_served(self) -> bool:
        await self.cp.list(FLINK, NAMESPACE, limit=1)
        return True

    # ------------------------------------------------------------------ measurements before the fault
    async def quiet_rate(self, seconds: float = 2.0) -> float:
        """The control plane's writes/s while nothing happens (cluster status, leases, ...)."""
        before = await self.scrape()
        await asyncio.sleep(seconds)
        after = await self.scrape()
        return stats.counter_delta(before, after, "flotilla_bench_apiserver_writes_total").get("", 0.0) / seconds

    async def wait_quiet(self) -> None:
        """Wait until the set-up's tail has been written (the Events of a thousand placements, the last status
        reports; the Event recorder paces its backlog): the fault hits a fleet at rest. Done when the control plane
        writes at most :data:`QUIET_WRITES_PER_S` a second, at most :data:`QUIET_MAX_SECONDS`."""
        start = time.monotonic()
        rate = 0.0
        while time.monotonic() - start < QUIET_MAX_SECONDS:
            rate = await self.quiet_rate(1.0)
            if rate <= QUIET_WRITES_PER_S:
                break
        waited = time.monotonic() - start
        self.result.setdefault("setup", {})["quiet_seconds"] = round(waited, 1)
        say(f"quiet after {waited:.1f}s more ({rate:,.0f} writes/s)")

    async def ceiling(self) -> dict[str, Any]:
        from flotilla.bench.ceiling import measure_store_ceiling

        sizes = list(self.observer.binding_sizes.values())
        value_bytes = int(statistics.median(sizes)) if sizes else 2048
        say(f"store ceiling: {self.p.ceiling_writes} creates + CAS updates of {value_bytes}-byte values on "
             f"{self.p.storage} ...")
        return await measure_store_ceiling(self.storage_url, self.workdir / "ceiling", value_bytes,
                                           self.p.ceiling_writes)

    # ------------------------------------------------------------------ the fault
    async def fault(self) -> dict[str, Any]:
        from flotilla.api import resources as R

        info: dict[str, Any] = {"kind": self.p.fault}
        t0 = self.observer.mark_fault()
        if self.p.fault == "taint":
            for _ in range(10):
                cluster = await self.cp.get(R.CLUSTERS, self.failed)
                spec = cluster.setdefault("spec", {})
                spec["taints"] = [*(spec.get("taints") or []), dict(FAULT_TAINT)]
                try:
                    await self.cp.update(R.CLUSTERS, cluster)
                    break
                except Exception as e:  # noqa: BLE001 - a conflict with the cluster-status controller: again
                    from flotilla.client import ApiException, is_conflict

                    if not (isinstance(e, ApiException) and is_conflict(e)):
                        raise
            info["what"] = f"NoExecute taint {FAULT_TAINT['key']} added to {self.failed}"
        elif self.p.fault == "partition":
            from flotilla.bench.link import CUT_SIGNAL

            assert self.link_proc is not None and self.link_proc.proc is not None
            self.link_proc.proc.send_signal(CUT_SIGNAL)
            info["what"] = (f"{self.failed}'s agent cut off from the control plane (its link partitioned; "
                            f"{self.failed} and its workloads keep running)")
        else:
            assert self.http is not None
            async with self.http.post(f"{self.admin_url}/members/{self.failed}/fault", json={"mode": "off"}) as r:
                if r.status != 200:
                    raise RuntimeError(f"fault on {self.failed}: {r.status} {await r.text()}")
            info["what"] = f"{self.failed} powered off (flotilla sim fault {self.failed} --mode off)"
        info["applied_s"] = round(time.time() - t0, 4)
        return info

    async def fence_when_tainted(self) -> dict[str, Any]:
        """``--fault down`` with Directly: ``flotilla fence`` as soon as the not-ready taint is there (D2)."""
        from flotilla.cli.fence_commands import fence_cluster

        key = f"taint:{NOT_READY_TAINT}"
        obs = self.observer
        ok = await obs.wait_for(lambda: key in obs.cluster_events, self.p.timeout)
        if not ok:
            return {"fenced": False}
        await fence_cluster(self.cp, self.failed, out=lambda m: None, warn=lambda m: None)
        assert obs.fault_at is not None
        detected = obs.cluster_events.get("not_ready")
        return {"fenced": True, "not_ready_s": round(detected - obs.fault_at, 3) if detected else None,
                "not_ready_taint_s": round(obs.cluster_events[key] - obs.fault_at, 3),
                "fenced_s": round(time.time() - obs.fault_at, 3)}

    def progress(self) -> str:
        """The progress line's text while the failover runs."""
        obs = self.observer
        tls = list(obs.timelines.values())
        counts = " ".join(f"{key} {sum(1 for tl in tls if tl.stage(key) is not None)}" for key, _ in stats.STAGES)
        if self.p.partition:
            counts = (f"guard-stopped {sum(1 for tl in tls if tl.old_stopped is not None)} "
                      f"fenced {'yes' if obs.fenced_at() is not None else 'no'} {counts} "
                      f"running {sum(1 for tl in tls if tl.running is not None)}")
        return f"T+{time.time() - obs.fault_at:5.1f}s  {counts}  (of {len(tls)})"

    async def settle(self, background: float) -> tuple[float, stats.Samples]:
        """Wait (at most SETTLE_MAX_SECONDS) until writes fall back to the background rate; (when, metrics)."""
        deadline = time.monotonic() + SETTLE_MAX_SECONDS
        prev = await self.scrape()
        while time.monotonic() < deadline:
            await asyncio.sleep(SETTLE_QUIET_SECONDS)
            now = await self.scrape()
            grown = stats.counter_delta(prev, now, "flotilla_bench_apiserver_writes_total").get("", 0.0)
            prev = now
            if grown <= background * SETTLE_QUIET_SECONDS * 2 + 5:
                break
        return time.time(), prev

    # ------------------------------------------------------------------ the whole run
    async def execute(self) -> dict[str, Any]:
        p = self.p
        await self.start_processes()
        assert self.cp_proc is not None and self.members_proc is not None
        await self.setup()
        await self.wait_quiet()
        background = await self.quiet_rate()
        ceiling = await self.ceiling()
        await asyncio.sleep(0.5)
        background = min(background, await self.quiet_rate(1.0))
        pids = {"control_plane": self.cp_proc.pid, "members": self.members_proc.pid, "driver": os.getpid()}
        if self.etcd is not None:
            pids["etcd"] = self.etcd.pid
        if self.agent_proc is not None:
            pids["agent"] = self.agent_proc.pid
        if self.link_proc is not None:
            pids["link"] = self.link_proc.pid
        cpu0 = {k: proc_cpu_seconds(pid) for k, pid in pids.items()}
        machine0 = machine_cpu_seconds()
        rss_before = rss_mb(self.cp_proc.pid)
        before = await self.scrape()
        if p.profile:
            self.profiler = Profiler(self.cp_proc.pid, p.profile)
            await self.profiler.start()
        say(f"fault: {p.fault} on {self.failed} ...")
        fault = await self.fault()
        obs = self.observer
        t0 = obs.fault_at
        assert t0 is not None
        fence_task = asyncio.create_task(self.fence_when_tainted()) \
            if p.fault == "down" and p.purge_mode == "Directly" else None
        done = (lambda: obs.all_recovered() and obs.all_running()) if p.partition else obs.all_recovered
        recovered = await obs.wait_for(done, p.timeout, self.progress, what="failover:")
        t_wait_end = time.time()
        cpu1 = {k: proc_cpu_seconds(pid) for k, pid in pids.items()}
        machine1 = machine_cpu_seconds()
        at_healthy = await self.scrape()
        if fence_task is not None:
            if not fence_task.done():
                fence_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                fault.update(await fence_task)
        profile = await self.profiler.stop(limit=15) if self.profiler is not None else {}
        settled_at, settled = await self.settle(background)
        peak = peak_rss_mb(self.cp_proc.pid)
        rss_after = rss_mb(self.cp_proc.pid)
        from flotilla.member.history import read_history

        intervals = [iv.to_dict() for iv in read_history(self.members_dir / "history.jsonl")]
        timelines = list(obs.timelines.values())
        healthy_times = [tl.healthy for tl in timelines if tl.healthy is not None]
        last = max(healthy_times, default=t_wait_end)
        total = max(1e-9, last - t0)
        first_evicted = min((tl.evicted for tl in timelines if tl.evicted is not None), default=t0)
        window = max(1e-9, t_wait_end - t0)
        writes_healthy = stats.counter_delta(before, at_healthy, "flotilla_bench_apiserver_writes_total")
        writes_settled = stats.counter_delta(before, settled, "flotilla_bench_apiserver_writes_total")
        by_resource = stats.counter_delta(before, settled, "flotilla_bench_apiserver_writes_total", by="resource")
        net_writes = max(0.0, writes_settled.get("", 0.0) - background * (settled_at - t0))
        per_workload = net_writes / p.workloads
        throughput = len(healthy_times) / total
        copies, with_history = stats.max_concurrent_copies(intervals, NAMESPACE)
        cpu = {k: round(cpu1[k] - cpu0[k], 2) for k in pids}
        busy = machine1[0] - machine0[0]
        irq = machine1[1] - machine0[1]
        other = max(0.0, busy - irq - sum(cpu.values()))
        self.result.update({
            "command": p.command_line(),
            "workloads": p.workloads,
            "members": p.members,
            "kind": p.kind,
            "purge_mode": p.purge_mode,
            "state": p.state,
            "storage": p.storage,
            "fault": fault,
            "transport": p.transport,
            "pull": p.pull,
            "resource_eviction_rate": p.resource_eviction_rate,
            "controller_flags": p.controller_flags,
            "all_recovered": bool(recovered),
            "recovered": len(healthy_times),
            "total_seconds": round(total, 3),
            "throughput_per_s": round(throughput, 2),
            "first_eviction_seconds": round(first_evicted - t0, 3),
            "throughput_after_first_eviction_per_s": round(len(healthy_times) / max(1e-9, last - first_evicted), 2),
            "latency_ms": {k: v for k, v in stats.latency_summary(
                [tl.healthy - t0 for tl in timelines if tl.healthy is not None]).items() if k != "count"},
            "stages_ms": stats.stage_summaries(timelines, t0),
            "steps_ms": stats.step_summaries(timelines),
            "slowest": stats.slowest(timelines, t0),
            "store_ceiling_writes_per_s": ceiling["writes_per_s"],
            "store_ceiling": ceiling,
            "writes": {"until_last_healthy": int(writes_healthy.get("", 0.0)),
                       "until_settled": int(writes_settled.get("", 0.0)),
                       "settled_after_s": round(settled_at - t0, 1),
                       "background_per_s": round(background, 1),
                       "net_of_background": int(net_writes),
                       "by_resource": {k: int(v) for k, v in sorted(by_resource.items(), key=lambda kv: -kv[1]) if v}},
            "writes_per_workload": round(per_workload, 2),
            "ceiling_ratio": round(stats.ceiling_ratio(per_workload, throughput, ceiling["writes_per_s"]), 4),
            "cpu_seconds": cpu["control_plane"],
            **({"cpu_seconds_agent": cpu["agent"]} if "agent" in cpu else {}),
            "cpu_cores": {**{k: round(v / window, 2) for k, v in cpu.items()},
                          "irq": round(irq / window, 2), "other": round(other / window, 2)},
            "cpu_window_seconds": round(window, 2),
            "peak_rss_mb": peak,
            "rss_mb": {"before_fault": rss_before, "after": rss_after},
            "state_injected": sum(1 for tl in timelines if tl.state_ok),
            "state_labelled": sum(1 for tl in timelines if tl.injected),
            "max_concurrent_copies": copies,
            "workloads_with_running_history": with_history,
            **stats.workqueue_summary(before, at_healthy),
            "events_recorder": {k: int(v) for k, v in stats.counter_delta(
                before, settled, "flotilla_bench_events", by="outcome").items()},
            "sqlite_writes_per_transaction": _per_transaction(before, settled),
            "evictions": stats.counter_counts(before, at_healthy, "flotilla_evictions_total", "result"),
            "curves": {key: [[round(t, 3), n] for t, n in stats.recovered_curve(
                (tl.stage(key) for tl in timelines), t0)] for key, _ in stats.STAGES},
            "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0],
                        "loadavg_1m": round(os.getloadavg()[0], 2)},
        })
        if p.partition:
            self.result["partition"] = partition_summary(
                timelines, t0, obs.fenced_at(), intervals, failed=self.failed, namespace=NAMESPACE, timings=p.timings)
            self.result["partition"]["fenced_condition"] = obs.fenced_condition
        if profile:
            self.result["profile"] = profile
        missing = [tl.binding for tl in timelines if tl.healthy is None]
        if missing:
            self.result["not_recovered"] = missing[:20]
        if p.state and p.purge_mode == "Directly":
            wrong = [{"binding": tl.binding, "expected": tl.expected_state, "injected": tl.injected}
                     for tl in timelines if tl.created is not None and not tl.state_ok]
            if wrong:
                self.result["state_mismatches"] = wrong[:20]
        return self.result


def _per_transaction(before: stats.Samples, after: stats.Samples) -> float | None:
    """SQLite: rows appended per transaction committed between two scrapes (None for other stores)."""
    rows = stats.counter_delta(before, after, "flotilla_bench_sqlite_rows").get("", 0.0)
    transactions = stats.counter_delta(before, after, "flotilla_bench_sqlite_transactions").get("", 0.0)
    return round(rows / transactions, 2) if transactions > 0 else None


async def run_failover_bench(p: FailoverParams) -> dict[str, Any]:
    """Run the benchmark once; the result document (see the module docstring)."""
    return await run_in_workdir(lambda workdir: Run(p, workdir), p.data_dir, "flotilla-bench-failover-")


def result_problems(result: dict[str, Any], p: FailoverParams) -> list[str]:
    """The run's invariants that did not hold (empty: a clean run)."""
    found = []
    if not result.get("all_recovered"):
        found.append(f"only {result.get('recovered')} of {p.workloads} workloads recovered within {p.timeout:.0f}s")
    # Karmada's rule (flotilla.failover.state): state is injected only with purgeMode Directly
    if p.state and p.purge_mode == "Directly" and result.get("state_injected") != p.workloads:
        found.append(f"state injected into {result.get('state_injected')} of {p.workloads} new copies")
    if p.purge_mode == "Directly" and result.get("max_concurrent_copies", 0) > 1:
        found.append(f"{result['max_concurrent_copies']} copies of one workload ran at once (purge mode Directly)")
    if p.partition:
        found += partition_problems(result.get("partition") or {}, p.workloads)
    return found


#: the flags that only mean something with --fault partition (argparse dest, flag)
PARTITION_FLAGS: Final = (("fence_after", "--fence-after"), ("permit_hold", "--permit-hold"),
                          ("fence_margin", "--fence-margin"), ("cluster_monitor_period", "--cluster-monitor-period"),
                          ("lease_duration", "--lease-duration"))
#: controller-manager flags the partition benchmark sets itself (from its own flags, which the bound is made of)
OWN_CONTROLLER_FLAGS: Final = ("--fence-margin", "--cluster-monitor-period")


def usage_errors(p: FailoverParams, given: Iterable[str] = ()) -> list[str]:
    """What makes this command line meaningless (empty: it can run). ``given``: the partition flags that were
    given on the command line (their argparse names)."""
    errs = []
    if p.members < 2:
        errs.append("--members must be at least 2 (one fails, one takes over)")
    if p.workloads < 1:
        errs.append("--workloads must be at least 1")
    if not p.partition:
        named = [flag for dest, flag in PARTITION_FLAGS if dest in set(given)]
        if named:
            errs.append(f"{', '.join(named)} {'applies' if len(named) == 1 else 'apply'} only to --fault partition "
                        f"(the guarded Pull member's timings)")
        return errs
    if p.purge_mode != "Directly":
        errs.append(f"--fault partition needs --purge-mode Directly: only Directly workloads are guarded (stopped "
                    f"by member1's guard when it is cut off), so with {p.purge_mode} the old copies keep running in "
                    f"the partitioned member and there is no guarded failover to measure")
    if p.members < 3:
        errs.append("--fault partition needs --members 3 or more: the control plane fences member1 only while it "
                    "sees a strict majority of all clusters live, and member1 never counts (1 of 2 is not a "
                    "majority)")
    for flag in p.controller_flags:
        for own in OWN_CONTROLLER_FLAGS:
            if flag == own or flag.startswith(own + "="):
                errs.append(f"--controller-flag={flag}: with --fault partition set it with the benchmark's {own}, "
                            f"which the expected bound is computed from")
    errs += timing_errors(p.timings)
    return errs


def params_from_args(args: Any) -> FailoverParams:
    return FailoverParams(
        workloads=args.workloads, members=args.members, kind=args.kind, purge_mode=args.purge_mode,
        state=args.state, storage=args.storage, fault=args.fault, json=args.json or "", plot=args.plot or "",
        resource_eviction_rate=args.resource_eviction_rate, controller_flags=list(args.controller_flag or []),
        transport=args.transport, timeout=args.timeout, setup_timeout=args.setup_timeout,
        ceiling_writes=args.ceiling_writes, profile=args.profile or "", data_dir=args.data_dir or "",
        repeat=args.repeat, pull=bool(getattr(args, "pull", False)) or args.fault == "partition",
        timings=timings_from_args(args))


def timings_from_args(args: Any) -> PartitionTimings:
    """The partition timings: the flags given, the product's defaults for the rest."""
    d = DEFAULT_TIMINGS

    def value(name: str, default: float) -> float:
        given = getattr(args, name, None)
        return default if given is None else float(given)

    return PartitionTimings(fence_after=value("fence_after", d.fence_after),
                            permit_hold=value("permit_hold", d.permit_hold),
                            fence_margin=value("fence_margin", d.fence_margin),
                            monitor_period=value("cluster_monitor_period", d.monitor_period),
                            lease_duration=value("lease_duration", d.lease_duration))


def partition_flags_given(args: Any) -> list[str]:
    return [dest for dest, _ in PARTITION_FLAGS if getattr(args, dest, None) is not None]


def run_failover_command(args: Any) -> int:
    from flotilla.bench.report import render_report

    p = params_from_args(args)
    errs = usage_errors(p, partition_flags_given(args))
    if errs:
        from flotilla.cli.flags import usage_error

        return usage_error(args, "\n".join(errs), "flotilla bench failover")
    if p.plot:
        from flotilla.bench.plot import require_matplotlib

        require_matplotlib()  # fail before an hour of benchmark, not after
    print(f"command: {p.command_line()}", flush=True)

    def draw(result: dict[str, Any], path: str) -> None:
        from flotilla.bench.plot import plot_recovery

        plot_recovery(result, path)

    ending = Ending("bench failover", lambda result: result_problems(result, p), render_report, p.json, p.plot, draw,
                    repeat=p.repeat, summary=PARTITION_SUMMARY if p.partition else SUMMARY,
                    order_key="partition.all_running_s" if p.partition else "total_seconds")
    return finish_command(ending, lambda: run_failover_bench(p))
