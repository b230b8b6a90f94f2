"""``flotilla controller-manager``: the propagation pipeline's controllers, as karmada-controller-manager.

Every :class:`~flotilla.runtime.options.ControllerOptions` field is a flag with Karmada's name (the field
name with dashes). Durations take Go's syntax (``10s``, ``1m30s``, ``500ms``) or plain seconds (``0.5``);
booleans take ``--flag``, ``--flag=true`` or ``--flag=false`` as Go's pflag does. ``--controllers`` takes
Karmada's list syntax: ``*`` (every controller), ``name`` (enable), ``-name`` (disable), first match wins.

With ``--leader-elect`` the controllers run only while this process holds the Lease
``<--leader-elect-resource-namespace>/<--leader-elect-resource-name>`` (default
``karmada-system/flotilla-controller-manager``). When the lease is lost the controllers stop and the process
campaigns again; SIGTERM/SIGINT stop the controllers, release the lease and exit 0.

``--metrics-bind-address`` (Karmada's flag; default ``127.0.0.1:8080``, ``0`` disables) serves ``GET /metrics``
(Prometheus text format) and ``/healthz`` for the whole life of the process, leader or standby. An address
that cannot be bound (in use) is reported and the process runs on without metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import socket
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flotilla.cli.argtypes import argtype, duration, parse_non_negative
from flotilla.cli.flags import keep_parser, usage_error
from flotilla.observability.logs import progress_line
from flotilla.runtime.options import DEFAULT_FEATURE_GATES, ControllerOptions
from flotilla.signals import run_until_stopped

if TYPE_CHECKING:
    import asyncio

if TYPE_CHECKING:
    from flotilla.observability.metrics import ControllerMetrics, MetricsServer

log = logging.getLogger("flotilla.controller-manager")

PROG = "flotilla controller-manager"
LEADER_ELECTION_NAMESPACE = "karmada-system"
LEADER_ELECTION_NAME = "flotilla-controller-manager"
DEFAULT_METRICS_BIND_ADDRESS = "127.0.0.1:8080"

# ----------------------------------------------------------------------------------------------- values


def format_duration(seconds: float) -> str:
    """As Go's ``time.Duration.String()``: ``10s``, ``10m0s``, ``1h0m0s``, ``500ms``, ``0s``."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        for unit, scale in (("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
            if seconds >= scale:
                return f"{_trim(seconds / scale)}{unit}"
        return f"{_trim(seconds / 1e-9)}ns"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{int(hours)}h"
    if hours or minutes:
        out += f"{int(minutes)}m"
    return out + f"{_trim(secs)}s"


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


_TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false"}


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``: 1/t/true and 0/f/false, any case."""
    v = text.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"invalid boolean {text!r} (true or false)")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be at least 1: {text!r}")
    return value


def _ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be between 0 and 1: {text!r}")
    return value


def _string_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


# ----------------------------------------------------------------------------------------------- option flags


@dataclass(frozen=True)
class OptionFlag:
    """How one ControllerOptions field is spelled and parsed on the command line."""

    field: str
    kind: str  # duration | float | int | bool | choice | list | gates | str
    help: str = ""
    convert: Any = None
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")


# Known fields with their help; any other field of ControllerOptions still gets a flag from its default's type.
_KNOWN: dict[str, OptionFlag] = {f.field: f for f in (
    OptionFlag("cluster_status_update_frequency", "duration",
               "how often the cluster-status controller probes each member and posts Cluster status"),
    OptionFlag("cluster_success_threshold", "duration",
               "how long a member must keep answering healthy before it is marked Ready"),
    OptionFlag("cluster_failure_threshold", "duration",
               "how long a member must keep failing its probes before it is marked not Ready"),
    OptionFlag("cluster_api_qps", "float", "requests per second to each member's API server",
               convert=parse_non_negative),
    OptionFlag("cluster_api_timeout", "duration",
               "timeout of every request to a member's API server, health probes included (watches excepted): a "
               "member that accepts connections but does not answer is seen failing after it; Karmada: 32s"),
    OptionFlag("cluster_monitor_period", "duration",
               "how often the cluster controller checks the health of Pull clusters (their Lease and Ready condition)"),
    OptionFlag("cluster_monitor_grace_period", "duration",
               "how long a Pull cluster may go without renewing its Lease or posting a new Ready condition before "
               "its Ready condition is set Unknown"),
    OptionFlag("cluster_startup_grace_period", "duration",
               "the grace period of a Pull cluster that never posted a Ready condition (counted from its creation)"),
    OptionFlag("fence_margin", "duration",
               "a Pull cluster whose agent announces a guard is fenced automatically once its Lease has not been "
               "renewed for its announced permit-hold + fence-after + this margin (and a strict majority of the "
               "clusters is live)"),
    OptionFlag("enable_no_execute_taint_eviction", "bool",
               "evict workloads from clusters with NoExecute taints they do not tolerate"),
    OptionFlag("no_execute_taint_eviction_purge_mode", "choice",
               "how the old copy is removed on NoExecute eviction when the policy does not say",
               choices=("Gracefully", "Directly")),
    OptionFlag("graceful_eviction_timeout", "duration",
               "how long a graceful eviction task waits for the new copy to be healthy before the old one goes"),
    OptionFlag("resource_eviction_rate", "float", "evictions per second while most clusters are healthy",
               convert=parse_non_negative),
    OptionFlag("secondary_resource_eviction_rate", "float",
               "evictions per second while more than --unhealthy-cluster-threshold of the clusters are unhealthy",
               convert=parse_non_negative),
    OptionFlag("unhealthy_cluster_threshold", "float",
               "fraction of unhealthy clusters (0..1) above which the secondary eviction rate applies",
               convert=_ratio),
    OptionFlag("state_preservation_timeout", "duration",
               "let an eviction proceed without preserved state after this long (0: wait forever, as Karmada)"),
    OptionFlag("restore_missing", "choice",
               "what a native restore does when no snapshot can be used (none found, storage unreachable, "
               "credentials refused, too old): hold the new copy's Work, or start the job from empty state",
               choices=("hold", "fresh")),
    OptionFlag("restore_hold_timeout", "duration",
               "with --restore-missing=hold, start the job from empty state after holding this long (0: hold "
               "until the lookup succeeds)"),
    OptionFlag("restore_storage_timeout", "duration",
               "timeout of each native-restore call to checkpoint storage"),
    OptionFlag("restore_default_checkpoint_dir", "str",
               "checkpoint directory (URI or path) for jobs whose flinkConfiguration names none"),
    OptionFlag("move_savepoint_timeout", "duration",
               "how long a planned move waits for the old copy's savepoint before it goes on as an unplanned "
               "failover (restoring the newest checkpoint)"),
    OptionFlag("concurrent_syncs", "int", "workers per controller", convert=_positive_int),
    OptionFlag("skipped_propagating_namespaces", "list",
               "comma-separated namespaces whose resources are never propagated"),
    OptionFlag("feature_gates", "gates", "comma-separated Name=true|false pairs"),
)}

_DURATION_HINTS = ("frequency", "period", "timeout", "duration", "interval", "deadline", "delay", "grace")


def option_flags() -> list[OptionFlag]:
    """One flag per ControllerOptions field (fields added later get a flag from their default's type)."""
    defaults = ControllerOptions()
    flags: list[OptionFlag] = []
    for f in dataclasses.fields(ControllerOptions):
        if f.name in _KNOWN:
            flags.append(_KNOWN[f.name])
            continue
        value = getattr(defaults, f.name)
        if isinstance(value, bool):
            kind = "bool"
        elif isinstance(value, int):
            kind = "int"
        elif isinstance(value, float):
            kind = "duration" if any(h in f.name for h in _DURATION_HINTS) else "float"
        elif isinstance(value, (tuple, list)):
            kind = "list"
        elif isinstance(value, dict):
            kind = "gates" if f.name == "feature_gates" else "skip"
        else:
            kind = "str"
        if kind != "skip":
            flags.append(OptionFlag(f.name, kind))
    return flags


def _show_default(flag: OptionFlag, value: Any) -> str:
    if flag.kind == "duration":
        return format_duration(float(value))
    if flag.kind == "bool":
        return "true" if value else "false"
    if flag.kind == "list":
        return ",".join(value)
    if flag.kind == "gates":
        return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(value.items()))
    return str(value)


def _add_option_flag(group: Any, flag: OptionFlag, default: Any) -> None:
    shown = _show_default(flag, default)
    common: dict[str, Any] = {"dest": flag.field, "default": argparse.SUPPRESS}
    if flag.kind == "bool":
        group.add_argument(flag.flag, nargs="?", const=True, type=argtype(parse_bool, "boolean"),
                           metavar="true|false", help=f"{flag.help} (default {shown})", **common)
    elif flag.kind == "duration":
        group.add_argument(flag.flag, type=duration, metavar="DURATION",
                           help=f"{flag.help} (default {shown})", **common)
    elif flag.kind == "choice":
        group.add_argument(flag.flag, choices=flag.choices, help=f"{flag.help} (default {shown})", **common)
    elif flag.kind == "list":
        group.add_argument(flag.flag, type=_string_list, metavar="A,B",
                           help=f"{flag.help} (default {shown or 'none'})", **common)
    elif flag.kind == "gates":
        known = ", ".join(f"{k}={'true' if v else 'false'}" for k, v in DEFAULT_FEATURE_GATES.items())
        group.add_argument(flag.flag, metavar="NAME=BOOL,...", action="append",
                           help=f"{flag.help} (repeatable); gates and defaults: {known}", **common)
    elif flag.kind == "int":
        conv = flag.convert or int
        group.add_argument(flag.flag, type=argtype(conv, "integer"), metavar="N",
                           help=f"{flag.help} (default {shown})".strip(), **common)
    elif flag.kind == "float":
        conv = flag.convert or float
        group.add_argument(flag.flag, type=argtype(conv, "number"), metavar="X",
                           help=f"{flag.help} (default {shown})".strip(), **common)
    else:
        group.add_argument(flag.flag, help=f"{flag.help} (default {shown})".strip(), **common)


def options_from_args(args: argparse.Namespace) -> ControllerOptions:
    """ControllerOptions with the flags given on the command line; ValueError on a bad --feature-gates."""
    options = ControllerOptions()
    for flag in option_flags():
        if not hasattr(args, flag.field):
            continue
        value = getattr(args, flag.field)
        if flag.kind == "gates":
            for spec in value if isinstance(value, list) else [value]:
                options.set_gates(spec)
        else:
            setattr(options, flag.field, value)
    return options


# ----------------------------------------------------------------------------------------------- controllers


def known_controllers() -> list[str]:
    """Every controller name the registry declares, in start order (whether or not it is written yet)."""
    from flotilla.runtime.controller_names import declared_controller_names

    return declared_controller_names()


def available_controllers() -> list[str]:
    from flotilla.runtime.registry import CONTROLLERS

    return list(CONTROLLERS)


def _enabled(name: str, items: Sequence[str]) -> bool:
    """Karmada's ``IsControllerEnabled``: the first ``name``/``-name`` decides; else on iff ``*`` is listed."""
    star = False
    for item in items:
        if item == name:
            return True
        if item == "-" + name:
            return False
        if item == "*":
            star = True
    return star


def select_controllers(spec: str, known: Sequence[str], available: Sequence[str]) -> tuple[list[str], list[str]]:
    """Karmada's ``--controllers`` rule: for each controller the first matching item decides (``name`` on,
    ``-name`` off); otherwise ``*`` turns it on. Returns (to start, in start order; enabled but not available).

    ValueError for unknown names, and for a controller named explicitly that is not available.
    """
    items = [p.strip() for p in spec.split(",") if p.strip()]
    if not items:
        raise ValueError("--controllers: empty list (use '*' for all controllers)")
    unknown = [i for i in items if i != "*" and i.lstrip("-") not in known]
    if unknown:
        raise ValueError(f"--controllers: unknown controller(s) {', '.join(unknown)}; known: {', '.join(known)}")
    selected = [name for name in known if _enabled(name, items)]
    explicit = {i for i in items if i != "*" and not i.startswith("-")}
    missing_explicit = [n for n in selected if n in explicit and n not in available]
    if missing_explicit:
        raise ValueError(f"--controllers: {', '.join(missing_explicit)} not available in this build "
                         f"(available: {', '.join(available) or 'none'})")
    missing = [n for n in selected if n not in available]
    return [n for n in selected if n in available], missing


# ----------------------------------------------------------------------------------------------- parser


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", default=None, metavar="FILE",
                   help="kubeconfig of the control plane (default $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--context", default=None, metavar="NAME", help="kubeconfig context to use (default: its current context)")
    p.add_argument("--controllers", default="*", metavar="LIST",
                   help="controllers to run: '*' for all, 'name' to enable, '-name' to disable, comma-separated "
                        "(default '*'); names: " + ", ".join(known_controllers()))
    g = p.add_argument_group("controller options")
    defaults = ControllerOptions()
    for flag in option_flags():
        _add_option_flag(g, flag, getattr(defaults, flag.field))
    le = p.add_argument_group("leader election")
    le.add_argument("--leader-elect", nargs="?", const=True, default=False, type=argtype(parse_bool, "boolean"),
                    metavar="true|false",
                    help="run the controllers only while holding the leader Lease (default false)")
    le.add_argument("--leader-elect-lease-duration", type=duration, default=15.0,
                    metavar="DURATION", help="how long a standby waits after the last renewal before taking over "
                                             "(default 15s)")
    le.add_argument("--leader-elect-renew-deadline", type=duration, default=10.0,
                    metavar="DURATION", help="how long the leader keeps trying to renew before it steps down "
                                             "(default 10s)")
    le.add_argument("--leader-elect-retry-period", type=duration, default=2.0,
                    metavar="DURATION", help="how often candidates poll and the leader renews (default 2s)")
    le.add_argument("--leader-elect-resource-namespace", default=LEADER_ELECTION_NAMESPACE, metavar="NS",
                    help=f"namespace of the Lease (created if missing; default {LEADER_ELECTION_NAMESPACE})")
    le.add_argument("--leader-elect-resource-name", default=LEADER_ELECTION_NAME, metavar="NAME",
                    help=f"name of the Lease (default {LEADER_ELECTION_NAME})")
    le.add_argument("--leader-elect-identity", default=None, metavar="ID",
                    help="this candidate's identity (default <hostname>_<random uuid>)")
    mg = p.add_argument_group("metrics")
    mg.add_argument("--metrics-bind-address", default=DEFAULT_METRICS_BIND_ADDRESS, metavar="HOST:PORT",
                    help="serve Prometheus metrics on http://HOST:PORT/metrics and /healthz; ':PORT' listens on "
                         f"every interface, '0' disables (default {DEFAULT_METRICS_BIND_ADDRESS})")


DESCRIPTION = ("Run the controllers of the propagation pipeline (detector, scheduler, binding, execution, "
               "status, cluster health) against a control-plane API server, as karmada-controller-manager.")

EPILOG = """\
durations: Go syntax (10s, 1m30s, 500ms, 2h) or plain seconds (0.5).
booleans: --flag, --flag=true, --flag=false.
example:
  flotilla controller-manager --kubeconfig .flotilla/kubeconfig --cluster-status-update-frequency 2s \\
      --feature-gates Failover=false --controllers '*,-dependencies-distributor'
"""


def add_controller_manager_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = subparsers.add_parser("controller-manager", help="run the controllers (as karmada-controller-manager)",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    p.set_defaults(fn=run_controller_manager_command)
    keep_parser(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    """A stand-alone parser (``python -m flotilla.cli.controller_manager``)."""
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    _add_arguments(p)
    p.set_defaults(fn=run_controller_manager_command)
    keep_parser(p)
    return p


@dataclass
class Config:
    kubeconfig: str | None
    context: str | None
    options: ControllerOptions
    controllers: list[str]
    unavailable: list[str]
    leader_elect: bool
    lease_duration: float
    renew_deadline: float
    retry_period: float
    lease_namespace: str
    lease_name: str
    identity: str
    metrics_address: tuple[str, int] | None = None


def config_from_args(args: argparse.Namespace) -> Config:
    """Validate everything that can be validated before connecting; ValueError with a flag-named message."""
    from flotilla.observability.metrics import parse_bind_address

    options = options_from_args(args)
    problems = options.validate()  # Karmada's flag checks, made before it starts
    if problems:
        raise ValueError("; ".join(problems))
    metrics_address = parse_bind_address(getattr(args, "metrics_bind_address", "0"))
    controllers, unavailable = select_controllers(args.controllers, known_controllers(), available_controllers())
    if args.leader_elect:
        if args.leader_elect_lease_duration <= args.leader_elect_renew_deadline:
            raise ValueError("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline")
        if args.leader_elect_renew_deadline <= args.leader_elect_retry_period:
            raise ValueError("--leader-elect-renew-deadline must be greater than --leader-elect-retry-period")
        if args.leader_elect_retry_period <= 0:
            raise ValueError("--leader-elect-retry-period must be positive")
    identity = args.leader_elect_identity or f"{socket.gethostname()}_{uuid.uuid4()}"
    return Config(kubeconfig=args.kubeconfig, context=args.context, options=options, controllers=controllers,
                  unavailable=unavailable, leader_elect=bool(args.leader_elect),
                  lease_duration=args.leader_elect_lease_duration, renew_deadline=args.leader_elect_renew_deadline,
                  retry_period=args.leader_elect_retry_period, lease_namespace=args.leader_elect_resource_namespace,
                  lease_name=args.leader_elect_resource_name, identity=identity, metrics_address=metrics_address)


# ----------------------------------------------------------------------------------------------- running


def _say(message: str) -> None:
    print(progress_line(PROG, message), file=sys.stderr, flush=True)


async def _ensure_namespace(client: Any, name: str, stop: asyncio.Event) -> bool:
    """Create ``name`` if missing, retrying while the API server cannot be reached; False if stopped first."""
    import asyncio

    from flotilla.cli.control_plane import create_unless_exists
    from flotilla.client import ApiException, is_not_found
    from flotilla.cluster.join import namespace_object
    from flotilla.kube.resources import NAMESPACES

    delay = 0.5
    while not stop.is_set():
        try:
            try:
                await client.get(NAMESPACES, name)
                return True
            except ApiException as e:
                if not is_not_found(e):
                    raise
            if await create_unless_exists(client, NAMESPACES, namespace_object(name)) is not None:
                _say(f"created namespace {name}")
            return True
        except (ApiException, OSError, TimeoutError) as e:
            log.warning("cannot ensure namespace %s (%s); retrying in %.1fs", name, e, delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await stop.wait()
            delay = min(delay * 2, 10.0)
    return False


async def _run_controllers(client: Any, cfg: Config, metrics: ControllerMetrics | None = None) -> None:
    """Start the ControllerManager and run it until cancelled; it is always stopped on the way out."""
    import asyncio

    from flotilla.runtime.manager import ControllerManager

    manager = ControllerManager(client, cfg.options, controllers=cfg.controllers, metrics=metrics)
    try:
        await manager.start()
        _say(f"started {len(cfg.controllers)} controllers: {', '.join(cfg.controllers) or 'none'}")
        await asyncio.Event().wait()
    finally:
        await manager.stop()
        _say("controllers stopped")


async def start_metrics_server(metrics: ControllerMetrics, address: tuple[str, int] | None) -> MetricsServer | None:
    """Serve ``metrics`` on ``address``; ``None`` when disabled or when the address cannot be bound (said why)."""
    from flotilla.observability.metrics import MetricsServer

    if address is None:
        return None
    server = MetricsServer(metrics.registry, *address)
    try:
        await server.start()
    except OSError as e:
        log.error("cannot serve metrics on %s:%d: %s", address[0], address[1], e)
        _say(f"cannot serve metrics on {address[0]}:{address[1]} ({e.strerror or e}); running without metrics "
             "(choose another --metrics-bind-address, or 0)")
        return None
    _say(f"serving metrics on {server.url}/metrics")
    return server


async def run(cfg: Config, stop: asyncio.Event | None = None, metrics: ControllerMetrics | None = None) -> int:
    """Run until ``stop`` is set (or SIGTERM/SIGINT when called from the command); the exit code.

    ``metrics``: the :class:`~flotilla.observability.metrics.ControllerMetrics` to record into and serve (a new
    one by default), kept across leadership terms.
    """
    import asyncio

    from flotilla.client import Client
    from flotilla.observability.metrics import ControllerMetrics

    stop = stop or asyncio.Event()
    try:
        client = Client.from_kubeconfig(cfg.kubeconfig, cfg.context)
    except (OSError, ValueError, KeyError) as e:
        _say(f"cannot load kubeconfig {cfg.kubeconfig or os.environ.get('KUBECONFIG') or '~/.kube/config'}: {e}")
        return 1
    if cfg.unavailable:
        _say(f"not available in this build, not started: {', '.join(cfg.unavailable)}")
    metrics = metrics if metrics is not None else ControllerMetrics()
    server = None
    try:
        server = await start_metrics_server(metrics, cfg.metrics_address)
        if cfg.leader_elect:
            return await _run_elected(client, cfg, stop, metrics)
        return await _run_until(_run_controllers(client, cfg, metrics), stop)
    finally:
        if server is not None:
            await server.stop()
        await client.close()


async def _run_until(coro: Any, stop: asyncio.Event) -> int:
    import asyncio

    task = asyncio.ensure_future(coro)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        task.cancel()
        await asyncio.wait({task})
    if task.cancelled() or task.exception() is None:
        return 0
    err = task.exception()
    _say(f"controllers failed: {err}")
    log.debug("controllers failed", exc_info=err)
    return 1


async def _run_elected(client: Any, cfg: Config, stop: asyncio.Event,
                       metrics: ControllerMetrics | None = None) -> int:
    import asyncio

    from flotilla.client.leaderelection import LeaderElector

    lease = f"{cfg.lease_namespace}/{cfg.lease_name}"

    def started_leading() -> Any:
        _say(f"acquired lease {lease} as {cfg.identity}")
        return _run_controllers(client, cfg, metrics)

    def stopped_leading() -> None:
        _say(f"stopped leading {lease}")

    def new_leader(identity: str) -> None:
        if identity != cfg.identity:
            _say(f"leader is {identity}")

    while not stop.is_set():
        if not await _ensure_namespace(client, cfg.lease_namespace, stop):
            break
        elector = LeaderElector(client, cfg.lease_namespace, cfg.lease_name, cfg.identity,
                                lease_duration=cfg.lease_duration, renew_deadline=cfg.renew_deadline,
                                retry_period=cfg.retry_period, on_started_leading=started_leading,
                                on_stopped_leading=stopped_leading, on_new_leader=new_leader)
        campaign = asyncio.ensure_future(elector.run())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({campaign, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not campaign.done():
            campaign.cancel()  # stops the controllers, then releases the lease (release_on_cancel)
            await asyncio.wait({campaign})
            break
        if campaign.cancelled():
            break
        err = campaign.exception()
        if err is not None:
            _say(f"controllers failed: {err}")
            return 1
        _say(f"lost lease {lease}; campaigning again")
    return 0


def run_controller_manager_command(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        return usage_error(args, str(e), PROG)

    from flotilla.apiserver.gctune import tune_gc

    tune_gc()  # a long-running process (see flotilla.apiserver.gctune)
    return run_until_stopped(lambda stop: run(cfg, stop))


def main(argv: list[str] | None = None) -> int:
    from flotilla.observability.logs import add_logging_arguments, setup_logging

    parser = build_parser()
    add_logging_arguments(parser)
    args = parser.parse_args(argv)
    setup_logging(parser, args)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
