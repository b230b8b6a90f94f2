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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
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
    fit_widths,
    render_table,
    table_line,
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
  flotilla get clusters -l region=eu -w        # follow the readiness and taints of the clusters in eu
  flotilla get failovers -A --watch-only      # print each failover as it starts, moves on and ends
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
    g.add_argument("-l", "--selector", default="",
                   help="label selector, as kubectl's (e.g. -l env=prod,tier!=cache); for failovers, of the bindings")
    g.add_argument("-w", "--watch", action="store_true",
                   help="after listing, print each change as it happens (until interrupted)")
    g.add_argument("--watch-only", action="store_true", help="print only the changes, not the list first")
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


async def _fetch(cp: Client, res: Resource, name: str | None, namespace: str | None,
                 selector: str = "") -> tuple[list[dict[str, Any]], str]:
    """The objects (one when ``name`` is given; none when it does not exist) and the resourceVersion to watch from."""
    from flotilla.client import ApiException, is_not_found

    if name is not None:
        try:
            obj = await cp.get(res, name, namespace)
        except ApiException as e:
            if is_not_found(e):
                return [], ""
            raise
        return [obj], str(as_map(obj.get("metadata")).get("resourceVersion") or "")
    listed = await cp.list(res, namespace, label_selector=selector)
    return list(listed.get("items") or []), str(as_map(listed.get("metadata")).get("resourceVersion") or "")


def _object_name(kind: str, obj: Mapping[str, Any]) -> str:
    prefix = {"clusters": "cluster.cluster.karmada.io", "works": "work.work.karmada.io"}.get(kind)
    if prefix is None:
        prefix = ("resourcebinding.work.karmada.io" if as_map(obj.get("metadata")).get("namespace")
                  else "clusterresourcebinding.work.karmada.io")
    return f"{prefix}/{as_map(obj.get('metadata')).get('name')}"


def _failover_name(binding: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    return f"failover/{as_map(binding.get('metadata')).get('name')}/{entry.get('from')}@{entry.get('at')}"


def _document(doc: Any, output: str) -> str:
    import yaml

    return (json.dumps(doc, indent=4) if output == "json"
            else yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).rstrip())


class TablePrinter:
    """Rows printed as they come, as ``kubectl get --watch`` does: the header with the first row, the columns as wide
    as the first batch needed (later rows widen them), and a row again only when what it shows changed (ages, which
    change with the clock alone, do not count)."""

    #: columns whose text changes with time alone
    CLOCK_COLUMNS = frozenset({"AGE", "STARTED"})

    def __init__(self, headers: Sequence[str], out: Callable[[str], None]) -> None:
        self.headers = list(headers)
        self.out = out
        self.widths: list[int] | None = None
        self._compared = [i for i, h in enumerate(self.headers) if h not in self.CLOCK_COLUMNS]
        self.shown: dict[Any, list[str]] = {}  # per key, the compared columns of the row printed last

    def seen(self, key: Any, row: Sequence[str]) -> None:
        """Take ``row`` as printed (``--watch-only``: what exists when the watch starts)."""
        self.shown[key] = [row[i] for i in self._compared]

    def print_rows(self, rows: Sequence[tuple[Any, Sequence[str]]], *, deleted: bool = False) -> None:
        """Print each ``(key, row)`` whose row differs from the last one printed for its key (``deleted``: always,
        and forget the key)."""
        fresh = [(key, list(row)) for key, row in rows
                 if deleted or self.shown.get(key) != [row[i] for i in self._compared]]
        if not fresh:
            return
        lines: list[list[str]] = []
        if self.widths is None:
            self.widths = [len(h) for h in self.headers]
            lines.append(self.headers)
        for key, row in fresh:
            if deleted:
                self.shown.pop(key, None)
            else:
                self.seen(key, row)
            lines.append(row)
        self.widths = fit_widths(self.widths, lines)
        for line in lines:
            self.out(table_line(line, self.widths))


@dataclass(frozen=True)
class _Source:
    """One collection a ``get`` reads (and follows with ``--watch``)."""

    res: Resource
    namespace: str | None


def _sources(kind: str, args: argparse.Namespace, namespace: str | None) -> list[_Source]:
    if kind == "clusters":
        return [_Source(R.CLUSTERS, None)]
    if kind == "works":
        return [_Source(R.WORKS, None if args.all_namespaces else args.namespace)]
    crb_only = args.kind.lower().startswith(("crb", "cluster"))
    rbs = [] if crb_only else [_Source(R.RESOURCE_BINDINGS, namespace)]
    if crb_only or args.all_namespaces:
        return [*rbs, _Source(R.CLUSTER_RESOURCE_BINDINGS, None)]
    return rbs


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """An object's identity among what one ``get`` shows (list items carry no kind; a ClusterResourceBinding has no
    namespace, a ResourceBinding always one)."""
    meta = as_map(obj.get("metadata"))
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class _View:
    """What ``flotilla get KIND`` shows of a set of objects, in each output format."""

    def __init__(self, kind: str, args: argparse.Namespace, namespace: str | None, out: Callable[[str], None]) -> None:
        self.kind, self.args, self.namespace, self.out = kind, args, namespace, out
        self.wide = args.output == "wide"
        if kind == "clusters":
            headers = CLUSTER_WIDE if self.wide else CLUSTER_HEADERS
        elif kind == "bindings":
            headers = BINDING_WIDE if self.wide else BINDING_HEADERS
            headers = ["NAMESPACE", *headers] if args.all_namespaces else headers
        elif kind == "works":
            headers = WORK_WIDE if self.wide else WORK_HEADERS
        else:
            headers = FAILOVER_WIDE if self.wide else FAILOVER_HEADERS
        self.table = TablePrinter(headers, out)
        self.shown: dict[Any, Any] = {}  # failovers in the machine-readable outputs: the last one printed per key

    def row(self, obj: Mapping[str, Any]) -> list[str]:
        if self.kind == "clusters":
            return cluster_row(obj, wide=self.wide)
        if self.kind == "bindings":
            return binding_row(obj, wide=self.wide, namespaced=self.args.all_namespaces)
        return work_row(obj, wide=self.wide)

    def failovers(self, bindings: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
        from flotilla.failover.history import entries_of

        name = self.args.name
        if name is not None:
            bindings = [b for b in bindings if name in (
                as_map(b.get("metadata")).get("name"), as_map(as_map(b.get("spec")).get("resource")).get("name"))]
        return entries_of(bindings)

    def show(self, objs: Sequence[Mapping[str, Any]], *, deleted: bool = False, stream: bool = False) -> None:
        """Print ``objs`` (``stream``: one document each, as ``--watch`` prints them; else a list or a table)."""
        output = self.args.output
        if self.kind == "failovers":
            if deleted:
                return  # a binding that goes takes no failover with it: what was printed stays true
            pairs = self.failovers(objs)
            if output in ("yaml", "json", "name"):
                fresh = [(b, e) for b, e in pairs if self.shown.get((_key(b), e.get("from"), e.get("at"))) != e]
                for b, e in fresh:
                    self.shown[(_key(b), e.get("from"), e.get("at"))] = e
                if output == "name":
                    for b, e in fresh:
                        self.out(_failover_name(b, e))
                elif stream:
                    for b, e in fresh:
                        self.out(("---\n" if output == "yaml" else "") + _document(failover_item(b, e), output))
                else:
                    self.out(_document(_as_list([failover_item(b, e) for b, e in pairs]), output))
                return
            self.table.print_rows([((_key(b), e.get("from"), e.get("at")), failover_row(b, e, wide=self.wide))
                                   for b, e in pairs])
            return
        if output == "name":
            for obj in objs:
                self.out(_object_name(self.kind, obj))
        elif output in ("yaml", "json"):
            if stream:
                for obj in objs:
                    self.out(("---\n" if output == "yaml" else "") + _document(obj, output))
            else:
                self.out(_document(objs[0] if self.args.name is not None else _as_list(list(objs)), output))
        else:
            self.table.print_rows([(_key(o), self.row(o)) for o in objs], deleted=deleted)

    def nothing_found(self) -> str:
        if self.kind == "failovers":
            where = f" in {self.namespace} namespace" if self.namespace else ""
            what = f" for {self.args.name}" if self.args.name is not None else ""
            return f"No failovers recorded{what}{where}."
        return "No resources found" + (f" in {self.namespace} namespace." if self.kind == "bindings" and self.namespace
                                       else ".")

    def missing(self) -> str:
        name = self.args.name
        if self.kind == "clusters":
            return f'clusters.cluster.karmada.io "{name}" not found'
        if self.kind == "bindings":
            return f'bindings "{name}" not found in namespace {self.namespace}'
        return f'works.work.karmada.io "{name}" not found'


def _warn_unreadable_history(bindings: Sequence[Mapping[str, Any]]) -> None:
    from flotilla.failover.history import HISTORY_ANNOTATION, history_unreadable

    for b in bindings:
        md = as_map(b.get("metadata"))
        if history_unreadable(as_map(md.get("annotations"))):
            print(f"warning: {md.get('namespace') or ''}/{md.get('name')}: the annotation {HISTORY_ANNOTATION} is "
                  "not a JSON list; its failovers are not shown", file=sys.stderr)


def open_control_plane(args: argparse.Namespace) -> Client:
    """The client of the control plane named by :func:`add_control_plane_flags`; :class:`GetError` when the
    kubeconfig cannot be used."""
    from flotilla.client import Client
    from flotilla.client.kubeconfig import KubeconfigError

    try:
        return Client.from_kubeconfig(args.kubeconfig, args.karmada_context, request_timeout=10.0)
    except KubeconfigError as e:
        raise GetError(f"control plane: {e} (use --kubeconfig)") from None


def _check_flags(args: argparse.Namespace) -> str:
    """The kind the arguments ask for; :class:`GetError` for a combination kubectl refuses too."""
    kind = KINDS.get(args.kind.lower())
    if kind is None:
        raise GetError(f'unknown kind "{args.kind}": use clusters, bindings (rb, crb), works or failovers')
    if args.selector and args.name is not None and kind != "failovers":
        raise GetError("name cannot be provided when a selector is specified")
    if kind == "works" and args.name is not None and not args.namespace:
        # Works live in the execution spaces karmada-es-<cluster>
        raise GetError(f"a Work is named within its execution space: add -n karmada-es-<cluster> to get work "
                       f"{args.name}")
    return kind


async def _get(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    kind = _check_flags(args)
    cp = open_control_plane(args)
    namespace = None if args.all_namespaces else (args.namespace or cp.namespace or "default")
    view = _View(kind, args, namespace, out)
    sources = _sources(kind, args, namespace)
    watching = args.watch or args.watch_only
    async with cp:
        name = None if kind == "failovers" else args.name
        items: list[dict[str, Any]] = []
        versions: list[str] = []
        for src in sources:
            found, version = await _fetch(cp, src.res, name, src.namespace, args.selector)
            items += found
            versions.append(version)
        if kind == "bindings" and not items and not args.all_namespaces and len(sources) == 1 and \
                sources[0].res is R.RESOURCE_BINDINGS:
            # no ResourceBinding: a ClusterResourceBinding of that name (or any, without one) is shown instead
            found, version = await _fetch(cp, R.CLUSTER_RESOURCE_BINDINGS, name, None, args.selector)
            items += found
            sources, versions = [*sources, _Source(R.CLUSTER_RESOURCE_BINDINGS, None)], [*versions, version]
        if kind == "failovers":
            _warn_unreadable_history(items)
        if name is not None and not items and not watching:
            raise GetError(view.missing())
        if not args.watch_only:
            if (view.failovers(items) if kind == "failovers" else items):
                view.show(items)
            elif not watching:
                print(view.nothing_found(), file=sys.stderr)
                return 0
        if not watching:
            return 0
        if args.watch_only:  # what exists now is known, not printed: only its changes are
            for obj in items:
                if kind == "failovers":
                    for b, e in view.failovers([obj]):
                        view.shown[(_key(b), e.get("from"), e.get("at"))] = e
                        view.table.seen((_key(b), e.get("from"), e.get("at")), failover_row(b, e, wide=view.wide))
                else:
                    view.table.seen(_key(obj), view.row(obj))
        await _follow(cp, args, name, list(zip(sources, versions, strict=True)), view)
    return 0


async def _follow(cp: Client, args: argparse.Namespace, name: str | None,
                  sources: list[tuple[_Source, str]], view: _View) -> None:
    """Print the changes of ``sources`` from their resourceVersions on, until interrupted. A watch the server ends
    is opened again where it stopped; one whose history is gone starts over from a fresh list (rows that did not
    change are not printed again)."""
    import asyncio

    from flotilla.client import ApiException, is_gone

    field_selector = f"metadata.name={name}" if name is not None else ""
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | BaseException] = asyncio.Queue()

    async def pump(src: _Source, version: str) -> None:
        try:
            while True:
                try:
                    async with cp.watch(src.res, src.namespace, resource_version=version or "0",
                                        label_selector=args.selector, field_selector=field_selector) as w:
                        async for event in w:
                            version = str(as_map(event.object.get("metadata")).get("resourceVersion") or version)
                            if event.type != "BOOKMARK":
                                queue.put_nowait((event.type, event.object))
                except ApiException as e:
                    if not is_gone(e):
                        raise
                    items, version = await _fetch(cp, src.res, name, src.namespace, args.selector)
                    for obj in items:
                        queue.put_nowait(("MODIFIED", obj))
        except BaseException as e:  # noqa: BLE001 - handed to the printing loop, which raises it
            queue.put_nowait(e)

    tasks = [asyncio.create_task(pump(src, version)) for src, version in sources]
    try:
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            type_, obj = item
            view.show([obj], deleted=type_ == "DELETED", stream=True)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def run_get_command(args: argparse.Namespace) -> int:
    return run_control_plane_command(_get, args)


def run_control_plane_command(command: Callable[[argparse.Namespace, Callable[[str], None]], Awaitable[int]],
                              args: argparse.Namespace) -> int:
    """Run ``command(args, print)``; its errors become one line on stderr and exit status 1, as kubectl's
    (:func:`flotilla.cli.control_plane.run_client_command`; a :class:`GetError` says what to change)."""
    from flotilla.cli.control_plane import run_client_command

    return run_client_command(lambda: command(args, print), (GetError,))
