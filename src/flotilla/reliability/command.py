"""``flotilla soak ...``: reliability trials with real faults (results: docs/reliability.md)."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from flotilla.bench.choices import KIND_CHOICES
from flotilla.cli.argtypes import positive_int, seconds
from flotilla.cli.flags import add_command, add_fencing_flags, keep_parser
from flotilla.reliability.fault_names import FAULT_WHAT

#: trial -> (module, function) that runs it
RUNNERS = {
    "crash": ("flotilla.reliability.crash", "run_crash_command"),
    "ha": ("flotilla.reliability.ha", "run_ha_command"),
    "partition": ("flotilla.reliability.partition", "run_partition_command"),
}


def _trial_arguments(p: argparse.ArgumentParser, seed_of: str) -> None:
    p.add_argument("--trials", type=positive_int, default=10, help="how many trials (default 10)")
    p.add_argument("--seed", type=int, default=1, help=f"seed of {seed_of} (default 1)")


def _workload_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--members", type=int, default=3, help="simulated members, member1 fails (default 3)")
    p.add_argument("--kind", choices=KIND_CHOICES, default="mix", help="workload kind (default mix)")
    p.add_argument("--setup-timeout", type=float, default=600.0,
                   help="seconds to wait until the workloads are Healthy on member1 (default 600)")


def _output_arguments(p: argparse.ArgumentParser, what: str, whose: str) -> None:
    p.add_argument("--json", default="", metavar="FILE", help=f"write {what} as JSON to FILE")
    p.add_argument("--data-dir", default="", help=f"keep {whose} files here (default: a temporary directory)")


def run_soak(args: argparse.Namespace) -> int:
    """``flotilla soak TRIAL``; 0 when every invariant held."""
    module, function = RUNNERS[args.soak]
    run: Any = getattr(importlib.import_module(module), function)
    return int(run(args))


def add_soak_parsers(sub: Any) -> None:
    s = add_command(sub, "soak", help="reliability trials with real faults",
                    description="Reliability trials: real processes, real faults, and the invariants that must "
                                "hold afterwards (results: docs/reliability.md).",
                    examples=["flotilla soak crash --trials 10 --workloads 500 --seed 1",
                              "flotilla soak partition --trials 10 --seed 1"])
    s.set_defaults(fn=run_soak)
    ssub = s.add_subparsers(dest="soak", required=True)
    c = add_command(
        ssub, "crash", help="SIGKILL the control plane during a mass failover, restart it, check the end state",
        description="Per trial: place N stateful workloads (Directly, with state preservation) on member1 as "
                    "`flotilla bench failover` does, taint member1 NoExecute, SIGKILL the control plane's process "
                    "(API server and controllers on SQLite) at a moment drawn from --seed, restart it on the same "
                    "data directory and port, and wait until it converges. Then every workload must have exactly "
                    "one copy, in an allowed member, Healthy, with the state its previous copy reported; no "
                    "graceful eviction task duplicated or left; no Work or member object left behind; and the "
                    "members' running history must show no moment with two copies. Exit 1 if any trial broke one.",
        examples=["flotilla soak crash --trials 10 --workloads 500 --seed 1 --json crash.json",
                  "flotilla soak crash --trials 2 --workloads 60 --kill-window 1.5"])
    _trial_arguments(c, "the kill moments")
    c.add_argument("--workloads", type=positive_int, default=500, help="workloads per trial (default 500)")
    _workload_arguments(c)
    c.add_argument("--storage", choices=("sqlite", "etcd"), default="sqlite",
                   help="the control plane's storage (default sqlite)")
    c.add_argument("--kill-window", type=float, default=0.0, metavar="S",
                   help="the kill lands within S seconds of the fault (default: workloads/100, about the "
                        "failover's length)")
    c.add_argument("--timeout", type=float, default=300.0,
                   help="seconds after the restart until every trial must have converged (default 300)")
    _output_arguments(c, "every trial", "the trials'")

    h = add_command(
        ssub, "ha", help="the HA deployment on etcd loses its leading controller-manager, an etcd member, an API server",
        description="Start a three-member etcd cluster, two `flotilla apiserver` replicas on it, two "
                    "`flotilla controller-manager --leader-elect` replicas whose kubeconfig lists both API servers, "
                    "and simulated members. Place N stateful workloads (Directly, with state) on member1 and taint "
                    "it; once --kill-at of them are evicted, SIGKILL the controller-manager holding the lease: the "
                    "standby must take over within the lease duration (plus its retry period) and finish the failover with every "
                    "invariant of `flotilla soak crash`. Then SIGKILL one etcd member, then the first API server: "
                    "after each, --extra new workloads must still become Healthy. Exit 1 on any problem.",
        examples=["flotilla soak ha --workloads 200 --json ha.json",
                  "flotilla soak ha --workloads 45 --extra 3 --lease-duration 3"])
    h.add_argument("--workloads", type=positive_int, default=200, help="workloads that fail over (default 200)")
    _workload_arguments(h)
    h.add_argument("--kill-at", type=float, default=0.3, metavar="SHARE",
                   help="kill the leading controller-manager once this share of the workloads is evicted "
                        "(default 0.3)")
    h.add_argument("--lease-duration", type=float, default=4.0, metavar="S",
                   help="the controller-managers' --leader-elect-lease-duration in seconds (default 4)")
    h.add_argument("--extra", type=positive_int, default=10,
                   help="new workloads created after each later fault (default 10)")
    h.add_argument("--timeout", type=float, default=300.0, help="seconds each step may take (default 300)")
    _output_arguments(h, "the trial", "the trial's")

    fault_list = "\n".join(f"  {name:22} {what}" for name, what in FAULT_WHAT.items())
    pp = add_command(
        ssub, "partition", help="randomized partitions and agent, member faults against guarded Pull members",
        description="Start `flotilla up --guard` with every member in Pull mode (short fencing timings). Per trial: "
                    "place --workloads FlinkDeployments and StatefulSets (purgeMode Directly, state preserved: the "
                    "job id, the replicas) on the members about to be faulted, apply one fault or two together drawn "
                    "from --seed, heal each after its hold time (earlier once its workloads run elsewhere), unfence "
                    "a fenced member once its agent renews its Lease again, and wait until every cluster is Ready "
                    "and every workload runs exactly once. Then check from the members' running history that no "
                    "two copies of a workload ever ran at once, that none was lost, and that every workload that "
                    "moved kept its state (a Flink job its id, restored from a snapshot). Exit 1 on any violation.",
        notes=f"faults (--faults):\n{fault_list}",
        examples=["flotilla soak partition --trials 10 --seed 1 --json soak-partition.json",
                  "flotilla soak partition --trials 2 --workloads 2 --faults partition,agent-kill"])
    _trial_arguments(pp, "the faults, their members and hold times")
    pp.add_argument("--workloads", type=positive_int, default=4, help="workloads placed per trial (default 4)")
    pp.add_argument("--members", type=int, default=3,
                    help="simulated members, all in Pull mode with a guard; at least 3 (default 3)")
    pp.add_argument("--faults", default="", metavar="NAME,...",
                    help="the faults to draw from, comma-separated (default all; see below)")
    add_fencing_flags(pp, ("fence-after", "permit-hold", "fence-margin"),
                      {"fence-after": 4.0, "permit-hold": 12.0, "fence-margin": 4.0})
    pp.add_argument("--settle-timeout", type=seconds, default=150.0, metavar="SECONDS",
                    help="after the last heal, how long the fleet may take to settle (default 150)")
    _output_arguments(pp, "every trial", "the stack's")
    keep_parser(pp)
