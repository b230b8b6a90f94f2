"""``flotilla version``: the client's version and, when the control plane answers, the server's ``/version``, as
``kubectl version`` prints them (``-o json``: ``clientVersion`` and ``serverVersion``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from flotilla import __version__
from flotilla.cli.control_plane import add_control_plane_args
from flotilla.cli.flags import add_command

__all__ = ["add_version_parser", "client_version", "render_version", "run_version_command"]


def client_version() -> dict[str, str]:
    return {"gitVersion": f"v{__version__}", "platform": sys.platform,
            "pythonVersion": ".".join(map(str, sys.version_info[:3]))}


def render_version(client: dict[str, Any], server: dict[str, Any] | None, output: str) -> str:
    """What ``flotilla version`` prints: ``Client Version: ...`` and ``Server Version: ...`` lines, or JSON."""
    if output == "json":
        doc: dict[str, Any] = {"clientVersion": client}
        if server is not None:
            doc["serverVersion"] = server
        return json.dumps(doc, indent=2)
    lines = [f"Client Version: {client.get('gitVersion', '')}"]
    if server is not None:
        lines.append(f"Server Version: {server.get('gitVersion', '')}")
    return "\n".join(lines)


async def _server_version(args: argparse.Namespace) -> dict[str, Any]:
    from flotilla.cli.control_plane import control_plane_client

    client = control_plane_client(args, ValueError, timeout=args.request_timeout)
    try:
        return await client.transport.discovery("/version")
    finally:
        await client.close()


def run_version_command(args: argparse.Namespace) -> int:
    """Print the versions; 0, or 1 when the server was asked for (no ``--client``) and did not answer."""
    client = client_version()
    if args.client:
        print(render_version(client, None, args.output))
        return 0
    import asyncio

    try:
        server = asyncio.run(_server_version(args))
    except Exception as e:  # a kubeconfig that cannot be read, a refused connection, an error answer
        print(render_version(client, None, args.output))
        print(f"error: cannot reach the control plane for its version: {e}; pass --kubeconfig "
              "(and --context) of a running control plane, or --client for the client's version only",
              file=sys.stderr)
        return 1
    print(render_version(client, server, args.output))
    return 0


def add_version_parser(sub: Any) -> None:
    p = add_command(sub, "version", help="print the client's and the control plane's versions",
                    description="Print the client's version and the version the control plane's /version reports "
                                "(as kubectl version).",
                    examples=["flotilla version --client", "flotilla version -o json --kubeconfig .flotilla/kubeconfig"])
    p.add_argument("--client", action="store_true", help="only the client's version; no server is asked")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    p.add_argument("--request-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="how long to wait for the server (default 5)")
    add_control_plane_args(p)
    p.set_defaults(fn=run_version_command)
