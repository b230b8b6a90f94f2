"""``flotilla up`` and ``flotilla down``: the whole of Flotilla on this machine (:mod:`flotilla.local.stack`).

``up`` runs in the foreground until Ctrl-C (or SIGTERM), then stops every part cleanly. ``up --detach`` starts the
same thing as a background process (log in ``D/up.log``), waits until it is ready and returns; ``down`` stops it.
Running ``up`` again on the same data directory resumes the same state.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flotilla.cli.argtypes import duration, seconds
from flotilla.cli.flags import add_fencing_flags, add_security_flags, keep_parser, secure, usage_error
from flotilla.files import PRIVATE_FILE, make_private, private_dir
from flotilla.local.layout import DataDirError, Layout, resume_conflict
from flotilla.local.timings import LAPTOP_TIMINGS, NOT_READY_TAINT
from flotilla.signals import run_until_stopped

if TYPE_CHECKING:
    import asyncio

    from flotilla.local.stack import StackConfig

__all__ = ["add_up_parsers", "run_down_command", "run_up_command"]

DEFAULT_DATA_DIR = ".flotilla"
DETACH_TIMEOUT = 90.0
DOWN_TIMEOUT = 30.0
GUARD_DEFAULT = 15.0  # --fence-after and --permit-hold, as the agent's

UP_EPILOG = f"""\
what runs: the control plane API server (SQLite in D/controlplane), every controller, and --members simulated
member clusters (member1..N) joined to it, all in this one process. A ClusterTaintPolicy "not-ready" turns a
member's Ready condition False/Unknown into the taint {NOT_READY_TAINT}:NoExecute (--no-default-taint-policy
skips it). Health timings suited to a laptop: members are probed every
{LAPTOP_TIMINGS['cluster_status_update_frequency']:g}s, a failure counts after
{LAPTOP_TIMINGS['cluster_failure_threshold']:g}s, recovery after {LAPTOP_TIMINGS['cluster_success_threshold']:g}s,
graceful-eviction tasks time out after {LAPTOP_TIMINGS['graceful_eviction_timeout']:g}s, and a request to a member
times out after {LAPTOP_TIMINGS['cluster_api_timeout']:g}s; a Pull member (registered by its agent) is checked
every {LAPTOP_TIMINGS['cluster_monitor_period']:g}s and turns Ready Unknown after
{LAPTOP_TIMINGS['cluster_monitor_grace_period']:g}s without a Lease renewal
({LAPTOP_TIMINGS['cluster_startup_grace_period']:g}s before it first posted its status); a Pull member whose
agent announces a guard is fenced after its permit-hold + fence-after + {LAPTOP_TIMINGS['fence_margin']:g}s
without a Lease renewal. Override them with
--cluster-status-update-frequency, --cluster-failure-threshold, --cluster-success-threshold,
--graceful-eviction-timeout, --cluster-api-timeout, --cluster-monitor-period, --cluster-monitor-grace-period,
--cluster-startup-grace-period and --fence-margin, in seconds.

Pull mode: --pull-members N makes the last N members Pull members: they are not joined; each gets its own
`flotilla agent` process (restarted when it exits; pid and log in D/agents/<member>/) that registers the Cluster
(MODE Pull) and applies its Works. `flotilla sim fault <member> --mode partition --data-dir D/members` cuts a
member off the control plane both ways (its workloads keep running); --mode recover heals it. --mode
partition-to-member / partition-from-member lose one direction only, --all-members cuts every member at once;
`flotilla sim agent <member> --mode kill|freeze|thaw|start` kills an agent for good (no restart until start) or
freezes it; `flotilla sim controlplane --mode restart` restarts the controller-manager.

Automatic fencing: --guard (with --pull-members) runs the Pull members' agents with --guard, so each keeps the
run permit in its member and announces the guard on its Cluster, and runs those members with their guard on:
guarded workloads (purgeMode Directly) stop --fence-after seconds after the permit last changed, and the control
plane fences such a member by itself once it has seen no Lease renewal for permit-hold + fence-after +
--fence-margin. --fence-after and --permit-hold (seconds, default 15 each) are the agents' flags of the same
names. A data directory keeps its --guard setting: resuming it with the other one is refused.

dashboard: the control plane serves a live web dashboard (docs/dashboard.md); `up` prints its URL with a
one-time token that logs the browser in (as the read-only viewer; without --insecure the browser asks once to
accept the certificate of D/controlplane/pki/ca.crt).

Security: by default everything serves https with certificates of its own CA and requires a token: an
unauthenticated request is refused (401). D/kubeconfig holds the admin token and the CA, D/viewer.kubeconfig a
read-only token; both are written 0600 (the data directory 0700). --insecure serves plain http without
authentication, for tests and tools that need raw HTTP; a data directory keeps the mode it was created in (one
created by an older Flotilla without --secure resumes only with --insecure).

files: D/kubeconfig (contexts: flotilla = the control plane, current; member1..N), D/viewer.kubeconfig,
D/controlplane/ (its store, pki/ with the CA, tokens.csv), D/up.log (with --detach), D/members/ (the members'
data, checkpoints/, history.jsonl), D/agents/ (the Pull members' agents).

examples:
  flotilla up                      # foreground; Ctrl-C stops it
  flotilla up --detach --members 2 # background; `flotilla down` stops it
  flotilla up --detach --pull-members 1  # member3 in Pull mode, with its agent
  flotilla up --detach --pull-members 1 --guard  # ... fenced automatically when cut off
  flotilla up --detach --insecure  # plain http, no authentication (raw HTTP tools)
  KUBECONFIG=.flotilla/kubeconfig kubectl get clusters
  KUBECONFIG=.flotilla/kubeconfig kubectl --context member1 get deployments -A
"""


def add_up_parsers(sub: Any) -> None:
    u = sub.add_parser("up", help="run the control plane, every controller and simulated members on this machine",
                       description="Start Flotilla on this machine: the control plane, every controller and "
                                   "--members simulated member clusters joined to it.",
                       epilog=UP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    u.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"where everything is kept (default {DEFAULT_DATA_DIR})")
    u.add_argument("--members", type=int, default=3, help="simulated member clusters (default 3)")
    u.add_argument("--pull-members", type=int, default=0, metavar="N",
                   help="the last N members join in Pull mode, each with its own agent process (default 0)")
    u.add_argument("--guard", action="store_true",
                   help="automatic fencing (docs/fencing.md): every member's agent keeps the run permit and "
                        "speaks the peer protocol (a Push member gets a lease-only agent), and every member runs "
                        "the guard")
    u.add_argument("--port", type=int, default=6443, help="the control plane API server's port (default 6443; "
                                                           "0 = any free port)")
    u.add_argument("--host", default="127.0.0.1", help="address everything listens on (default 127.0.0.1)")
    u.add_argument("--no-default-taint-policy", action="store_true",
                   help=f"do not install the ClusterTaintPolicy turning Ready False/Unknown into {NOT_READY_TAINT}")
    u.add_argument("--detach", action="store_true", help="run in the background; stop with `flotilla down`")
    add_security_flags(u, secure="the control plane serves https with its own CA (D/controlplane/pki) and requires "
                                  "a token (D/kubeconfig: admin; D/viewer.kubeconfig: read-only), every member "
                                  "too (joined with its token, kept in the cluster's Secret), every agent holds a "
                                  "token scoped to its cluster",
                       insecure="for tests and tools that speak raw HTTP; anyone who can reach the ports may do "
                                "anything. A data directory keeps its mode: one created insecure (also by an "
                                "older Flotilla) resumes only with --insecure")
    u.add_argument("--feature-gates", default="", help="Name=true|false,... as the controller-manager's flag")
    u.add_argument("--metrics-bind-address", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="serve the controllers' Prometheus metrics on http://HOST:PORT/metrics (default "
                        "127.0.0.1:8080; a busy port is reported and skipped); every agent serves its own on a free "
                        "port, printed when it starts; 0 disables them all")
    u.add_argument("--restore-missing", choices=("hold", "fresh"), default="hold",
                   help="the controllers' --restore-missing: when a failed-over job's checkpoint cannot be used, hold "
                        "its new copy (default) or start it from empty state")
    u.add_argument("--restore-hold-timeout", type=duration, default=300.0, metavar="DURATION",
                   help="the controllers' --restore-hold-timeout (default 5m; 0: hold until the lookup succeeds)")
    u.add_argument("--savepoint-rule", action="store_true",
                   help="install the member-side savepoint rule (the simulated Kyverno policy that turns the "
                        "preserved job-id label into spec.job.initialSavepointPath) in every member; not needed: "
                        "the control plane restores natively")
    for name, value in LAPTOP_TIMINGS.items():
        u.add_argument("--" + name.replace("_", "-"), type=seconds, default=value, metavar="SECONDS",
                       help=f"(default {value:g})")
    add_fencing_flags(u.add_argument_group("with --guard"), ("fence-after", "permit-hold"))
    u.set_defaults(fn=run_up_command)
    keep_parser(u)

    d = sub.add_parser("down", help="stop a `flotilla up --detach` running on a data directory",
                       description="Stop the `flotilla up` running on --data-dir (SIGTERM, then SIGKILL after "
                                   f"{DOWN_TIMEOUT:g}s). The data stays; `flotilla up` resumes it. Exits 0 when "
                                   "it stopped it, 1 when nothing was running on that data directory (or it had "
                                   "to be killed).",
                       epilog="example:\n  flotilla down --data-dir .flotilla",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"the data directory (default {DEFAULT_DATA_DIR})")
    d.set_defaults(fn=run_down_command)


def _err(message: str) -> None:
    print(f"flotilla up: {message}", file=sys.stderr, flush=True)


def config_from_args(args: argparse.Namespace) -> StackConfig:
    from flotilla.local.stack import StackConfig

    if args.members < 1:
        raise ValueError("--members must be at least 1")
    if not 0 <= args.pull_members <= args.members:
        raise ValueError(f"--pull-members must be between 0 and --members ({args.members}), got {args.pull_members}")
    fence_after, permit_hold = _guard_settings(args)
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be between 0 and 65535, got {args.port}")
    if args.feature_gates:
        from flotilla.runtime.options import ControllerOptions

        ControllerOptions().set_gates(args.feature_gates)  # ValueError names the bad gate
    timings = {name: float(getattr(args, name)) for name in LAPTOP_TIMINGS}
    from flotilla.observability.metrics import parse_bind_address

    metrics = parse_bind_address(args.metrics_bind_address)  # ValueError says what is wrong
    return StackConfig(data_dir=Path(args.data_dir), members=args.members, host=args.host, port=args.port,
                       default_taint_policy=not args.no_default_taint_policy, timings=timings,
                       feature_gates=args.feature_gates, metrics_address=metrics, secure=secure(args),
                       pull_members=args.pull_members, guard=args.guard, fence_after=fence_after,
                       permit_hold=permit_hold, savepoint_rule=args.savepoint_rule,
                       restore_missing=args.restore_missing, restore_hold_timeout=args.restore_hold_timeout)


def _guard_settings(args: argparse.Namespace) -> tuple[float, float]:
    """(fence-after, permit-hold) of ``--guard``; ValueError for a conflict or what the agents would refuse."""
    from flotilla.agent.runtime import AgentConfig

    given = [flag for flag, value in (("--fence-after", args.fence_after), ("--permit-hold", args.permit_hold))
             if value is not None]
    if not args.guard:
        if given:
            raise ValueError(f"{' and '.join(given)} only apply with --guard")
        return GUARD_DEFAULT, GUARD_DEFAULT
    fence_after = GUARD_DEFAULT if args.fence_after is None else float(args.fence_after)
    permit_hold = GUARD_DEFAULT if args.permit_hold is None else float(args.permit_hold)
    errs = AgentConfig(cluster_name="member1", guard=True, fence_after=fence_after,
                       permit_hold=permit_hold).validate()  # what every Pull member's agent is started with
    if errs:
        raise ValueError("; ".join(errs))
    return fence_after, permit_hold


def _check_dependencies() -> str | None:
    """A missing runtime dependency, said in one line with how to fix it (None: all there)."""
    for module, package in (("aiohttp", "aiohttp"), ("orjson", "orjson"), ("yaml", "PyYAML"),
                            ("cryptography", "cryptography"), ("lupa", "lupa"), ("re2", "google-re2"),
                            ("sqlite3", "Python's sqlite3")):
        try:
            __import__(module)
        except ImportError as e:
            return (f"missing dependency {package} ({e}); install Flotilla with its dependencies: "
                    f"`make venv` or `pip install -e .`")
    return None


def run_up_command(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        return usage_error(args, str(e), "flotilla up")
    missing = _check_dependencies()
    if missing:
        _err(missing)
        return 1
    layout = Layout(cfg.data_dir)
    pid = layout.running_pid()
    if pid is not None:
        _err(f"Flotilla is already running on {cfg.data_dir} (pid {pid}); stop it with "
             f"`flotilla down --data-dir {cfg.data_dir}` or use another --data-dir")
        return 1
    try:
        record = layout.load_record()  # refuses another version's data directory before anything starts
    except DataDirError as e:
        _err(str(e))
        return 1
    conflict = resume_conflict(cfg.data_dir, record, secure=cfg.secure, guard=cfg.guard)
    if conflict is not None:  # said here, not in the log of a detached process that then exits
        _err(conflict)
        return 1
    if args.detach:
        return _detach(args, layout)
    return _foreground(cfg, layout)


def _foreground(cfg: StackConfig, layout: Layout) -> int:
    from flotilla.local.stack import LocalStack

    async def main(stop: asyncio.Event) -> int:
        stack = LocalStack(cfg, say=lambda m: print(f"flotilla up: {m}", flush=True))
        try:
            await stack.start()
        except DataDirError as e:
            _err(str(e))
            return 1
        except OSError as e:
            _err(f"cannot start: {e}")
            return 1
        url = stack.dashboard_url()
        if url is not None:
            # a one-time token: printed on the terminal (with --detach into D/up.log, the owner's only), before
            # the pid file says it is ready, so `up --detach` finds it there
            print(f"flotilla up: dashboard {url}  (opens it logged in, once; the token is spent then)", flush=True)
        layout.write_pid(os.getpid())
        try:
            print(f"flotilla up: ready. export KUBECONFIG={layout.kubeconfig.resolve()}  "
                  f"(contexts: flotilla, {', '.join(cfg.member_names())}"
                  f"{'; Pull: ' + ', '.join(cfg.pull_names()) if cfg.pull_names() else ''}"
                  f"{'; guard on' if cfg.guard else ''}); Ctrl-C stops",
                  flush=True)
            await stop.wait()
            print("flotilla up: stopping", flush=True)
        finally:
            layout.remove_pid(os.getpid())
            await stack.stop()
        print("flotilla up: stopped", flush=True)
        return 0

    return run_until_stopped(main)


def _child_argv(args: argparse.Namespace) -> list[str]:
    argv = [sys.executable, "-m", "flotilla.main", *(["-v"] if getattr(args, "verbose", False) else []), "up",
            "--data-dir", str(args.data_dir), "--members", str(args.members), "--port", str(args.port),
            "--pull-members", str(args.pull_members),
            "--host", args.host, "--metrics-bind-address", args.metrics_bind_address]
    if args.no_default_taint_policy:
        argv.append("--no-default-taint-policy")
    if not secure(args):
        argv.append("--insecure")
    if args.guard:
        argv.append("--guard")
    for flag, value in (("--fence-after", args.fence_after), ("--permit-hold", args.permit_hold)):
        if value is not None:
            argv += [flag, repr(float(value))]
    if args.feature_gates:
        argv += ["--feature-gates", args.feature_gates]
    argv += ["--restore-missing", args.restore_missing, "--restore-hold-timeout", repr(float(args.restore_hold_timeout))]
    if args.savepoint_rule:
        argv.append("--savepoint-rule")
    for name in LAPTOP_TIMINGS:
        argv += ["--" + name.replace("_", "-"), repr(float(getattr(args, name)))]
    return argv


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _dashboard_line(log_file: Path) -> str | None:
    """The dashboard line the background process wrote to its log (owner-only), for the terminal."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return None
    found = [line for line in lines if line.startswith("flotilla up: dashboard ")]
    return found[-1] if found else None


def _detach(args: argparse.Namespace, layout: Layout) -> int:
    private_dir(layout.root)
    fd = os.open(layout.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
    make_private(layout.log_file)  # an older version's
    with os.fdopen(fd, "ab") as log:
        proc = subprocess.Popen(_child_argv(args), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=os.getcwd())
    deadline = time.monotonic() + DETACH_TIMEOUT
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            _err(f"the background process exited with {code} before it was ready; {layout.log_file} ends with:\n"
                 f"{_tail(layout.log_file)}")
            return 1
        if layout.running_pid() == proc.pid:
            print(f"flotilla up: running in the background (pid {proc.pid}, log {layout.log_file})")
            print(f"flotilla up: export KUBECONFIG={layout.kubeconfig.resolve()}; stop with "
                  f"`flotilla down --data-dir {args.data_dir}`")
            dashboard = _dashboard_line(layout.log_file)
            if dashboard:
                print(dashboard)
            return 0
        time.sleep(0.2)
    proc.terminate()
    _err(f"not ready after {DETACH_TIMEOUT:g}s; stopped it. {layout.log_file} ends with:\n{_tail(layout.log_file)}")
    return 1


def run_down_command(args: argparse.Namespace) -> int:
    layout = Layout(Path(args.data_dir))
    pid = layout.running_pid()
    if pid is None:
        print(f"flotilla down: nothing is running on {args.data_dir} (no live `flotilla up` on that data "
              f"directory); pass the --data-dir that `flotilla up` was started with", file=sys.stderr)
        return 1
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + DOWN_TIMEOUT
    while time.monotonic() < deadline:
        if not _alive(pid):
            print(f"flotilla down: stopped (pid {pid}); the data stays in {args.data_dir}")
            return 0
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    layout.remove_pid(pid)
    print(f"flotilla down: pid {pid} did not stop within {DOWN_TIMEOUT:g}s and was killed", file=sys.stderr)
    return 1


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    from flotilla.local.layout import pid_alive

    return pid_alive(pid)
