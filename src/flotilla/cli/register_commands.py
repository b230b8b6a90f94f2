"""``flotilla register`` and ``flotilla unregister``: a Pull-mode member cluster and its agent.

``register NAME --kubeconfig MEMBER --karmada-kubeconfig ADMIN`` uses the control plane's admin credentials to
give the cluster's agent a token: a random token whose SHA-256 goes into the Secret ``NAME.agent-token`` (type
``flotilla.io/agent-token``, namespace ``karmada-cluster``), which the API server follows
(:mod:`flotilla.apiserver.agent_tokens`). The token itself is written only into the agent kubeconfig (``OUT``,
mode 0600, with the control plane's CA), never printed. Registering again makes a new token (the old one stops
working). It refuses a cluster joined in Push mode. Then it prints the ``flotilla agent`` command to run
(``--print-command``, the default) or starts it in the background (``--start``: pid and log files next to OUT).
The agent creates the Cluster (``syncMode: Pull``) itself.

``unregister NAME`` stops the agent ``--start`` launched (its pid file), deletes the Cluster and waits like
``unjoin`` does, deletes its Lease and revokes the token (deletes its Secret).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flotilla.cli.argtypes import duration
from flotilla.cli.cluster_commands import (
    ClusterCommandError,
    _strip_finalizers,
    _wait_gone,
    add_removal_command,
)
from flotilla.cli.control_plane import run_client_command
from flotilla.cli.flags import add_command
from flotilla.cluster.register import (
    AgentFiles,
    agent_argv,
    agent_files,
    agent_kubeconfig_context,
    agent_process_matches,
    agent_user_name,
    existing_cluster_problem,
    register_name_problems,
)

if TYPE_CHECKING:
    from flotilla.client import Client
    from flotilla.client.kubeconfig import (
        ClusterCredentials,
    )

__all__ = ["add_register_parsers", "register_cluster", "run_register_command", "run_unregister_command",
           "unregister_cluster"]

Out = Callable[[str], None]


def add_register_parsers(subparsers: Any) -> None:
    """Add ``register`` and ``unregister`` to the ``flotilla`` command's sub-parsers."""
    r = add_command(
        subparsers, "register", help="register a member cluster in Pull mode: credentials for its agent",
        description="Give a Pull-mode cluster's agent a token (kept by the control plane as a hash only) and a "
                    "kubeconfig for the control plane, then print the `flotilla agent` command or start it. The "
                    "agent creates the Cluster (syncMode Pull) and keeps its status and Lease.",
        examples=["flotilla register member3 --kubeconfig ./member3.kubeconfig "
                  "--karmada-kubeconfig ./cp/kubeconfig --start"])
    r.add_argument("name", help="the member cluster's name in the control plane")
    r.add_argument("--kubeconfig", required=True, help="kubeconfig of the member cluster (the agent's)")
    r.add_argument("--context", default=None, help="context in --kubeconfig (default: current)")
    _karmada_args(r)
    r.add_argument("--agent-kubeconfig", default=None,
                   help="where to write the agent's kubeconfig for the control plane (default NAME-agent.kubeconfig; "
                        "mode 0600; the agent's pid and log files go next to it)")
    how = r.add_mutually_exclusive_group()
    how.add_argument("--start", action="store_true", help="start `flotilla agent` in the background")
    how.add_argument("--print-command", action="store_true",
                     help="print the `flotilla agent` command to run (the default)")
    r.set_defaults(fn=run_register_command)

    u = add_removal_command(
        subparsers, "unregister", help="remove a Pull-mode member cluster and revoke its agent's token",
        description="Stop the agent `register --start` started, delete the Cluster (waiting for its cleanup), its "
                    "Lease and the agent's token.",
        example="flotilla unregister member3 --karmada-kubeconfig ./cp/kubeconfig --wait 60s", flags=_karmada_args)
    u.add_argument("--agent-kubeconfig", default=None,
                   help="the agent kubeconfig register wrote (default NAME-agent.kubeconfig): its pid file names "
                        "the agent to stop")
    u.set_defaults(fn=run_unregister_command)


def _karmada_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--karmada-kubeconfig", default=None,
                   help="the control plane's admin kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--karmada-context", default=None, help="context in --karmada-kubeconfig (default: current)")
    p.add_argument("--timeout", type=duration, default=10.0,
                   help="timeout of each request to the control plane (default 10s)")


def _control_plane_credentials(args: argparse.Namespace) -> ClusterCredentials:
    from flotilla.client.kubeconfig import KubeconfigError, load_kubeconfig

    try:
        return load_kubeconfig(args.karmada_kubeconfig, args.karmada_context)
    except KubeconfigError as e:
        raise ClusterCommandError(f"control plane: {e} (use --karmada-kubeconfig with the control plane's admin "
                                  "kubeconfig)") from None


def flotilla_executable() -> list[str]:
    """How to run this Flotilla: the ``flotilla`` script next to the interpreter, else ``python -m``."""
    script = Path(sys.executable).parent / "flotilla"
    if script.exists():
        return [str(script)]
    found = shutil.which("flotilla")
    return [found] if found else [sys.executable, "-m", "flotilla.main"]


# ============================================================================================ register


def _running_agent(files: AgentFiles, name: str) -> int | None:
    """The pid of the agent of ``name`` the pid file names, if that process still runs."""
    try:
        pid = int(files.pid.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if agent_process_matches([a.decode(errors="replace") for a in cmdline], name) else None


async def register_cluster(cp: Client, cp_creds: ClusterCredentials, name: str, files: AgentFiles,
                           out: Out = print) -> None:
    """Make the agent's token: its Secret in the control plane, then the agent kubeconfig (0600)."""
    from flotilla.apiserver.agent_tokens import (
        AGENT_TOKEN_NAMESPACE,
        AGENT_TOKEN_SECRET_TYPE,
        agent_token_secret,
    )
    from flotilla.client import ApiException, is_already_exists
    from flotilla.client.kubeconfig import write_kubeconfig
    from flotilla.cluster.join import namespace_object
    from flotilla.kube.resources import NAMESPACES, SECRETS
    from flotilla.runtime.members import CLUSTERS

    cluster = await cp.get_or_none(CLUSTERS, name)
    problem = existing_cluster_problem(cluster, name)
    if problem:
        raise ClusterCommandError(problem)
    with contextlib.suppress(ApiException):
        await cp.create(NAMESPACES, namespace_object(AGENT_TOKEN_NAMESPACE))
    token = secrets.token_urlsafe(32)
    secret = agent_token_secret(name, token)
    try:
        await cp.create(SECRETS, secret, AGENT_TOKEN_NAMESPACE)
    except ApiException as e:
        if not is_already_exists(e):
            raise
        existing = await cp.get(SECRETS, secret["metadata"]["name"], AGENT_TOKEN_NAMESPACE)
        if existing.get("type") != AGENT_TOKEN_SECRET_TYPE:
            raise ClusterCommandError(
                f"Secret {AGENT_TOKEN_NAMESPACE}/{secret['metadata']['name']} exists and is not an agent token "
                f"(type {existing.get('type')!r}): delete or rename it, then register again") from None
        secret["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        await cp.update(SECRETS, secret)
        out(f"cluster({name}) was registered before: its agent has a new token (the previous one no longer works)")
    try:
        files.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        write_kubeconfig(files.kubeconfig, server=cp_creds.server, context=agent_kubeconfig_context(name),
                         cluster="karmada-apiserver", user=agent_user_name(name), token=token,
                         ca_pem=cp_creds.ca_pem, insecure_skip_tls_verify=cp_creds.insecure,
                         tls_server_name=cp_creds.tls_server_name, fallback_servers=cp_creds.fallback_servers,
                         namespace=None)
    except OSError as e:
        with contextlib.suppress(ApiException):
            await cp.delete(SECRETS, secret["metadata"]["name"], AGENT_TOKEN_NAMESPACE)
        raise ClusterCommandError(f"cannot write the agent kubeconfig {files.kubeconfig}: {e} "
                                  "(choose another --agent-kubeconfig)") from None


def start_agent(argv: list[str], files: AgentFiles, *, settle: float = 1.5) -> int:
    """Start the agent detached from this process (own session, output to the log file), write its pid file;
    the pid. Raises ClusterCommandError if it exits at once."""
    files.log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    except OSError as e:
        raise ClusterCommandError(f"cannot start the agent ({shlex.join(argv[:2])}): {e}") from None
    finally:
        os.close(fd)
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = files.log.read_text(errors="replace")[-2000:].strip()
            raise ClusterCommandError(f"the agent exited at once (code {proc.returncode}); its log "
                                      f"{files.log} ends with:\n{tail}")
        time.sleep(0.1)
    pid_fd = os.open(files.pid, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(pid_fd, "w") as f:
        f.write(f"{proc.pid}\n")
    return proc.pid


async def _register_main(args: argparse.Namespace) -> int:
    from flotilla.client import Client
    from flotilla.client.kubeconfig import KubeconfigError, load_kubeconfig

    problems = register_name_problems(args.name)
    if problems:
        raise ClusterCommandError("; ".join(problems))
    try:
        load_kubeconfig(args.kubeconfig, args.context)
    except KubeconfigError as e:
        raise ClusterCommandError(f"member cluster: {e} (--kubeconfig is the member cluster's kubeconfig, which "
                                  "the agent uses)") from None
    files = agent_files(args.name, args.agent_kubeconfig)
    if args.start and (pid := _running_agent(files, args.name)) is not None:
        raise ClusterCommandError(f"the agent of cluster {args.name} is already running (pid {pid}, {files.pid}): "
                                  f"`flotilla unregister {args.name}` stops it")
    cp_creds = _control_plane_credentials(args)
    async with Client.from_credentials(cp_creds, request_timeout=args.timeout) as cp:
        await register_cluster(cp, cp_creds, args.name, files)
    if not cp_creds.is_https:
        print(f"warning: the control plane at {cp_creds.server} does not check credentials (plain http); run it "
              "without --insecure so that the agent's token limits what the agent may do", file=sys.stderr)
    argv = agent_argv(flotilla_executable(), args.name, files, args.kubeconfig, args.context)
    print(f"cluster({args.name}) is registered: the agent's kubeconfig is {files.kubeconfig} (mode 0600, it holds "
          "the agent's token)")
    if args.start:
        pid = start_agent(argv, files)
        print(f"agent started (pid {pid}); log {files.log}, pid file {files.pid}")
    else:
        print("start the agent where it reaches the member cluster and the control plane:")
        print("  " + shlex.join(["flotilla", *argv[len(flotilla_executable()):]]))
    return 0


# ============================================================================================ unregister


def stop_agent(files: AgentFiles, name: str, *, within: float = 10.0) -> int | None:
    """Stop the agent the pid file names (SIGTERM, then SIGKILL after ``within`` s) and remove the pid file; the
    pid it stopped, or None when none was running."""
    pid = _running_agent(files, name)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline and _running_agent(files, name) is not None:
            time.sleep(0.1)
        if _running_agent(files, name) is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        files.pid.unlink()
    return pid


async def unregister_cluster(cp: Client, name: str, files: AgentFiles, *, wait: float = 60.0,
                             force: bool = False, poll: float = 0.25, out: Out = print) -> None:
    from flotilla.apiserver.agent_scope import LEASE_NAMESPACE
    from flotilla.apiserver.agent_tokens import (
        AGENT_TOKEN_NAMESPACE,
        AGENT_TOKEN_SECRET_TYPE,
        agent_token_secret_name,
    )
    from flotilla.client import ApiException, is_not_found
    from flotilla.kube.resources import LEASES, SECRETS
    from flotilla.runtime.members import CLUSTERS

    cluster = await cp.get_or_none(CLUSTERS, name)
    problem = existing_cluster_problem(cluster, name, unregistering=True)
    if problem:
        raise ClusterCommandError(problem)
    secret_name = agent_token_secret_name(name)
    secret = await cp.get_or_none(SECRETS, secret_name, AGENT_TOKEN_NAMESPACE)
    if secret is not None and secret.get("type") != AGENT_TOKEN_SECRET_TYPE:
        secret = None  # not ours: leave it alone
    stopped = stop_agent(files, name)
    if stopped is not None:
        out(f"stopped the agent of cluster {name} (pid {stopped})")
    if cluster is None and secret is None and stopped is None:
        raise ClusterCommandError(f"cluster {name} not found: nothing is registered under that name "
                                  "(`kubectl get clusters` lists the clusters)")
    if cluster is not None:
        with contextlib.suppress(ApiException):
            await cp.delete(CLUSTERS, name)
        if wait > 0 and (remaining := await _wait_gone(cp, name, wait, poll)) is not None:
            finalizers = ", ".join((remaining.get("metadata") or {}).get("finalizers") or [])
            if not force:
                raise ClusterCommandError(
                    f"cluster {name} is still being deleted after {wait:g}s (finalizers: {finalizers}); "
                    f"`kubectl describe cluster {name}` shows what it waits for; --force removes the finalizers. "
                    "Its agent's token is kept until the Cluster is gone: run unregister again")
            out(f"cluster {name} is still being deleted after {wait:g}s; removing its finalizers ({finalizers}) "
                "as --force asks")
            await _strip_finalizers(cp, name)
    try:
        await cp.delete(LEASES, name, LEASE_NAMESPACE)
    except ApiException as e:
        if not is_not_found(e):
            raise
    if secret is not None:
        try:
            await cp.delete(SECRETS, secret_name, AGENT_TOKEN_NAMESPACE)
        except ApiException as e:
            if not is_not_found(e):
                raise
    out(f"cluster({name}) is unregistered successfully (its agent's token is revoked)")


async def _unregister_main(args: argparse.Namespace) -> int:
    from flotilla.client import Client

    cp_creds = _control_plane_credentials(args)
    files = agent_files(args.name, args.agent_kubeconfig)
    async with Client.from_credentials(cp_creds, request_timeout=args.timeout) as cp:
        await unregister_cluster(cp, args.name, files, wait=args.wait, force=args.force)
    return 0


def run_register_command(args: argparse.Namespace) -> int:
    return run_client_command(lambda: _register_main(args), (ClusterCommandError,), "--karmada-kubeconfig")


def run_unregister_command(args: argparse.Namespace) -> int:
    return run_client_command(lambda: _unregister_main(args), (ClusterCommandError,), "--karmada-kubeconfig")
