"""Informers: a list+watch cache of one collection, with indexes and event handlers.

One asyncio task per informer (no threads), so a process can hold informers on many clusters. The task lists
the collection (pages of 500), then watches from the list's resourceVersion with bookmarks, and keeps going:

* a watch the server ends normally is resumed from the last resourceVersion seen (event or bookmark);
* 410 Gone (an ERROR event or a 410 response) re-lists and replaces the cache, telling the handlers what
  changed meanwhile (adds, updates, deletes);
* connection errors are retried with jittered exponential backoff, resuming the watch (which re-lists if the
  server's history no longer reaches back far enough);
* a stream that delivers nothing, not even a bookmark, for ``inactivity_timeout`` seconds is deemed dead and
  replaced (servers send bookmarks every ~30 s to watches that allow them).

The cache's objects are shared with every reader: do not mutate them (``copy.deepcopy`` first).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from flotilla.client.callbacks import run_callback
from flotilla.client.client import Client
from flotilla.client.errors import ApiException, ConnectionFailed, is_gone
from flotilla.client.transport import WatchEvent
from flotilla.kube.resources import Resource, object_key

__all__ = [
    "HandlerRegistration",
    "Informer",
    "InformerStats",
    "ObjectCache",
    "SharedInformerFactory",
    "label_indexer",
    "namespace_indexer",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
IndexFunc = Callable[[Obj], list[str]]
_SHORT_WATCH = 1.0  # a watch that ends this quickly with nothing delivered counts as a failure (backoff)


def namespace_indexer(obj: Obj) -> list[str]:
    ns = (obj.get("metadata") or {}).get("namespace")
    return [ns] if ns else []


def label_indexer(label_key: str) -> IndexFunc:
    """An index function: the object's value of label ``label_key`` (objects without it are not indexed)."""

    def index(obj: Obj) -> list[str]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        value = labels.get(label_key)
        return [value] if isinstance(value, str) else []

    index.__name__ = f"label_indexer({label_key!r})"
    return index


# ============================================================================================ cache


class ObjectCache:
    """Objects keyed ``namespace/name`` (``name`` when cluster-scoped), with secondary indexes.

    Only the owning informer writes it, from its task, without awaiting in between: readers on the event loop
    always see a consistent state.
    """

    def __init__(self) -> None:
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}  # index -> value -> keys
        self._values: dict[str, dict[str, list[str]]] = {}  # index -> key -> values (to unindex)

    # ------------------------------------------------------------------ reading
    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def get_by_name(self, name: str, namespace: str | None = None) -> Obj | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> list[Obj]:
        return list(self._items.values())

    def keys(self) -> list[str]:
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[Obj]:
        return iter(self.list())

    def index_keys(self, index: str, value: str) -> list[str]:
        if index not in self._indexers:
            raise KeyError(f"no index named {index!r}")
        return sorted(self._indices[index].get(value, ()))

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [self._items[k] for k in self.index_keys(index, value)]

    def index_values(self, index: str) -> list[str]:
        """The values the index currently holds (e.g. every namespace with objects)."""
        if index not in self._indexers:
            raise KeyError(f"no index named {index!r}")
        return sorted(v for v, keys in self._indices[index].items() if keys)

    # ------------------------------------------------------------------ indexes
    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        if name in self._indexers:
            raise ValueError(f"an index named {name!r} exists already")
        self._indexers[name] = fn
        self._indices[name] = {}
        self._values[name] = {}
        for key, obj in self._items.items():
            self._index(name, key, obj)

    def _index(self, name: str, key: str, obj: Obj) -> None:
        try:
            values = [v for v in self._indexers[name](obj) if isinstance(v, str)]
        except Exception:
            log.exception("index function %r failed on %s", name, key)
            values = []
        self._index_values(name, key, values)

    def _index_values(self, name: str, key: str, values: list[str]) -> None:
        if values:
            self._values[name][key] = values
            idx = self._indices[name]
            for v in values:
                idx.setdefault(v, set()).add(key)

    def _unindex(self, name: str, key: str) -> None:
        idx = self._indices[name]
        for v in self._values[name].pop(key, ()):
            keys = idx.get(v)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del idx[v]

    # ------------------------------------------------------------------ writing (the informer only)
    def _put(self, key: str, obj: Obj) -> Obj | None:
        old = self._items.get(key)
        self._items[key] = obj
        for name in self._indexers:
            if old is None:
                self._index(name, key, obj)
                continue
            try:
                values = [v for v in self._indexers[name](obj) if isinstance(v, str)]
            except Exception:
                log.exception("index function %r failed on %s", name, key)
                values = []
            if values == self._values[name].get(key, []):
                continue  # the usual update: the same index values as before
            self._unindex(name, key)
            self._index_values(name, key, values)
        return old

    def _remove(self, key: str) -> Obj | None:
        old = self._items.pop(key, None)
        if old is not None:
            for name in self._indexers:
                self._unindex(name, key)
        return old


# ============================================================================================ handlers


class HandlerRegistration:
    """What ``add_handler`` returns; pass it to ``remove_handler``."""

    __slots__ = ("backlog", "on_add", "on_delete", "on_update")

    def __init__(self, on_add: Callable[..., Any] | None, on_update: Callable[..., Any] | None,
                 on_delete: Callable[..., Any] | None) -> None:
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete
        # while a late-added handler is replayed the current objects, live events wait here
        self.backlog: list[tuple[str, tuple[Obj, ...]]] | None = None


async def _call(fn: Callable[..., Any] | None, *args: Obj) -> None:
    await run_callback(fn, *args, logger=log, what="informer event handler")


async def _deliver(reg: HandlerRegistration, kind: str, args: tuple[Obj, ...]) -> None:
    fn = reg.on_add if kind == "add" else reg.on_update if kind == "update" else reg.on_delete
    await _call(fn, *args)


def _handler_of(reg: HandlerRegistration, kind: str) -> Callable[..., Any] | None:
    return reg.on_add if kind == "add" else reg.on_update if kind == "update" else reg.on_delete


# ============================================================================================ informer


@dataclass
class InformerStats:
    lists: int = 0  # successful (re)lists
    watches: int = 0  # watch requests made
    events: int = 0  # ADDED/MODIFIED/DELETED received
    bookmarks: int = 0
    gone: int = 0  # 410s that forced a re-list
    connection_errors: int = 0
    inactivity_restarts: int = 0
    errors: int = 0  # other API errors


class _Inactive(Exception):
    pass


class Informer:
    """A list+watch cache of ``res`` (in ``namespace``, or all) with handlers and indexes.

    ``resync`` > 0: every that many seconds each cached object is re-delivered as ``on_update(obj, obj)``.
    ``transform``: applied to every listed or watched object before it is cached and handed to the handlers
    (as client-go's ``SetTransform``), so a cache can keep only the fields its reader needs; what it returns
    must keep ``metadata.name``, ``namespace``, ``uid`` and ``resourceVersion``.
    ``watch_timeout``: the ``timeoutSeconds`` of each watch request (default: random 5-10 minutes, as
    client-go), after which the server ends the stream and the informer resumes it. ``backoff`` is the
    (initial, maximum) delay in seconds between attempts after failures.
    """

    def __init__(
        self,
        client: Client,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        resync: float = 0,
        inactivity_timeout: float = 120.0,
        backoff: tuple[float, float] = (0.2, 30.0),
        watch_timeout: float | None = None,
        page_size: int = 500,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        self.client = client
        self.transform = transform
        self.res = res
        self.namespace = namespace if res.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.resync = resync
        self.inactivity_timeout = inactivity_timeout
        self.backoff = backoff
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.store = ObjectCache()
        self.store.add_indexer("namespace", namespace_indexer)
        self.stats = InformerStats()
        self._handlers: list[HandlerRegistration] = []
        self._replays: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._synced = asyncio.Event()
        self._listed_once = False
        self._rv = ""
        self._next_resync = 0.0

    def __repr__(self) -> str:
        sel = f" labels={self.label_selector!r}" if self.label_selector else ""
        return f"<Informer {self.res} ns={self.namespace or '*'}{sel} @ {self.client.server}>"

    # ------------------------------------------------------------------ public surface
    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def resource_version(self) -> str:
        """The resourceVersion the cache is at (the next watch resumes from it)."""
        return self._rv

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        self.store.add_indexer(name, fn)

    def add_handler(
        self,
        on_add: Callable[[Obj], Any] | None = None,
        on_update: Callable[[Obj, Obj], Any] | None = None,
        on_delete: Callable[[Obj], Any] | None = None,
    ) -> HandlerRegistration:
        """Register callbacks (plain functions or coroutine functions), called in event order from the
        informer's task; keep them quick (enqueue work). A handler added after the first list is first told
        about every cached object through ``on_add``."""
        reg = HandlerRegistration(on_add, on_update, on_delete)
        self._handlers.append(reg)
        if self._listed_once and len(self.store):
            reg.backlog = []
            task = asyncio.get_running_loop().create_task(self._replay(reg, self.store.list()))
            self._replays.add(task)
            task.add_done_callback(self._replays.discard)
        return reg

    def remove_handler(self, reg: HandlerRegistration) -> None:
        if reg in self._handlers:
            self._handlers.remove(reg)

    def start(self) -> None:
        """Start the informer's task (idempotent; needs a running event loop)."""
        if self.running:
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    async def stop(self) -> None:
        """Cancel the task and wait until its watch is closed. The cache keeps its content."""
        tasks = [t for t in (self._task, *self._replays) if t is not None]
        self._task = None
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def wait_synced(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """True once the first list is in the cache and handlers were told; False on timeout."""
        if self._synced.is_set():
            return True
        if self._task is None:
            raise RuntimeError(f"{self!r} is not started")
        waiter = asyncio.ensure_future(self._synced.wait())
        try:
            await asyncio.wait((waiter, self._task), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        return self._synced.is_set()

    # ------------------------------------------------------------------ the task
    def _delay(self, failures: int) -> float:
        base, cap = self.backoff
        return min(cap, base * (2 ** min(failures, 30))) * random.uniform(0.5, 1.0)

    async def _run(self) -> None:
        failures = 0  # since the last watch that delivered something: sets the backoff
        gone_streak = 0  # 410s in a row: the first re-lists at once, further ones back off
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                delivered = await self._watch()
                if delivered:
                    failures = gone_streak = 0
                    continue
                failures += 1  # a watch that ended at once with nothing: don't spin
            except _Inactive:
                self.stats.inactivity_restarts += 1
                log.info("%r: no event or bookmark for %.1fs, reconnecting", self, self.inactivity_timeout)
                failures += 1
                continue  # the silent stream already cost inactivity_timeout: retry at once
            except ApiException as e:
                if is_gone(e):
                    self.stats.gone += 1
                    log.info("%r: resourceVersion %s is gone (%s), re-listing", self, self._rv, e.message)
                    need_list = True
                    gone_streak += 1
                    if gone_streak == 1:
                        continue  # the server is there and answered: re-list now, whatever failed before
                    failures += 1
                elif isinstance(e, ConnectionFailed):
                    self.stats.connection_errors += 1
                    log.info("%r: %s", self, e.message)
                    failures += 1
                else:
                    self.stats.errors += 1
                    log.warning("%r: %s", self, e)
                    failures += 1
            except asyncio.CancelledError:
                raise
            except Exception:
                self.stats.errors += 1
                log.exception("%r: unexpected error", self)
                need_list = True
                failures += 1
            await asyncio.sleep(self._delay(failures - 1))

    async def _list(self) -> None:
        items: dict[str, Obj] = {}
        cont = ""
        rv = ""
        limit = self.page_size
        while True:
            try:
                page = await self.client.list(self.res, self.namespace, label_selector=self.label_selector,
                                              field_selector=self.field_selector, limit=limit, continue_=cont)
            except ApiException as e:
                if not (is_gone(e) and cont):
                    raise
                # the continue token expired mid-way (compaction): list everything at once
                items, cont, rv, limit = {}, "", "", 0
                continue
            md = page.get("metadata") or {}
            rv = rv or str(md.get("resourceVersion") or "")
            for obj in page.get("items") or []:
                obj.setdefault("apiVersion", self.res.api_version)
                obj.setdefault("kind", self.res.kind)
                items[object_key(obj)] = obj if self.transform is None else self.transform(obj)
            cont = md.get("continue") or ""
            if not cont:
                break
        await self._replace(items, rv)

    async def _replace(self, items: dict[str, Obj], rv: str) -> None:
        changes: list[tuple[str, tuple[Obj, ...]]] = []
        for key in self.store.keys():
            if key not in items:
                old = self.store._remove(key)
                assert old is not None
                changes.append(("delete", (old,)))
        for key, obj in items.items():
            old = self.store._put(key, obj)
            if old is None:
                changes.append(("add", (obj,)))
            elif _uid(old) != _uid(obj):  # deleted and created again while we were not watching
                changes.append(("delete", (old,)))
                changes.append(("add", (obj,)))
            elif _rv(old) != _rv(obj):
                changes.append(("update", (old, obj)))
        self._rv = rv
        self._listed_once = True
        self.stats.lists += 1
        for kind, args in changes:
            await self._dispatch(kind, args)
        if not self._synced.is_set():
            self._synced.set()
            self._next_resync = asyncio.get_running_loop().time() + self.resync

    async def _watch(self) -> bool:
        """One watch request, consumed until it ends; True if it delivered anything (events or bookmarks)."""
        timeout = self.watch_timeout if self.watch_timeout else random.uniform(300, 600)
        stream = self.client.watch(self.res, self.namespace, resource_version=self._rv,
                                   label_selector=self.label_selector, field_selector=self.field_selector,
                                   allow_bookmarks=True, timeout_seconds=timeout)
        self.stats.watches += 1
        loop = asyncio.get_running_loop()
        started = last_activity = loop.time()
        delivered = False
        # an event the stream has ready is taken without arming a timer (the in-process transport's streams
        # have them ready most of the time); only waiting for one is timed
        ready: Callable[[], WatchEvent | None] | None = getattr(stream, "ready", None)
        try:
            while True:
                if ready is not None:
                    ev = ready()
                    if ev is not None:  # (a resync that falls due meanwhile is done once the stream is idle)
                        last_activity = loop.time()
                        delivered = True
                        await self._handle(ev)
                        continue
                wake = last_activity + self.inactivity_timeout
                if self.resync > 0:
                    wake = min(wake, self._next_resync)
                try:
                    async with asyncio.timeout_at(wake) as cm:
                        ev = await stream.__anext__()
                except StopAsyncIteration:
                    return delivered or loop.time() - started >= _SHORT_WATCH
                except TimeoutError:
                    if not cm.expired():
                        raise
                    now = loop.time()
                    if self.resync > 0 and now >= self._next_resync:
                        self._next_resync = now + self.resync
                        await self._resync()
                    if now >= last_activity + self.inactivity_timeout:
                        raise _Inactive() from None
                    continue
                last_activity = loop.time()
                delivered = True
                await self._handle(ev)
        finally:
            await stream.aclose()

    async def _handle(self, ev: WatchEvent) -> None:
        obj = ev.object
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if ev.type == "BOOKMARK":
            self.stats.bookmarks += 1
            if rv:
                self._rv = rv
            return
        self.stats.events += 1
        key = object_key(obj)
        if self.transform is not None:
            obj = self.transform(obj)
        if ev.type in ("ADDED", "MODIFIED"):
            old = self.store._put(key, obj)
            if rv:
                self._rv = rv
            if old is None:
                await self._dispatch("add", (obj,))
            else:
                await self._dispatch("update", (old, obj))
        elif ev.type == "DELETED":
            old = self.store._remove(key)
            if rv:
                self._rv = rv
            if old is not None:
                await self._dispatch("delete", (obj,))
        else:
            log.warning("%r: ignoring a watch event of type %r", self, ev.type)

    async def _resync(self) -> None:
        for obj in self.store.list():
            await self._dispatch("update", (obj, obj))

    async def _dispatch(self, kind: str, args: tuple[Obj, ...]) -> None:
        # the body of _deliver/_call inlined: most handlers are plain functions, and a coroutine per
        # handler per event would cost more than the handler
        for reg in tuple(self._handlers):
            if reg.backlog is not None:
                reg.backlog.append((kind, args))
                continue
            fn = _handler_of(reg, kind)
            if fn is None:
                continue
            try:
                result = fn(*args)
                if result is not None and inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("informer event handler %r failed", fn)

    async def _replay(self, reg: HandlerRegistration, snapshot: list[Obj]) -> None:
        for obj in snapshot:
            await _call(reg.on_add, obj)
        while True:
            pending, reg.backlog = reg.backlog or [], []
            if not pending:
                reg.backlog = None
                return
            for kind, args in pending:
                await _deliver(reg, kind, args)


def _uid(obj: Obj) -> Any:
    return (obj.get("metadata") or {}).get("uid")


def _rv(obj: Obj) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


# ============================================================================================ factory


class SharedInformerFactory:
    """One informer per (resource, namespace, label selector, field selector) for one client.

    The options given here apply to every informer it makes. Informers made after ``start()`` start at once.
    """

    def __init__(
        self,
        client: Client,
        *,
        resync: float = 0,
        inactivity_timeout: float = 120.0,
        backoff: tuple[float, float] = (0.2, 30.0),
        watch_timeout: float | None = None,
    ) -> None:
        self.client = client
        self._options: dict[str, Any] = {"resync": resync, "inactivity_timeout": inactivity_timeout,
                                         "backoff": backoff, "watch_timeout": watch_timeout}
        self._informers: dict[tuple[Resource, str | None, str, str], Informer] = {}
        self._started = False

    def informer(self, res: Resource, namespace: str | None = None, *, label_selector: str = "",
                 field_selector: str = "") -> Informer:
        key = (res, namespace if res.namespaced else None, label_selector, field_selector)
        inf = self._informers.get(key)
        if inf is None:
            inf = Informer(self.client, res, key[1], label_selector=label_selector, field_selector=field_selector,
                           **self._options)
            self._informers[key] = inf
            if self._started:
                inf.start()
        return inf

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def start(self) -> None:
        self._started = True
        for inf in self._informers.values():
            inf.start()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """True when every informer made so far has synced; False on timeout."""
        infs = list(self._informers.values())
        if not infs:
            return True
        results = await asyncio.gather(*(inf.wait_synced(timeout) for inf in infs))
        return all(results)

    async def stop(self) -> None:
        self._started = False
        await asyncio.gather(*(inf.stop() for inf in self._informers.values()))
