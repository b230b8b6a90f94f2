"""``flotilla taint clusters``, ``flotilla cordon`` and ``flotilla uncordon``, as karmadactl's.

``taint clusters NAME... key[=value]:Effect ... [--overwrite] [--dry-run]`` updates ``spec.taints`` of each named
Cluster (:mod:`flotilla.cli.taint_spec` decides); ``cordon NAME`` adds ``cluster.karmada.io/unschedulable:
NoSchedule`` (new placements keep away; nothing is evicted), ``uncordon NAME`` removes it. Writes are JSON merge
patches guarded by the Cluster's ``resourceVersion`` (decided again on a conflict). Messages and outputs are
karmadactl's: ``cluster/NAME tainted|untainted|modified``, ``NAME cluster cordoned|already cordoned``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flotilla.cli.cluster_update import ClusterNotFound, ClusterUpdateConflict, update_cluster
from flotilla.cli.control_plane import add_control_plane_args, control_plane_client, run_client_command
from flotilla.cli.flags import add_command
from flotilla.cli.taint_spec import (
    UNSCHEDULABLE_TAINT_KEY,
    TaintSpecError,
    TaintUpdate,
    apply_update,
    parse_taint_args,
    split_resources_and_taints,
)

if TYPE_CHECKING:
    from flotilla.client import Client

__all__ = ["add_taint_parsers", "cordon_cluster", "taint_clusters"]

Out = Callable[[str], None]

TAINT_EPILOG = """\
A taint is key[=value]:Effect. The key is a qualified name (optionally prefixed, like example.com/my-app); the value
is optional and must be a valid label value; the effect is NoSchedule, PreferNoSchedule or NoExecute (a Cluster
accepts NoSchedule and NoExecute). NoSchedule keeps new placements away; NoExecute evicts the workloads that do not
tolerate it (the taint manager).

examples:
  # taint member1 so that workloads not tolerating dedicated=special-user:NoSchedule are not placed there
  flotilla taint clusters member1 dedicated=special-user:NoSchedule
  # replace the value of an existing taint
  flotilla taint clusters member1 dedicated=other:NoSchedule --overwrite
  # remove the taint with key dedicated and effect NoSchedule; remove every taint with key dedicated
  flotilla taint clusters member1 dedicated:NoSchedule-
  flotilla taint clusters member1 dedicated-
  # evict the workloads that do not tolerate it (the taint manager moves them to other clusters)
  flotilla taint clusters member1 fail-test:NoExecute
"""


class TaintCommandError(Exception):
    """The command cannot do what was asked; the message says why."""


_USAGE_ERRORS = (TaintCommandError, TaintSpecError, ClusterNotFound, ClusterUpdateConflict)


def add_taint_parsers(sub: Any) -> None:
    t = sub.add_parser("taint", help="update the taints on one or more clusters (as karmadactl taint)",
                       description="Update the taints on one or more clusters: "
                                   "taint clusters NAME... KEY_1=VAL_1:EFFECT_1 ... KEY_N=VAL_N:EFFECT_N",
                       epilog=TAINT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("args", nargs="+", metavar="clusters NAME... TAINT...",
                   help="the resource type (cluster or clusters), one or more names, then the taint changes")
    t.add_argument("--overwrite", action="store_true",
                   help="allow taints to be overwritten, otherwise reject updates that overwrite existing taints")
    t.add_argument("--dry-run", action="store_true",
                   help="only print what would change, without writing it")
    add_control_plane_args(t)
    t.set_defaults(fn=run_taint_command)

    for verb, doing in (("cordon", "mark a cluster unschedulable (taint "
                                   f"{UNSCHEDULABLE_TAINT_KEY}:NoSchedule); nothing is evicted"),
                        ("uncordon", f"mark a cluster schedulable again (remove {UNSCHEDULABLE_TAINT_KEY}:"
                                     "NoSchedule)")):
        c = add_command(sub, verb, help=doing, description=doing[0].upper() + doing[1:] + ".",
                        examples=[f"flotilla {verb} member1"])
        c.add_argument("name", help="the cluster's name")
        c.add_argument("--dry-run", action="store_true", help="only print what would change")
        add_control_plane_args(c)
        c.set_defaults(fn=run_cordon_command, _cordon=verb == "cordon")


# ============================================================================================ operations


def _taints_patch(taints: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    return None if taints is None else {"spec": {"taints": taints}}


async def taint_clusters(cp: Client, names: list[str], update: TaintUpdate, *, overwrite: bool, dry_run: bool,
                         out: Out = print) -> None:
    for name in names:
        operation = ""

        def decide(cluster: dict[str, Any], name: str = name) -> list[dict[str, Any]]:
            nonlocal operation
            operation, taints = apply_update(name, (cluster.get("spec") or {}).get("taints"), update,
                                             overwrite=overwrite)
            return taints

        await update_cluster(cp, name, lambda c: _taints_patch(decide(c)), dry_run=dry_run)
        out(f"cluster/{name} {operation}" + (" (dry run)" if dry_run else ""))


async def cordon_cluster(cp: Client, name: str, *, cordon: bool, dry_run: bool, out: Out = print) -> bool:
    verb = "cordon" if cordon else "uncordon"

    def decide(cluster: dict[str, Any]) -> list[dict[str, Any]] | None:
        taints = [t for t in (cluster.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]
        has = any(t.get("key") == UNSCHEDULABLE_TAINT_KEY and t.get("effect") == "NoSchedule" for t in taints)
        if has == cordon:
            return None
        if cordon:
            return [*taints, {"key": UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}]
        return [t for t in taints if not (t.get("key") == UNSCHEDULABLE_TAINT_KEY and t.get("effect") == "NoSchedule")]

    changed = await update_cluster(cp, name, lambda c: _taints_patch(decide(c)), dry_run=dry_run)
    if not changed:
        out(f"{name} cluster already {verb}ed")
        return False
    out(f"{name} cluster {verb}ed" + (" (dry run)" if dry_run else ""))
    return True


# ============================================================================================ commands


def run_taint_command(args: argparse.Namespace) -> int:
    async def main() -> int:
        resources, specs = split_resources_and_taints(args.args)
        if not resources:
            raise TaintCommandError("one or more resources must be specified as <resource> <name>")
        update = parse_taint_args(specs)
        kind = resources[0].lower()
        if kind not in ("cluster", "clusters"):
            raise TaintCommandError(f'invalid resource type {kind}, only ["cluster" "clusters"] are supported')
        if len(resources) < 2:
            raise TaintCommandError("at least one resource name must be specified")
        async with control_plane_client(args, TaintCommandError) as cp:
            await taint_clusters(cp, resources[1:], update, overwrite=args.overwrite, dry_run=args.dry_run)
        return 0

    return run_client_command(main, _USAGE_ERRORS)


def run_cordon_command(args: argparse.Namespace) -> int:
    async def main() -> int:
        async with control_plane_client(args, TaintCommandError) as cp:
            await cordon_cluster(cp, args.name, cordon=args._cordon, dry_run=args.dry_run)
        return 0

    return run_client_command(main, _USAGE_ERRORS)
