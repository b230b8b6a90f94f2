"""What the commands that talk to the control plane share: its flags, its client, and how they end (what went
wrong as one ``error:`` line, and an exit code)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flotilla.client import Client
    from flotilla.kube.resources import Resource


__all__ = ["add_control_plane_args", "control_plane_client", "create_unless_exists", "run_client_command"]


def add_control_plane_args(p: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--karmada-context`` (alias ``--context``) of the control plane."""
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig of the control plane (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--karmada-context", "--context", dest="karmada_context", default=None,
                   help="context in --kubeconfig (default: current)")


def control_plane_client(args: argparse.Namespace, error: type[Exception], timeout: float = 10.0) -> Client:
    """The client of the control plane that :func:`add_control_plane_args` names; ``error`` (a usage error) when
    its kubeconfig cannot be used."""
    from flotilla.client import Client
    from flotilla.client.kubeconfig import KubeconfigError

    try:
        return Client.from_kubeconfig(args.kubeconfig, args.karmada_context, request_timeout=timeout)
    except KubeconfigError as e:
        raise error(f"control plane: {e} (use --kubeconfig)") from None


async def create_unless_exists(client: Client, res: Resource, obj: dict[str, Any],
                               namespace: str | None = None) -> dict[str, Any] | None:
    """Create ``obj``; None when an object of that name is there already (left as it is)."""
    from flotilla.client import ApiException, is_already_exists

    try:
        return await client.create(res, obj, namespace)
    except ApiException as e:
        if not is_already_exists(e):
            raise
        return None


def run_client_command(main: Callable[[], Coroutine[Any, Any, int | None]],
                       usage_errors: tuple[type[Exception], ...], kubeconfig_flag: str = "--kubeconfig") -> int:
    """Run ``main()`` and return its exit code (None: 0), as kubectl ends: an error of ``usage_errors`` (its message
    says what to change; ``Error from server ...`` printed as it is, others after ``error: ``), the control plane's
    answer, or no answer at all (then what to pass: ``kubeconfig_flag``) is printed as one line on stderr and exits 1;
    Ctrl-C exits 130. A closed stdout (``| head``) is left to ``flotilla``'s main, which ends quietly."""
    import asyncio

    from flotilla.client import ApiException

    try:
        return int(asyncio.run(main()) or 0)
    except usage_errors as e:
        text = str(e)
        print(text if text.startswith("Error from server") else f"error: {text}", file=sys.stderr)
    except ApiException as e:
        if e.status == 0:  # no response: the connection failed or timed out
            _err(f"cannot reach the control plane: {e.message} ({unreachable_hint(kubeconfig_flag)})")
        else:
            _err(f"the control plane answered: {e}")
    except BrokenPipeError:
        raise
    except OSError as e:
        _err(f"cannot reach the control plane: {e} ({unreachable_hint(kubeconfig_flag)})")
    except KeyboardInterrupt:
        return 130
    return 1


def unreachable_hint(kubeconfig_flag: str = "--kubeconfig") -> str:
    """What to check when the control plane does not answer."""
    return f"is it running? pass {kubeconfig_flag} of a running control plane, or --context"


def _err(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
