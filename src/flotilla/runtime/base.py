"""The controller skeleton: informers feed keys into a work queue; workers call ``reconcile(key)``.

A controller registers its informers and handlers in ``setup`` (handlers only compute keys and
``enqueue`` them), and ``reconcile`` reads the informer caches, calls a pure decision function and
writes the result through the client. ``reconcile`` returns a delay to be called again after (or None);
raising requeues the key with per-key backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, CLUSTERS, RESOURCE_BINDINGS, WORKS
from flotilla.client import Client, Resource, SharedInformerFactory
from flotilla.client.events import EventRecorder
from flotilla.client.workqueue import WorkQueue
from flotilla.cluster.scope import cluster_field_selector, execution_namespace, serves_cluster
from flotilla.kube.objects import as_map
from flotilla.observability.metrics import ControllerMetrics
from flotilla.runtime.forward_first import ForwardFirst
from flotilla.runtime.members import MemberClients
from flotilla.runtime.options import ControllerOptions

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class ControllerContext:
    """What every controller of one controller-manager shares."""

    client: Client
    informers: SharedInformerFactory
    recorder: EventRecorder
    options: ControllerOptions
    members: MemberClients
    now: Callable[[], datetime] = utcnow
    #: the monotonic clock, seconds (durations that must not follow wall-clock steps: the automatic fence)
    monotonic: Callable[[], float] = time.monotonic
    extras: dict[str, Any] = field(default_factory=dict)
    #: Prometheus metrics (served by ``flotilla controller-manager --metrics-bind-address``).
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)
    #: the forward controllers' queues, which reporting controllers let go first (:mod:`.forward_first`)
    forward_first: ForwardFirst = field(default_factory=ForwardFirst)


class Controller(ABC):
    name: ClassVar[str] = "controller"
    workers: ClassVar[int] = 2
    #: keys enqueued with a negative priority (background work): at most this many reconciled at once (None: no
    #: limit), and only once no other key was enqueued for ``low_priority_quiet`` seconds
    low_priority_workers: ClassVar[int | None] = None
    low_priority_quiet: ClassVar[float] = 0.0
    #: what the controller does under load (:mod:`.forward_first`): "forward" (carries objects to their clusters:
    #: its ready keys hold the reporting controllers back), "reports" (waits for the forward ones; its ready keys
    #: hold the clean-up controllers back), "cleanup" (waits for the reporting ones) or "" (none of these)
    role: ClassVar[str] = ""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.client = ctx.client
        self.options = ctx.options
        self.queue: WorkQueue[str] = WorkQueue(self.name, metrics=ctx.metrics.workqueue,
                                               low_priority_limit=self.low_priority_workers,
                                               low_priority_quiet=self.low_priority_quiet)
        self._task: asyncio.Task[None] | None = None
        if self.role == "forward":
            ctx.forward_first.add_forward(self.queue)
        elif self.role == "reports":
            ctx.forward_first.add_reports(self.queue)

    @abstractmethod
    def setup(self) -> None:
        """Create informers (``self.ctx.informers.informer(...)``) and add handlers that enqueue keys."""

    @abstractmethod
    async def reconcile(self, key: str) -> float | None:
        """Bring the world in line for ``key``; return seconds until the next call, or None."""

    def collect_metrics(self) -> None:
        """Refresh gauges that mirror this controller's live state; called before every scrape and once after
        :meth:`stop` (then forget them). Most controllers record as they go and need nothing here."""
        return None

    def enqueue(self, key: str, after: float = 0.0, priority: int = 0) -> None:
        """Queue ``key`` (after ``after`` seconds); a higher ``priority`` is handed to a worker first."""
        if after > 0:
            self.queue.add_after(key, after)
        else:
            self.queue.add(key, priority)

    def informer(self, res: Resource, namespace: str | None = None, **kw: Any) -> Any:
        return self.ctx.informers.informer(res, namespace, **kw)

    # ------------------------------------------------------------------ scope (flotilla.cluster.scope)
    @property
    def agent_cluster(self) -> str | None:
        """The agent's one cluster (``ControllerOptions.agent_cluster``), or None in the controller-manager."""
        return getattr(self.options, "agent_cluster", None)

    def serves(self, cluster: Mapping[str, Any] | None) -> bool:
        """Whether this process drives the member of ``cluster`` (the agent its own, the manager the Push ones)."""
        return serves_cluster(cluster, self.agent_cluster)

    def works_informer(self) -> Any:
        """The Works this process applies and reports on: all, or the agent's execution namespace only."""
        return self.informer(WORKS, execution_namespace(self.agent_cluster))

    def clusters_informer(self) -> Any:
        """The Clusters: all, or the agent's own only (``fieldSelector=metadata.name=<cluster>``)."""
        return self.informer(CLUSTERS, field_selector=cluster_field_selector(self.agent_cluster))

    def enqueue_object(self, obj: Mapping[str, Any], priority: int = 0) -> None:
        md = obj.get("metadata") or {}
        ns, name = md.get("namespace"), md.get("name")
        if name:
            self.queue.add(f"{ns}/{name}" if ns else name, priority)

    def handlers_enqueue_self(self) -> dict[str, Callable[..., None]]:
        """Handlers that enqueue the object's own key on add/update/delete."""
        return {
            "on_add": self.enqueue_object,
            "on_update": lambda old, new: self.enqueue_object(new),
            "on_delete": self.enqueue_object,
        }

    async def _handle(self, key: str) -> None:
        if self.role == "reports":
            gate = self.ctx.forward_first
            took = await gate.turn()
            try:
                after = await self.reconcile(key)
            finally:
                gate.done(took)
        else:
            if self.role == "cleanup":
                await self.ctx.forward_first.cleanup_turn()
            after = await self.reconcile(key)
        if after is not None and after >= 0:
            self.queue.add_after(key, after)

    def worker_count(self) -> int:
        """How many keys this controller reconciles at once: its ``workers``, or ``--concurrent-syncs`` when that
        is more (Karmada has one such flag per controller, ``--concurrent-work-syncs`` ..., 5 each). A worker is a
        coroutine that mostly waits for the API, so a controller whose passes make several writes runs more."""
        n = getattr(self.options, "concurrent_syncs", None)
        flag = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0
        return max(self.workers, flag)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self.queue.run_workers(self.worker_count(), self._handle))

    async def stop(self) -> None:
        self.queue.shutdown(discard_ready=True)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None


T = TypeVar("T")


async def settle_deleted(deleted: dict[str, T], key: str, obj: Any, clean_up: Callable[[T], Awaitable[Any]]) -> bool:
    """Whether ``obj``, the cached object of ``key``, is gone (None): then the cleanup after what ``deleted`` kept
    of it on its deletion runs (once). ``key``'s entry leaves ``deleted`` either way: an object that exists again
    needs no cleanup."""
    gone = deleted.pop(key, None)
    if obj is not None:
        return False
    if gone is not None:
        await clean_up(gone)
    return True


def split_key(key: str) -> tuple[str | None, str]:
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else (None, ns)


def binding_key(binding: Mapping[str, Any], cluster_scoped: bool) -> str | None:
    """The key of a ResourceBinding (``rb|<ns>|<name>``) or ClusterResourceBinding (``crb|<name>``) in the
    queues of the controllers that handle both; None without a name."""
    md = binding.get("metadata")
    md = md if isinstance(md, Mapping) else {}
    name = md.get("name")
    if not name:
        return None
    return f"crb|{name}" if cluster_scoped else f"rb|{md.get('namespace')}|{name}"


def split_binding_key(key: str) -> tuple[Resource, str]:
    """The kind (``RESOURCE_BINDINGS`` or ``CLUSTER_RESOURCE_BINDINGS``) and the cache key (``<ns>/<name>`` or
    ``<name>``) of a key made by :func:`binding_key`; ValueError for any other key."""
    parts = key.split("|")
    if parts[0] == "rb" and len(parts) == 3:
        return RESOURCE_BINDINGS, f"{parts[1]}/{parts[2]}"
    if parts[0] == "crb" and len(parts) == 2:
        return CLUSTER_RESOURCE_BINDINGS, parts[1]
    raise ValueError(f"malformed key {key!r}")


def cached_binding(controller: str, key: str, rbs: Any, crbs: Any) -> tuple[dict[str, Any] | None, Resource]:
    """The binding that ``key`` (:func:`binding_key`) names, from the ResourceBinding or ClusterResourceBinding
    informer's cache, and its kind. The binding is None when it is not cached or is being deleted, and when the
    key is malformed (which is logged for ``controller``)."""
    try:
        res, cache_key = split_binding_key(key)
    except ValueError:
        log.warning("%s: ignoring malformed key %r", controller, key)
        return None, RESOURCE_BINDINGS
    binding = (crbs if res is CLUSTER_RESOURCE_BINDINGS else rbs).store.get(cache_key)
    if binding is None or as_map(binding.get("metadata")).get("deletionTimestamp"):
        return None, res
    return binding, res


def template_ref(binding: Mapping[str, Any]) -> dict[str, Any] | None:
    """The binding's resource template as an object the event recorder accepts (``None``: no name)."""
    spec = binding.get("spec")
    ref = spec.get("resource") if isinstance(spec, Mapping) else None
    if not isinstance(ref, Mapping) or not ref.get("name"):
        return None
    md = {k: ref[k] for k in ("name", "namespace", "uid") if ref.get(k)}
    return {"apiVersion": ref.get("apiVersion"), "kind": ref.get("kind"), "metadata": md}
