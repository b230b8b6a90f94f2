"""The simulator framework: small in-process controllers that make a simulated member's objects progress.

A simulated member has no controller manager and no kubelets, so something must write the status a real
cluster would: Deployments becoming Available, Jobs completing, a FlinkDeployment's job RUNNING. Each such
something is a :class:`Simulator`, started with the member and stopped with it. Simulators talk to the member's
:class:`~flotilla.apiserver.rest.ResourceStorage` directly (no HTTP): writes go through the normal API write
path, so watches, resourceVersions and generations behave exactly as for any client.

Most simulators follow one resource type and reconcile one object at a time; subclass
:class:`ResourceSimulator`::

    class FlinkDeploymentSimulator(ResourceSimulator):
        name = "flinkdeployment"
        group, version, plural = "flink.apache.org", "v1beta1", "flinkdeployments"

        async def reconcile(self, obj):             # called on every change and when a timer is due
            ...
            await self.update_status(obj, lambda fresh: new_status_or_None)
            self.record_running(obj, running=True)  # running-interval history
            return 2.0                               # reconcile this object again in 2 s (None: no timer)

        async def forget(self, key, last):           # the object is gone
            ...

    register_simulator("flinkdeployment", FlinkDeploymentSimulator)

The type may be served later (a CRD installed after the member starts): the simulator waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar

from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.rest import PROGRESS, WatchSpec
from flotilla.signals import cancel_all

if TYPE_CHECKING:
    from flotilla.member.simulated import MemberCluster, MemberConfig

log = logging.getLogger(__name__)

__all__ = [
    "ObjectKey",
    "ResourceSimulator",
    "Simulator",
    "SimulatorFactory",
    "key_of",
    "register_simulator",
    "registered_simulators",
]

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
SimulatorFactory = Callable[[], "Simulator"]

_REGISTRY: dict[str, SimulatorFactory] = {}


def register_simulator(name: str, factory: SimulatorFactory, *, replace: bool = False) -> None:
    """Make a simulator part of every member started afterwards (``MemberConfig.simulators`` may select)."""
    if name in _REGISTRY and not replace and _REGISTRY[name] is not factory:
        raise ValueError(f"a simulator named {name!r} is already registered")
    _REGISTRY[name] = factory


def registered_simulators() -> dict[str, SimulatorFactory]:
    return dict(_REGISTRY)


def key_of(obj: dict[str, Any]) -> ObjectKey:
    md = obj.get("metadata") or {}
    return (md.get("namespace") or "", md.get("name") or "")


class Simulator:
    """Base class: one simulated controller inside one member.

    ``start`` is called once the member's API server serves; it must return promptly (spawn long-running work
    with :meth:`spawn`). ``stop`` cancels what was spawned.

    ``cold_start`` is True for the simulators a member starts when it is powered on again after the ``off``
    fault: the objects in the store are those of before, but what they describe died with the member (pods
    restart, jobs restart from their checkpoints); False when the member starts.
    """

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self._member: MemberCluster | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self.cold_start = False

    @property
    def member(self) -> MemberCluster:
        if self._member is None:
            raise RuntimeError(f"simulator {self.name!r} is not started")
        return self._member

    @property
    def config(self) -> MemberConfig:
        return self.member.config

    async def start(self, member: MemberCluster) -> None:
        self._member = member
        self._stopping = False

    async def stop(self) -> None:
        self._stopping = True
        await cancel_all(self._tasks)
        self._tasks.clear()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str = "") -> asyncio.Task[Any]:
        """Run ``coro`` in the background until :meth:`stop`; a crash is logged, not silently lost."""
        task = asyncio.ensure_future(coro)
        if name:
            task.set_name(f"{self.member.name}/{self.name}/{name}")
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("simulator %s in %s crashed", self.name, self.member.name, exc_info=t.exception())

        task.add_done_callback(done)
        return task

    # ------------------------------------------------------------------ helpers for any simulator
    async def wait_for_type(self, group: str, version: str, plural: str, poll: float = 0.25) -> ResourceType:
        """The served ResourceType; waits while it is not served yet (a CRD not installed)."""
        while True:
            rt = self.member.storage.types.lookup(group, version, plural)
            if rt is not None:
                return rt
            await asyncio.sleep(poll)

    def halted(self, obj: dict[str, Any]) -> bool:
        """The object's workload is down: its crash switch (``sim.flotilla.io/broken``) or the member's guard
        (a guarded object on a stale run permit, :mod:`flotilla.member.guard`)."""
        if self.config.crash_annotation(obj):
            return True
        stops = getattr(self._member, "guard_stops", None)
        return bool(callable(stops) and stops(obj))

    def record_running(self, obj: dict[str, Any], running: bool, kind: str | None = None) -> None:
        """Running-interval history of a copy (see :mod:`flotilla.member.history`); idempotent."""
        md = obj.get("metadata") or {}
        self.member.history.set_running(member=self.member.name, kind=kind or str(obj.get("kind") or ""),
                                        namespace=md.get("namespace") or "", name=md.get("name") or "",
                                        uid=md.get("uid") or "", running=running)

    async def write_status(self, rt: ResourceType, obj: dict[str, Any],
                           compute: Callable[[dict[str, Any]], dict[str, Any] | None],
                           retries: int = 10) -> dict[str, Any] | None:
        """Set ``obj``'s status to ``compute(current object)`` with optimistic concurrency.

        The write is conditional on the resourceVersion ``compute`` saw; on a conflict the object is read
        again and ``compute`` called again (it may return None to give up, e.g. when the object is no longer
        the one it reasoned about). No write when the status is unchanged. Returns the stored object, or None
        (gone, replaced by another uid, or ``compute`` gave up).
        """
        storage = self.member.storage
        md = obj.get("metadata") or {}
        ns, name = md.get("namespace") or None, md.get("name") or ""

        def attempt(current: dict[str, Any]) -> Any:
            status = compute(current)
            if status is None:
                return None
            if status == current.get("status"):
                return current
            return storage.update(rt, ns, name, {**current, "status": status}, subresource="status")

        done, written = await storage.write_guarded(rt, obj, attempt, attempts=retries)
        if not done:
            log.warning("%s: giving up writing the status of %s/%s after %d conflicts", self.member.name,
                        ns, name, retries)
        return written

    async def patch_status(self, rt: ResourceType, key: ObjectKey,
                           mutate: Callable[[dict[str, Any]], dict[str, Any] | None],
                           retries: int = 10) -> dict[str, Any] | None:
        """Read the object named ``key`` and write ``mutate(object)`` as its status (optimistic retries)."""
        try:
            obj = await self.member.storage.get(rt, key[0] or None, key[1])
        except ApiError as e:
            if e.code == 404:
                return None
            raise
        return await self.write_status(rt, obj, mutate, retries)

    async def install_crd(self, crd: dict[str, Any]) -> None:
        """Create a CustomResourceDefinition in the member unless one of that name exists (then left as is)."""
        storage = self.member.storage
        rt = storage.types.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        if rt is None:  # pragma: no cover - every Flotilla API server serves CRDs
            raise RuntimeError("the member does not serve CustomResourceDefinitions")
        try:
            await storage.create(rt, None, dict(crd))
        except ApiError as e:
            if e.code != 409:
                raise


class ResourceSimulator(Simulator):
    """Follows one resource type (list + watch, re-list after errors) and reconciles objects one at a time.

    Subclasses set ``group``/``version``/``plural`` and implement :meth:`reconcile` (and :meth:`forget` for
    per-object state). Reconciles of one key never run concurrently; different keys run on ``workers``
    concurrent workers. Changes that arrive while a key is being reconciled queue it again.
    """

    group: ClassVar[str] = ""
    version: ClassVar[str] = "v1"
    plural: ClassVar[str] = ""
    workers: ClassVar[int] = 4
    relist_backoff: ClassVar[float] = 0.5
    #: whether the member's guard stops this simulator's guarded objects (:meth:`Simulator.halted`): the guard
    #: records its Events on those only
    stopped_by_guard: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.rt: ResourceType | None = None
        self.cache: dict[ObjectKey, dict[str, Any]] = {}
        self._queue: deque[ObjectKey] = deque()
        self._queued: set[ObjectKey] = set()
        self._active: set[ObjectKey] = set()
        self._again: set[ObjectKey] = set()
        self._wake = asyncio.Event()
        self._timers: dict[ObjectKey, asyncio.TimerHandle] = {}
        self.synced = asyncio.Event()  # set once the first list has been delivered

    # ------------------------------------------------------------------ to implement
    async def reconcile(self, obj: dict[str, Any]) -> float | None:
        """Bring ``obj`` (the newest cached version) one step forward; return seconds until this object should
        be reconciled again even if nothing changes (a delay elapsing), or None."""
        raise NotImplementedError

    async def forget(self, key: ObjectKey, last: dict[str, Any]) -> None:
        """The object is gone (``last`` is its final state): drop per-object state, close history intervals."""
        return None

    # ------------------------------------------------------------------ machinery
    async def start(self, member: MemberCluster) -> None:
        await super().start(member)
        self.spawn(self._run(), "follow")

    async def stop(self) -> None:
        await super().stop()
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()

    def enqueue(self, key: ObjectKey, after: float = 0.0) -> None:
        """Reconcile ``key`` now (``after`` 0) or in ``after`` seconds (the earliest pending timer wins)."""
        if self._stopping:
            return
        if after > 0:
            loop = asyncio.get_running_loop()
            when = loop.time() + after
            old = self._timers.get(key)
            if old is not None:
                if old.when() <= when and not old.cancelled():
                    return
                old.cancel()
            self._timers[key] = loop.call_at(when, self._fire, key)
            return
        if key in self._active:
            self._again.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._wake.set()

    def _fire(self, key: ObjectKey) -> None:
        self._timers.pop(key, None)
        self.enqueue(key)

    async def _run(self) -> None:
        self.rt = await self.wait_for_type(self.group, self.version, self.plural)
        for i in range(max(1, self.workers)):
            self.spawn(self._worker(), f"worker{i}")
        await self._follow(self.rt)

    async def _follow(self, rt: ResourceType) -> None:
        storage = self.member.storage
        last_rv = ""
        while not self._stopping:
            stream = None
            try:
                stream = await storage.watch(rt, WatchSpec(resource_version=last_rv))
                listing = last_rv == ""
                seen: set[ObjectKey] = set()
                async for etype, obj in stream:
                    if etype == PROGRESS:
                        last_rv = obj["metadata"]["resourceVersion"]
                        if listing:
                            listing = False
                            await self._relisted(seen)
                        continue
                    if etype == "BOOKMARK":
                        continue
                    if etype == "ERROR":
                        last_rv = ""  # expired: list again
                        break
                    key = key_of(obj)
                    last_rv = (obj.get("metadata") or {}).get("resourceVersion") or last_rv
                    if etype == "DELETED":
                        self.cache.pop(key, None)
                        self._cancel_timer(key)
                        await self._forget(key, obj)
                        continue
                    if listing:
                        seen.add(key)
                    old = self.cache.get(key)
                    if old is not None and (old.get("metadata") or {}).get("uid") != obj["metadata"].get("uid"):
                        await self._forget(key, old)  # replaced by a new object of the same name
                    self.cache[key] = obj
                    self.enqueue(key)
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                if e.code == 410:
                    last_rv = ""
                else:
                    log.warning("%s/%s: watch failed: %s", self.member.name, self.name, e)
                    await asyncio.sleep(self.relist_backoff)
            except Exception:
                log.exception("%s/%s: watch failed; listing again", self.member.name, self.name)
                last_rv = ""
                await asyncio.sleep(self.relist_backoff)
            finally:
                if stream is not None:
                    with contextlib.suppress(Exception):
                        await stream.aclose()

    async def _relisted(self, seen: set[ObjectKey]) -> None:
        """After a (re-)list: objects cached before but absent now were deleted while we were not watching."""
        for key in [k for k in self.cache if k not in seen]:
            last = self.cache.pop(key)
            self._cancel_timer(key)
            await self._forget(key, last)
        self.synced.set()

    def _cancel_timer(self, key: ObjectKey) -> None:
        h = self._timers.pop(key, None)
        if h is not None:
            h.cancel()

    async def _forget(self, key: ObjectKey, last: dict[str, Any]) -> None:
        try:
            await self.forget(key, last)
        except Exception:
            log.exception("%s/%s: forget %s failed", self.member.name, self.name, key)

    async def _worker(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            key = self._queue.popleft()
            self._queued.discard(key)
            obj = self.cache.get(key)
            if obj is None:
                continue
            self._active.add(key)
            try:
                after = await self.reconcile(obj)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s/%s: reconcile %s/%s failed; retrying", self.member.name, self.name, *key)
                after = 1.0
            finally:
                self._active.discard(key)
            if key in self._again:
                self._again.discard(key)
                self.enqueue(key)
            elif after is not None and key in self.cache:
                self.enqueue(key, max(after, 0.001))

    # convenience for subclasses
    async def set_status(self, obj: dict[str, Any],
                         compute: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any] | None:
        """:meth:`Simulator.write_status` on this simulator's resource type."""
        assert self.rt is not None
        return await self.write_status(self.rt, obj, compute)
