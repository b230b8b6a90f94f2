"""What the benchmark driver sees, through watches (informers) only: per-workload timestamps of a failover.

On the control plane it watches the ResourceBindings of the benchmark's namespace, the Works of the surviving
members' execution namespaces and the failed Cluster; on each member the workloads of the benchmark's namespace.
Timestamps are ``time.time()`` when the event reached this process (the member's running-interval history uses
the same clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from flotilla.api import resources as R
from flotilla.bench.partition import workload_running
from flotilla.bench.stats import Timeline
from flotilla.bench.workloads import NAMESPACE, KindSpec, expected_state
from flotilla.client import Client, Informer
from flotilla.failover.fencing import OUT_OF_SERVICE_TAINT_KEY
from flotilla.kube.objects import meta_of

__all__ = ["FailoverObserver", "InformerObserver", "wait_on"]

BINDING_NAMESPACE_ANNOTATION = "resourcebinding.karmada.io/namespace"
BINDING_NAME_ANNOTATION = "resourcebinding.karmada.io/name"
EXECUTION_SPACE_PREFIX = "karmada-es-"


def _clusters(binding: dict[str, Any]) -> list[str]:
    return [str(c.get("name") or "") for c in (binding.get("spec") or {}).get("clusters") or []]


def _item(binding: dict[str, Any], cluster: str) -> dict[str, Any] | None:
    for item in (binding.get("status") or {}).get("aggregatedStatus") or []:
        if item.get("clusterName") == cluster:
            return dict(item)
    return None


def _healthy_on(binding: dict[str, Any], cluster: str) -> bool:
    item = _item(binding, cluster)
    return item is not None and item.get("health") == "Healthy"


async def wait_on(changed: asyncio.Event, done: Callable[[], bool], within: float,
                  progress: Callable[[], str] | None = None, what: str = "waiting") -> bool:
    """True once ``done()`` holds (checked each time ``changed`` is set), False after ``within`` seconds. What the
    benchmarks' observers wait with. On a terminal, a progress line says ``what`` and ``progress()``'s text,
    redrawn twice a second; piped, nothing is printed (:mod:`flotilla.cli.progress`)."""
    from flotilla.cli.progress import Progress

    deadline = time.monotonic() + within
    with Progress(what) as line:
        next_report = time.monotonic()
        while not done():
            now = time.monotonic()
            if now >= deadline:
                return False
            if line.enabled and now >= next_report:
                line.update(status=progress() if progress is not None else None)
                next_report = now + 0.5
            changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(deadline, next_report) - now if line.enabled else deadline - now):
                    await changed.wait()
    return True


class InformerObserver:
    """What the benchmarks' observers share: their informers, and an event that their handlers set on every change
    that may end a wait."""

    def __init__(self) -> None:
        self._informers: list[Informer] = []
        self._changed = asyncio.Event()

    async def stop(self) -> None:
        await asyncio.gather(*(inf.stop() for inf in self._informers), return_exceptions=True)
        self._informers = []

    async def wait_for(self, done: Callable[[], bool], within: float,
                       progress: Callable[[], str] | None = None, what: str = "waiting") -> bool:
        """True once ``done()`` holds (checked after every event), False after ``within`` seconds; ``progress``:
        the text of the progress line (:func:`wait_on`)."""
        return await wait_on(self._changed, done, within, progress, what)


class FailoverObserver(InformerObserver):
    """Timelines of the workloads (by binding name) of one failover away from ``failed``."""

    def __init__(self, cp: Client, members: dict[str, Client], failed: str,
                 workloads: list[tuple[str, KindSpec]], *, state: bool) -> None:
        super().__init__()
        self.cp = cp
        self.members = members
        self.failed = failed
        self.state = state
        self.specs: dict[str, KindSpec] = {}
        self.timelines: dict[str, Timeline] = {}
        for name, spec in workloads:
            binding = spec.binding_name(name)
            self.specs[binding] = spec
            self.timelines[binding] = Timeline(name=name, kind=spec.kind, binding=binding)
        self.by_kind_name = {(tl.kind, tl.name): tl for tl in self.timelines.values()}
        self.fault_at: float | None = None
        self.placed: set[str] = set()  # healthy on the failed member (with its state known), before the fault
        self.binding_sizes: dict[str, int] = {}
        self.recovered = 0
        self.cluster_events: dict[str, float] = {}  # what happened to the failed Cluster, first time after fault
        self.fenced_condition: dict[str, Any] | None = None  # its Fenced=True condition, as first seen
        #: bindings seen (after the fault) with more than one graceful eviction task from the same cluster
        self.duplicate_tasks: dict[str, list[str]] = {}
        self._size_of: Callable[[dict[str, Any]], int] | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        import orjson

        self._size_of = lambda obj: len(orjson.dumps(obj))
        rb = Informer(self.cp, R.RESOURCE_BINDINGS, NAMESPACE)
        rb.add_handler(self._on_binding, lambda old, new: self._on_binding(new))
        # the Works of the surviving members' execution namespaces only: the failed member's (1 create at set-up,
        # 2 writes when deleted per workload) tell nothing, and serving their events would load the control plane
        works = [Informer(self.cp, R.WORKS, EXECUTION_SPACE_PREFIX + m) for m in sorted(self.members)
                 if m != self.failed]
        for inf in works:
            inf.add_handler(self._on_work)
        clusters = Informer(self.cp, R.CLUSTERS, field_selector=f"metadata.name={self.failed}")
        clusters.add_handler(self._on_cluster, lambda old, new: self._on_cluster(new))
        self._informers += [rb, *works, clusters]
        kinds = {spec.resource for spec in self.specs.values()}
        for member, client in self.members.items():
            for res in kinds:
                inf = Informer(client, res, NAMESPACE, backoff=(0.2, 1.0))
                inf.add_handler(lambda obj, m=member, k=res.kind: self._on_member_add(m, k, obj),
                                lambda old, obj, m=member, k=res.kind: self._on_member_update(m, k, obj),
                                on_delete=lambda obj, m=member, k=res.kind: self._on_member_delete(m, k, obj))
                self._informers.append(inf)
        for inf in self._informers:
            inf.start()

    # ------------------------------------------------------------------ waiting
    def all_placed(self) -> bool:
        return len(self.placed) == len(self.timelines)

    def all_recovered(self) -> bool:
        return self.recovered == len(self.timelines)

    def all_running(self) -> bool:
        """Every workload's new copy seen running in its new member."""
        return all(tl.running is not None for tl in self.timelines.values())

    def fenced_at(self) -> float | None:
        """When the failed Cluster was first seen with the out-of-service taint (a fence) after the fault."""
        return self.cluster_events.get(f"taint:{OUT_OF_SERVICE_TAINT_KEY}")

    def mark_fault(self) -> float:
        self.fault_at = time.time()
        return self.fault_at

    # ------------------------------------------------------------------ handlers
    def _on_binding(self, obj: dict[str, Any]) -> None:
        name = str(meta_of(obj).get("name") or "")
        tl = self.timelines.get(name)
        if tl is None:
            return
        if self.fault_at is None:
            self._placement(name, tl, obj)
            return
        now = time.time()
        clusters = _clusters(obj)
        self._count_tasks(name, obj)
        if tl.evicted is None:
            for task in (obj.get("spec") or {}).get("gracefulEvictionTasks") or []:
                if task.get("fromCluster") == self.failed:
                    tl.evicted = now
                    tl.preserved = dict(task.get("preservedLabelState") or {})
                    break
            else:
                if self.failed not in clusters:
                    tl.evicted = now
        if tl.rescheduled is None and clusters and self.failed not in clusters:
            tl.rescheduled = now
            tl.new_cluster = clusters[0]
        if tl.healthy is None and tl.new_cluster and _healthy_on(obj, tl.new_cluster):
            tl.healthy = now
            self.recovered += 1
        self._changed.set()

    def _count_tasks(self, name: str, obj: dict[str, Any]) -> None:
        seen: set[str] = set()
        for task in (obj.get("spec") or {}).get("gracefulEvictionTasks") or []:
            source = str(task.get("fromCluster") or "")
            if source in seen:
                self.duplicate_tasks.setdefault(name, []).append(source)
            seen.add(source)

    def _placement(self, name: str, tl: Timeline, obj: dict[str, Any]) -> None:
        ok = _clusters(obj) == [self.failed] and _healthy_on(obj, self.failed)
        if ok and self.state:
            item = _item(obj, self.failed) or {}
            tl.expected_state = expected_state(self.specs[name], item.get("status"))
            ok = tl.expected_state is not None
        if ok:
            if name not in self.placed and self._size_of is not None:
                self.binding_sizes[name] = self._size_of(obj)
            self.placed.add(name)
        else:
            self.placed.discard(name)
        self._changed.set()

    def _on_work(self, obj: dict[str, Any]) -> None:
        if self.fault_at is None:
            return
        meta = meta_of(obj)
        ns = str(meta.get("namespace") or "")
        if not ns.startswith(EXECUTION_SPACE_PREFIX) or ns == EXECUTION_SPACE_PREFIX + self.failed:
            return
        ann = meta.get("annotations") or {}
        if ann.get(BINDING_NAMESPACE_ANNOTATION) != NAMESPACE:
            return
        tl = self.timelines.get(str(ann.get(BINDING_NAME_ANNOTATION) or ""))
        if tl is not None and tl.work_created is None:
            tl.work_created = time.time()
            self._changed.set()

    def _on_member_add(self, member: str, kind: str, obj: dict[str, Any]) -> None:
        if self.fault_at is None or member == self.failed:
            return
        meta = meta_of(obj)
        tl = self.by_kind_name.get((kind, str(meta.get("name") or "")))
        if tl is None:
            return
        if tl.created is None:
            tl.created = time.time()
            tl.created_in = member
            label = self.specs[tl.binding].label
            value = (meta.get("labels") or {}).get(label)
            tl.injected = None if value is None else str(value)
            self._changed.set()
        self._on_member_update(member, kind, obj)

    def _on_member_update(self, member: str, kind: str, obj: dict[str, Any]) -> None:
        """After the fault: the old copy in the failed member stopping (a guard), a new copy running elsewhere."""
        if self.fault_at is None:
            return
        tl = self.by_kind_name.get((kind, str(meta_of(obj).get("name") or "")))
        if tl is None:
            return
        if member == self.failed:
            if tl.old_stopped is None and not workload_running(kind, obj):
                tl.old_stopped = time.time()
                self._changed.set()
        elif tl.running is None and workload_running(kind, obj):
            tl.running = time.time()
            self._changed.set()

    def _on_member_delete(self, member: str, kind: str, obj: dict[str, Any]) -> None:
        if self.fault_at is None or member != self.failed:
            return
        tl = self.by_kind_name.get((kind, str(meta_of(obj).get("name") or "")))
        if tl is not None and tl.old_deleted is None:
            tl.old_deleted = time.time()

    def _on_cluster(self, obj: dict[str, Any]) -> None:
        if self.fault_at is None:
            return
        now = time.time()
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") in ("False", "Unknown"):
                self.cluster_events.setdefault("not_ready", now)
        for taint in (obj.get("spec") or {}).get("taints") or []:
            if taint.get("effect") == "NoExecute":
                self.cluster_events.setdefault(f"taint:{taint.get('key')}", now)
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Fenced" and cond.get("status") == "True" and self.fenced_condition is None:
                self.fenced_condition = dict(cond)
        self._changed.set()
