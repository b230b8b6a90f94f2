"""``flotilla guard``: run a command and kill it when the member's run permit goes stale (docs/fencing.md).

For real member clusters, beside a guarded workload (a sidecar or a wrapper of the workload's own process): it
reads the Lease ``flotilla-system/flotilla-run-permit`` of the member every ``--poll-interval`` and judges it with
:class:`~flotilla.failover.run_permit.PermitWatch` on its own monotonic clock. When the permit has not changed for
``--fence-after`` (the agent stopped renewing it: it lost the control plane, or it died), the child gets SIGTERM,
then SIGKILL after ``--kill-grace``, and the guard exits 3 saying why. An unreadable permit (the member's API
unreachable) changes nothing: its age keeps growing, so the child is stopped even if nothing can be read.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from flotilla.cli.argtypes import positive_duration
from flotilla.cli.flags import add_command
from flotilla.signals import run_until_stopped, wait_or_kill

if TYPE_CHECKING:
    import asyncio


#: exit code when the guard stopped the command because the permit went stale
EXIT_FENCED = 3


def add_guard_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    from flotilla.api.agents import PERMIT_NAMESPACE

    p = add_command(
        subparsers, "guard", help="run a command, killing it when the member's run permit goes stale",
        description="Run COMMAND as a child and stop it (SIGTERM, then SIGKILL) once the run permit that "
                    "'flotilla agent --guard' keeps in this member (Lease flotilla-system/flotilla-run-permit) has "
                    "not changed for --fence-after, measured on this process's monotonic clock from when it saw "
                    "the last change. Exits 3 when it stopped COMMAND for that reason, else with COMMAND's code.",
        examples=["flotilla guard --kubeconfig member.kubeconfig --fence-after 15s -- \\\n"
                  "      /opt/flink/bin/jobmanager.sh start-foreground"])
    p.add_argument("--kubeconfig", default=None, help="kubeconfig of the member (default: $KUBECONFIG)")
    p.add_argument("--context", default=None, help="context of --kubeconfig (default: current)")
    p.add_argument("--fence-after", type=positive_duration, required=True, metavar="DURATION",
                   help="stop COMMAND when the permit has not changed for this long (the agent's --fence-after)")
    p.add_argument("--namespace", default=PERMIT_NAMESPACE,
                   help=f"namespace of the permit Lease (default {PERMIT_NAMESPACE})")
    p.add_argument("--poll-interval", type=positive_duration, default=1.0, metavar="DURATION",
                   help="how often the permit is read (default 1s)")
    p.add_argument("--kill-grace", type=positive_duration, default=10.0, metavar="DURATION",
                   help="seconds between SIGTERM and SIGKILL (default 10s)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...", help="the command to run")
    p.set_defaults(fn=run_guard_command)
    return p


def _say(message: str) -> None:
    print(f"flotilla guard: {message}", file=sys.stderr, flush=True)


async def _read(client: Any, namespace: str) -> tuple[bool, dict[str, Any] | None]:
    """(read, permit): ``read`` False when the API could not answer (nothing is observed then)."""
    from flotilla.client import ApiException
    from flotilla.failover.run_permit import PERMIT_NAME
    from flotilla.kube.resources import LEASES

    try:
        return True, await client.get_or_none(LEASES, PERMIT_NAME, namespace)
    except (ApiException, OSError, TimeoutError):
        return False, None


async def _stop_child(proc: asyncio.subprocess.Process, grace: float) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    await wait_or_kill(proc, grace)


async def run(args: argparse.Namespace, stop: asyncio.Event) -> int:
    import asyncio

    from flotilla.client import Client
    from flotilla.failover.run_permit import PERMIT_NAME, PermitWatch

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        _say("no COMMAND given (flotilla guard ... -- COMMAND [ARGS...])")
        return 2
    try:
        client = Client.from_kubeconfig(args.kubeconfig, args.context, request_timeout=min(10.0, args.fence_after),
                                        read_retries=0)
    except (OSError, ValueError, KeyError) as e:
        _say(f"cannot load --kubeconfig {args.kubeconfig or os.environ.get('KUBECONFIG') or '~/.kube/config'}: {e}")
        return 2
    watch = PermitWatch(args.fence_after)
    proc: asyncio.subprocess.Process | None = None
    try:
        while not stop.is_set():
            read, permit = await _read(client, args.namespace)
            now = time.monotonic()
            if read:
                watch.observe(permit, now)
            if watch.stopped(now):
                if proc is not None:
                    reason = watch.reason(now)
                    _say(f"{reason}: stopping {command[0]} (pid {proc.pid})")
                    await _stop_child(proc, args.kill_grace)
                    _say(f"stopped {command[0]}: the run permit {args.namespace}/{PERMIT_NAME} went stale")
                    return EXIT_FENCED
            elif proc is None:
                try:
                    proc = await asyncio.create_subprocess_exec(*command)
                except OSError as e:
                    _say(f"cannot run {command[0]}: {e}")
                    return 2
            if proc is not None and proc.returncode is not None:
                return proc.returncode
            waiter = asyncio.ensure_future(proc.wait()) if proc is not None else None
            stopper = asyncio.ensure_future(stop.wait())
            pending = {stopper} | ({waiter} if waiter is not None else set())
            _, rest = await asyncio.wait(pending, timeout=args.poll_interval, return_when=asyncio.FIRST_COMPLETED)
            for t in rest:
                t.cancel()
            if proc is not None and proc.returncode is not None:
                return proc.returncode
        if proc is not None:
            await _stop_child(proc, args.kill_grace)
        return 0
    finally:
        if proc is not None and proc.returncode is None:
            await _stop_child(proc, args.kill_grace)
        await client.close()


def run_guard_command(args: argparse.Namespace) -> int:
    return run_until_stopped(lambda stop: run(args, stop), interrupted=130)
