"""Groups of flags that several commands and tools declare alike."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from flotilla.cli.argtypes import seconds

__all__ = [
    "FENCING_TIMINGS", "add_command", "add_fencing_flags", "add_security_flags", "keep_parser", "run_alone", "secure",
    "usage_error",
]

#: the automatic fencing timings (docs/fencing.md) a tool passes on to the agents, member guards and
#: controller-manager it starts, in seconds: flag -> (the product's default, what it sets)
FENCING_TIMINGS: Final[Mapping[str, tuple[float, str]]] = {
    "fence-after": (15.0, "the agents' and guards' --fence-after: guarded workloads stop once the run permit has "
                          "not changed for this long"),
    "permit-hold": (15.0, "the agents' --permit-hold: the permit is renewed only while their last successful Lease "
                          "renewal started less than this ago, which must be longer than their Lease renew "
                          "interval"),
    "fence-margin": (15.0, "the controller-manager's --fence-margin"),
    "cluster-monitor-period": (5.0, "the controller-manager's --cluster-monitor-period: how often the fence is "
                                    "decided"),
    "lease-duration": (40.0, "the agents' --cluster-lease-duration; the Lease is renewed every quarter of it"),
}


def add_fencing_flags(parser: Any, names: tuple[str, ...], defaults: Mapping[str, float] | None = None) -> None:
    """``--NAME SECONDS`` for each of ``names`` (keys of :data:`FENCING_TIMINGS`). A flag not given is None unless
    ``defaults`` names the tool's own default for it."""
    for name in names:
        product, what = FENCING_TIMINGS[name]
        default = (defaults or {}).get(name)
        parser.add_argument(f"--{name}", type=seconds, default=default, metavar="SECONDS",
                            help=f"{what} (default {product if default is None else default:g})")


def add_security_flags(parser: argparse.ArgumentParser, *, secure: str, insecure: str) -> None:
    """``--secure`` (the default, accepted so that older command lines keep working) and ``--insecure``, which
    exclude each other (argparse's usage error, exit 2). ``secure`` says what the default mode serves, ``insecure``
    what plain mode gives up; :func:`secure` reads the result."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--secure", action="store_true",
                       help=f"the default: {secure}; accepted for command lines written when it had to be asked for")
    group.add_argument("--insecure", action="store_true",
                       help=f"plain http and no authentication: {insecure}")


def secure(args: argparse.Namespace) -> bool:
    """False when the command was given ``--insecure`` (:func:`add_security_flags`), True otherwise."""
    return not getattr(args, "insecure", False)


def add_command(sub: Any, name: str, *, help: str, description: str, examples: Sequence[str],
                notes: str = "") -> argparse.ArgumentParser:
    """The sub-command ``name`` of ``sub``, whose ``--help`` ends with ``notes`` (printed as written) and then
    ``examples``, one command line each."""
    heading = "examples:" if len(examples) > 1 else "example:"
    epilog = "".join([notes + "\n\n" if notes else "", heading, *(f"\n  {line}" for line in examples)])
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description, epilog=epilog,
                                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def keep_parser(parser: argparse.ArgumentParser) -> None:
    """Keep ``parser`` in the arguments it parses, for :func:`usage_error`."""
    parser.set_defaults(_parser=parser)


def usage_error(args: argparse.Namespace, message: str, prog: str) -> int:
    """A combination of flags the command refuses, reported as argparse reports a bad flag: through the command's
    parser (usage and message on stderr, exit 2) when ``args`` came from one (:func:`keep_parser`), else as
    ``PROG: error: MESSAGE`` on stderr; 2 either way."""
    parser: argparse.ArgumentParser | None = getattr(args, "_parser", None)
    if parser is not None:
        parser.error(message)
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def run_alone(command: str, add_parser: Callable[[Any], Any], argv: Sequence[str] | None = None) -> int:
    """``flotilla COMMAND ARGV`` from the command's own module (``python -m flotilla.cli.MODULE ARGV``), with only
    that command's parser built."""
    parser = argparse.ArgumentParser(prog="flotilla")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([command, *(sys.argv[1:] if argv is None else argv)])
    return int(args.fn(args))
