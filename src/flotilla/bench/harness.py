"""What the benchmarks that start a stack share (``flotilla bench propagate`` and ``scale`` all of it, ``failover``
some): the processes of a benchmark (the control plane, one or more member processes), joining the members, waiting
for them, and measuring CPU and memory.

* the control plane is ``flotilla bench control-plane`` (API server + every controller, its own process), as
  ``flotilla bench failover`` starts it;
* the members are ``flotilla member --count K --ready-delay 0`` processes (memory storage, nodes so large that
  capacity never decides). More than one process when one would hold too many members: each process gets its own
  directory and a name prefix (``p2-member7``), and all share one checkpoint directory (a Flink job restores from
  any member, as from S3).

Nothing here polls while a measurement runs: waiting for the members to be Ready (set-up) is the only loop with a
sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import aiohttp
import orjson

from flotilla.bench import stats
from flotilla.bench.processes import ChildProcess, peak_rss_mb, proc_cpu_seconds, rss_mb

__all__ = ["CONTROL_PLANE_READY", "BenchStack", "CpuWindow", "Ending", "StackOptions", "StackParams", "close_all",
           "control_plane_endpoints", "control_plane_process", "finish_command", "machine_cpu_seconds", "py_spy",
           "run_in_workdir", "say", "start_storage", "workdir_for"]

#: Members' settings: capacity so large that it never decides (as ``flotilla bench failover``)
#: plain http (``--insecure``), as the control plane here: the benchmarks measure Flotilla's work, not TLS and token
#: checks, and stay comparable with the numbers recorded in docs/benchmarks.md
MEMBER_ARGS = ("--insecure", "--nodes", "3", "--node-cpu", "100000", "--node-memory", "100000Gi", "--node-pods",
               "1000000")
#: The Flink simulator's periodic writes (progress, checkpoints) rare, so that a steady state is quiet
FLINK_QUIET = ("flink_checkpoint_interval=3600", "flink_progress_interval=3600")
#: Members per ``flotilla member`` process by default (50 idle members take ~70 MB and no CPU)
MEMBERS_PER_PROCESS = 50


def say(message: str) -> None:
    """A message on stderr, above the progress line if one is showing."""
    from flotilla.cli.progress import say as say_above_progress

    say_above_progress(message)


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, irq) CPU seconds of the whole machine (/proc/stat); (0, 0) if unknown."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - ticks[3] - ticks[4]) / hz, (ticks[5] + ticks[6]) / hz


class CpuWindow:
    """CPU seconds of named processes over a window, and the machine's: ``irq`` (interrupts, softirqs: loopback
    TCP) and ``other`` (every other process on the machine, i.e. work competing for the same cores)."""

    def __init__(self, pids: Mapping[str, int | list[int]]) -> None:
        self.pids = {k: (v if isinstance(v, list) else [v]) for k, v in pids.items()}
        self._t0 = time.monotonic()
        self._cpu0 = self._sample()
        self._machine0 = machine_cpu_seconds()
        self.seconds: dict[str, float] = {}
        self.cores: dict[str, float] = {}
        self.wall = 0.0

    def _sample(self) -> dict[str, float]:
        return {k: sum(proc_cpu_seconds(p) for p in pids) for k, pids in self.pids.items()}

    def stop(self) -> CpuWindow:
        cpu1 = self._sample()
        machine1 = machine_cpu_seconds()
        self.wall = max(1e-9, time.monotonic() - self._t0)
        self.seconds = {k: round(cpu1[k] - self._cpu0[k], 2) for k in self.pids}
        busy = machine1[0] - self._machine0[0]
        irq = machine1[1] - self._machine0[1]
        other = max(0.0, busy - irq - sum(self.seconds.values()))
        self.cores = {**{k: round(v / self.wall, 3) for k, v in self.seconds.items()},
                      "irq": round(irq / self.wall, 3), "other": round(other / self.wall, 3)}
        return self


#: what ``flotilla bench control-plane`` prints once it serves
CONTROL_PLANE_READY: Final = r"control-plane: serving"


async def start_storage(storage: str, workdir: Path) -> tuple[Any, str]:
    """The control plane's storage: for ``etcd`` a fresh etcd in ``workdir/etcd`` (returned, for the caller to
    stop), for the others None; and the storage URL."""
    if storage != "etcd":
        return None, f"{storage}://"
    from flotilla.storage.etcd_launcher import start_etcd

    etcd = await asyncio.to_thread(start_etcd, workdir / "etcd")
    return etcd, f"etcd://{etcd.endpoint}"


def control_plane_process(workdir: Path, storage_url: str, transport: str, controller_flags: list[str],
                          *options: str) -> ChildProcess:
    """``flotilla bench control-plane`` on ``storage_url`` (data and log in ``workdir``), with ``options`` and the
    controller-manager's ``controller_flags``; start it with :data:`CONTROL_PLANE_READY`."""
    return ChildProcess("control plane", [
        "bench", "control-plane", "--data-dir", str(workdir / "controlplane"), "--storage", storage_url,
        "--transport", transport, *options, "--", *controller_flags], workdir / "controlplane.log")


async def close_all(clients: Iterable[Any]) -> None:
    """Close each of ``clients`` (API clients, HTTP sessions; None: skipped), whatever the others do."""
    for client in clients:
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


def control_plane_endpoints(ready_line: str) -> tuple[str, str]:
    """(kubeconfig path, metrics URL) from the control plane's ready line."""
    found = re.search(r"\(kubeconfig: (\S+)\) metrics (\S+)", ready_line)
    if found is None:
        raise RuntimeError(f"cannot read the control plane's ready line: {ready_line!r}")
    return found.group(1), found.group(2)


@dataclass
class StackParams:
    members: int = 3
    storage: str = "sqlite"
    transport: str = "inprocess"
    controller_flags: list[str] = field(default_factory=list)
    member_processes: int = 0  # 0: one per MEMBERS_PER_PROCESS members
    sim_options: tuple[str, ...] = FLINK_QUIET
    taint_policy: bool = True  # the default ClusterTaintPolicy not-ready (as flotilla up)
    floor: bool = False  # the control plane runs the forward-path floor instead of the propagation controllers


@dataclass
class StackOptions:
    """The flags of a benchmark that starts a :class:`BenchStack` (``--storage``, ``--transport``,
    ``--controller-flag``, ``--member-processes``) and of where its results go (``--profile``, ``--json``,
    ``--data-dir``)."""

    members: int = 3
    storage: str = "sqlite"
    transport: str = "inprocess"
    controller_flags: list[str] = field(default_factory=list)
    member_processes: int = 0
    profile: str = ""
    json: str = ""
    data_dir: str = ""

    @staticmethod
    def from_args(args: Any) -> dict[str, Any]:
        """These flags from the command line, as keyword arguments of a subclass."""
        return {"members": args.members, "storage": args.storage, "transport": args.transport,
                "controller_flags": list(args.controller_flag or []), "member_processes": args.member_processes,
                "profile": args.profile or "", "json": args.json or "", "data_dir": args.data_dir or ""}

    def stack_params(self, **more: Any) -> StackParams:
        """The stack these flags ask for; ``more`` sets (or replaces) other :class:`StackParams` fields."""
        fields: dict[str, Any] = {"members": self.members, "storage": self.storage, "transport": self.transport,
                                  "controller_flags": list(self.controller_flags),
                                  "member_processes": self.member_processes}
        return StackParams(**{**fields, **more})

    def stack_command_args(self) -> list[str]:
        """The stack's flags on a command line that reproduces the run."""
        cmd = ["--members", str(self.members), "--storage", self.storage, "--transport", self.transport]
        cmd += [f"--controller-flag={flag}" for flag in self.controller_flags]
        if self.member_processes:
            cmd += ["--member-processes", str(self.member_processes)]
        for opt, value in (("--profile", self.profile), ("--json", self.json)):
            if value:
                cmd += [opt, value]
        return cmd


def member_groups(members: int, processes: int) -> list[tuple[str, int]]:
    """``(name prefix, count)`` of each member process: ``member1..M`` in one process, else ``p<k>-member<i>``."""
    if processes <= 0:
        processes = max(1, math.ceil(members / MEMBERS_PER_PROCESS))
    processes = max(1, min(processes, members))
    if processes == 1:
        return [("member", members)]
    base, extra = divmod(members, processes)
    return [(f"p{k}-member", base + (1 if k <= extra else 0)) for k in range(1, processes + 1)]


def member_names(groups: list[tuple[str, int]]) -> list[str]:
    return [f"{prefix}{i}" for prefix, count in groups for i in range(1, count + 1)]


async def poll_until(check: Callable[[], Coroutine[Any, Any, bool]], what: str, within: float,
                     every: float = 0.5) -> None:
    """Set-up only: call ``check()`` until it is true; RuntimeError naming ``what`` (and the last error) after
    ``within`` seconds."""
    deadline = time.monotonic() + within
    last = ""
    while time.monotonic() < deadline:
        try:
            if await check():
                return
        except Exception as e:  # noqa: BLE001 - the API may not serve it yet; said on timeout
            last = str(e)
        await asyncio.sleep(every)
    raise RuntimeError(f"timed out after {within:.0f}s waiting for {what}" + (f" ({last})" if last else ""))


async def clusters_ready(cp: Any, expected: int) -> bool:
    """Whether ``expected`` Clusters are Ready and untainted."""
    from flotilla.api import resources as R

    items = (await cp.list(R.CLUSTERS)).get("items") or []
    ready = [c for c in items
             if any(x.get("type") == "Ready" and x.get("status") == "True"
                    for x in (c.get("status") or {}).get("conditions") or [])
             and not (c.get("spec") or {}).get("taints")]
    return len(ready) == expected


class BenchStack:
    """The control plane and the member processes of one benchmark run, and clients to all of them."""

    def __init__(self, p: StackParams, workdir: Path) -> None:
        self.p = p
        self.workdir = workdir
        self.members_dir = workdir / "members"
        self.groups = member_groups(p.members, p.member_processes)
        self.names = member_names(self.groups)
        self.member_dirs: dict[str, Path] = {}
        for k, (prefix, count) in enumerate(self.groups, start=1):
            d = self.members_dir if len(self.groups) == 1 else self.members_dir / f"p{k}"
            for i in range(1, count + 1):
                self.member_dirs[f"{prefix}{i}"] = d
        self.cp_proc: ChildProcess | None = None
        self.member_procs: list[ChildProcess] = []
        self.admin_urls: dict[str, str] = {}  # member name -> its process's admin endpoint
        self.etcd: Any = None
        self.cp: Any = None
        self.member_clients: dict[str, Any] = {}
        self.metrics_url = ""
        self.storage_url = ""
        self.http: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------------ processes
    @property
    def cp_pid(self) -> int:
        assert self.cp_proc is not None
        return self.cp_proc.pid

    @property
    def member_pids(self) -> list[int]:
        return [proc.pid for proc in self.member_procs]

    async def start(self) -> None:
        p = self.p
        self.etcd, self.storage_url = await start_storage(p.storage, self.workdir)
        self.cp_proc = control_plane_process(self.workdir, self.storage_url, p.transport, p.controller_flags,
                                             *(["--floor"] if p.floor else []))
        checkpoints = self.members_dir / "checkpoints"
        for k, (prefix, count) in enumerate(self.groups, start=1):
            d = self.members_dir if len(self.groups) == 1 else self.members_dir / f"p{k}"
            args = ["member", "--count", str(count), "--name-prefix", prefix, "--data-dir", str(d),
                    "--checkpoint-dir", str(checkpoints), "--ready-delay", "0", "--storage", "memory://",
                    *MEMBER_ARGS]
            for option in p.sim_options:
                args += ["--sim-option", option]
            self.member_procs.append(ChildProcess(f"members {prefix}*", args, self.workdir / f"members-{k}.log"))
        within = 120.0 + 2.0 * p.members  # starting 100 members in one process takes ~10 s on a quiet machine
        lines = await asyncio.gather(self.cp_proc.start(CONTROL_PLANE_READY),
                                     *(proc.start(r"admin endpoint", within=within) for proc in self.member_procs))
        kubeconfig, self.metrics_url = control_plane_endpoints(lines[0])
        for (prefix, count), line in zip(self.groups, lines[1:], strict=True):
            admin = re.search(r"admin endpoint (\S+)", line)
            for i in range(1, count + 1):
                self.admin_urls[f"{prefix}{i}"] = admin.group(1) if admin else ""
        from flotilla.client import Client

        self.cp = Client.from_kubeconfig(kubeconfig)
        for name in self.names:
            self.member_clients[name] = Client.from_kubeconfig(str(self.member_dirs[name] / name / "kubeconfig"))
        self.http = aiohttp.ClientSession()

    async def stop(self) -> None:
        await close_all([self.cp, *self.member_clients.values(), self.http])
        procs = [proc for proc in (self.cp_proc, *self.member_procs) if proc is not None]
        await asyncio.gather(*(proc.stop() for proc in procs), return_exceptions=True)
        if self.etcd is not None:
            await asyncio.to_thread(self.etcd.stop)

    def history_files(self) -> list[Path]:
        dirs = {self.member_dirs[name] for name in self.names}
        return [d / "history.jsonl" for d in sorted(dirs)]

    # ------------------------------------------------------------------ set-up
    async def join(self, concurrency: int = 16, ready_within: float = 300.0) -> float:
        """Join every member (and the default ClusterTaintPolicy), then wait until all are Ready and untainted;
        returns the seconds it took."""
        from flotilla.api import resources as R
        from flotilla.cli.cluster_commands import join_cluster, join_spec_from_credentials
        from flotilla.client.kubeconfig import load_kubeconfig
        from flotilla.local.stack import default_taint_policy

        t0 = time.monotonic()
        if self.p.taint_policy:
            await self.cp.create(R.CLUSTER_TAINT_POLICIES, default_taint_policy(self.names))
        queue = iter(self.names)

        async def joiner() -> None:
            for name in queue:
                creds = load_kubeconfig(str(self.member_dirs[name] / name / "kubeconfig"))
                await join_cluster(self.cp, join_spec_from_credentials(name, creds))

        await asyncio.gather(*(joiner() for _ in range(max(1, min(concurrency, len(self.names))))))
        await self.poll(self.clusters_ready, f"all {len(self.names)} members Ready and untainted", ready_within)
        return time.monotonic() - t0

    async def poll(self, check: Any, what: str, within: float, every: float = 0.5) -> None:
        """Set-up only: call ``check()`` until it is true."""
        await poll_until(check, what, within, every)

    async def clusters_ready(self) -> bool:
        return await clusters_ready(self.cp, len(self.names))

    async def install_flink_crd(self) -> None:
        from flotilla.bench.workloads import FLINK, NAMESPACE
        from flotilla.kube.resources import CRDS
        from flotilla.member.flink_crd import flink_deployment_crd

        await self.cp.create(CRDS, flink_deployment_crd())

        async def served() -> bool:
            await self.cp.list(FLINK, NAMESPACE, limit=1)
            return True

        await self.poll(served, "the FlinkDeployment CRD to be served", 60)

    async def create_namespace(self, name: str) -> None:
        from flotilla.cluster.join import namespace_object
        from flotilla.kube.resources import NAMESPACES

        await self.cp.create(NAMESPACES, namespace_object(name))

    # ------------------------------------------------------------------ metrics
    async def scrape(self) -> stats.Samples:
        assert self.http is not None
        async with self.http.get(f"{self.metrics_url}/metrics") as resp:
            return stats.parse_prometheus(await resp.text())

    async def write_rate(self, seconds: float) -> float:
        """The control plane's writes/s over ``seconds`` (two scrapes)."""
        before = await self.scrape()
        await asyncio.sleep(seconds)
        after = await self.scrape()
        return stats.counter_delta(before, after, "flotilla_bench_apiserver_writes_total").get("", 0.0) / seconds

    def memory(self) -> dict[str, Any]:
        """RSS now and peak (MiB) of the control plane and of each member process."""
        return {
            "control_plane": {"pid": self.cp_pid, "rss_mb": rss_mb(self.cp_pid), "peak_rss_mb": peak_rss_mb(self.cp_pid)},
            "member_processes": [
                {"pid": proc.pid, "members": count, "rss_mb": rss_mb(proc.pid), "peak_rss_mb": peak_rss_mb(proc.pid)}
                for proc, (_, count) in zip(self.member_procs, self.groups, strict=True)],
        }

    def cpu_window(self) -> CpuWindow:
        pids: dict[str, int | list[int]] = {"control_plane": self.cp_pid, "members": self.member_pids,
                                            "driver": os.getpid()}
        if self.etcd is not None:
            pids["etcd"] = self.etcd.pid
        return CpuWindow(pids)


def py_spy() -> str:
    """The py-spy executable (on PATH or beside this Python); RuntimeError when there is none."""
    import shutil

    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise RuntimeError("--profile needs py-spy (pip install py-spy)")
    return spy


def profile_command(pid: int, output: str, rate: int = 100) -> list[str]:
    """py-spy record of ``pid`` (collapsed stacks, ``--format raw``) until SIGINT."""
    return [py_spy(), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--nonblocking",
            "--output", output]


class Profiler:
    """py-spy on one process, from :meth:`start` to :meth:`stop` (which returns the top functions)."""

    def __init__(self, pid: int, output: str, rate: int = 100) -> None:
        self.argv = profile_command(pid, output, rate)
        self.output = output
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)

    async def stop(self, limit: int = 25) -> dict[str, Any]:
        import signal

        if self.proc is None:
            return {}
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                await self.proc.wait()
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        try:
            text = _read_text(self.output)
        except OSError as e:
            return {"error": f"no profile written: {e}"}
        return {"file": self.output, **stats.profile_top(text, limit=limit)}

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()


def _read_text(path: str) -> str:
    return Path(path).read_text()


def workdir_for(data_dir: str, prefix: str) -> tuple[Path, Any]:
    """(the run's directory, a TemporaryDirectory to clean up or None when ``data_dir`` was given)."""
    import tempfile

    if data_dir:
        workdir = Path(data_dir)
        if workdir.exists() and any(workdir.iterdir()):
            raise RuntimeError(f"--data-dir {workdir} is not empty")
        workdir.mkdir(parents=True, exist_ok=True)
        return workdir, None
    cleanup = tempfile.TemporaryDirectory(prefix=prefix)
    return Path(cleanup.name), cleanup


class BenchRun(Protocol):
    async def execute(self) -> dict[str, Any]: ...

    async def stop(self) -> None: ...


async def run_in_workdir(make_run: Callable[[Path], BenchRun], data_dir: str, prefix: str) -> dict[str, Any]:
    """Run one benchmark in its directory (``data_dir``, or a temporary one removed afterwards); always stopped."""
    workdir, cleanup = workdir_for(data_dir, prefix)
    try:
        run = make_run(workdir)
        try:
            return await run.execute()
        finally:
            await run.stop()
    finally:
        if cleanup is not None:
            cleanup.cleanup()


@dataclass
class Ending:
    """How one bench or soak command finishes: its name (``bench failover``, for messages), invariants, report, and
    optional outputs."""

    name: str
    problems: Callable[[dict[str, Any]], list[str]]
    render: Callable[[dict[str, Any]], str]
    json: str = ""
    plot: str = ""
    draw: Callable[[dict[str, Any], str], None] | None = None
    #: how many runs (``--repeat``); with more than one, the medians of ``summary`` (dotted keys of the result)
    repeat: int = 1
    summary: tuple[str, ...] = ()
    #: the key that orders the runs to pick the median one (its JSON and plot are written)
    order_key: str = "total_seconds"


def finish_command(ending: Ending, bench: Callable[[], Coroutine[Any, Any, dict[str, Any]]]) -> int:
    """Run the bench (``ending.repeat`` times), print each report and its problems, then with several runs the
    table of medians; write the JSON and the plot (of the median run). The command's exit status: 1 when a run
    could not run or an invariant did not hold in any run."""
    from flotilla.bench.repeat import render_table, with_repeat

    results: list[dict[str, Any]] = []
    for index in range(ending.repeat):
        if ending.repeat > 1:
            say(f"run {index + 1} of {ending.repeat}")
        try:
            result = asyncio.run(bench())
        except (RuntimeError, OSError) as e:
            print(f"flotilla {ending.name}: {e}", file=sys.stderr)
            return 1
        found = ending.problems(result)
        result["problems"] = found
        print(ending.render(result))
        for problem in found:
            print(f"PROBLEM: {problem}")
        results.append(result)
    doc = results[0]
    if len(results) > 1:
        doc = with_repeat(results, ending.summary, ending.order_key)
        print(f"\n{len(results)} runs (the JSON and the plot are run {doc['repeat']['median_run']}'s, the median by "
              f"{ending.order_key})")
        print(render_table(results, ending.summary))
    if ending.json:
        Path(ending.json).parent.mkdir(parents=True, exist_ok=True)
        Path(ending.json).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        print(f"results written to {ending.json}")
    if ending.plot and ending.draw is not None:
        ending.draw(doc, ending.plot)
        print(f"plot written to {ending.plot}")
    return 1 if doc["problems"] else 0
