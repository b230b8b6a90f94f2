"""What the command line and the dashboard show of Flotilla's objects: table rows and texts (pure).

``flotilla get`` and ``flotilla describe`` print them; the dashboard (:mod:`flotilla.dashboard`) shows the same
rows in its pages. Every function takes plain objects (dicts as the API serves them) and an optional ``now``,
and does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from flotilla.kube.objects import as_list, as_map
from flotilla.kube.times import human_age

__all__ = ["BINDING_HEADERS", "BINDING_WIDE", "CLUSTER_HEADERS", "CLUSTER_WIDE", "FAILOVER_HEADERS",
           "FAILOVER_WIDE", "WORK_HEADERS", "WORK_WIDE", "binding_row", "cluster_row", "condition_status",
           "condition_text", "event_time", "eviction_task_text", "failover_item", "failover_row", "fit_widths",
           "render_table", "resource_summary", "secs", "state_gap", "table_line", "taint_text", "workload_of",
           "work_row"]


def condition_status(obj: Mapping[str, Any], type_: str) -> str:
    for c in as_list(as_map(obj.get("status")).get("conditions")):
        if isinstance(c, Mapping) and c.get("type") == type_:
            return str(c.get("status") or "Unknown")
    return "Unknown"


def taint_text(t: Mapping[str, Any]) -> str:
    value = t.get("value")
    return f"{t.get('key')}{'=' + str(value) if value else ''}:{t.get('effect')}"


def cluster_row(cluster: Mapping[str, Any], now: datetime | None = None, *, wide: bool = False) -> list[str]:
    from flotilla.failover.auto_fence import fence_reason

    meta, spec, status = as_map(cluster.get("metadata")), as_map(cluster.get("spec")), as_map(cluster.get("status"))
    taints = [taint_text(t) for t in as_list(spec.get("taints")) if isinstance(t, Mapping)]
    row = [str(meta.get("name") or ""), str(status.get("kubernetesVersion") or ""),
           str(spec.get("syncMode") or "Push"), condition_status(cluster, "Ready"), ",".join(taints) or "<none>",
           fence_reason(cluster) or "<none>", human_age(meta.get("creationTimestamp"), now)]
    if wide:
        row.insert(6, str(spec.get("apiEndpoint") or ""))
    return row


#: FENCED: ``<none>``, the reason of the Cluster's ``Fenced`` condition (``LeaseExpired``: fenced automatically),
#: or ``Manual`` (the out-of-service taint without that condition: ``flotilla fence`` or by hand)
CLUSTER_HEADERS = ["NAME", "VERSION", "MODE", "READY", "TAINTS", "FENCED", "AGE"]
CLUSTER_WIDE = ["NAME", "VERSION", "MODE", "READY", "TAINTS", "FENCED", "ENDPOINT", "AGE"]


def eviction_task_text(t: Mapping[str, Any], wide: bool) -> str:
    out = f"{t.get('fromCluster')}({t.get('purgeMode') or 'Gracefully'})"
    if wide:
        state = as_map(t.get("preservedLabelState"))
        if state:
            out += "{" + ",".join(f"{k}={v}" for k, v in sorted(state.items())) + "}"
    return out


def binding_row(binding: Mapping[str, Any], now: datetime | None = None, *, wide: bool = False,
                namespaced: bool = False) -> list[str]:
    meta, spec = as_map(binding.get("metadata")), as_map(binding.get("spec"))
    resource = as_map(spec.get("resource"))
    target = f"{resource.get('kind')}/{resource.get('name')}"
    clusters = []
    for c in as_list(spec.get("clusters")):
        if isinstance(c, Mapping):
            replicas = c.get("replicas")
            clusters.append(f"{c.get('name')}" + (f":{replicas}" if replicas else ""))
    tasks = [eviction_task_text(t, wide) for t in as_list(spec.get("gracefulEvictionTasks")) if isinstance(t, Mapping)]
    row = [str(meta.get("name") or ""), target, ",".join(clusters) or "<none>", ",".join(tasks) or "<none>",
           condition_status(binding, "Scheduled"), condition_status(binding, "FullyApplied"),
           human_age(meta.get("creationTimestamp"), now)]
    if wide:
        health = [f"{i.get('clusterName')}={i.get('health') or 'Unknown'}"
                  for i in as_list(as_map(binding.get("status")).get("aggregatedStatus")) if isinstance(i, Mapping)]
        row.insert(6, ",".join(health) or "<none>")
    if namespaced:
        row.insert(0, str(meta.get("namespace") or ""))
    return row


BINDING_HEADERS = ["NAME", "RESOURCE", "CLUSTERS", "EVICTING", "SCHEDULED", "FULLYAPPLIED", "AGE"]
BINDING_WIDE = ["NAME", "RESOURCE", "CLUSTERS", "EVICTING", "SCHEDULED", "FULLYAPPLIED", "HEALTH", "AGE"]


def work_row(work: Mapping[str, Any], now: datetime | None = None, *, wide: bool = False) -> list[str]:
    meta, spec = as_map(work.get("metadata")), as_map(work.get("spec"))
    namespace = str(meta.get("namespace") or "")
    cluster = namespace.removeprefix("karmada-es-")
    manifests = [m for m in as_list(as_map(spec.get("workload")).get("manifests")) if isinstance(m, Mapping)]
    workloads = ",".join(f"{m.get('kind')}/{as_map(m.get('metadata')).get('name')}" for m in manifests) or "<none>"
    row = [namespace, str(meta.get("name") or ""), cluster, workloads, condition_status(work, "Applied"),
           human_age(meta.get("creationTimestamp"), now)]
    if wide:
        row.insert(5, "true" if meta.get("deletionTimestamp") else "false")
    return row


WORK_HEADERS = ["NAMESPACE", "NAME", "CLUSTER", "WORKLOAD", "APPLIED", "AGE"]
WORK_WIDE = ["NAMESPACE", "NAME", "CLUSTER", "WORKLOAD", "APPLIED", "DELETING", "AGE"]


def workload_of(binding: Mapping[str, Any]) -> str:
    resource = as_map(as_map(binding.get("spec")).get("resource"))
    return f"{resource.get('kind')}/{resource.get('name')}"


def secs(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return f"{value:.1f}s"


def state_gap(entry: Mapping[str, Any]) -> str:
    from flotilla.failover.history import PHASE_IN_PROGRESS

    gap = as_map(entry.get("stateGap"))
    records = gap.get("recordsReprocessed")
    counted = isinstance(records, int) and not isinstance(records, bool)
    records_text = f"{records} records" if counted else None
    if entry.get("restoreOutcome") == "Fresh":
        age = "fresh start"
    else:
        age = secs(gap.get("ageAtFault"))
    parts = [p for p in (age, records_text) if p]
    if parts:
        return " / ".join(parts)
    return "<pending>" if entry.get("phase") == PHASE_IN_PROGRESS else "<unknown>"


def failover_row(binding: Mapping[str, Any], entry: Mapping[str, Any], now: datetime | None = None, *,
                 wide: bool = False) -> list[str]:
    """One history entry: NAMESPACE, WORKLOAD, FROM, TO, TRIGGER, STARTED, TIME-TO-RUNNING, STATE-GAP (wide:
    PURGE-MODE, RESTORED-PATH, PRESERVED-STATE before STATE-GAP's successor columns)."""
    from flotilla.failover.history import PHASE_IN_PROGRESS, PHASE_SUPERSEDED

    meta = as_map(binding.get("metadata"))
    phase = entry.get("phase")
    if phase == PHASE_IN_PROGRESS:
        ttr = "<in progress>"
    elif phase == PHASE_SUPERSEDED:
        ttr = "<superseded>"
    else:
        ttr = secs(entry.get("timeToRunning")) or "<unknown>"
    row = [str(meta.get("namespace") or ""), workload_of(binding), str(entry.get("from") or "<unknown>"),
           str(entry.get("to") or "<pending>"), str(entry.get("trigger") or "<unknown>"),
           human_age(entry.get("at"), now), ttr, state_gap(entry)]
    if wide:
        state = as_map(entry.get("preservedState"))
        row += [str(entry.get("purgeMode") or "<none>"), str(entry.get("restoredPath") or "<none>"),
                ",".join(f"{k}={v}" for k, v in sorted(state.items())) or "<none>"]
    return row


def failover_item(binding: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """A history entry as ``-o json|yaml`` prints it: with the binding and workload it belongs to."""
    meta = as_map(binding.get("metadata"))
    resource = as_map(as_map(binding.get("spec")).get("resource"))
    return {"namespace": meta.get("namespace"), "binding": meta.get("name"),
            "bindingKind": binding.get("kind") or ("ResourceBinding" if meta.get("namespace")
                                                   else "ClusterResourceBinding"),
            "workload": {k: resource.get(k) for k in ("apiVersion", "kind", "name")}, **entry}


FAILOVER_HEADERS = ["NAMESPACE", "WORKLOAD", "FROM", "TO", "TRIGGER", "STARTED", "TIME-TO-RUNNING",
                    "STATE-GAP"]
FAILOVER_WIDE = [*FAILOVER_HEADERS, "PURGE-MODE", "RESTORED-PATH", "PRESERVED-STATE"]


def fit_widths(widths: Sequence[int], lines: Iterable[Sequence[str]]) -> list[int]:
    """The column widths ``widths``, widened where a cell of ``lines`` (one cell per column) is longer."""
    fitted = list(widths)
    for line in lines:
        fitted = [max(w, len(c)) for w, c in zip(fitted, line, strict=True)]
    return fitted


def table_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    """One line of a table as kubectl prints it: each cell padded to its column's width, three spaces between
    columns, no trailing blanks."""
    return "   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns separated by three spaces, as kubectl prints them."""
    widths = fit_widths([len(h) for h in headers], rows)
    return "\n".join(table_line(line, widths) for line in [headers, *rows])


def event_time(event: Mapping[str, Any]) -> str:
    """When an Event last happened: ``lastTimestamp``, else ``eventTime``, ``firstTimestamp``, its creation."""
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
               or as_map(event.get("metadata")).get("creationTimestamp") or "")


def condition_text(c: Mapping[str, Any], now: datetime | None) -> str:
    """``True, reason X, message, since <time> (<age> ago)``: a condition as describe prints it."""
    parts = [str(c.get("status") or "Unknown")]
    if c.get("reason"):
        parts.append(f"reason {c['reason']}")
    if c.get("message"):
        parts.append(str(c["message"]))
    if c.get("lastTransitionTime"):
        parts.append(f"since {c['lastTransitionTime']} ({human_age(c['lastTransitionTime'], now)} ago)")
    return ", ".join(parts)


def resource_summary(status: Mapping[str, Any]) -> str:
    """A Cluster's ``status.resourceSummary``: one line per allocatable / allocating / allocated."""
    summary = as_map(status.get("resourceSummary"))
    lines = []
    for what in ("allocatable", "allocating", "allocated"):
        amounts = as_map(summary.get(what))
        if amounts:
            lines.append(f"{what}: " + ", ".join(f"{k}={amounts[k]}" for k in sorted(amounts)))
    return "\n".join(lines) or "<none>"
