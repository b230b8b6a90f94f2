"""The dashboard's in-memory model of the fleet, and the queries its pages make (pure: no I/O, no clock).

The feed (:mod:`flotilla.dashboard.feed`) keeps it up to date from the API server's watches: every object goes
through a ``slim_*`` function first, which keeps only the fields the pages show (a binding's manifests, status
payloads and most annotations stay out), so the model's memory grows with the number of objects, not with their
size. The pages never read the API server: each request renders from the model, so paging, filtering and search
over 10,000 workloads cost a pass over small dicts.

Each change bumps a version per *topic* (``fleet``, ``workloads``, ``timeline`` and one per workload), which
the server's Server-Sent Events stream turns into "changed" notifications for the pages that show it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from flotilla.api.labels import (
    CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION,
    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    PROPAGATION_POLICY_NAME_ANNOTATION,
    RESOURCE_BINDING_PERMANENT_ID_LABEL,
)
from flotilla.display.rows import condition_status, eviction_task_text, taint_text
from flotilla.failover.events import FAILOVER_EVENT_REASONS
from flotilla.failover.history import HISTORY_ANNOTATION, PHASE_IN_PROGRESS, parse_history
from flotilla.failover.peer_quorum import ANNOTATION_FENCE_PENDING
from flotilla.kube.objects import as_list, as_map
from flotilla.kube.times import human_age

__all__ = ["PAGE_SIZES", "STATES", "DashboardModel", "QueryError", "WorkloadQuery", "binding_key", "slim_binding",
           "slim_cluster", "slim_event", "slim_lease", "slim_work"]

#: the rows a workloads page may show at once
PAGE_SIZES: Final = (10, 25, 50, 100, 200)
#: the workloads filter: every one, those with an eviction task or a failover in progress, those not healthy
STATES: Final = ("all", "moving", "unhealthy")
_MAX_SEARCH: Final = 200

# ============================================================================================ slim objects


def _meta(obj: Mapping[str, Any], *, annotations: Iterable[str] = (), labels: Iterable[str] = ()) -> dict[str, Any]:
    md = as_map(obj.get("metadata"))
    out = {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp",
                               "deletionTimestamp") if md.get(k)}
    ann, lab = as_map(md.get("annotations")), as_map(md.get("labels"))
    kept_ann = {k: ann[k] for k in annotations if k in ann}
    kept_lab = {k: lab[k] for k in labels if k in lab}
    if kept_ann:
        out["annotations"] = kept_ann
    if kept_lab:
        out["labels"] = kept_lab
    return out


def _conditions(status: Mapping[str, Any], types: Iterable[str] | None = None) -> list[dict[str, Any]]:
    wanted = set(types) if types is not None else None
    return [{k: c[k] for k in ("type", "status", "reason", "message", "lastTransitionTime") if k in c}
            for c in as_list(status.get("conditions"))
            if isinstance(c, Mapping) and (wanted is None or c.get("type") in wanted)]


def slim_cluster(obj: dict[str, Any]) -> dict[str, Any]:
    """A Cluster as the fleet page needs it: mode, endpoint, taints, conditions, version, resource summary."""
    spec, status = as_map(obj.get("spec")), as_map(obj.get("status"))
    return {"kind": "Cluster", "metadata": _meta(obj, annotations=(ANNOTATION_FENCE_PENDING,)),
            "spec": {k: spec[k] for k in ("syncMode", "apiEndpoint", "taints") if k in spec},
            "status": {"conditions": _conditions(status),
                       **{k: status[k] for k in ("kubernetesVersion", "resourceSummary") if k in status}}}


def _task(t: Mapping[str, Any]) -> dict[str, Any]:
    return {k: t[k] for k in ("fromCluster", "purgeMode", "producer", "reason", "preservedLabelState",
                              "creationTimestamp", "clustersBeforeFailover") if k in t}


def _aggregated(item: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: item[k] for k in ("clusterName", "health", "applied") if k in item}
    state = as_map(as_map(item.get("status")).get("jobStatus")).get("state")
    if isinstance(state, str):
        out["jobState"] = state
    return out


def slim_binding(obj: dict[str, Any]) -> dict[str, Any]:
    """A ResourceBinding or ClusterResourceBinding as the workloads pages need it (no manifests, no reflected
    status but the job's state)."""
    spec, status = as_map(obj.get("spec")), as_map(obj.get("status"))
    resource = as_map(spec.get("resource"))
    return {
        "kind": obj.get("kind") or "ResourceBinding",
        "metadata": _meta(obj, annotations=(HISTORY_ANNOTATION, PROPAGATION_POLICY_NAME_ANNOTATION,
                                            CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION),
                          labels=(RESOURCE_BINDING_PERMANENT_ID_LABEL, CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL)),
        "spec": {"resource": {k: resource[k] for k in ("apiVersion", "kind", "name", "namespace") if k in resource},
                 "clusters": [{k: c[k] for k in ("name", "replicas") if k in c}
                              for c in as_list(spec.get("clusters")) if isinstance(c, Mapping)],
                 "gracefulEvictionTasks": [_task(t) for t in as_list(spec.get("gracefulEvictionTasks"))
                                           if isinstance(t, Mapping)]},
        "status": {"conditions": _conditions(status, ("Scheduled", "FullyApplied")),
                   "aggregatedStatus": [_aggregated(i) for i in as_list(status.get("aggregatedStatus"))
                                        if isinstance(i, Mapping)]},
    }


def slim_work(obj: dict[str, Any]) -> dict[str, Any]:
    """A Work: its execution space, which binding it belongs to, what it carries (kinds and names) and Applied."""
    manifests = as_list(as_map(as_map(obj.get("spec")).get("workload")).get("manifests"))
    return {"kind": "Work",
            "metadata": _meta(obj, labels=(RESOURCE_BINDING_PERMANENT_ID_LABEL,
                                           CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL)),
            "spec": {"workload": {"manifests": [
                {"kind": m.get("kind"), "metadata": {"name": as_map(m.get("metadata")).get("name")}}
                for m in manifests if isinstance(m, Mapping)]}},
            "status": {"conditions": _conditions(as_map(obj.get("status")), ("Applied",))}}


def event_matters(obj: Mapping[str, Any]) -> bool:
    """The Events the dashboard shows: those a failover writes, and every Warning."""
    return obj.get("reason") in FAILOVER_EVENT_REASONS or obj.get("type") == "Warning"


def slim_event(obj: dict[str, Any]) -> dict[str, Any]:
    """An Event the dashboard shows, or only its metadata (one it does not show costs next to nothing)."""
    if not event_matters(obj):
        return {"kind": "Event", "metadata": _meta(obj)}
    involved = as_map(obj.get("involvedObject"))
    return {"kind": "Event", "metadata": _meta(obj),
            "involvedObject": {k: involved[k] for k in ("kind", "name", "namespace") if k in involved},
            "source": {"component": as_map(obj.get("source")).get("component") or obj.get("reportingComponent")
                       or ""},
            **{k: obj[k] for k in ("type", "reason", "message", "count", "firstTimestamp", "lastTimestamp",
                                   "eventTime") if k in obj}}


def slim_lease(obj: dict[str, Any]) -> dict[str, Any]:
    """An agent's Lease: only when it was renewed."""
    return {"kind": "Lease", "metadata": _meta(obj),
            "spec": {"renewTime": as_map(obj.get("spec")).get("renewTime")}}


def binding_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a ResourceBinding, ``/name`` of a ClusterResourceBinding."""
    md = as_map(obj.get("metadata"))
    return f"{md.get('namespace') or ''}/{md.get('name') or ''}"


def _permanent_id(obj: Mapping[str, Any]) -> str | None:
    labels = as_map(as_map(obj.get("metadata")).get("labels"))
    value = labels.get(RESOURCE_BINDING_PERMANENT_ID_LABEL) or labels.get(CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL)
    return value if isinstance(value, str) and value else None


# ============================================================================================ queries


class QueryError(ValueError):
    """A query parameter the pages cannot use; the message names it and what it accepts."""


@dataclass(frozen=True)
class WorkloadQuery:
    """What the workloads page shows: a page of the workloads matching a search, a namespace, a cluster, a state."""

    #: ``q``: text that ``namespace/binding Kind/name`` must contain (any case); "" for all
    search: str = ""
    #: only this namespace ("" for all)
    namespace: str = ""
    #: only workloads placed in this cluster or being evicted from it ("" for all)
    cluster: str = ""
    #: one of :data:`STATES`: ``moving`` (an eviction task or a failover in progress), ``unhealthy``, ``all``
    state: str = "all"
    #: which page, from 1 (past the last one: the last)
    page: int = 1
    #: rows a page, one of :data:`PAGE_SIZES`
    size: int = 50

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> WorkloadQuery:
        """From a request's query parameters; :class:`QueryError` for one that is not valid."""
        unknown = sorted(set(params) - {"q", "namespace", "cluster", "state", "page", "size"})
        if unknown:
            raise QueryError(f"unknown query parameter {unknown[0]!r}: use q, namespace, cluster, state, page, size")
        search = params.get("q", "").strip()
        if len(search) > _MAX_SEARCH:
            raise QueryError(f"q: at most {_MAX_SEARCH} characters")
        state = params.get("state", "all") or "all"
        if state not in STATES:
            raise QueryError(f"state: one of {', '.join(STATES)}, not {state!r}")
        page = _positive(params.get("page", "1") or "1", "page")
        size = _positive(params.get("size", "50") or "50", "size")
        if size not in PAGE_SIZES:
            raise QueryError(f"size: one of {', '.join(map(str, PAGE_SIZES))}, not {size}")
        return cls(search=search, namespace=params.get("namespace", "").strip(),
                   cluster=params.get("cluster", "").strip(), state=state, page=page, size=size)

    def params(self, **changes: Any) -> dict[str, str]:
        """The query parameters of this query with ``changes``, defaults left out (for links)."""
        values = {"q": self.search, "namespace": self.namespace, "cluster": self.cluster, "state": self.state,
                  "page": self.page, "size": self.size, **changes}
        defaults = {"q": "", "namespace": "", "cluster": "", "state": "all", "page": 1, "size": 50}
        return {k: str(v) for k, v in values.items() if v != defaults[k]}


def _positive(text: str, name: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) < 1:
        raise QueryError(f"{name}: a whole number from 1, not {text[:20]!r}")
    return int(text)


@dataclass
class ClusterView:
    name: str
    mode: str
    ready: str
    ready_since: str
    taints: list[str]
    fenced: str | None
    summary: list[str]
    lease_age: str | None
    endpoint: str
    version: str
    workloads: int
    age: str


@dataclass
class TaskView:
    from_cluster: str
    purge_mode: str
    producer: str
    reason: str
    preserved: dict[str, str]
    age: str
    text: str


@dataclass
class WorkloadRow:
    key: str
    namespace: str
    name: str
    kind: str
    workload: str
    policy: str
    clusters: list[str]
    health: dict[str, str]
    tasks: list[TaskView]
    moving: bool
    healthy: bool
    scheduled: str
    applied: str
    last_failover: str | None
    age: str


@dataclass
class Page:
    rows: list[WorkloadRow]
    total: int
    matching: int
    page: int
    pages: int
    query: WorkloadQuery


@dataclass
class WorkView:
    namespace: str
    name: str
    cluster: str
    manifests: str
    applied: str
    deleting: bool
    age: str


@dataclass
class EventView:
    at: str
    age: str
    type: str
    reason: str
    source: str
    message: str
    count: int
    subject: str


@dataclass(frozen=True)
class BindingFacts:
    """What the filters ask of a binding, worked out once when it changes (a search over 10,000 bindings then
    compares strings, it does not walk objects)."""

    namespace: str
    haystack: str  # "namespace/name kind/name", lower case
    clusters: frozenset[str]  # where it is placed, and where its eviction tasks come from
    placed: tuple[str, ...]
    moving: bool
    unhealthy: bool
    has_history: bool

    @classmethod
    def of(cls, key: str, b: Mapping[str, Any]) -> BindingFacts:
        meta, spec = as_map(b.get("metadata")), as_map(b.get("spec"))
        resource = as_map(spec.get("resource"))
        placed = tuple(str(as_map(c).get("name")) for c in as_list(spec.get("clusters")))
        tasks = as_list(spec.get("gracefulEvictionTasks"))
        sources = {str(as_map(t).get("fromCluster")) for t in tasks}
        annotations = as_map(meta.get("annotations"))
        in_progress = False
        if HISTORY_ANNOTATION in annotations:
            in_progress = any(isinstance(e, Mapping) and e.get("phase") == PHASE_IN_PROGRESS
                              for e in parse_history(annotations))
        health = {as_map(i).get("clusterName"): as_map(i).get("health")
                  for i in as_list(as_map(b.get("status")).get("aggregatedStatus"))}
        return cls(namespace=str(meta.get("namespace") or ""),
                   haystack=f"{key} {resource.get('kind')}/{resource.get('name')}".lower(),
                   clusters=frozenset(placed) | sources, placed=placed, moving=bool(tasks) or in_progress,
                   unhealthy=not placed or any(health.get(c) != "Healthy" for c in placed),
                   has_history=HISTORY_ANNOTATION in annotations)


@dataclass
class Versions:
    """A counter per topic, bumped on every change the topic's pages show."""

    topics: dict[str, int] = field(default_factory=dict)

    def bump(self, *topics: str) -> None:
        for t in topics:
            self.topics[t] = self.topics.get(t, 0) + 1

    def of(self, topic: str) -> int:
        return self.topics.get(topic, 0)


def workload_topic(key: str) -> str:
    return f"workload:{key}"


class DashboardModel:
    """Slim Clusters, bindings, Works, Events and agent Leases, with the indexes the pages need.

    ``put_*``/``remove_*`` are what the watches call; every other method only reads. Objects handed in are slim
    (the ``slim_*`` functions) and never changed afterwards.
    """

    def __init__(self) -> None:
        self.clusters: dict[str, dict[str, Any]] = {}
        self.bindings: dict[str, dict[str, Any]] = {}
        self.leases: dict[str, dict[str, Any]] = {}
        self.works: dict[str, dict[str, Any]] = {}  # "namespace/name" -> Work
        self.events: dict[str, dict[str, Any]] = {}  # uid -> Event (only those that matter)
        self.versions = Versions()
        self._by_permanent_id: dict[str, str] = {}  # binding permanent id -> binding key
        self._works_by_binding: dict[str, set[str]] = {}  # binding permanent id -> Work keys
        self._events_by_subject: dict[tuple[str, str, str], set[str]] = {}  # (kind, ns, name) -> Event uids
        self._sorted: list[str] | None = None
        self.facts: dict[str, BindingFacts] = {}
        self.placed: dict[str, int] = {}  # cluster -> bindings placed there
        self.moving: set[str] = set()  # binding keys with an eviction task or a failover in progress
        self.with_history: set[str] = set()  # binding keys with a failover history

    # ------------------------------------------------------------------ changes
    def put_cluster(self, obj: dict[str, Any]) -> None:
        self.clusters[str(as_map(obj.get("metadata")).get("name"))] = obj
        self.versions.bump("fleet", "workloads")

    def remove_cluster(self, obj: Mapping[str, Any]) -> None:
        self.clusters.pop(str(as_map(obj.get("metadata")).get("name")), None)
        self.versions.bump("fleet", "workloads")

    def put_lease(self, obj: dict[str, Any]) -> None:
        self.leases[str(as_map(obj.get("metadata")).get("name"))] = obj
        self.versions.bump("fleet")

    def remove_lease(self, obj: Mapping[str, Any]) -> None:
        self.leases.pop(str(as_map(obj.get("metadata")).get("name")), None)
        self.versions.bump("fleet")

    def put_binding(self, obj: dict[str, Any]) -> None:
        key = binding_key(obj)
        old = self.bindings.get(key)
        if old is None:
            self._sorted = None
        else:
            self._unindex_binding(old)
        self.bindings[key] = obj
        pid = _permanent_id(obj)
        if pid is not None:
            self._by_permanent_id[pid] = key
        facts = BindingFacts.of(key, obj)
        self.facts[key] = facts
        for c in facts.placed:
            self.placed[c] = self.placed.get(c, 0) + 1
        if facts.moving:
            self.moving.add(key)
        if facts.has_history:
            self.with_history.add(key)
        topics = ["fleet", "workloads", workload_topic(key)]
        if old is None or _history(old) != _history(obj) or _tasks(old) != _tasks(obj):
            topics.append("timeline")
        self.versions.bump(*topics)

    def remove_binding(self, obj: Mapping[str, Any]) -> None:
        key = binding_key(obj)
        old = self.bindings.pop(key, None)
        if old is not None:
            self._unindex_binding(old)
            self._sorted = None
        self.versions.bump("fleet", "workloads", "timeline", workload_topic(key))

    def _unindex_binding(self, old: Mapping[str, Any]) -> None:
        key = binding_key(old)
        pid = _permanent_id(old)
        if pid is not None and self._by_permanent_id.get(pid) == key:
            del self._by_permanent_id[pid]
        facts = self.facts.pop(key, None)
        if facts is not None:
            for c in facts.placed:
                left = self.placed.get(c, 0) - 1
                if left > 0:
                    self.placed[c] = left
                else:
                    self.placed.pop(c, None)
        self.moving.discard(key)
        self.with_history.discard(key)

    def put_work(self, obj: dict[str, Any]) -> None:
        md = as_map(obj.get("metadata"))
        key = f"{md.get('namespace')}/{md.get('name')}"
        old = self.works.get(key)
        if old is not None:
            self._unindex_work(key, old)
        self.works[key] = obj
        pid = _permanent_id(obj)
        if pid is not None:
            self._works_by_binding.setdefault(pid, set()).add(key)
        self._bump_work(obj, old)

    def remove_work(self, obj: Mapping[str, Any]) -> None:
        md = as_map(obj.get("metadata"))
        key = f"{md.get('namespace')}/{md.get('name')}"
        old = self.works.pop(key, None)
        if old is not None:
            self._unindex_work(key, old)
        self._bump_work(obj, old)

    def _unindex_work(self, key: str, old: Mapping[str, Any]) -> None:
        pid = _permanent_id(old)
        if pid is not None:
            keys = self._works_by_binding.get(pid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._works_by_binding[pid]

    def _bump_work(self, *objs: Mapping[str, Any] | None) -> None:
        topics = {"workloads"}
        for obj in objs:
            pid = _permanent_id(obj) if obj is not None else None
            owner = self._by_permanent_id.get(pid) if pid is not None else None
            if owner is not None:
                topics.add(workload_topic(owner))
        self.versions.bump(*sorted(topics))

    def put_event(self, obj: dict[str, Any]) -> None:
        uid = str(as_map(obj.get("metadata")).get("uid") or binding_key(obj))
        old = self.events.pop(uid, None)
        if old is not None:
            self._unindex_event(uid, old)
        if "reason" not in obj:  # an Event the dashboard does not show (slim_event kept its metadata only)
            if old is not None:
                self._bump_event(old)
            return
        self.events[uid] = obj
        self._events_by_subject.setdefault(_subject(obj), set()).add(uid)
        self._bump_event(obj)

    def remove_event(self, obj: Mapping[str, Any]) -> None:
        uid = str(as_map(obj.get("metadata")).get("uid") or binding_key(obj))
        old = self.events.pop(uid, None)
        if old is not None:
            self._unindex_event(uid, old)
            self._bump_event(old)

    def _unindex_event(self, uid: str, old: Mapping[str, Any]) -> None:
        uids = self._events_by_subject.get(_subject(old))
        if uids is not None:
            uids.discard(uid)
            if not uids:
                del self._events_by_subject[_subject(old)]

    def _bump_event(self, obj: Mapping[str, Any]) -> None:
        kind, ns, name = _subject(obj)
        topics = ["timeline"]
        if kind == "Cluster":
            topics.append("fleet")
        elif kind in ("ResourceBinding", "ClusterResourceBinding"):
            topics.append(workload_topic(f"{ns}/{name}"))
        else:  # an Event about a workload's template: its binding's page, when the model knows the binding
            for key in self._bindings_of_template(kind, ns, name):
                topics.append(workload_topic(key))
        self.versions.bump(*topics)

    def _bindings_of_template(self, kind: str, ns: str, name: str) -> list[str]:
        # a binding is named <name>-<kind in lower case> in its template's namespace (Karmada's naming)
        key = f"{ns}/{name}-{kind.lower()}"
        return [key] if key in self.bindings else []

    # ------------------------------------------------------------------ reads
    def sorted_binding_keys(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self.bindings)
        return self._sorted

    def works_of(self, binding: Mapping[str, Any]) -> list[dict[str, Any]]:
        pid = _permanent_id(binding)
        keys = self._works_by_binding.get(pid, set()) if pid is not None else set()
        return [self.works[k] for k in sorted(keys) if k in self.works]

    def events_about(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]:
        return [self.events[u] for u in self._events_by_subject.get((kind, namespace, name), ())]

    def all_events(self) -> list[dict[str, Any]]:
        return list(self.events.values())


def _subject(event: Mapping[str, Any]) -> tuple[str, str, str]:
    inv = as_map(event.get("involvedObject"))
    return (str(inv.get("kind") or ""), str(inv.get("namespace") or ""), str(inv.get("name") or ""))


def _history(binding: Mapping[str, Any]) -> Any:
    return as_map(as_map(binding.get("metadata")).get("annotations")).get(HISTORY_ANNOTATION)


def _tasks(binding: Mapping[str, Any]) -> Any:
    return as_map(binding.get("spec")).get("gracefulEvictionTasks")


# ============================================================================================ page contents


def cluster_views(model: DashboardModel, now: datetime) -> list[ClusterView]:
    """Every Cluster, by name: what the fleet page shows."""
    from flotilla.failover.auto_fence import fence_reason
    from flotilla.kube.conditions import find_condition

    placed = model.placed
    out = []
    for name in sorted(model.clusters):
        c = model.clusters[name]
        meta, spec, status = as_map(c.get("metadata")), as_map(c.get("spec")), as_map(c.get("status"))
        mode = str(spec.get("syncMode") or "Push")
        ready = find_condition(status.get("conditions"), "Ready")
        lease = model.leases.get(name)
        renew = as_map(as_map(lease).get("spec")).get("renewTime") if lease is not None else None
        out.append(ClusterView(
            name=name, mode=mode, ready=condition_status(c, "Ready"),
            ready_since=human_age(ready.get("lastTransitionTime"), now) if ready is not None else "<unknown>",
            taints=[taint_text(t) for t in as_list(spec.get("taints")) if isinstance(t, Mapping)],
            fenced=fence_reason(c), summary=_summary_lines(status),
            lease_age=human_age(renew, now) if renew else None,
            endpoint=str(spec.get("apiEndpoint") or ""), version=str(status.get("kubernetesVersion") or ""),
            workloads=placed.get(name, 0), age=human_age(meta.get("creationTimestamp"), now)))
    return out


def _summary_lines(status: Mapping[str, Any]) -> list[str]:
    summary = as_map(status.get("resourceSummary"))
    allocatable, allocated = as_map(summary.get("allocatable")), as_map(summary.get("allocated"))
    lines = []
    for res in ("cpu", "memory", "pods"):
        if res in allocatable:
            used = allocated.get(res)
            lines.append(f"{res} {used if used is not None else 0} / {allocatable[res]}")
    return lines


def _task_view(t: Mapping[str, Any], now: datetime) -> TaskView:
    return TaskView(from_cluster=str(t.get("fromCluster") or ""), purge_mode=str(t.get("purgeMode") or "Gracefully"),
                    producer=str(t.get("producer") or ""), reason=str(t.get("reason") or ""),
                    preserved={str(k): str(v) for k, v in sorted(as_map(t.get("preservedLabelState")).items())},
                    age=human_age(t.get("creationTimestamp"), now), text=eviction_task_text(t, True))


def workload_row(key: str, b: Mapping[str, Any], now: datetime) -> WorkloadRow:
    meta, spec, status = as_map(b.get("metadata")), as_map(b.get("spec")), as_map(b.get("status"))
    resource = as_map(spec.get("resource"))
    ann = as_map(meta.get("annotations"))
    clusters = [f"{c.get('name')}" + (f" ({c.get('replicas')})" if c.get("replicas") else "")
                for c in as_list(spec.get("clusters")) if isinstance(c, Mapping)]
    health: dict[str, str] = {}
    for item in as_list(status.get("aggregatedStatus")):
        if isinstance(item, Mapping) and item.get("clusterName"):
            text = str(item.get("health") or "Unknown")
            if item.get("jobState"):
                text += f" ({item['jobState']})"
            health[str(item["clusterName"])] = text
    tasks = [_task_view(t, now) for t in as_list(spec.get("gracefulEvictionTasks")) if isinstance(t, Mapping)]
    history = parse_history(ann)
    in_progress = any(isinstance(e, Mapping) and e.get("phase") == PHASE_IN_PROGRESS for e in history)
    last = None
    if history and isinstance(history[0], Mapping):
        e = history[0]
        phase = ", in progress" if e.get("phase") == PHASE_IN_PROGRESS else ""
        last = (f"{e.get('from') or '?'} → {e.get('to') or '…'} ({e.get('trigger') or '?'}{phase}, "
                f"{human_age(e.get('at'), now)} ago)")
    placed = {str(as_map(c).get("name")) for c in as_list(spec.get("clusters"))}
    healthy = bool(placed) and all(health.get(c, "").startswith("Healthy") for c in placed)
    return WorkloadRow(
        key=key, namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        kind=str(b.get("kind") or "ResourceBinding"),
        workload=f"{resource.get('kind')}/{resource.get('name')}",
        policy=str(ann.get(PROPAGATION_POLICY_NAME_ANNOTATION) or ann.get(CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION)
                   or ""),
        clusters=clusters, health=health, tasks=tasks, moving=bool(tasks) or in_progress, healthy=healthy,
        scheduled=condition_status(b, "Scheduled"), applied=condition_status(b, "FullyApplied"),
        last_failover=last, age=human_age(meta.get("creationTimestamp"), now))


def _matches(f: BindingFacts, q: WorkloadQuery, needle: str) -> bool:
    if q.namespace and f.namespace != q.namespace:
        return False
    if q.cluster and q.cluster not in f.clusters:
        return False
    if needle and needle not in f.haystack:
        return False
    if q.state == "moving" and not f.moving:
        return False
    return not (q.state == "unhealthy" and not f.unhealthy)


def workload_page(model: DashboardModel, q: WorkloadQuery, now: datetime) -> Page:
    """The page ``q`` asks for: matching workloads by namespace and name, only that page's rows built."""
    needle = q.search.lower()
    keys = model.sorted_binding_keys()
    plain = not (needle or q.namespace or q.cluster or q.state != "all")
    facts = model.facts
    matching = keys if plain else [k for k in keys if _matches(facts[k], q, needle)]
    pages = max(1, -(-len(matching) // q.size))
    page = min(q.page, pages)
    chosen = matching[(page - 1) * q.size: page * q.size]
    return Page(rows=[workload_row(k, model.bindings[k], now) for k in chosen], total=len(keys),
                matching=len(matching), page=page, pages=pages, query=q)


def work_views(model: DashboardModel, binding: Mapping[str, Any], now: datetime) -> list[WorkView]:
    out = []
    for w in model.works_of(binding):
        md = as_map(w.get("metadata"))
        manifests = as_list(as_map(as_map(w.get("spec")).get("workload")).get("manifests"))
        out.append(WorkView(namespace=str(md.get("namespace") or ""), name=str(md.get("name") or ""),
                            cluster=str(md.get("namespace") or "").removeprefix("karmada-es-"),
                            manifests=", ".join(f"{m.get('kind')}/{as_map(m.get('metadata')).get('name')}"
                                                for m in manifests if isinstance(m, Mapping)) or "<none>",
                            applied=condition_status(w, "Applied"), deleting=bool(md.get("deletionTimestamp")),
                            age=human_age(md.get("creationTimestamp"), now)))
    return out


def event_views(events: Iterable[Mapping[str, Any]], now: datetime, limit: int = 200) -> list[EventView]:
    """Events newest first (at most ``limit``)."""
    from flotilla.display.rows import event_time

    ordered = sorted(events, key=event_time, reverse=True)[:limit]
    out = []
    for e in ordered:
        inv = as_map(e.get("involvedObject"))
        count = e.get("count")
        out.append(EventView(at=event_time(e), age=human_age(event_time(e), now), type=str(e.get("type") or ""),
                             reason=str(e.get("reason") or ""), source=str(as_map(e.get("source")).get("component")
                                                                           or ""),
                             message=str(e.get("message") or ""), count=count if isinstance(count, int) else 1,
                             subject=f"{inv.get('kind')}/{inv.get('name')}"))
    return out
