"""``flotilla bench propagate``: N templates applied at once, how long until each is in its members.

Processes as ``flotilla bench failover`` (:mod:`flotilla.bench.harness`): the control plane on ``--storage`` in
its own process, ``--members`` simulated members (``--ready-delay 0``: a workload is ready as soon as it exists,
so the control plane is what is measured) in another, and this driver.

Set-up: join the members and wait until they are Ready, create the namespace ``bench`` and the
PropagationPolicy (``--placement duplicated``: one policy, every template to every member; ``single``: one
policy per member, template *i* to member *i mod M*). Then the driver starts its watches (informers: the
bindings and Works on the control plane, the templates' kind on every member) and, with ``--concurrency``
clients, creates the N templates at once: Deployments, and with ``--flink-share`` that share of
FlinkDeployments.

Per template, from the moment its create was answered (the template exists), the driver stamps: its
ResourceBinding seen (detector), scheduled (``spec.clusters`` filled), every Work created, the first and the
last member object seen by the member watches, and Healthy on the binding (``aggregatedStatus`` Healthy for
every target cluster). The headline is the latency per member object (template created -> object in the
member), p50/p90/p99/max, with the throughput, the control plane's CPU seconds and peak RSS over the window
(first create to last Healthy).

``--floor`` runs the same templates through the forward-path floor (:mod:`flotilla.bench.floor`) instead of the
propagation controllers: only the writes and member creates the design needs, no logic, no status. Nothing
becomes Healthy there, so the window ends with the last member object; the member-object latency is the lowest
the real pipeline could reach on this machine.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from flotilla.bench import stats
from flotilla.bench.harness import (
    BenchStack,
    Ending,
    Profiler,
    StackOptions,
    finish_command,
    run_in_workdir,
    say,
)
from flotilla.bench.observer import InformerObserver
from flotilla.bench.processes import peak_rss_mb, rss_mb
from flotilla.bench.report import fmt_ms, latency_cells, profile_lines, step_rows, text_table
from flotilla.bench.workloads import FLINK, KINDS, NAMESPACE, RUN_LABEL, KindSpec, workload
from flotilla.kube.objects import meta_of

__all__ = ["PropagateParams", "result_problems", "run_propagate_bench", "run_propagate_command"]

#: the PropagationPolicy of ``--placement duplicated`` (the floor's claims name it too)
DUPLICATED_POLICY: Final = "bench-propagate"
#: How long a --floor run waits, once every member object is there, for the floor to count its last templates
FLOOR_COUNT_WAIT: Final = 10.0
#: the numbers ``--repeat`` tabulates (run by run, and their median)
SUMMARY: Final = ("total_seconds", "throughput_per_s", "latency_ms.p50", "latency_ms.p90", "latency_ms.p99",
                  "cpu_seconds", "peak_rss_mb", "cpu_cores.other")
BINDING_NAMESPACE_ANNOTATION = "resourcebinding.karmada.io/namespace"
BINDING_NAME_ANNOTATION = "resourcebinding.karmada.io/name"
EXECUTION_SPACE_PREFIX = "karmada-es-"

#: The stages of one template, in order: (key, label); each is timed from the template's creation.
STAGES: Final[tuple[tuple[str, str], ...]] = (
    ("bound", "ResourceBinding created (detector)"),
    ("scheduled", "scheduled (spec.clusters)"),
    ("works", "every Work created"),
    ("first_member", "first member object"),
    ("all_members", "every member object"),
    ("healthy", "Healthy on the binding"),
)


@dataclass
class PropagateParams(StackOptions):
    templates: int = 1000
    placement: str = "duplicated"
    flink_share: float = 0.0
    concurrency: int = 64
    timeout: float = 600.0
    plot: str = ""
    repeat: int = 1
    floor: bool = False

    def command_line(self) -> str:
        cmd = ["flotilla", "bench", "propagate", "--templates", str(self.templates), *self.stack_command_args(),
               "--placement", self.placement, "--flink-share", f"{self.flink_share:g}",
               "--concurrency", str(self.concurrency)]
        if self.floor:
            cmd.append("--floor")
        if self.plot:
            cmd += ["--plot", self.plot]
        if self.repeat > 1:
            cmd += ["--repeat", str(self.repeat)]
        return shlex.join(cmd)

    def target_count(self) -> int:
        """How many member objects one template makes."""
        return self.members if self.placement == "duplicated" else 1


# ============================================================================================ pure parts


def template_kinds(count: int, flink_share: float) -> list[KindSpec]:
    """The kind of each template: Deployments, with every k-th a FlinkDeployment so that ``flink_share`` of them
    are (spread evenly, so the Flink ones are not all created last)."""
    deployment, flink = KINDS["deployment"], KINDS["flink"]
    flinks = round(count * max(0.0, min(1.0, flink_share)))
    out = [deployment] * count
    for j in range(flinks):
        out[(j * count) // flinks] = flink
    return out


def policies(kinds: list[KindSpec], members: list[str], placement: str, run: str) -> list[dict[str, Any]]:
    """``duplicated``: one PropagationPolicy, every template of the run to every member; ``single``: one per
    member, for the templates labelled ``<run>.<member>``."""
    selectors = [{"apiVersion": spec.api_version, "kind": spec.kind} for spec in dict.fromkeys(kinds)]

    def policy(name: str, run_value: str, clusters: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "resourceSelectors": [{**s, "labelSelector": {"matchLabels": {RUN_LABEL: run_value}}}
                                      for s in selectors],
                "placement": {"clusterAffinity": {"clusterNames": clusters},
                              "replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
            },
        }

    if placement == "duplicated":
        return [policy(DUPLICATED_POLICY, run, list(members))]
    return [policy(f"bench-propagate-{m}", f"{run}.{m}", [m]) for m in members]


def template_run_label(index: int, members: list[str], placement: str, run: str) -> str:
    return run if placement == "duplicated" else f"{run}.{members[index % len(members)]}"


@dataclass
class TemplateTimeline:
    """What the driver saw of one template (``time.time()`` seconds; None: not seen)."""

    name: str
    kind: str
    binding: str
    targets: int  # member objects expected
    requested: float | None = None
    created: float | None = None
    bound: float | None = None
    scheduled: float | None = None
    works: float | None = None
    first_member: float | None = None
    all_members: float | None = None
    healthy: float | None = None
    work_clusters: set[str] = field(default_factory=set)
    member_seen: dict[str, float] = field(default_factory=dict)

    def stage(self, key: str) -> float | None:
        value = getattr(self, key)
        return value if isinstance(value, float) else None

    def since_created(self, key: str) -> float | None:
        t = self.stage(key)
        if t is None or self.created is None:
            return None
        return max(0.0, t - self.created)


def object_latencies(timelines: list[TemplateTimeline]) -> list[float]:
    """Template created -> member object seen, one sample per member object."""
    out = []
    for tl in timelines:
        if tl.created is None:
            continue
        out += [max(0.0, t - tl.created) for t in tl.member_seen.values()]
    return out


def stage_summaries(timelines: list[TemplateTimeline]) -> dict[str, dict[str, float | int]]:
    out: dict[str, dict[str, float | int]] = {}
    for key, _ in STAGES:
        out[key] = stats.latency_summary([x for x in (tl.since_created(key) for tl in timelines) if x is not None])
    return out


def step_summaries(timelines: list[TemplateTimeline]) -> dict[str, dict[str, float | int]]:
    """Per stage: the time from the previous stage (the first from the creation), per template."""
    out: dict[str, dict[str, float | int]] = {}
    prev_key = "created"
    for key, _ in STAGES:
        samples = []
        for tl in timelines:
            a, b = tl.stage(prev_key), tl.stage(key)
            if a is not None and b is not None:
                samples.append(max(0.0, b - a))
        out[f"{prev_key}->{key}"] = stats.latency_summary(samples)
        prev_key = key
    return out


# ============================================================================================ observer


class PropagationObserver(InformerObserver):
    """Stamps each template's stages from watches: bindings and Works on the control plane, the templates' kinds
    in every member."""

    def __init__(self, cp: Any, members: dict[str, Any], timelines: list[TemplateTimeline]) -> None:
        super().__init__()
        self.cp = cp
        self.members = members
        self.timelines = {tl.binding: tl for tl in timelines}
        self.by_kind_name = {(tl.kind, tl.name): tl for tl in timelines}
        self.kinds = {FLINK if tl.kind == FLINK.kind else KINDS["deployment"].resource for tl in timelines}
        self.objects = 0
        self.objects_expected = sum(tl.targets for tl in timelines)
        self.healthy = 0

    async def start(self) -> None:
        from flotilla.api import resources as R
        from flotilla.client import Informer

        rb = Informer(self.cp, R.RESOURCE_BINDINGS, NAMESPACE)
        rb.add_handler(self._on_binding, lambda old, new: self._on_binding(new))
        works = Informer(self.cp, R.WORKS)
        works.add_handler(self._on_work)
        self._informers += [rb, works]
        for member, client in self.members.items():
            for res in self.kinds:
                inf = Informer(client, res, NAMESPACE, backoff=(0.2, 1.0))
                inf.add_handler(lambda obj, m=member, k=res.kind: self._on_member(m, k, obj))
                self._informers.append(inf)
        for inf in self._informers:
            inf.start()
        await asyncio.gather(*(inf.wait_synced(60) for inf in self._informers))

    def all_healthy(self) -> bool:
        return self.healthy == len(self.timelines)

    def all_propagated(self) -> bool:
        return self.objects >= self.objects_expected

    def _on_binding(self, obj: dict[str, Any]) -> None:
        tl = self.timelines.get(str(meta_of(obj).get("name") or ""))
        if tl is None:
            return
        now = time.time()
        if tl.bound is None:
            tl.bound = now
        clusters = [str(c.get("name") or "") for c in (obj.get("spec") or {}).get("clusters") or []]
        if tl.scheduled is None and clusters:
            tl.scheduled = now
        if tl.healthy is None and len(clusters) >= tl.targets:
            health = {i.get("clusterName"): i.get("health")
                      for i in (obj.get("status") or {}).get("aggregatedStatus") or []}
            if all(health.get(c) == "Healthy" for c in clusters):
                tl.healthy = now
                self.healthy += 1
        self._changed.set()

    def _on_work(self, obj: dict[str, Any]) -> None:
        meta = meta_of(obj)
        ns = str(meta.get("namespace") or "")
        if not ns.startswith(EXECUTION_SPACE_PREFIX):
            return
        ann = meta.get("annotations") or {}
        if ann.get(BINDING_NAMESPACE_ANNOTATION) != NAMESPACE:
            return
        tl = self.timelines.get(str(ann.get(BINDING_NAME_ANNOTATION) or ""))
        if tl is None or tl.works is not None:
            return
        tl.work_clusters.add(ns.removeprefix(EXECUTION_SPACE_PREFIX))
        if len(tl.work_clusters) >= tl.targets:
            tl.works = time.time()
            self._changed.set()

    def _on_member(self, member: str, kind: str, obj: dict[str, Any]) -> None:
        tl = self.by_kind_name.get((kind, str(meta_of(obj).get("name") or "")))
        if tl is None or member in tl.member_seen:
            return
        now = time.time()
        tl.member_seen[member] = now
        self.objects += 1
        if tl.first_member is None:
            tl.first_member = now
        if len(tl.member_seen) >= tl.targets:
            tl.all_members = now
        self._changed.set()


# ============================================================================================ the run


class Run:
    def __init__(self, p: PropagateParams, workdir: Path) -> None:
        self.p = p
        self.workdir = workdir
        self.stack = BenchStack(p.stack_params(taint_policy=False, floor=p.floor), workdir)
        self.run_id = f"p{int(time.time())}"
        self.kinds = template_kinds(p.templates, p.flink_share)
        self.timelines = [TemplateTimeline(name=f"t{i:05d}", kind=spec.kind, binding=spec.binding_name(f"t{i:05d}"),
                                           targets=p.target_count()) for i, spec in enumerate(self.kinds)]
        self.observer: PropagationObserver | None = None
        self.profiler: Profiler | None = None
        self.result: dict[str, Any] = {}

    async def stop(self) -> None:
        if self.profiler is not None:
            await self.profiler.kill()
        if self.observer is not None:
            await self.observer.stop()
        await self.stack.stop()

    async def setup(self) -> None:
        from flotilla.api import resources as R

        stack, p = self.stack, self.p
        say(f"starting the control plane ({p.storage}) and {p.members} members ...")
        await stack.start()
        joined = await stack.join()
        await stack.create_namespace(NAMESPACE)
        if any(spec.resource == FLINK for spec in self.kinds):
            await stack.install_flink_crd()
        for pol in policies(self.kinds, stack.names, p.placement, self.run_id):
            await stack.cp.create(R.PROPAGATION_POLICIES, pol, NAMESPACE)
        self.observer = PropagationObserver(stack.cp, stack.member_clients, self.timelines)
        await self.observer.start()
        if p.floor:
            await stack.poll(self.floor_synced, "the floor's informers to sync", 60)
        self.result["setup"] = {"joined_seconds": round(joined, 1)}

    async def floor_synced(self) -> bool:
        samples = await self.stack.scrape()
        return samples.get(("flotilla_bench_floor_unsynced", ()), 1.0) == 0.0

    async def apply(self) -> float:
        """Create every template with ``--concurrency`` clients; returns the wall time of the creates."""
        stack, p = self.stack, self.p
        queue = iter(enumerate(self.timelines))
        errors: list[str] = []

        async def creator() -> None:
            for i, tl in queue:
                body = workload(self.kinds[i], tl.name, template_run_label(i, stack.names, p.placement, self.run_id))
                tl.requested = time.time()
                try:
                    await stack.cp.create(self.kinds[i].resource, body, NAMESPACE)
                except Exception as e:  # noqa: BLE001 - reported; the template is then never propagated
                    errors.append(f"{tl.name}: {e}")
                    continue
                tl.created = time.time()

        t0 = time.monotonic()
        await asyncio.gather(*(creator() for _ in range(max(1, min(p.concurrency, p.templates)))))
        if errors:
            self.result["create_errors"] = errors[:10]
        return time.monotonic() - t0

    async def _floor_counted(self, before: Any, deadline: float) -> None:
        """Wait until the floor has counted every template (carried or failed), or until ``deadline``: its counter
        goes up once its own create in the last member returns, which can be after the driver saw the object
        there through its watch."""
        while time.monotonic() < deadline:
            counted = stats.counter_delta(before, await self.stack.scrape(), "flotilla_bench_floor_templates_total",
                                          by="outcome")
            if sum(counted.values()) >= self.p.templates:
                return
            await asyncio.sleep(0.1)

    def progress(self, t0: float) -> str:
        """The progress line's text while the templates propagate."""
        obs = self.observer
        assert obs is not None
        tls = self.timelines
        counts = " ".join(f"{key} {sum(1 for tl in tls if tl.stage(key) is not None)}" for key, _ in STAGES)
        return (f"T+{time.time() - t0:5.1f}s  created {sum(1 for tl in tls if tl.created)}  {counts}  "
                f"(of {len(tls)}; member objects {obs.objects}/{obs.objects_expected})")

    async def execute(self) -> dict[str, Any]:
        p, stack = self.p, self.stack
        await self.setup()
        obs = self.observer
        assert obs is not None
        await asyncio.sleep(1.0)
        background = await stack.write_rate(2.0)
        rss_before = rss_mb(stack.cp_pid)
        before = await stack.scrape()
        if p.profile:
            self.profiler = Profiler(stack.cp_pid, p.profile)
            await self.profiler.start()
        say(f"applying {p.templates} templates ({p.placement}, {p.flink_share:.0%} FlinkDeployments) with "
            f"{p.concurrency} clients ...")
        cpu = stack.cpu_window()
        t0 = time.time()
        create_s = await self.apply()
        propagated = await obs.wait_for(obs.all_propagated, p.timeout, lambda: self.progress(t0), "propagating:")
        healthy = False if p.floor else await obs.wait_for(obs.all_healthy, max(1.0, p.timeout - (time.time() - t0)),
                                                           lambda: self.progress(t0), "propagating:")
        if p.floor:
            await self._floor_counted(before, deadline=time.monotonic() + FLOOR_COUNT_WAIT)
        cpu.stop()
        after = await stack.scrape()
        profile = await self.profiler.stop() if self.profiler is not None else {}
        self.profiler = None
        tls = self.timelines
        created = [tl.created for tl in tls if tl.created is not None]
        first_created = min(created, default=t0)
        last_created = max(created, default=t0)
        member_times = [t for tl in tls for t in tl.member_seen.values()]
        healthy_times = [tl.healthy for tl in tls if tl.healthy is not None]
        last_object = max(member_times, default=first_created)
        last_healthy = max(healthy_times, default=last_object if p.floor else first_created)
        objects = object_latencies(tls)
        writes = stats.counter_delta(before, after, "flotilla_bench_apiserver_writes_total")
        by_resource = stats.counter_delta(before, after, "flotilla_bench_apiserver_writes_total", by="resource")
        self.result.update({
            "command": p.command_line(),
            "templates": p.templates,
            "members": p.members,
            "placement": p.placement,
            "flink_share": p.flink_share,
            "flinkdeployments": sum(1 for tl in tls if tl.kind == FLINK.kind),
            "storage": p.storage,
            "transport": p.transport,
            "controller_flags": p.controller_flags,
            "floor": p.floor,
            "concurrency": p.concurrency,
            "member_objects_expected": obs.objects_expected,
            "member_objects": obs.objects,
            "all_propagated": bool(propagated),
            "healthy": obs.healthy,
            "all_healthy": bool(healthy),
            "create_seconds": round(create_s, 3),
            "creates_per_s": round(len(created) / create_s, 1) if create_s > 0 else 0.0,
            "apply_window_seconds": round(last_created - first_created, 3),
            "total_seconds": round(last_healthy - first_created, 3),
            "propagated_seconds": round(last_object - first_created, 3),
            "throughput_per_s": round(len(healthy_times) / max(1e-9, last_healthy - first_created), 2),
            "member_objects_per_s": round(len(member_times) / max(1e-9, last_object - first_created), 2),
            "latency_ms": {k: v for k, v in stats.latency_summary(objects).items()},
            "stages_ms": stage_summaries(tls),
            "steps_ms": step_summaries(tls),
            "cpu_seconds": cpu.seconds["control_plane"],
            "cpu_cores": cpu.cores,
            "cpu_window_seconds": round(cpu.wall, 2),
            "peak_rss_mb": peak_rss_mb(stack.cp_pid),
            "rss_mb": {"before": rss_before, "after": rss_mb(stack.cp_pid)},
            "memory": stack.memory(),
            "writes": {"total": int(writes.get("", 0.0)), "background_per_s": round(background, 1),
                       "per_template": round(writes.get("", 0.0) / max(1, p.templates), 2),
                       "by_resource": {k: int(v) for k, v in sorted(by_resource.items(), key=lambda kv: -kv[1])
                                       if v}},
            **stats.workqueue_summary(before, after),
            "curves": {
                "member_objects": [[round(t, 3), n] for t, n in stats.recovered_curve(member_times, first_created)],
                "healthy": [[round(t, 3), n] for t, n in stats.recovered_curve(healthy_times, first_created)],
                "created": [[round(t, 3), n] for t, n in stats.recovered_curve(created, first_created)],
            },
            "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0],
                        "loadavg_1m": round(os.getloadavg()[0], 2)},
        })
        if p.floor:
            self.result["floor_templates"] = {k: int(v) for k, v in stats.counter_delta(
                before, after, "flotilla_bench_floor_templates_total", by="outcome").items()}
        if profile:
            self.result["profile"] = profile
        missing = [tl.name for tl in tls if tl.all_members is None]
        if missing:
            self.result["not_propagated"] = missing[:20]
        unhealthy = [tl.binding for tl in tls if tl.healthy is None]
        if unhealthy and not p.floor:
            self.result["not_healthy"] = unhealthy[:20]
        return self.result


async def run_propagate_bench(p: PropagateParams) -> dict[str, Any]:
    """Run the benchmark once; the result document."""
    return await run_in_workdir(lambda workdir: Run(p, workdir), p.data_dir, "flotilla-bench-propagate-")


def result_problems(result: dict[str, Any], p: PropagateParams) -> list[str]:
    """The run's invariants that did not hold (empty: a clean run). No timing is judged here."""
    found = []
    if result.get("create_errors"):
        found.append(f"creates failed: {result['create_errors'][:3]}")
    if not result.get("all_propagated"):
        found.append(f"only {result.get('member_objects')} of {result.get('member_objects_expected')} member objects "
                     f"appeared within {p.timeout:.0f}s")
    if p.floor:
        failed = (result.get("floor_templates") or {}).get("failed", 0)
        if failed:
            found.append(f"the floor failed to carry {failed} templates (the control plane's log says why)")
    elif not result.get("all_healthy"):
        found.append(f"only {result.get('healthy')} of {p.templates} bindings were Healthy within {p.timeout:.0f}s")
    return found


# ============================================================================================ report


def render_report(r: dict[str, Any]) -> str:
    n = r.get("templates", 0)
    cores = r.get("cpu_cores") or {}
    writes = r.get("writes") or {}
    lat = r.get("latency_ms") or {}
    floor = bool(r.get("floor"))
    rows: list[tuple[str, ...]] = [("stage (ms since the template's creation)", "reached", "p50", "p90", "p99", "max")]
    stages = r.get("stages_ms") or {}
    for key, label in STAGES:
        if floor and key == "healthy":
            continue  # the floor writes no status
        s = stages.get(key) or {}
        rows.append((label, f"{s.get('count', 0)}/{n}", *latency_cells(s)))
    rows.append(("member object (each of them)", f"{lat.get('count', 0)}/{r.get('member_objects_expected', 0)}",
                 *latency_cells(lat)))
    table = text_table(rows + step_rows(r.get("steps_ms") or {}, skip="healthy" if floor else ""))
    mem = r.get("memory") or {}
    members_rss = ", ".join(f"{m['rss_mb']:.0f}" for m in mem.get("member_processes") or [])
    by_resource = ", ".join(f"{k} {v:,}" for k, v in list((writes.get("by_resource") or {}).items())[:6])
    carried_by = "the forward-path floor (no controller logic)" if floor else "controllers"
    if floor:
        done = (r.get("floor_templates") or {})
        healthy_line = (f"  Healthy                     not measured (--floor: no status controllers); the floor "
                        f"carried {done.get('carried', 0)}, failed {done.get('failed', 0)}")
    else:
        healthy_line = (f"  all Healthy                 {r.get('total_seconds', 0):.2f} s after the first create "
                        f"({r.get('throughput_per_s', 0):,.1f} templates/s)")
    lines = [
        f"flotilla bench propagate: {n} templates ({r.get('flinkdeployments', 0)} FlinkDeployments), "
        f"{r.get('placement')} to {r.get('members')} members ({r.get('member_objects_expected')} member objects), "
        f"storage {r.get('storage')}, {carried_by} over {r.get('transport')}",
        f"applied with {r.get('concurrency')} clients in {r.get('create_seconds', 0):.2f} s "
        f"({r.get('creates_per_s', 0):,.0f} creates/s); background writes {writes.get('background_per_s', 0):,.1f}/s",
        "",
        *table,
        "",
        "summary",
        f"  template -> member object   p50 {fmt_ms(lat.get('p50'))} ms, p90 {fmt_ms(lat.get('p90'))} ms, "
        f"p99 {fmt_ms(lat.get('p99'))} ms, max {fmt_ms(lat.get('max'))} ms",
        f"  all member objects          {r.get('propagated_seconds', 0):.2f} s after the first create "
        f"({r.get('member_objects_per_s', 0):,.1f} objects/s)",
        healthy_line,
        f"  writes                      {writes.get('total', 0):,} ({writes.get('per_template', 0):.1f} per template); "
        f"{by_resource}",
        f"  control plane               {r.get('cpu_seconds', 0):.1f} CPU s over {r.get('cpu_window_seconds', 0):.1f} s "
        f"({cores.get('control_plane', 0):.2f} cores); peak RSS {r.get('peak_rss_mb', 0):,.0f} MB "
        f"(before {((r.get('rss_mb') or {}).get('before') or 0):,.0f} MB)",
        f"  member processes RSS (MB)   {members_rss}",
        "  CPU cores (window)          " + " ".join(f"{k} {v:.2f}" for k, v in cores.items()),
        f"  all propagated / Healthy    {'yes' if r.get('all_propagated') else 'NO'} "
        f"({r.get('member_objects', 0)}/{r.get('member_objects_expected', 0)}) / "
        + ("not measured" if floor else f"{'yes' if r.get('all_healthy') else 'NO'} ({r.get('healthy', 0)}/{n})"),
        f"  machine                     {(r.get('machine') or {}).get('nproc')} CPUs, load average (1 min) "
        f"{(r.get('machine') or {}).get('loadavg_1m')}",
    ]
    lines += profile_lines(r.get("profile") or {})
    return "\n".join(lines)


def plot_propagation(result: dict[str, Any], path: str) -> None:
    """Templates created, member objects and Healthy templates over seconds since the first create."""
    from flotilla.bench.plot import step_plot

    n = result.get("templates", 0)
    with step_plot(path, n, "the first create", "templates") as ax:
        curves = result.get("curves") or {}
        targets = max(1, int(result.get("member_objects_expected", n) or n) // max(1, n))
        for key, label, scale in (("created", "templates created", 1), ("member_objects",
                                  f"member objects / {targets}" if targets > 1 else "member objects", targets),
                                  ("healthy", "templates Healthy", 1)):
            points = curves.get(key) or []
            xs = [0.0] + [pt[0] for pt in points]
            ys = [0.0] + [pt[1] / scale for pt in points]
            ax.step(xs, ys, where="post", label=label, linewidth=2.4 if key == "healthy" else 1.2)
        lat = result.get("latency_ms") or {}
        ax.set_title(f"{n} templates applied at once, {result.get('placement')} to {result.get('members')} "
                     f"members ({result.get('storage')}): member object p50 {lat.get('p50', 0):,.0f} ms, "
                     f"p99 {lat.get('p99', 0):,.0f} ms; all Healthy in {result.get('total_seconds', 0):.1f} s",
                     fontsize=9)


# ============================================================================================ command


def params_from_args(args: Any) -> PropagateParams:
    return PropagateParams(
        **StackOptions.from_args(args), templates=args.templates, placement=args.placement,
        flink_share=args.flink_share, concurrency=args.concurrency, timeout=args.timeout, plot=args.plot or "",
        repeat=args.repeat, floor=args.floor)


def run_propagate_command(args: Any) -> int:
    p = params_from_args(args)
    if p.templates < 1:
        raise SystemExit("flotilla bench propagate: --templates must be at least 1")
    if p.members < 1:
        raise SystemExit("flotilla bench propagate: --members must be at least 1")
    if not 0.0 <= p.flink_share <= 1.0:
        raise SystemExit("flotilla bench propagate: --flink-share must be between 0 and 1")
    if p.floor and p.placement != "duplicated":
        raise SystemExit("flotilla bench propagate: --floor carries every template to every member: use it with "
                         "--placement duplicated")
    if p.plot:
        from flotilla.bench.plot import require_matplotlib

        require_matplotlib()
    print(f"command: {p.command_line()}", flush=True)
    ending = Ending("bench propagate", lambda result: result_problems(result, p), render_report, p.json, p.plot,
                    plot_propagation, repeat=p.repeat, summary=SUMMARY)
    return finish_command(ending, lambda: run_propagate_bench(p))
