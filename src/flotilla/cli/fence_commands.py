"""``flotilla fence`` and ``flotilla unfence``: mark a member cluster as known down (fencing, D2).

``fence NAME`` adds the taint ``cluster.flotilla.io/out-of-service:NoExecute`` to the Cluster (as
``node.kubernetes.io/out-of-service`` does for nodes): the control plane then treats the member's workloads as
gone. Works deleted there complete without contacting the member, and a NoExecute taint evicts what does not
tolerate it. Run it only when the cluster is really down (powered off, isolated from its storage and clients).
``unfence NAME`` removes the taint; once the cluster is Ready again, the execution controller first deletes what
Flotilla had left there that no Work wants any more, then resumes applying.

Both write a JSON merge patch guarded by the Cluster's ``resourceVersion`` (retried on conflict) and keep every
other taint; both are idempotent.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from flotilla.api.labels import TAINT_CLUSTER_OUT_OF_SERVICE, TAINT_EFFECT_NO_EXECUTE
from flotilla.cli.cluster_update import ClusterNotFound, ClusterUpdateConflict, update_cluster
from flotilla.cli.control_plane import add_control_plane_args, control_plane_client, run_client_command
from flotilla.cli.flags import add_command

if TYPE_CHECKING:
    pass

if TYPE_CHECKING:
    from flotilla.client import Client

__all__ = [
    "FenceCommandError",
    "add_fence_parsers",
    "fence_cluster",
    "run_fence_command",
    "run_unfence_command",
    "unfence_cluster",
]

Out = Callable[[str], None]
TAINT = f"{TAINT_CLUSTER_OUT_OF_SERVICE}:{TAINT_EFFECT_NO_EXECUTE}"  # failover.fencing's taint


class FenceCommandError(Exception):
    """The command cannot do what was asked; the message says why."""


_USAGE_ERRORS = (FenceCommandError, ClusterNotFound, ClusterUpdateConflict)


def add_fence_parsers(subparsers: Any) -> None:
    """Add ``fence`` and ``unfence`` to the ``flotilla`` command's sub-parsers."""
    f = add_command(
        subparsers, "fence", help=f"mark a member cluster as known down (taint {TAINT})",
        description=f"Add the taint {TAINT} to the Cluster: its workloads are treated as gone, Works deleted "
                    "there complete without contacting it, and workloads that do not tolerate the taint are "
                    "evicted. Only for a cluster that is really down (powered off or isolated).",
        notes="For a cluster known to be down: once member1 is fenced, the Directly move of its stateful "
              "workloads goes on without waiting for it.",
        examples=["flotilla fence member1 --kubeconfig ./cp/kubeconfig"])
    f.add_argument("name", help="the member cluster's name in the control plane")
    add_control_plane_args(f)
    f.set_defaults(fn=run_fence_command)

    u = add_command(
        subparsers, "unfence", help=f"remove the taint {TAINT} from a member cluster",
        description=f"Remove the taint {TAINT} from the Cluster. Once it is Ready, the objects Flotilla left "
                    "there that no Work wants any more are deleted before anything is applied to it.",
        examples=["flotilla unfence member1 --kubeconfig ./cp/kubeconfig"])
    u.add_argument("name", help="the member cluster's name in the control plane")
    add_control_plane_args(u)
    u.set_defaults(fn=run_unfence_command)


# ============================================================================================ operations


async def fence_cluster(cp: Client, name: str, *, now: datetime | None = None, out: Out = print,
                        warn: Out | None = None) -> bool:
    """Add the out-of-service taint to Cluster ``name``; False when it was already fenced."""
    from flotilla.failover.fencing import fence_patch

    warn = warn or (lambda m: print(m, file=sys.stderr))
    stamp = now or datetime.now(UTC)
    changed = await update_cluster(cp, name, lambda c: fence_patch(c, stamp))
    if not changed:
        out(f"cluster({name}) is already fenced (taint {TAINT})")
        return False
    out(f"cluster({name}) fenced: taint {TAINT} added")
    warn(f"warning: the workloads of cluster {name} are now treated as gone: Works deleted there complete "
         "without contacting it, and workloads that do not tolerate the taint are moved elsewhere. Make sure the "
         f"cluster is really down (powered off or isolated); `flotilla unfence {name}` undoes this")
    return True


async def unfence_cluster(cp: Client, name: str, *, out: Out = print) -> bool:
    """Remove the out-of-service taint from Cluster ``name``; False when it was not fenced."""
    from flotilla.failover.fencing import unfence_patch

    changed = await update_cluster(cp, name, unfence_patch)
    if not changed:
        out(f"cluster({name}) is not fenced")
        return False
    out(f"cluster({name}) unfenced: taint {TAINT} removed; once it is Ready, the objects no Work wants any more "
        "are deleted there before anything else is applied")
    return True


# ============================================================================================ commands


async def _fence_main(args: argparse.Namespace) -> int:
    async with control_plane_client(args, FenceCommandError) as cp:
        await fence_cluster(cp, args.name)
    return 0


async def _unfence_main(args: argparse.Namespace) -> int:
    async with control_plane_client(args, FenceCommandError) as cp:
        await unfence_cluster(cp, args.name)
    return 0


def run_fence_command(args: argparse.Namespace) -> int:
    return run_client_command(lambda: _fence_main(args), _USAGE_ERRORS)


def run_unfence_command(args: argparse.Namespace) -> int:
    return run_client_command(lambda: _unfence_main(args), _USAGE_ERRORS)
