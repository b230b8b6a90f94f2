"""``flotilla agent``: Pull mode's agent for one member cluster (Karmada's karmada-agent flags)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from flotilla.cli.argtypes import bind_address, duration
from flotilla.cli.controller_manager import DEFAULT_METRICS_BIND_ADDRESS
from flotilla.cli.flags import add_command
from flotilla.kube.durations import go_duration
from flotilla.signals import run_until_stopped

if TYPE_CHECKING:
    import asyncio

#: (flag, default, what it sets) of the agent's durations, in Karmada's names and defaults (AgentConfig's)
_CLUSTER_TIMINGS = (
    ("--cluster-lease-duration", 40.0, "the Lease's duration"),
    ("--cluster-status-update-frequency", 10.0, "how often the cluster's status is collected and posted"),
    ("--cluster-api-timeout", 10.0, "timeout of each request to the member's API server"),
    ("--cluster-success-threshold", 30.0, "how long the member must stay healthy before Ready turns True again"),
    ("--cluster-failure-threshold", 30.0, "how long the member must stay unhealthy before Ready turns False"),
)
_PERMIT_TIMINGS = (
    ("--fence-after", 15.0, "how long the member's guard lets guarded workloads run on an unchanged permit "
                            "(announced on the Cluster)"),
    ("--permit-hold", 15.0, "the permit is renewed only while the last successful control-plane Lease renewal "
                            "started less than this ago"),
    ("--permit-renew-interval", 1.0, "how often the permit is renewed"),
)
_PEER_TIMINGS = (
    ("--peer-report-ttl", 2.0, "how long a peer's report counts after it was asked for (announced)"),
    ("--peer-poll-interval", 0.5, "how often the peers are asked while the control plane is in doubt"),
)


def _add_durations(parser: Any, timings: tuple[tuple[str, float, str], ...]) -> None:
    for flag, default, what in timings:
        parser.add_argument(flag, type=duration, default=default, metavar="DURATION",
                            help=f"{what} (default {go_duration(default)})")


def _fraction(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None


def add_agent_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = add_command(
        subparsers, "agent", help="run the Pull-mode agent of one member cluster",
        description="Register this member as a Pull cluster on the control plane, renew its Lease and run the "
                    "cluster-status, execution and work-status controllers for it: the agent reads the Works of "
                    "karmada-es-<cluster> from the control plane and applies them to the member.",
        examples=["flotilla agent --karmada-kubeconfig cp.kubeconfig --cluster-name member1 \\\n"
                  "      --kubeconfig member1.kubeconfig"])
    p.add_argument("--karmada-kubeconfig", required=True,
                   help="kubeconfig of the control plane (several servers: an HA control plane)")
    p.add_argument("--karmada-context", default=None, help="context of --karmada-kubeconfig (default: current)")
    p.add_argument("--cluster-name", required=True, help="name of this member's Cluster on the control plane")
    p.add_argument("--cluster-namespace", default="karmada-cluster",
                   help="namespace of the cluster's Lease on the control plane (default karmada-cluster)")
    p.add_argument("--cluster-api-endpoint", default=None,
                   help="the member's API endpoint, recorded in the Cluster (informational; never called)")
    _add_durations(p, _CLUSTER_TIMINGS)
    p.add_argument("--cluster-lease-renew-interval-fraction", type=_fraction, default=0.25, metavar="FRACTION",
                   help="the Lease is renewed every duration x fraction (default 0.25: every 10s)")
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig of the member (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--context", default=None, help="context of --kubeconfig (default: current)")
    p.add_argument("--metrics-bind-address", type=bind_address, default=DEFAULT_METRICS_BIND_ADDRESS,
                   metavar="HOST:PORT",
                   help="serve the agent's Prometheus metrics (Lease and run permit renewals, the peers' quorum) on "
                        "http://HOST:PORT/metrics and /healthz; ':PORT' listens on every interface, '0' disables "
                        f"(default {DEFAULT_METRICS_BIND_ADDRESS})")
    g = p.add_argument_group("run permit (docs/fencing.md)")
    g.add_argument("--guard", action="store_true",
                   help="keep the run permit (Lease flotilla-system/flotilla-run-permit in the member) and announce "
                        "the guard on the Cluster, so the control plane may fence this cluster automatically")
    _add_durations(g, _PERMIT_TIMINGS)
    g.add_argument("--lease-only", action="store_true",
                   help="beside a Push cluster (joined with flotilla join): do not register or apply Works, only "
                        "renew the cluster's Lease, keep the run permit (--guard) and answer peers, so the control "
                        "plane may fence it automatically")
    g = p.add_argument_group("peer protocol (docs/fencing.md)")
    g.add_argument("--peer-listen", default="", metavar="HOST:PORT",
                   help="answer the other agents' report requests here (port 0: any free port), follow every "
                        "Cluster and acknowledge pending fences; with --guard, keep the permit through a control-"
                        "plane outage while a strict majority of clusters report it unreachable (default: off)")
    g.add_argument("--peer-advertise", default="", metavar="HOST:PORT",
                   help="the address announced to the other agents (default: the --peer-listen address)")
    _add_durations(g, _PEER_TIMINGS)
    p.set_defaults(fn=run_agent_command)
    return p


def _say(message: str) -> None:
    print(f"flotilla agent: {message}", file=sys.stderr, flush=True)


def config_from_args(args: argparse.Namespace) -> Any:
    from flotilla.agent.runtime import AgentConfig

    return AgentConfig(cluster_name=args.cluster_name, cluster_namespace=args.cluster_namespace,
                       cluster_api_endpoint=args.cluster_api_endpoint,
                       cluster_lease_duration=args.cluster_lease_duration,
                       cluster_lease_renew_interval_fraction=args.cluster_lease_renew_interval_fraction,
                       cluster_status_update_frequency=args.cluster_status_update_frequency,
                       cluster_api_timeout=args.cluster_api_timeout,
                       cluster_success_threshold=args.cluster_success_threshold,
                       cluster_failure_threshold=args.cluster_failure_threshold, guard=args.guard,
                       fence_after=args.fence_after, permit_hold=args.permit_hold,
                       permit_renew_interval=args.permit_renew_interval, peer_listen=args.peer_listen,
                       peer_advertise=args.peer_advertise, peer_report_ttl=args.peer_report_ttl,
                       peer_poll_interval=args.peer_poll_interval, lease_only=args.lease_only,
                       metrics_address=args.metrics_bind_address)


async def run(args: argparse.Namespace, stop: asyncio.Event) -> int:
    from flotilla.agent.runtime import Agent
    from flotilla.client import Client

    cfg = config_from_args(args)
    errs = cfg.validate()
    if errs:
        for e in errs:
            _say(e)
        return 1
    try:
        cp = Client.from_kubeconfig(args.karmada_kubeconfig, args.karmada_context)
    except (OSError, ValueError, KeyError) as e:
        _say(f"cannot load --karmada-kubeconfig {args.karmada_kubeconfig}: {e}")
        return 1
    try:
        member = Client.from_kubeconfig(args.kubeconfig, args.context, request_timeout=cfg.cluster_api_timeout,
                                        read_retries=0)
    except (OSError, ValueError, KeyError) as e:
        await cp.close()
        where = args.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        _say(f"cannot load the member's --kubeconfig {where}: {e}")
        return 1
    try:
        code = await Agent(cp, member, cfg).run(stop)
    finally:
        await cp.close()
        await member.close()
    if code:
        _say(f"cluster {cfg.cluster_name} cannot be registered by this agent (see the log above)")
    return code


def run_agent_command(args: argparse.Namespace) -> int:
    return run_until_stopped(lambda stop: run(args, stop))
