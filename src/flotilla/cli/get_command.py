"""``flotilla get clusters|bindings|works|failovers [NAME]``: the failover view of Flotilla's own objects.

``clusters``: readiness, taints (fenced, cordoned, not-ready...) and what runs there. ``bindings``
(ResourceBindings and, without a namespace filter, ClusterResourceBindings): the workload, where it is placed,
its graceful-eviction tasks (from which cluster, purge mode, preserved state) and its scheduling/apply
conditions. ``works``: one row per Work, with its cluster, workload and Applied condition. ``failovers``: one
row per entry of the bindings' failover history (D22, annotation ``failover.flotilla.io/history``), newest
first per binding, in-progress ones included. ``-o wide`` adds columns; ``-o yaml|json`` prints the objects as
kubectl does (a ``List`` when there are several; for failovers a ``List`` of the history entries, each with
the binding's namespace, name and workload); ``-o name`` prints ``kind/name`` (for failovers
``failover/<binding>/<from>@<start>``).

The rows are computed by pure functions (:func:`cluster_row`, :func:`binding_row`, :func:`work_row`,
:func:`failover_row`, in :mod:`flotilla.display.rows`) so that tests, ``flotilla demo`` and the dashboard can use them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from flotilla.api import resources as R
from flotilla.display.rows import (
    BINDING_HEADERS,
    BINDING_WIDE,
    CLUSTER_HEADERS,
    CLUSTER_WIDE,
    FAILOVER_HEADERS,
    FAILOVER_WIDE,
    WORK_HEADERS,
    WORK_WIDE,
    binding_row,
    cluster_row,
    failover_item,
    failover_row,
    render_table,
    work_row,
)
from flotilla.kube.objects import as_map

if TYPE_CHECKING:
    from flotilla.client import Client, Resource

__all__ = ["BINDING_HEADERS", "BINDING_WIDE", "CLUSTER_HEADERS", "CLUSTER_WIDE", "FAILOVER_HEADERS",
           "FAILOVER_WIDE", "WORK_HEADERS", "WORK_WIDE", "GetError", "add_control_plane_flags", "add_get_parser", "binding_row", "cluster_row", "failover_item",
           "failover_row", "open_control_plane", "render_table", "run_control_plane_command", "work_row"]

KINDS: dict[str, str] = {
    "cluster": "clusters", "clusters": "clusters",
    "binding": "bindings", "bindings": "bindings", "rb": "bindings", "resourcebinding": "bindings",
    "resourcebindings": "bindings", "crb": "bindings", "clusterresourcebinding": "bindings",
    "clusterresourcebindings": "bindings",
    "work": "works", "works": "works",
    "failover": "failovers", "failovers": "failovers",
}

GET_EPILOG = """\
examples:
  flotilla get clusters                       # readiness and taints of every member
  flotilla get bindings -A                    # where every workload runs, eviction tasks in progress
  flotilla get bindings web-deployment -n default -o yaml
  flotilla get works -A -o wide               # one row per Work, with its cluster and applied state
  flotilla get failovers -A                   # every recorded failover: from, to, trigger, time to running
  flotilla get failovers -n streaming -o json | jq '.items[] | {from, to, stateGap}'
"""


def add_get_parser(sub: Any) -> None:
    g = sub.add_parser("get", help="show clusters, bindings (placement, eviction tasks), works or failovers",
                       description="Show Flotilla's clusters, bindings, works or failover history, with what "
                       "matters for failover.",
                       epilog=GET_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("kind", help="clusters, bindings (rb, crb), works or failovers")
    g.add_argument("name", nargs="?", default=None,
                   help="only this object (failovers: those of this binding or of the workload of this name)")
    g.add_argument("-n", "--namespace", default=None,
                   help="namespace of bindings/works/failovers (default: the context's)")
    g.add_argument("-A", "--all-namespaces", action="store_true",
                   help="bindings/works/failovers of every namespace")
    g.add_argument("-o", "--output", default="", choices=["", "wide", "yaml", "json", "name"],
                   help="wide, yaml, json or name")
    add_control_plane_flags(g)
    g.set_defaults(fn=run_get_command)


def add_control_plane_flags(p: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--context`` (``--karmada-context``): where :func:`open_control_plane` looks."""
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig of the control plane (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--karmada-context", "--context", dest="karmada_context", default=None,
                   help="context in --kubeconfig (default: current)")



# ============================================================================================ command


class GetError(Exception):
    pass


def _as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


async def _fetch(cp: Client, res: Resource, name: str | None, namespace: str | None) -> list[dict[str, Any]]:
    from flotilla.client import ApiException, is_not_found

    if name is not None:
        try:
            return [await cp.get(res, name, namespace)]
        except ApiException as e:
            if is_not_found(e):
                return []
            raise
    return list((await cp.list(res, namespace)).get("items") or [])


def _object_name(kind: str, obj: Mapping[str, Any]) -> str:
    prefix = {"clusters": "cluster.cluster.karmada.io", "works": "work.work.karmada.io"}.get(kind)
    if prefix is None:
        prefix = ("resourcebinding.work.karmada.io" if as_map(obj.get("metadata")).get("namespace")
                  else "clusterresourcebinding.work.karmada.io")
    return f"{prefix}/{as_map(obj.get('metadata')).get('name')}"


async def _get_failovers(cp: Client, args: argparse.Namespace, namespace: str | None,
                         out: Callable[[str], None]) -> int:
    import yaml

    from flotilla.failover.history import HISTORY_ANNOTATION, entries_of, history_unreadable

    bindings = await _fetch(cp, R.RESOURCE_BINDINGS, None, namespace)
    if args.all_namespaces:
        bindings += await _fetch(cp, R.CLUSTER_RESOURCE_BINDINGS, None, None)
    if args.name is not None:
        bindings = [b for b in bindings if args.name in (
            as_map(b.get("metadata")).get("name"), as_map(as_map(b.get("spec")).get("resource")).get("name"))]
    for b in bindings:
        md = as_map(b.get("metadata"))
        if history_unreadable(as_map(md.get("annotations"))):
            print(f"warning: {md.get('namespace') or ''}/{md.get('name')}: the annotation {HISTORY_ANNOTATION} is "
                  "not a JSON list; its failovers are not shown", file=sys.stderr)
    pairs = entries_of(bindings)
    if args.output in ("yaml", "json"):
        doc = _as_list([failover_item(b, e) for b, e in pairs])
        out(json.dumps(doc, indent=4) if args.output == "json"
            else yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).rstrip())
        return 0
    if args.output == "name":
        for b, e in pairs:
            out(f"failover/{as_map(b.get('metadata')).get('name')}/{e.get('from')}@{e.get('at')}")
        return 0
    if not pairs:
        where = f" in {namespace} namespace" if namespace else ""
        what = f" for {args.name}" if args.name is not None else ""
        print(f"No failovers recorded{what}{where}.", file=sys.stderr)
        return 0
    wide = args.output == "wide"
    rows = [failover_row(b, e, wide=wide) for b, e in pairs]
    out(render_table(FAILOVER_WIDE if wide else FAILOVER_HEADERS, rows))
    return 0


def open_control_plane(args: argparse.Namespace) -> Client:
    """The client of the control plane named by :func:`add_control_plane_flags`; :class:`GetError` when the
    kubeconfig cannot be used."""
    from flotilla.client import Client
    from flotilla.client.kubeconfig import KubeconfigError

    try:
        return Client.from_kubeconfig(args.kubeconfig, args.karmada_context, request_timeout=10.0)
    except KubeconfigError as e:
        raise GetError(f"control plane: {e} (use --kubeconfig)") from None


async def _get(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    import yaml

    kind = KINDS.get(args.kind.lower())
    if kind is None:
        raise GetError(f'unknown kind "{args.kind}": use clusters, bindings (rb, crb), works or failovers')
    cp = open_control_plane(args)
    wide = args.output == "wide"
    namespace = None if args.all_namespaces else (args.namespace or cp.namespace or "default")
    async with cp:
        if kind == "failovers":
            return await _get_failovers(cp, args, namespace, out)
        if kind == "clusters":
            items = await _fetch(cp, R.CLUSTERS, args.name, None)
            headers = CLUSTER_WIDE if wide else CLUSTER_HEADERS
            rows = [cluster_row(c, wide=wide) for c in items]
            missing = f'clusters.cluster.karmada.io "{args.name}" not found'
        elif kind == "bindings":
            items = await _fetch(cp, R.RESOURCE_BINDINGS, args.name, namespace)
            if args.all_namespaces or args.kind.lower() in ("crb", "clusterresourcebinding",
                                                            "clusterresourcebindings") or not items:
                crbs = await _fetch(cp, R.CLUSTER_RESOURCE_BINDINGS, args.name, None)
                if args.kind.lower().startswith(("crb", "cluster")):
                    items = crbs
                else:
                    items += crbs
            headers = BINDING_WIDE if wide else BINDING_HEADERS
            headers = ["NAMESPACE", *headers] if args.all_namespaces else headers
            rows = [binding_row(b, wide=wide, namespaced=args.all_namespaces) for b in items]
            missing = f'bindings "{args.name}" not found in namespace {namespace}'
        else:
            # Works live in the execution spaces karmada-es-<cluster>: every one unless -n names one
            if args.name is not None and not args.namespace:
                raise GetError(f"a Work is named within its execution space: add -n karmada-es-<cluster> to "
                               f"get work {args.name}")
            items = await _fetch(cp, R.WORKS, args.name, None if args.all_namespaces else args.namespace)
            headers = WORK_WIDE if wide else WORK_HEADERS
            rows = [work_row(w, wide=wide) for w in items]
            missing = f'works.work.karmada.io "{args.name}" not found'
    if args.name is not None and not items:
        raise GetError(missing)
    if args.output == "name":
        for obj in items:
            out(_object_name(kind, obj))
        return 0
    if args.output in ("yaml", "json"):
        doc: Any = items[0] if args.name is not None else _as_list(items)
        out(json.dumps(doc, indent=4) if args.output == "json"
            else yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).rstrip())
        return 0
    if not items:
        print("No resources found" + (f" in {namespace} namespace." if kind == "bindings" and namespace else "."),
              file=sys.stderr)
        return 0
    out(render_table(headers, rows))
    return 0


def run_get_command(args: argparse.Namespace) -> int:
    return run_control_plane_command(_get, args)


def run_control_plane_command(command: Callable[[argparse.Namespace, Callable[[str], None]], Awaitable[int]],
                              args: argparse.Namespace) -> int:
    """Run ``command(args, print)`` and turn its errors into a message on stderr and exit status 1, as kubectl:
    a :class:`GetError` (``Error from server ...`` as it is, others after ``error: ``), an error the control plane
    answered, or no answer at all (then what to pass: ``--kubeconfig``)."""
    import asyncio

    from flotilla.client import ApiException

    try:
        return asyncio.run(command(args, print))
    except GetError as e:
        text = str(e)
        print(text if text.startswith("Error from server") else f"error: {text}", file=sys.stderr)
    except ApiException as e:
        if e.status == 0:  # no response: ConnectionFailed, Timeout
            print(f"error: cannot reach the control plane: {e.message} (pass --kubeconfig of a running control "
                  "plane, or --context)", file=sys.stderr)
        else:
            print(f"error: the control plane answered: {e}", file=sys.stderr)
    except BrokenPipeError:  # the reader went away (`| head`)
        return 0
    except OSError as e:
        print(f"error: cannot reach the control plane: {e} (pass --kubeconfig of a running control plane, or "
              "--context)", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    return 1
