"""``flotilla bench scale``: the control plane at steady state with many members and workloads - memory and idle CPU,
and optionally the failover throughput at that scale.

Processes (:mod:`flotilla.bench.harness`): the control plane on ``--storage`` in its own process, ``--members``
simulated members in one ``flotilla member`` process per 50 members (``--member-processes``), and this driver.

Set-up: join the members and wait until all are Ready; one PropagationPolicy per member and kind pins the
workloads labelled for that member to it (the first member's policies as ``flotilla bench failover``'s: fallback
to every other member, purge mode Directly, a state-preservation rule). ``--failed-workloads`` K workloads go to
the first member, the other N-K round-robin to the others. The driver creates them (``--concurrency`` clients)
and waits, through a watch on the bindings, until each is Healthy on its member.

Steady state: the control plane's writes (its ``/metrics``) have stopped for a few seconds. Then, over
``--idle-seconds``, the CPU seconds of the control plane (and of the member processes, the driver, the rest of the
machine), the writes it made and the work its controllers' queues did (``workqueue_adds_total`` by controller:
what runs periodically), and its RSS; with ``--profile`` py-spy records the control plane during that window.

``--failover``: then a NoExecute taint on the first member (nothing tolerates it) and the same per-workload stages
as ``flotilla bench failover`` (:class:`flotilla.bench.observer.FailoverObserver`) until every one of its workloads
is Healthy elsewhere: total time and throughput, to compare with the 1,000-workload figure of that benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from flotilla.bench import harness, stats
from flotilla.bench.harness import say
from flotilla.bench.observer import InformerObserver
from flotilla.bench.processes import peak_rss_mb, rss_mb
from flotilla.bench.report import fmt_ms
from flotilla.bench.workloads import FLINK, NAMESPACE, KindSpec, kinds_for, policy, workload, workload_kinds

__all__ = ["ScaleParams", "result_problems", "run_scale_bench", "run_scale_command"]

FAULT_TAINT: Final = {"key": "bench.flotilla.io/fault", "effect": "NoExecute"}
QUIET_STEP_SECONDS: Final = 2.0
QUIET_MAX_SECONDS: Final = 600.0  # a backlog of Events (the recorder writes 100/s) drains first


@dataclass
class ScaleParams(harness.StackOptions):
    members: int = 100
    workloads: int = 10000
    kind: str = "deployment"
    failed_workloads: int = 0  # 0: the first member's even share
    concurrency: int = 32
    idle_seconds: float = 30.0
    failover: bool = False
    resource_eviction_rate: float = 1_000_000.0
    setup_timeout: float = 1800.0
    timeout: float = 600.0

    def failed_count(self) -> int:
        if self.failed_workloads > 0:
            return min(self.failed_workloads, self.workloads)
        return max(1, self.workloads // max(1, self.members))

    def command_line(self) -> str:
        cmd = ["flotilla", "bench", "scale", "--workloads", str(self.workloads), "--kind", self.kind,
               *self.stack_command_args(), "--idle-seconds", f"{self.idle_seconds:g}"]
        if self.failed_workloads:
            cmd += ["--failed-workloads", str(self.failed_workloads)]
        if self.failover:
            cmd += ["--failover", "--resource-eviction-rate", f"{self.resource_eviction_rate:g}"]
        return shlex.join(cmd)


# ============================================================================================ pure parts


def assignments(workloads: int, members: list[str], failed: int) -> list[str]:
    """The member of each workload: the first ``failed`` on ``members[0]``, the rest round-robin over the others
    (over all members when there is only one)."""
    others = members[1:] or members[:1]
    out = [members[0]] * min(failed, workloads)
    out += [others[i % len(others)] for i in range(workloads - len(out))]
    return out


def scale_policies(kinds: list[KindSpec], members: list[str], run: str) -> list[dict[str, Any]]:
    """Per member and kind, the policy pinning the workloads labelled ``<run>.<member>`` to that member; the first
    member's with the fallback to all the others, purge mode Directly and the state rule (its workloads are the
    ones ``--failover`` moves)."""
    out = []
    for i, member in enumerate(members):
        for spec in kinds:
            clusters = members if i == 0 else [member]
            pol = policy(spec, clusters, purge_mode="Directly", state=i == 0, run=f"{run}.{member}")
            pol["metadata"]["name"] = f"bench-{spec.name}-{member}"
            out.append(pol)
    return out


def quiet(writes: float, seconds: float) -> bool:
    """The control plane is at rest: at most one write per 2 seconds (a stray Event or status)."""
    return writes <= max(1.0, seconds / 2.0)


# ============================================================================================ observer


class PlacementObserver(InformerObserver):
    """How many workloads are Healthy on the member they were pinned to (a watch on the bindings)."""

    def __init__(self, cp: Any, targets: dict[str, str]) -> None:
        super().__init__()
        self.cp = cp
        self.targets = targets  # binding name -> member
        self.placed: set[str] = set()
        self.last_change = time.monotonic()

    def start(self) -> None:
        from flotilla.api import resources as R
        from flotilla.client import Informer

        informer = Informer(self.cp, R.RESOURCE_BINDINGS, NAMESPACE)
        informer.add_handler(self._on_binding, lambda old, new: self._on_binding(new))
        informer.start()
        self._informers.append(informer)

    def _on_binding(self, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        target = self.targets.get(name)
        if target is None:
            return
        clusters = [c.get("name") for c in (obj.get("spec") or {}).get("clusters") or []]
        healthy = any(i.get("clusterName") == target and i.get("health") == "Healthy"
                      for i in (obj.get("status") or {}).get("aggregatedStatus") or [])
        if clusters == [target] and healthy:
            self.placed.add(name)
        else:
            self.placed.discard(name)
        self.last_change = time.monotonic()
        self._changed.set()

    async def wait_all(self, within: float, progress: Any, what: str) -> bool:
        return await self.wait_for(lambda: len(self.placed) >= len(self.targets), within, progress, what)


# ============================================================================================ the run


class Run:
    def __init__(self, p: ScaleParams, workdir: Path) -> None:
        self.p = p
        self.workdir = workdir
        flags = list(p.controller_flags)
        if p.failover:
            flags = ["--resource-eviction-rate", f"{p.resource_eviction_rate:g}", *flags]
        self.stack = harness.BenchStack(p.stack_params(controller_flags=flags), workdir)
        self.run_id = f"s{int(time.time())}"
        self.kinds = workload_kinds(p.kind, p.workloads)
        self.names = [f"w{i:05d}" for i in range(p.workloads)]
        self.placement: list[str] = []
        self.observer: PlacementObserver | None = None
        self.failover_observer: Any = None
        self.profiler: harness.Profiler | None = None
        self.result: dict[str, Any] = {}

    async def stop(self) -> None:
        if self.profiler is not None:
            await self.profiler.kill()
        for obs in (self.observer, self.failover_observer):
            if obs is not None:
                with contextlib.suppress(Exception):
                    await obs.stop()
        await self.stack.stop()

    # ------------------------------------------------------------------ set-up
    async def setup(self) -> None:
        from flotilla.api import resources as R

        p, stack = self.p, self.stack
        say(f"starting the control plane ({p.storage}) and {p.members} members in {len(stack.groups)} "
            f"member process(es) ...")
        t0 = time.monotonic()
        await stack.start()
        started = time.monotonic() - t0
        say(f"joining {p.members} members ...")
        joined = await stack.join(ready_within=300.0 + 3.0 * p.members)
        await stack.create_namespace(NAMESPACE)
        specs = kinds_for(p.kind)
        if any(s.resource == FLINK for s in specs):
            await stack.install_flink_crd()
        for pol in scale_policies(specs, stack.names, self.run_id):
            await stack.cp.create(R.PROPAGATION_POLICIES, pol, NAMESPACE)
        self.placement = assignments(p.workloads, stack.names, p.failed_count())
        targets = {spec.binding_name(name): member
                   for name, spec, member in zip(self.names, self.kinds, self.placement, strict=True)}
        self.observer = PlacementObserver(stack.cp, targets)
        self.observer.start()
        say(f"creating {p.workloads} workloads ({p.kind}; {p.failed_count()} on {stack.names[0]}, the rest spread "
            f"over {max(1, p.members - 1)} members) ...")
        t1 = time.monotonic()
        queue = iter(zip(self.names, self.kinds, self.placement, strict=True))
        errors: list[str] = []

        async def creator() -> None:
            for name, spec, member in queue:
                try:
                    await stack.cp.create(spec.resource, workload(spec, name, f"{self.run_id}.{member}"), NAMESPACE)
                except Exception as e:  # noqa: BLE001 - reported
                    errors.append(f"{name}: {e}")

        await asyncio.gather(*(creator() for _ in range(max(1, min(p.concurrency, p.workloads)))))
        created = time.monotonic() - t1
        obs = self.observer

        def progress() -> str:
            return f"{len(obs.placed)}/{p.workloads}  control plane RSS {rss_mb(stack.cp_pid):,.0f} MB"

        ok = await obs.wait_all(p.setup_timeout, progress, "Healthy on their member:")
        self.result["setup"] = {"start_seconds": round(started, 1), "join_seconds": round(joined, 1),
                                "create_seconds": round(created, 1), "placed_seconds": round(time.monotonic() - t1, 1),
                                "placed": len(obs.placed), "create_errors": errors[:10]}
        if not ok:
            raise RuntimeError(f"only {len(obs.placed)} of {p.workloads} workloads were Healthy on their member "
                               f"after {p.setup_timeout:.0f}s")
        say(f"all {p.workloads} Healthy on their member after {time.monotonic() - t1:.1f}s")

    async def wait_quiet(self) -> dict[str, Any]:
        """Until the control plane's writes stop (at most QUIET_MAX_SECONDS)."""
        t0 = time.monotonic()
        stack = self.stack
        first = prev = await stack.scrape()
        rates = []
        ok = False
        while time.monotonic() - t0 < QUIET_MAX_SECONDS:
            await asyncio.sleep(QUIET_STEP_SECONDS)
            now = await stack.scrape()
            grown = stats.counter_delta(prev, now, "flotilla_bench_apiserver_writes_total").get("", 0.0)
            prev = now
            rates.append(round(grown / QUIET_STEP_SECONDS, 1))
            if quiet(grown, QUIET_STEP_SECONDS):
                ok = True
                break
        by = stats.counter_delta(first, prev, "flotilla_bench_apiserver_writes_total", by="resource")
        return {"seconds": round(time.monotonic() - t0, 1), "quiet": ok, "write_rates": rates[-10:],
                "writes_by_resource": {k: int(v) for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v}}

    # ------------------------------------------------------------------ the idle window
    async def idle(self) -> dict[str, Any]:
        p, stack = self.p, self.stack
        if p.profile:
            self.profiler = harness.Profiler(stack.cp_pid, p.profile)
            await self.profiler.start()
        say(f"steady state: measuring the idle control plane for {p.idle_seconds:g}s ...")
        before = await stack.scrape()
        cpu = stack.cpu_window()
        await asyncio.sleep(p.idle_seconds)
        cpu.stop()
        after = await stack.scrape()
        profile = await self.profiler.stop() if self.profiler is not None else {}
        self.profiler = None
        window = cpu.wall
        writes = stats.counter_delta(before, after, "flotilla_bench_apiserver_writes_total", by="resource")
        adds = stats.counter_delta(before, after, "workqueue_adds_total", by="name")
        out: dict[str, Any] = {
            "window_seconds": round(window, 2),
            "cpu_seconds": cpu.seconds,
            "cpu_cores": cpu.cores,
            "cpu_percent_of_one_core": round(100.0 * cpu.cores["control_plane"], 2),
            "writes_per_s": {k: round(v / window, 2) for k, v in sorted(writes.items(), key=lambda kv: -kv[1]) if v},
            "workqueue_adds_per_s": {k: round(v / window, 2) for k, v in sorted(adds.items(), key=lambda kv: -kv[1])
                                     if v},
            "workqueue_work_mean_ms": stats.histogram_means(before, after, "workqueue_work_duration_seconds"),
        }
        if profile:
            out["profile"] = profile
        return out

    # ------------------------------------------------------------------ failover
    async def fail_over(self) -> dict[str, Any]:
        from flotilla.api import resources as R
        from flotilla.bench.observer import FailoverObserver
        from flotilla.client import ApiException, is_conflict
        from flotilla.member.history import read_history

        p, stack = self.p, self.stack
        failed = stack.names[0]
        on_failed = [(name, spec) for name, spec, member in zip(self.names, self.kinds, self.placement, strict=True)
                     if member == failed]
        obs = self.failover_observer = FailoverObserver(stack.cp, stack.member_clients, failed, on_failed, state=True)
        say(f"failover: watching {len(on_failed)} workloads on {failed} (and {p.members - 1} members) ...")
        obs.start()
        if not await obs.wait_for(obs.all_placed, 300.0):
            raise RuntimeError(f"only {len(obs.placed)} of {len(on_failed)} workloads on {failed} were Healthy with "
                               f"their state known")
        before = await stack.scrape()
        cpu = stack.cpu_window()
        t0 = obs.mark_fault()
        for _ in range(10):
            cluster = await stack.cp.get(R.CLUSTERS, failed)
            spec = cluster.setdefault("spec", {})
            spec["taints"] = [*(spec.get("taints") or []), dict(FAULT_TAINT)]
            try:
                await stack.cp.update(R.CLUSTERS, cluster)
                break
            except ApiException as e:
                if not is_conflict(e):
                    raise
        say(f"fault: NoExecute taint {FAULT_TAINT['key']} on {failed}")

        def progress() -> str:
            tls = list(obs.timelines.values())
            counts = " ".join(f"{key} {sum(1 for tl in tls if tl.stage(key) is not None)}" for key, _ in stats.STAGES)
            return f"T+{time.time() - t0:5.1f}s  {counts}  (of {len(tls)})"

        recovered = await obs.wait_for(obs.all_recovered, p.timeout, progress, "failover:")
        cpu.stop()
        after = await stack.scrape()
        timelines = list(obs.timelines.values())
        healthy = [tl.healthy for tl in timelines if tl.healthy is not None]
        last = max(healthy, default=time.time())
        total = max(1e-9, last - t0)
        intervals = [iv.to_dict() for f in stack.history_files() if f.exists() for iv in read_history(f)]
        copies, with_history = stats.max_concurrent_copies(intervals, NAMESPACE)
        writes = stats.counter_delta(before, after, "flotilla_bench_apiserver_writes_total")
        out = {
            "failed_member": failed,
            "workloads": len(on_failed),
            "all_recovered": bool(recovered),
            "recovered": len(healthy),
            "total_seconds": round(total, 3),
            "throughput_per_s": round(len(healthy) / total, 2),
            "latency_ms": {k: v for k, v in stats.latency_summary([t - t0 for t in healthy]).items() if k != "count"},
            "stages_ms": stats.stage_summaries(timelines, t0),
            "steps_ms": stats.step_summaries(timelines),
            "state_injected": sum(1 for tl in timelines if tl.state_ok),
            "max_concurrent_copies": copies,
            "workloads_with_running_history": with_history,
            "writes": int(writes.get("", 0.0)),
            "writes_per_workload": round(writes.get("", 0.0) / max(1, len(on_failed)), 2),
            "cpu_seconds": cpu.seconds["control_plane"],
            "cpu_cores": cpu.cores,
            "peak_rss_mb": peak_rss_mb(stack.cp_pid),
        }
        missing = [tl.binding for tl in timelines if tl.healthy is None]
        if missing:
            out["not_recovered"] = missing[:20]
        return out

    # ------------------------------------------------------------------ the whole run
    async def execute(self) -> dict[str, Any]:
        p, stack = self.p, self.stack
        await self.setup()
        say("waiting for the control plane's writes to stop ...")
        steady = await self.wait_quiet()
        rss_steady = rss_mb(stack.cp_pid)
        idle = await self.idle()
        memory = stack.memory()
        self.result.update({
            "command": p.command_line(),
            "members": p.members,
            "member_processes": len(stack.groups),
            "workloads": p.workloads,
            "kind": p.kind,
            "failed_workloads": p.failed_count(),
            "storage": p.storage,
            "transport": p.transport,
            "controller_flags": p.controller_flags,
            "steady": steady,
            "idle": idle,
            "idle_cpu_percent": idle["cpu_percent_of_one_core"],
            "rss_mb": rss_steady,
            "peak_rss_mb": memory["control_plane"]["peak_rss_mb"],
            "memory": memory,
            "member_rss_mb_total": round(sum(m["rss_mb"] for m in memory["member_processes"]), 1),
            "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0],
                        "loadavg_1m": round(os.getloadavg()[0], 2)},
        })
        if self.observer is not None:
            await self.observer.stop()
            self.observer = None
        if p.failover:
            self.result["failover"] = await self.fail_over()
            self.result["peak_rss_mb_with_failover"] = peak_rss_mb(stack.cp_pid)
        return self.result


async def run_scale_bench(p: ScaleParams) -> dict[str, Any]:
    """Run the benchmark once; the result document."""
    return await harness.run_in_workdir(lambda workdir: Run(p, workdir), p.data_dir, "flotilla-bench-scale-")


def result_problems(result: dict[str, Any], p: ScaleParams) -> list[str]:
    """The run's invariants that did not hold (empty: a clean run). No timing or size is judged here."""
    found = []
    setup = result.get("setup") or {}
    if setup.get("create_errors"):
        found.append(f"creates failed: {setup['create_errors'][:3]}")
    if setup.get("placed", 0) != p.workloads:
        found.append(f"only {setup.get('placed')} of {p.workloads} workloads were placed")
    fo = result.get("failover")
    if p.failover and fo is not None:
        if not fo.get("all_recovered"):
            found.append(f"failover: only {fo.get('recovered')} of {fo.get('workloads')} workloads recovered")
        if fo.get("state_injected") != fo.get("workloads"):
            found.append(f"failover: state injected into {fo.get('state_injected')} of {fo.get('workloads')} copies")
        if fo.get("max_concurrent_copies", 0) > 1:
            found.append(f"failover: {fo['max_concurrent_copies']} copies of one workload ran at once")
    return found


# ============================================================================================ report


def render_report(r: dict[str, Any]) -> str:
    idle = r.get("idle") or {}
    cores = idle.get("cpu_cores") or {}
    setup = r.get("setup") or {}
    mem = r.get("memory") or {}
    steady = r.get("steady") or {}
    members = mem.get("member_processes") or []
    lines = [
        f"flotilla bench scale: {r.get('workloads')} workloads ({r.get('kind')}) on {r.get('members')} members "
        f"({r.get('member_processes')} member processes), storage {r.get('storage')}, controllers over "
        f"{r.get('transport')}",
        f"set-up: members started in {setup.get('start_seconds')} s, joined and Ready in {setup.get('join_seconds')} s, "
        f"workloads created in {setup.get('create_seconds')} s, all Healthy after {setup.get('placed_seconds')} s; "
        f"writes stopped {steady.get('seconds')} s later" + ("" if steady.get("quiet") else
                                                             f" (NOT quiet: {steady.get('write_rates')} writes/s)"),
        "",
        "steady state",
        f"  control plane idle CPU   {idle.get('cpu_percent_of_one_core', 0):.1f}% of one core "
        f"({(idle.get('cpu_seconds') or {}).get('control_plane', 0):.2f} CPU s over {idle.get('window_seconds', 0):.0f} s)",
        f"  control plane RSS        {r.get('rss_mb', 0):,.0f} MB (peak {r.get('peak_rss_mb', 0):,.0f} MB)",
        "  member processes RSS     " + ", ".join(f"{m['rss_mb']:,.0f} MB ({m['members']} members)" for m in members),
        "  CPU cores (idle window)  " + " ".join(f"{k} {v:.3f}" for k, v in cores.items()),
        "  writes/s at idle         " + (", ".join(f"{k} {v}" for k, v in (idle.get("writes_per_s") or {}).items())
                                         or "none"),
        "  work queue adds/s        " + (", ".join(f"{k} {v}" for k, v in (idle.get("workqueue_adds_per_s") or {}).items())
                                         or "none"),
    ]
    profile = idle.get("profile") or {}
    if profile.get("self"):
        lines.append(f"  profile (py-spy, control plane at idle, {profile.get('samples')} samples, "
                     f"{profile.get('file')}): top functions by own samples")
        for name, pct in profile["self"][:12]:
            lines.append(f"    {pct:5.1f}%  {name}")
        lines.append("  ... and by inclusive samples")
        for name, pct in profile["inclusive"][:15]:
            lines.append(f"    {pct:5.1f}%  {name}")
    fo = r.get("failover")
    if fo:
        lines += ["", f"failover of {fo.get('failed_member')} ({fo.get('workloads')} workloads, NoExecute taint, "
                      f"purge Directly, state on)"]
        stages = fo.get("stages_ms") or {}
        for key, label in stats.STAGES:
            s = stages.get(key) or {}
            lines.append(f"  {label:36s} {s.get('count', 0):>6}  p50 {fmt_ms(s.get('p50')):>7}  p90 {fmt_ms(s.get('p90')):>7}"
                         f"  p99 {fmt_ms(s.get('p99')):>7}  max {fmt_ms(s.get('max')):>7} ms")
        lines += [
            f"  total {fo.get('total_seconds', 0):.2f} s, throughput {fo.get('throughput_per_s', 0):.1f} workloads/s; "
            f"{fo.get('writes_per_workload', 0):.1f} writes per workload; control plane "
            f"{fo.get('cpu_seconds', 0):.1f} CPU s; peak RSS {fo.get('peak_rss_mb', 0):,.0f} MB",
            f"  all recovered {'yes' if fo.get('all_recovered') else 'NO'} ({fo.get('recovered')}/{fo.get('workloads')}), "
            f"state injected {fo.get('state_injected')}/{fo.get('workloads')}, max concurrent copies "
            f"{fo.get('max_concurrent_copies')}",
        ]
    m = r.get("machine") or {}
    lines.append(f"machine: {m.get('nproc')} CPUs, load average (1 min) {m.get('loadavg_1m')}")
    return "\n".join(lines)


# ============================================================================================ command


def params_from_args(args: Any) -> ScaleParams:
    return ScaleParams(
        **harness.StackOptions.from_args(args), workloads=args.workloads, kind=args.kind,
        failed_workloads=args.failed_workloads, concurrency=args.concurrency, idle_seconds=args.idle_seconds,
        failover=args.failover, resource_eviction_rate=args.resource_eviction_rate, setup_timeout=args.setup_timeout,
        timeout=args.timeout)


def run_scale_command(args: Any) -> int:
    p = params_from_args(args)
    if p.members < 2 and p.failover:
        raise SystemExit("flotilla bench scale: --failover needs at least 2 members")
    if p.members < 1 or p.workloads < 1:
        raise SystemExit("flotilla bench scale: --members and --workloads must be at least 1")
    if p.idle_seconds <= 0:
        raise SystemExit("flotilla bench scale: --idle-seconds must be greater than 0")
    print(f"command: {p.command_line()}", flush=True)
    ending = harness.Ending("bench scale", lambda result: result_problems(result, p), render_report, p.json)
    return harness.finish_command(ending, lambda: run_scale_bench(p))
