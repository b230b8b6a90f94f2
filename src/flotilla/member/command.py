"""``flotilla member`` (simulated member clusters) and ``flotilla sim fault`` (fault injection)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from flotilla.cli.flags import add_command

if TYPE_CHECKING:
    pass

DEFAULT_DATA_DIR = ".flotilla-members"

MEMBER_EPILOG = """\
files: D/<name>/kubeconfig (context named after the member), D/<name>/admin.json (admin endpoint),
D/history.jsonl (running intervals of stateful workloads), D/checkpoints/ (shared checkpoint store).

simulation: each member serves --nodes Ready Nodes <member>-node-<i> with --node-cpu, --node-memory and
--node-pods as capacity (what the control plane's resourceSummary and replica estimates are made of).
Deployments, ReplicaSets, StatefulSets and DaemonSets become ready --ready-delay seconds after a
change; Jobs complete after it. A workload with an image matching --broken-image-pattern never becomes ready
(Deployments fail their progress deadline, Jobs fail after their backoff limit). Per object, the annotations
sim.flotilla.io/ready-delay: "<seconds>" and sim.flotilla.io/broken: "true" override the settings.

faults: `flotilla sim fault <name> --mode down|off|unready|slow|partition|recover --data-dir D`
(`flotilla sim fault --help` for the one-way partitions and --all-members; `flotilla sim agent` for the agents
of flotilla up's Pull members). down closes the API port
(connections refused, watches dropped; recover listens on the same port) while the member's workloads keep
running inside, as in a network partition. off is a power-off: the API port closes AND the workloads stop
(running intervals end, Flink jobs die); recover powers it on: the API at once, the workloads --boot-delay
seconds later, resumed from the store as a restarted cluster does. To freeze a whole member process instead
(nothing answers, connections hang rather than being refused): kill -STOP <pid>; resume with kill -CONT <pid>
(the pid is in D/<name>/admin.json).

examples:
  flotilla member --count 3 --data-dir ./members
  flotilla sim fault member1 --mode off --data-dir ./members      # power off: API gone, workloads stopped
  flotilla sim fault member1 --mode recover --boot-delay 6 --data-dir ./members
"""


def add_member_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    m = sub.add_parser("member", help="run simulated member clusters (API server + workload simulators)",
                       description="Run one or more simulated member clusters in this process.",
                       epilog=MEMBER_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--name", default=None, help="the member's name (default member1)")
    m.add_argument("--count", type=int, default=None,
                   help="run N members named <prefix>1..<prefix>N in this process")
    m.add_argument("--name-prefix", default="member", help="name prefix with --count (default member)")
    m.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"shared root directory (default {DEFAULT_DATA_DIR})")
    m.add_argument("--host", default="127.0.0.1", help="address the members listen on (default 127.0.0.1)")
    m.add_argument("--port", type=int, default=0,
                   help="API port of the first member, the next ones use P+1, P+2, ... (0: free ports)")
    m.add_argument("--admin-port", type=int, default=0, help="port of this process's admin endpoint (0: free)")
    m.add_argument("--storage", default="memory://",
                   help="storage of each member's API server (default memory://; etcd://, or etcds:// with the "
                        "--etcd-* files)")
    from flotilla.cli.etcd_flags import add_etcd_tls_arguments

    add_etcd_tls_arguments(m)
    from flotilla.cli.flags import add_security_flags

    add_security_flags(m, secure="each member serves TLS with its own CA and requires its admin token (both in its "
                                 "kubeconfig, mode 0600, which `flotilla join` turns into the cluster's Secret)",
                       insecure="each member serves plain http to anyone, for tests and tools that speak raw HTTP")
    m.add_argument("--ready-delay", type=float, default=1.0,
                   help="seconds until a simulated pod is ready / a Job completes (default 1)")
    m.add_argument("--broken-image-pattern", default=r"^fake/",
                   help="regex: workloads with a matching image never become ready (default ^fake/)")
    m.add_argument("--progress-deadline", type=float, default=None,
                   help="seconds until a stuck Deployment reports ProgressDeadlineExceeded "
                        "(default: its spec.progressDeadlineSeconds, 600)")
    m.add_argument("--nodes", type=int, default=3,
                   help="simulated Nodes per member, named <member>-node-0..N-1 (default 3)")
    m.add_argument("--node-cpu", default="8", help="CPU capacity (and allocatable) of each node (default 8)")
    m.add_argument("--node-memory", default="32Gi", help="memory of each node (default 32Gi)")
    m.add_argument("--node-pods", default="110", help="pod capacity of each node (default 110)")
    m.add_argument("--daemonset-nodes", type=int, default=None,
                   help="nodes a DaemonSet runs one pod on (default: --nodes)")
    m.add_argument("--latency", type=float, default=2.0, help="default delay of the slow fault (seconds)")
    m.add_argument("--checkpoint-dir", default=None, help="shared checkpoint directory (default D/checkpoints)")
    m.add_argument("--history-file", default=None,
                   help="running-interval history, JSON lines appended by every member (default D/history.jsonl)")
    m.add_argument("--simulators", default=None,
                   help="comma-separated simulators to run (default all; 'none' for a bare API server)")
    m.add_argument("--sim-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for plug-in simulators (MemberConfig.options[KEY] = VALUE); repeatable")
    m.set_defaults(fn=run_member_command)

    s = add_command(sub, "sim", help="control simulated members", description="Control simulated member clusters.",
                    examples=["flotilla sim fault member1 --mode down --data-dir ./members"])
    ssub = s.add_subparsers(dest="sim", required=True)
    f = add_command(ssub, "fault", help="inject or clear a fault in a simulated member",
                        description="down: connections refused (same port on recover), workloads keep running; "
                                    "off: power off, connections refused and workloads stopped; "
                                    "unready: /readyz 500; slow: every request delayed by --latency; "
                                    "partition (members of flotilla up): cut off from the control plane both "
                                    "ways (a Push member's API unreachable from it, a Pull member's agent unable "
                                    "to reach it), the member and its workloads running; "
                                    "partition-to-member / partition-from-member (members of flotilla up): only "
                                    "the bytes flowing towards the member's side / away from it are lost, "
                                    "silently, connections stay open and the other direction still arrives "
                                    "(Pull: the agent's requests reach the control plane but the answers are "
                                    "lost / its requests are lost; Push: the control plane's requests are lost "
                                    "/ they reach the member but the answers are lost); "
                                    "recover: back to normal (after off: the API at once, the workloads "
                                    "--boot-delay seconds later). --all-members applies the fault to every "
                                    "member at once (partition: the control plane's network cut from all).",
                        examples=["flotilla sim fault member1 --mode off --data-dir ./members",
                                  "flotilla sim fault member1 --mode recover --boot-delay 6 --data-dir ./members",
                                  "flotilla sim fault member2 --mode slow --latency 3 --data-dir ./members",
                                  "flotilla sim fault member3 --mode partition --data-dir .flotilla/members",
                                  "flotilla sim fault member3 --mode partition-to-member --data-dir .flotilla/members",
                                  "flotilla sim fault --all-members --mode partition --data-dir .flotilla/members"])
    f.add_argument("member", nargs="*", default=[],
                   help="the member's name; several names apply the fault to all of them at once "
                        "(or --all-members)")
    f.add_argument("--all-members", action="store_true",
                   help="every member of the data directory, at once (instead of one member's name)")
    f.add_argument("--mode", required=True, choices=list(FAULT_MODES))
    f.add_argument("--latency", type=float, default=None, help="seconds of delay for --mode slow")
    f.add_argument("--boot-delay", type=float, default=None,
                   help="after --mode off: seconds from power-on (recover) until the member's workloads run "
                        "again (default 0; kept for later power-ons)")
    _admin_arguments(f)
    f.set_defaults(fn=run_fault_command, parser=f)

    a = add_command(ssub, "agent", help="kill, freeze, thaw or start a Pull member's agent (flotilla up)",
                        description="Control the agent process of a Pull member of flotilla up, through the same "
                                    "admin endpoint as `sim fault`. kill: kill -9, and the agent is NOT started "
                                    "again (flotilla up otherwise restarts a dead agent after 1 s) until --mode "
                                    "start; freeze: SIGSTOP, the process holds its connections and does nothing "
                                    "until --mode thaw (SIGCONT); start: a killed agent started again (a frozen one "
                                    "thawed). Prints the agent's state, pid and how many times it was started.",
                        examples=["flotilla sim agent member3 --mode kill --data-dir .flotilla/members",
                                  "flotilla sim agent member3 --mode start --data-dir .flotilla/members",
                                  "flotilla sim agent member3 --mode freeze --data-dir .flotilla/members"])
    a.add_argument("member", help="the Pull member whose agent to control")
    a.add_argument("--mode", required=True, choices=list(AGENT_MODES))
    _admin_arguments(a)
    a.set_defaults(fn=run_agent_command)

    c = add_command(ssub, "controlplane", help="restart the controller-manager of flotilla up",
                        description="restart: the controller-manager of flotilla up stops and starts again, as when "
                                    "its process restarts (what it held in memory is lost: a Lease it saw change "
                                    "counts from its first sight again). The API server, the members, the links "
                                    "and the agents keep running.",
                        examples=["flotilla sim controlplane --mode restart --data-dir .flotilla/members"])
    c.add_argument("--mode", required=True, choices=["restart"])
    _admin_arguments(c)
    c.set_defaults(fn=run_controlplane_command)


FAULT_MODES = ("down", "off", "unready", "slow", "partition", "partition-to-member", "partition-from-member",
               "recover")
AGENT_MODES = ("kill", "freeze", "thaw", "start")


def _admin_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                   help=f"the --data-dir given to `flotilla up` or to `flotilla member`: D/<name>/admin.json or "
                        f"D/members/<name>/admin.json is read (default {DEFAULT_DATA_DIR})")
    p.add_argument("--admin-url", default=None, help="the member process's admin endpoint (instead of admin.json)")


def member_names(args: argparse.Namespace) -> list[str]:
    if args.count is None:
        return [args.name or "member1"]
    if args.count < 1:
        raise SystemExit("flotilla member: --count must be at least 1")
    if args.name and args.count != 1:
        raise SystemExit("flotilla member: use --name-prefix (not --name) with --count N")
    if args.name:
        return [args.name]
    return [f"{args.name_prefix}{i}" for i in range(1, args.count + 1)]


def run_member_command(args: argparse.Namespace) -> int:
    import asyncio

    from flotilla.cli.flags import secure
    from flotilla.member.runner import run_members
    from flotilla.member.simulated import MemberConfig

    data_dir = Path(args.data_dir)
    names = member_names(args)
    try:
        re.compile(args.broken_image_pattern)
    except re.error as e:
        raise SystemExit(f"flotilla member: --broken-image-pattern is not a valid regex: {e}") from None
    options: dict[str, str] = {}
    for item in args.sim_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"flotilla member: --sim-option wants KEY=VALUE, got {item!r}")
        options[key] = value
    sims: list[str] | None = None
    if args.simulators is not None:
        sims = [] if args.simulators.strip() == "none" else [s for s in args.simulators.split(",") if s.strip()]
    checkpoint_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else data_dir / "checkpoints"
    from flotilla.cli.etcd_flags import etcd_tls_from_args

    try:
        etcd_tls = etcd_tls_from_args(args, args.storage)
    except ValueError as e:
        raise SystemExit(f"flotilla member: {e}") from None
    try:
        configs = [
            MemberConfig(name=name, data_dir=data_dir, host=args.host, port=args.port + i if args.port else 0,
                         storage_url=args.storage, etcd_tls=etcd_tls, ready_delay=args.ready_delay,
                         broken_image_pattern=args.broken_image_pattern, progress_deadline=args.progress_deadline,
                         nodes=args.nodes, node_cpu=args.node_cpu, node_memory=args.node_memory,
                         node_pods=args.node_pods, daemonset_nodes=args.daemonset_nodes, slow_latency=args.latency,
                         checkpoint_dir=checkpoint_dir, simulators=sims, options=dict(options),
                         secure=secure(args))
            for i, name in enumerate(names)
        ]
    except ValueError as e:  # --nodes or a node quantity out of range
        raise SystemExit(f"flotilla member: {e}") from None
    history = Path(args.history_file) if args.history_file else data_dir / "history.jsonl"
    try:
        asyncio.run(run_members(configs, history_file=history, admin_port=args.admin_port,
                                announce=lambda line: print(line, flush=True)))
    except KeyboardInterrupt:
        pass
    except OSError as e:  # a port in use, an unwritable data dir
        print(f"flotilla member: {e}", file=sys.stderr)
        return 1
    return 0


def run_fault_command(args: argparse.Namespace) -> int:
    from flotilla.member.runner import admin_urls, read_admin_file, send_admin, send_fault

    if args.all_members == bool(args.member):
        args.parser.error("name a member (or several), or pass --all-members (not both)")
    try:
        if len(args.member) == 1:
            state = send_fault(Path(args.data_dir), args.member[0], args.mode, args.latency,
                               boot_delay=args.boot_delay, admin_url=args.admin_url)
            print(json.dumps(state))
            return 0
        body: dict[str, object] = {"mode": args.mode}
        if args.latency is not None:
            body["latency"] = args.latency
        if args.boot_delay is not None:
            body["boot_delay"] = args.boot_delay
        # every member named gets the fault in one request to the process running it (at once, when one
        # process runs them all, as in flotilla up)
        groups: dict[str, list[str]] = {}
        if args.all_members:
            groups = {url: [] for url in ([args.admin_url] if args.admin_url else admin_urls(Path(args.data_dir)))}
        else:
            for name in dict.fromkeys(args.member):
                url = args.admin_url or read_admin_file(Path(args.data_dir), name)["admin_url"]
                groups.setdefault(url, []).append(name)
        members = []
        for url, names in groups.items():
            one = dict(body, members=names) if names else body
            members += send_admin(url, "/fault", one, what=", ".join(names) or "the members")["members"]
    except (OSError, RuntimeError, ValueError) as e:
        print(f"flotilla sim fault: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"members": members}))
    return 0


def run_agent_command(args: argparse.Namespace) -> int:
    from flotilla.member.runner import read_admin_file, send_admin

    try:
        url = args.admin_url or read_admin_file(Path(args.data_dir), args.member)["admin_url"]
        state = send_admin(url, f"/members/{args.member}/agent", {"mode": args.mode},
                           what=f"the agent of {args.member}")
    except (OSError, RuntimeError, ValueError) as e:
        print(f"flotilla sim agent: {e}", file=sys.stderr)
        return 1
    print(json.dumps(state))
    return 0


def run_controlplane_command(args: argparse.Namespace) -> int:
    from flotilla.member.runner import admin_urls, send_admin

    try:
        url = args.admin_url or admin_urls(Path(args.data_dir))[0]
        state = send_admin(url, "/controlplane", {"mode": args.mode}, what="the control plane", timeout=60.0)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"flotilla sim controlplane: {e}", file=sys.stderr)
        return 1
    print(json.dumps(state))
    return 0
