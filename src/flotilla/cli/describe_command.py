"""``flotilla describe cluster NAME`` / ``flotilla describe binding NAME [-n NS]``: one object in detail, as
``kubectl describe`` prints it: ``Key:  value`` lines, then the Events about the object.

The text is computed by pure functions (:func:`describe_cluster`, :func:`describe_binding`) from the objects;
the command only reads them from the control plane (the same ``--kubeconfig``/``--context`` as ``flotilla get``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from flotilla.api.agents import LEASE_NAMESPACE
from flotilla.cli.flags import add_command
from flotilla.cli.get_command import (
    GetError,
    add_control_plane_flags,
    open_control_plane,
    run_control_plane_command,
)
from flotilla.display.rows import (
    condition_text,
    event_time,
    render_table,
    resource_summary,
    taint_text,
)
from flotilla.kube.objects import as_list, as_map
from flotilla.kube.times import human_age

__all__ = ["add_describe_parser", "describe_binding", "describe_cluster", "render_events"]

KINDS: dict[str, str] = {
    "cluster": "cluster", "clusters": "cluster",
    "binding": "binding", "bindings": "binding", "rb": "binding", "resourcebinding": "binding",
    "resourcebindings": "binding",
}


def add_describe_parser(sub: Any) -> None:
    d = add_command(sub, "describe", help="show one cluster or binding in detail, with its events",
                    description="Show one Cluster or ResourceBinding in detail, with the Events about it, as "
                                "kubectl describe does.",
                    examples=["flotilla describe cluster member1    # readiness, taints, fencing, agent lease, events",
                              "flotilla describe binding web-deployment -n default"])
    d.add_argument("kind", help="cluster or binding (rb)")
    d.add_argument("name", help="the object's name")
    d.add_argument("-n", "--namespace", default=None, help="namespace of a binding (default: the context's)")
    add_control_plane_flags(d)
    d.set_defaults(fn=run_describe_command)


# ============================================================================================ text (pure)


def _fields(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """``Key:  value`` lines with the values aligned, as kubectl describe prints them; a multi-line value goes on
    under its first line."""
    width = max(len(k) for k, _ in pairs) + 3
    lines = []
    for key, value in pairs:
        first, *rest = value.split("\n") if value else [""]
        lines.append(f"{key + ':':<{width}}{first}".rstrip())
        lines += [f"{'':<{width}}{line}".rstrip() for line in rest]
    return lines


def _labels(meta: Mapping[str, Any]) -> str:
    labels = as_map(meta.get("labels"))
    return "\n".join(f"{k}={labels[k]}" for k in sorted(labels)) or "<none>"


def render_events(events: Sequence[Mapping[str, Any]], now: datetime | None = None) -> list[str]:
    """``Events:`` and a table Type, Reason, Age, From, Message, newest last (``Events:  <none>`` without)."""
    if not events:
        return ["Events:  <none>"]
    rows = []
    for e in sorted(events, key=event_time):
        age = human_age(event_time(e), now)
        count = e.get("count")
        if isinstance(count, int) and count > 1:
            age += f" (x{count} over {human_age(e.get('firstTimestamp'), now)})"
        source = as_map(e.get("source")).get("component") or e.get("reportingComponent") or ""
        rows.append([str(e.get("type") or ""), str(e.get("reason") or ""), age, str(source),
                     str(e.get("message") or "").replace("\n", " ")])
    headers = ["Type", "Reason", "Age", "From", "Message"]
    table = render_table(headers, [["-" * len(h) for h in headers], *rows])
    return ["Events:", *("  " + line for line in table.splitlines())]


def describe_cluster(cluster: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = (),
                     lease: Mapping[str, Any] | None = None, now: datetime | None = None) -> str:
    """The text of ``flotilla describe cluster``: ``lease`` is the Pull agent's Lease (None: none found)."""
    from flotilla.failover.auto_fence import fence_reason
    from flotilla.kube.conditions import find_condition

    meta, spec, status = as_map(cluster.get("metadata")), as_map(cluster.get("spec")), as_map(cluster.get("status"))
    mode = str(spec.get("syncMode") or "Push")
    ready = find_condition(status.get("conditions"), "Ready")
    taints = [taint_text(t) for t in as_list(spec.get("taints")) if isinstance(t, Mapping)]
    fenced = fence_reason(cluster)
    fenced_text = "no" if fenced is None else f"yes ({fenced})"
    fence_condition = find_condition(status.get("conditions"), "Fenced")
    if fence_condition is not None:
        detail = ", ".join(str(fence_condition[k]) for k in ("reason", "message") if fence_condition.get(k))
        fenced_text += f"\nFenced condition: {fence_condition.get('status') or 'Unknown'}" + (
            f", {detail}" if detail else "")
    pairs = [("Name", str(meta.get("name") or "")), ("Labels", _labels(meta)), ("Mode", mode),
             ("API Endpoint", str(spec.get("apiEndpoint") or "<none>")),
             ("Ready", condition_text(ready, now) if ready is not None else "Unknown"),
             ("Taints", "\n".join(taints) or "<none>"), ("Fenced", fenced_text),
             ("Resource Summary", resource_summary(status))]
    if mode == "Pull":
        renew = as_map(as_map(lease).get("spec")).get("renewTime")
        pairs.append(("Agent Lease", f"renewed {human_age(renew, now)} ago ({LEASE_NAMESPACE}/{meta.get('name')})"
                      if lease is not None and renew else "<none>"))
    return "\n".join([*_fields(pairs), *render_events(events, now)])


def describe_binding(binding: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = (),
                     now: datetime | None = None) -> str:
    """The text of ``flotilla describe binding``."""
    from flotilla.failover.history import parse_history

    meta, spec = as_map(binding.get("metadata")), as_map(binding.get("spec"))
    resource = as_map(spec.get("resource"))
    clusters = [f"{c.get('name')}:{c.get('replicas') or 0}" for c in as_list(spec.get("clusters"))
                if isinstance(c, Mapping)]
    tasks = []
    for t in as_list(spec.get("gracefulEvictionTasks")):
        if isinstance(t, Mapping):
            state = as_map(t.get("preservedLabelState"))
            tasks.append(f"from {t.get('fromCluster')}, producer {t.get('producer') or '<none>'}, reason "
                         f"{t.get('reason') or '<none>'}, preserved "
                         + (",".join(f"{k}={v}" for k, v in sorted(state.items())) or "<none>"))
    pairs = [("Name", str(meta.get("name") or "")), ("Namespace", str(meta.get("namespace") or "")),
             ("Resource", f"{resource.get('kind')}/{resource.get('name')}"),
             ("Clusters", "\n".join(clusters) or "<none>"),
             ("Graceful Eviction Tasks", "\n".join(tasks) or "<none>")]
    history = parse_history(as_map(meta.get("annotations")))
    if history:
        pairs.append(("Failover History", "\n".join(
            f"{e.get('phase') or '<unknown>'}: {e.get('from') or '<unknown>'} -> {e.get('to') or '<pending>'}, "
            f"trigger {e.get('trigger') or '<unknown>'}" for e in history if isinstance(e, Mapping))))
    conditions = [f"{c.get('type')}: {condition_text(c, now)}"
                  for c in as_list(as_map(binding.get("status")).get("conditions")) if isinstance(c, Mapping)]
    pairs.append(("Conditions", "\n".join(conditions) or "<none>"))
    return "\n".join([*_fields(pairs), *render_events(events, now)])


# ============================================================================================ command


async def _events(cp: Any, kind: str, name: str, namespace: str) -> list[dict[str, Any]]:
    from flotilla.kube.resources import EVENTS

    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    return list((await cp.list(EVENTS, namespace, field_selector=selector)).get("items") or [])


async def _describe(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    from flotilla.api import resources as R
    from flotilla.kube.resources import LEASES

    kind = KINDS.get(args.kind.lower())
    if kind is None:
        raise GetError(f'unknown kind "{args.kind}": use cluster or binding')
    cp = open_control_plane(args)
    async with cp:
        if kind == "cluster":
            cluster = await cp.get_or_none(R.CLUSTERS, args.name)
            if cluster is None:
                raise GetError(f'Error from server (NotFound): clusters.cluster.karmada.io "{args.name}" '
                                    "not found")
            lease = None
            if as_map(cluster.get("spec")).get("syncMode") == "Pull":
                lease = await cp.get_or_none(LEASES, args.name, LEASE_NAMESPACE)
            # the Events of a cluster-scoped object are in namespace "default"
            out(describe_cluster(cluster, await _events(cp, "Cluster", args.name, "default"), lease))
            return 0
        namespace = args.namespace or cp.namespace or "default"
        binding = await cp.get_or_none(R.RESOURCE_BINDINGS, args.name, namespace)
        if binding is None:
            raise GetError(f'Error from server (NotFound): resourcebindings.work.karmada.io "{args.name}" '
                                "not found")
        out(describe_binding(binding, await _events(cp, "ResourceBinding", args.name, namespace)))
        return 0


def run_describe_command(args: argparse.Namespace) -> int:
    return run_control_plane_command(_describe, args)
