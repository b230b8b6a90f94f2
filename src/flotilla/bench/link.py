"""``flotilla bench link``: a cuttable link to the control plane in a process of its own, for ``flotilla bench
failover --fault partition``.

It runs one :class:`~flotilla.local.links.Link` (the TCP forwarder ``flotilla up`` puts between the control plane
and each member) from a free loopback port to ``--target``. The Pull member's agent reaches the control plane
through it; ``SIGUSR1`` cuts it (every open connection dropped, every new one reset: a partition of that path, both
ends running) and ``SIGUSR2`` heals it. Being its own process, the forwarding never waits behind the benchmark
driver's work, and its CPU is its own.

Once serving it prints one line on stdout::

    flotilla bench link: serving HOST:PORT -> HOST:PORT pid PID

and ``flotilla bench link: cut`` / ``flotilla bench link: healed`` on each signal.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
from typing import TYPE_CHECKING, Any, Final

from flotilla.signals import run_until_stopped

if TYPE_CHECKING:
    import asyncio

__all__ = ["CUT_SIGNAL", "HEAL_SIGNAL", "READY_LINE", "add_link_parser", "parse_target", "run_link_command"]

READY_LINE: Final = "flotilla bench link: serving"
CUT_SIGNAL: Final = signal.SIGUSR1
HEAL_SIGNAL: Final = signal.SIGUSR2


def parse_target(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); ValueError saying what is wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--target wants HOST:PORT with a port from 1 to 65535, got {text!r}")
    return host, int(port)


def _target(text: str) -> tuple[str, int]:
    try:
        return parse_target(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_link_parser(sub: Any) -> None:
    p = sub.add_parser("link", help="(internal) a cuttable TCP link to the control plane, for "
                                    "`flotilla bench failover --fault partition`",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example (what `flotilla bench failover --fault partition` starts):\n"
                              "  flotilla bench link --name member1 --target 127.0.0.1:6443\n"
                              "  kill -USR1 PID   # cut;  kill -USR2 PID   # heal")
    p.add_argument("--name", default="link", help="what the link is called in its log lines (default link)")
    p.add_argument("--target", required=True, type=_target, metavar="HOST:PORT", help="where connections go")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")


async def serve_link(name: str, target: tuple[str, int], host: str, stop: asyncio.Event) -> int:
    import asyncio

    from flotilla.local.links import Link

    link = await Link(name, target, host=host).start()
    loop = asyncio.get_running_loop()

    def cut() -> None:
        link.cut()
        print("flotilla bench link: cut", flush=True)

    def heal() -> None:
        link.heal()
        print("flotilla bench link: healed", flush=True)

    loop.add_signal_handler(CUT_SIGNAL, cut)
    loop.add_signal_handler(HEAL_SIGNAL, heal)
    try:
        print(f"{READY_LINE} {link.url_host} -> {target[0]}:{target[1]} pid {os.getpid()}", flush=True)
        await stop.wait()
        return 0
    finally:
        for sig in (CUT_SIGNAL, HEAL_SIGNAL):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        await link.stop()


def run_link_command(args: argparse.Namespace) -> int:
    try:
        return run_until_stopped(lambda stop: serve_link(args.name, args.target, args.host, stop))
    except OSError as e:
        print(f"flotilla bench link: cannot listen on {args.host}: {e}", flush=True)
        return 1
