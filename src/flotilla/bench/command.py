"""``flotilla bench``: the benchmarks' command line (results: docs/benchmarks.md).

Each benchmark's body is a module of its own, imported only when it runs: ``apiserver``
(:mod:`flotilla.bench.apiserver`), ``failover``, ``propagate``, ``scale``, and the internal ``control-plane`` and
``link`` processes that ``failover`` starts.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from flotilla.bench.choices import FAULT_CHOICES, KIND_CHOICES, PLACEMENTS, STORAGE_CHOICES
from flotilla.cli.argtypes import non_negative, positive_int
from flotilla.cli.flags import add_command, add_fencing_flags, keep_parser

__all__ = ["add_bench_parsers", "run_bench"]

#: benchmark -> (module, function) that runs it
RUNNERS = {
    "apiserver": ("flotilla.bench.apiserver", "run_apiserver_command"),
    "failover": ("flotilla.bench.failover", "run_failover_command"),
    "propagate": ("flotilla.bench.propagate", "run_propagate_command"),
    "scale": ("flotilla.bench.scale", "run_scale_command"),
    "dashboard": ("flotilla.bench.dashboard", "run_dashboard_command"),
    "link": ("flotilla.bench.link", "run_link_command"),
    "control-plane": ("flotilla.bench.control_plane", "run_control_plane_command"),
}


def _stack_flags(f: argparse.ArgumentParser, transport: str, member_processes: bool = True) -> None:
    """The control plane (and members) a benchmark starts."""
    f.add_argument("--storage", choices=STORAGE_CHOICES, default="sqlite",
                   help="the control plane's storage (etcd: started by the benchmark; default sqlite)")
    f.add_argument("--transport", choices=("http", "inprocess"), default=transport,
                   help="how the controllers reach the API server in the control-plane process: inprocess as "
                        f"flotilla up, http as split processes would (default {transport})")
    f.add_argument("--controller-flag", action="append", default=[], metavar="FLAG",
                   help="another controller-manager flag for the control plane, e.g. "
                        "--controller-flag=--concurrent-syncs=20 (repeatable)")
    if member_processes:
        f.add_argument("--member-processes", type=int, default=0,
                       help="flotilla member processes (default: one per 50 members)")


def _result_flags(f: argparse.ArgumentParser, profiled: str, plotted: str = "") -> None:
    """Where a benchmark's numbers go: JSON, a profile of the control plane over ``profiled``, with ``plotted``
    a plot of it over time and --repeat, and the run's files."""
    f.add_argument("--json", default="", metavar="FILE", help="write every number as JSON to FILE")
    if plotted:
        f.add_argument("--repeat", type=positive_int, default=1, metavar="N",
                       help="run N times back to back and add a table of each run's headline numbers and their "
                            "median; the JSON and the plot are the median run's (default 1)")
        f.add_argument("--plot", default="", metavar="FILE.png",
                       help=f"plot {plotted} over time (needs matplotlib: the extra flotilla[bench])")
    f.add_argument("--profile", default="", metavar="FILE",
                   help=f"record the control plane with py-spy (collapsed stacks) {profiled}; the top functions "
                        "go into the report")
    f.add_argument("--data-dir", default="", help="keep the run's files here (default: a temporary directory)")


def _apiserver_flags(f: argparse.ArgumentParser) -> None:
    f.add_argument("--backends", default="memory,sqlite,etcd", help="comma-separated: memory,sqlite,etcd")
    f.add_argument("--objects", type=int, default=2000, help="objects per phase")
    f.add_argument("--concurrency", type=int, default=32, help="concurrent HTTP clients")
    f.add_argument("--store-writes", type=int, default=20000, help="raw in-process store writes")
    f.add_argument("--output", default="", help="also write the results as JSON to this file")


def _failover_flags(f: argparse.ArgumentParser) -> None:
    f.add_argument("--workloads", type=int, default=1000, help="N stateful workloads (default 1000)")
    f.add_argument("--members", type=int, default=3, help="M simulated members, member1 fails (default 3)")
    f.add_argument("--kind", choices=KIND_CHOICES, default="mix",
                   help="workload kind; mix takes deployment, statefulset and flink in turn (default mix)")
    f.add_argument("--purge-mode", choices=("Directly", "Gracefully"), default="Directly",
                   help="failover.cluster.purgeMode of the policies (default Directly)")
    f.add_argument("--state", action=argparse.BooleanOptionalAction, default=True,
                   help="state preservation rules on the policies (default --state); the state is injected into the "
                        "new copy with purgeMode Directly only, as in Karmada")
    _stack_flags(f, transport="inprocess", member_processes=False)
    f.add_argument("--pull", action="store_true",
                   help="member1 (the one that fails) joins in Pull mode, with its own `flotilla agent` process "
                        "(its CPU reported beside the control plane's)")
    f.add_argument("--fault", choices=FAULT_CHOICES, default="taint",
                   help="taint: a NoExecute taint on member1; down: member1 powered off (API and workloads gone; "
                        "with Directly it is fenced once the not-ready taint appears); partition: member1 is a "
                        "guarded Pull member (implies --pull; needs --purge-mode Directly and 3 members or more) "
                        "whose agent is cut off from the control plane, nothing else done (default taint)")
    f.add_argument("--resource-eviction-rate", type=non_negative, default=1_000_000.0, metavar="X",
                   help="the controller-manager's eviction rate (D10; 0 halts evictions, so the bench default is "
                        "1000000/s: the store is the limit)")
    f.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the failover (default 600)")
    f.add_argument("--setup-timeout", type=float, default=900.0,
                   help="seconds to wait until every workload is Healthy on member1 (default 900)")
    f.add_argument("--ceiling-writes", type=int, default=5000,
                   help="creates (then as many CAS updates) for the store ceiling (default 5000)")
    _result_flags(f, "from the fault to the last Healthy", plotted="workloads recovered")
    g = f.add_argument_group("--fault partition (the defaults are the product's, docs/fencing.md)")
    add_fencing_flags(g, ("fence-after", "permit-hold", "fence-margin", "cluster-monitor-period", "lease-duration"))
    keep_parser(f)


def _propagate_flags(f: argparse.ArgumentParser) -> None:
    f.add_argument("--templates", type=int, default=1000, help="N templates created at once (default 1000)")
    f.add_argument("--members", type=int, default=3, help="M simulated members (default 3)")
    f.add_argument("--placement", choices=PLACEMENTS, default="duplicated",
                   help="duplicated: one policy, every template to every member; single: one policy per member, "
                        "template i to member i mod M (default duplicated)")
    f.add_argument("--flink-share", type=non_negative, default=0.0, metavar="F",
                   help="share of the templates that are FlinkDeployments, 0..1 (default 0)")
    _stack_flags(f, transport="inprocess")
    f.add_argument("--concurrency", type=int, default=64, help="clients creating the templates (default 64)")
    f.add_argument("--floor", action="store_true",
                   help="carry the templates with only the writes and member creates the design needs, no "
                        "controller logic and no status (flotilla.bench.floor): the lowest latency this machine "
                        "allows; Healthy is not measured")
    f.add_argument("--timeout", type=float, default=600.0,
                   help="seconds to wait until every template is Healthy (default 600)")
    _result_flags(f, "from the first create to the last Healthy",
                  plotted="templates created, member objects and Healthy")


def _scale_flags(f: argparse.ArgumentParser) -> None:
    f.add_argument("--members", type=int, default=100, help="M simulated members (default 100)")
    f.add_argument("--workloads", type=int, default=10000, help="N workloads (default 10000)")
    f.add_argument("--kind", choices=KIND_CHOICES, default="deployment",
                   help="workload kind; mix takes deployment, statefulset and flink in turn (default deployment)")
    f.add_argument("--failed-workloads", type=int, default=0, metavar="K",
                   help="workloads placed on the first member, the one --failover fails (default: its even share "
                        "N/M); the rest are spread evenly over the others")
    _stack_flags(f, transport="http")
    f.add_argument("--concurrency", type=int, default=32, help="clients creating the workloads (default 32)")
    f.add_argument("--idle-seconds", type=float, default=30.0,
                   help="the window over which idle CPU is measured (default 30)")
    f.add_argument("--failover", action="store_true",
                   help="after the idle window, fail the first member and time its workloads' failover")
    f.add_argument("--resource-eviction-rate", type=non_negative, default=1_000_000.0, metavar="X",
                   help="the controller-manager's eviction rate for --failover (default 1000000/s)")
    f.add_argument("--setup-timeout", type=float, default=1800.0,
                   help="seconds to wait until every workload is Healthy (default 1800)")
    f.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the failover (default 600)")
    _result_flags(f, "during the idle window")


def _dashboard_flags(f: argparse.ArgumentParser) -> None:
    f.add_argument("--bindings", type=int, default=10_000, help="ResourceBindings (default 10000)")
    f.add_argument("--clusters", type=int, default=100, help="Clusters (default 100)")
    f.add_argument("--requests", type=int, default=50, help="fetches of each page (default 50)")
    f.add_argument("--changes", type=int, default=20, help="changes timed to the event stream (default 20)")
    f.add_argument("--json", default="", metavar="FILE", help="write the results as JSON")


@dataclass(frozen=True)
class Benchmark:
    """A ``flotilla bench`` sub-command: its help, and what declares its flags."""

    help: str
    description: str
    examples: tuple[str, ...]
    flags: Callable[[argparse.ArgumentParser], None]


BENCHMARKS: Final = {
    "apiserver": Benchmark(
        help="API server and store throughput",
        description="Creates, updates and watch latency through HTTP, and raw store writes, per storage backend.",
        examples=("flotilla bench apiserver --backends sqlite --objects 2000 --output a.json",),
        flags=_apiserver_flags),
    "failover": Benchmark(
        help="how fast N stateful workloads move off a failed member",
        description=("Start the control plane (own process) and M simulated members (own process, ready delay 0), "
                     "place N stateful workloads on member1, wait until all are Healthy, fail member1 and time "
                     "each workload's eviction, rescheduling, creation in the new member (with its injected "
                     "state) and health there. Reports total time, throughput, per-stage p50/p90/p99, "
                     "control-plane CPU and peak RSS, and the store ceiling (raw writes/s of the same backend, "
                     "measured in the same run) with the ratio achieved/possible. Exits 1 when a workload did not "
                     "recover, lost its state, or (Directly) ran twice at once. --fault partition: member1 is a "
                     "guarded Pull member cut off from the control plane; the guard stops its workloads, the "
                     "control plane fences it by itself and the workloads move (times from the cut; exits 1 also "
                     "when a copy in member1 still ran at the fence)."),
        examples=("flotilla bench failover --workloads 1000 --members 3 --kind mix --json out.json --plot out.png",
                  "flotilla bench failover --workloads 100 --fault down --storage etcd",
                  "flotilla bench failover --workloads 1 --kind flink --fault partition",
                  "flotilla bench failover --workloads 20 --fault partition --fence-after 2 --permit-hold 3 "
                  "--fence-margin 2 --cluster-monitor-period 1 --lease-duration 4"),
        flags=_failover_flags),
    "propagate": Benchmark(
        help="how fast N templates applied at once reach their members",
        description=("Start the control plane (own process) and M simulated members (ready delay 0), create one "
                     "PropagationPolicy, then N templates (Deployments, with --flink-share FlinkDeployments) at "
                     "once, and time each from its creation to its ResourceBinding, scheduling, Works, the member "
                     "objects (member watches) and Healthy on the binding. Reports p50/p90/p99/max per member "
                     "object and per stage, throughput, control-plane CPU seconds and peak RSS. Exits 1 when a "
                     "template was not propagated or not Healthy within --timeout (no timing is judged)."),
        examples=("flotilla bench propagate --templates 1000 --members 3 --json out.json --plot out.png",
                  "flotilla bench propagate --templates 200 --members 5 --placement single --flink-share 0.1"),
        flags=_propagate_flags),
    "scale": Benchmark(
        help="steady state with many members and workloads: memory and idle CPU",
        description=("Start the control plane (own process) and M simulated members (several member processes), "
                     "place N workloads spread over them, wait until all are Healthy and the control plane's "
                     "writes have stopped, then measure the control plane's idle CPU over --idle-seconds and its "
                     "RSS (and each member process's). With --failover, then fail the first member (a NoExecute "
                     "taint) and time how fast its workloads move. Exits 1 when a workload was not placed or did "
                     "not recover (no timing is judged)."),
        examples=("flotilla bench scale --members 100 --workloads 10000 --json scale.json",
                  "flotilla bench scale --members 100 --workloads 10000 --failover --failed-workloads 1000 "
                  "--profile idle.txt"),
        flags=_scale_flags),
    "dashboard": Benchmark(
        help="the dashboard's pages over many clusters and workloads: latency and memory",
        description=("One API server in this process with --clusters Clusters and --bindings ResourceBindings; "
                     "each dashboard page (whole, and the live fragment) fetched --requests times over HTTP, the "
                     "time from a binding's change to the event stream's notification, and the dashboard model's "
                     "memory per binding (tracemalloc)."),
        examples=("flotilla bench dashboard --bindings 10000 --clusters 100 --json dashboard.json",),
        flags=_dashboard_flags),
}


def add_bench_parsers(sub: Any) -> None:
    """``flotilla bench``, its benchmarks and their internal processes."""
    from flotilla.bench.control_plane import add_control_plane_parser
    from flotilla.bench.link import add_link_parser

    b = add_command(sub, "bench", help="benchmarks", description="Benchmarks (results: docs/benchmarks.md).",
                    examples=["flotilla bench apiserver --backends memory,sqlite",
                              "flotilla bench failover --workloads 1000 --members 3 --json out.json"])
    bsub = b.add_subparsers(dest="bench", required=True)
    for name, bench in BENCHMARKS.items():
        bench.flags(add_command(bsub, name, help=bench.help, description=bench.description,
                                examples=bench.examples))
    add_link_parser(bsub)
    add_control_plane_parser(bsub)
    b.set_defaults(fn=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    """``flotilla bench NAME``; 0 when the run was clean."""
    module, function = RUNNERS[getattr(args, "bench", "apiserver")]
    run: Any = getattr(importlib.import_module(module), function)
    return int(run(args))
