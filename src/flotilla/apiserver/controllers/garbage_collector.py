"""Garbage collection by ownerReferences: background, foreground and orphan cascading deletion.

The collector keeps a graph of every stored object that it learns from a list + watch of each served
resource (types added later by CRDs included): object uid -> (resource, namespace, name, owner references,
deletion state), and owner uid -> uids of the objects that name it as an owner. Owners need not exist: an
owner uid nobody has is how a deleted owner looks.

What it does with the graph follows Kubernetes' garbage collector:

* an object whose owners are all gone is deleted (Background, unless it carries the ``orphan`` or
  ``foregroundDeletion`` finalizer itself), so chains cascade; an object that still has a live owner only
  loses the references to the absent owners. Before it acts, the collector reads the dependent and each of
  its owners from storage (an owner is absent when the owner reference's kind/name does not give an object
  with the referenced uid, looked up in the dependent's namespace for namespaced owners), so a graph that
  lags behind never deletes anything that still has an owner;
* an owner with ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer: its dependents are deleted,
  and the finalizer is removed once no dependent with ``blockOwnerDeletion: true`` remains;
* an owner with ``deletionTimestamp`` and the ``orphan`` finalizer: the references to it are removed from
  its dependents, then the finalizer;
* owner references that cannot be resolved (unknown kind, or a namespaced owner of a cluster-scoped object)
  never count as absent; such dependents are looked at again when the served types change.

After the initial list of every type, everything already due is handled (owners deleted while no collector
ran, owners carrying the finalizers). All writes carry uid / resourceVersion preconditions, so several
collectors on one store (several API server processes) can run at once. Failed work is retried with
exponential backoff; no object, however odd, stops the collector.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flotilla.apiserver.errors import ApiError
from flotilla.apiserver.objects import meta
from flotilla.apiserver.resource_types import ResourceType
from flotilla.apiserver.rest import ResourceStorage, WatchSpec
from flotilla.apiserver.tasks import cancel_and_wait
from flotilla.kube.objects import as_str

log = logging.getLogger(__name__)

FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"

_WORKERS = 4
_TYPES_POLL = 1.0  # seconds between checks for types added/removed by CRDs (also woken by local writes)
_FOREGROUND_RECHECK = 10.0  # safety net while an owner waits for blocking dependents
_BACKOFF_BASE = 0.05
_BACKOFF_MAX = 30.0
_WRITE_RETRIES = 20

# work item kinds
_DELETE = "attemptToDelete"  # a dependent whose owners may be gone
_ORPHAN = "orphan"  # an owner being deleted with the orphan finalizer
_FOREGROUND = "foreground"  # an owner being deleted with the foregroundDeletion finalizer


# ============================================================================================== graph


@dataclass(frozen=True, slots=True)
class OwnerRef:
    uid: str
    api_version: str
    kind: str
    name: str
    block: bool


@dataclass(slots=True)
class Node:
    uid: str
    prefix: str  # storage key prefix of the resource (identifies it across versions)
    namespace: str | None  # None for cluster-scoped objects
    name: str
    owners: tuple[OwnerRef, ...]
    deleting: bool
    finalizers: frozenset[str]

    @property
    def foreground(self) -> bool:
        return self.deleting and FOREGROUND_FINALIZER in self.finalizers

    @property
    def orphan(self) -> bool:
        return self.deleting and ORPHAN_FINALIZER in self.finalizers

    def ref_to(self, owner_uid: str) -> OwnerRef | None:
        for ref in self.owners:
            if ref.uid == owner_uid:
                return ref
        return None


@dataclass(frozen=True, slots=True)
class _Item:
    kind: str
    prefix: str
    namespace: str | None
    name: str
    uid: str


def _item(kind: str, node: Node) -> _Item:
    return _Item(kind, node.prefix, node.namespace, node.name, node.uid)


def owner_refs_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The object's owner references that name an owner uid (anything malformed is skipped)."""
    md = obj.get("metadata")
    refs = md.get("ownerReferences") if isinstance(md, dict) else None
    if not isinstance(refs, list):
        return []
    return [r for r in refs if isinstance(r, dict) and isinstance(r.get("uid"), str) and r["uid"]]


def _finalizers(obj: dict[str, Any]) -> list[str]:
    md = obj.get("metadata")
    fins = md.get("finalizers") if isinstance(md, dict) else None
    return [f for f in fins if isinstance(f, str)] if isinstance(fins, list) else []


def _node_of(prefix: str, rt: ResourceType, obj: dict[str, Any]) -> Node | None:
    md = obj.get("metadata")
    if not isinstance(md, dict):
        return None
    uid = as_str(md.get("uid"))
    if not uid:
        return None
    owners = tuple(
        OwnerRef(
            uid=r["uid"],
            api_version=as_str(r.get("apiVersion")),
            kind=as_str(r.get("kind")),
            name=as_str(r.get("name")),
            block=r.get("blockOwnerDeletion") is True,
        )
        for r in owner_refs_of(obj)
    )
    return Node(
        uid=uid,
        prefix=prefix,
        namespace=as_str(md.get("namespace")) if rt.namespaced else None,
        name=as_str(md.get("name")),
        owners=owners,
        deleting=bool(md.get("deletionTimestamp")),
        finalizers=frozenset(_finalizers(obj)),
    )


def _graph_fields(md: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The metadata a node is built from besides the immutable identity (uid, name, namespace)."""
    return md.get("ownerReferences"), bool(md.get("deletionTimestamp")), md.get("finalizers")


def _compatible(owner: Node, dependent: Node) -> bool:
    """Whether ``owner`` can own ``dependent``: same namespace, or a cluster-scoped owner."""
    if owner.namespace is None:
        return True
    return dependent.namespace == owner.namespace


# ============================================================================================== queue


class _WorkQueue:
    """A de-duplicating work queue: an item is queued at most once and never processed concurrently with
    itself; adding an item while it is processed queues it again once it is done."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._dirty: set[_Item] = set()
        self._processing: set[_Item] = set()
        self._timers: dict[_Item, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[_Item, int] = {}

    def add(self, item: _Item) -> None:
        if item in self._dirty:
            return
        self._dirty.add(item)
        if item not in self._processing:
            self._queue.put_nowait(item)

    def add_after(self, item: _Item, delay: float) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        current = self._timers.get(item)
        if current is not None:
            if current[0] <= when:
                return
            current[1].cancel()

        def fire() -> None:
            self._timers.pop(item, None)
            self.add(item)

        self._timers[item] = (when, loop.call_at(when, fire))

    def add_rate_limited(self, item: _Item) -> float:
        n = self._failures.get(item, 0)
        self._failures[item] = n + 1
        delay = min(_BACKOFF_BASE * (2**n), _BACKOFF_MAX)
        self.add_after(item, delay)
        return delay

    def forget(self, item: _Item) -> None:
        self._failures.pop(item, None)

    async def get(self) -> _Item:
        item = await self._queue.get()
        self._dirty.discard(item)
        self._processing.add(item)
        return item

    def done(self, item: _Item) -> None:
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.put_nowait(item)

    def idle(self) -> bool:
        return not self._dirty and not self._processing

    def close(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()


class _Requeue(Exception):
    """Retry the item soon (a write conflicted)."""


# ============================================================================================== collector


#: what the collector does not follow, as kube-controller-manager's garbage collector by default
#: (``DefaultIgnoredResources``): Events, the most written kind, whose owners are never looked at
IGNORED_RESOURCES: frozenset[tuple[str, str]] = frozenset({("", "events"), ("events.k8s.io", "events")})


class GarbageCollector:
    """Cascading deletion by ownerReferences for every type ``storage`` serves."""

    def __init__(self, storage: ResourceStorage) -> None:
        self.storage = storage
        self.types = storage.types
        self.nodes: dict[str, Node] = {}  # uid -> node (live objects only)
        self.dependents: dict[str, set[str]] = {}  # owner uid -> dependent uids (owner may be absent)
        self.synced = False
        self._queue = _WorkQueue()
        self._watched: dict[str, asyncio.Task[None]] = {}  # prefix -> list+watch task
        self._rts: dict[str, ResourceType] = {}
        self._rts_generation = -1
        self._types_generation = -1
        self._types_changed = asyncio.Event()
        self._unresolved: set[_Item] = set()
        # uid -> the metadata fields its node was built from (by the last watch event that built it)
        self._graph_fields: dict[str, tuple[Any, Any, Any]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """List every served type, handle what is already due, then follow changes in the background."""
        if self._running:
            return
        self._running = True
        self.storage._gc_enabled = True  # DELETE with Foreground / Orphan now sets the finalizers
        self.storage.after_write.append(self._on_write)
        loop = asyncio.get_running_loop()
        self._types_generation = self.types.generation
        initial: dict[str, str | None] = {}
        for prefix, rt in self._current_rts().items():
            try:
                initial[prefix] = await self._relist(prefix, rt)
            except Exception:
                log.exception("garbage collector: initial list of %s failed; retrying in the background",
                              rt.qualified_resource)
                initial[prefix] = None
        for prefix, rv in initial.items():
            self._watched[prefix] = loop.create_task(self._follow(prefix, rv))
        self.synced = True
        self._resync()
        self._tasks = [loop.create_task(self._worker()) for _ in range(_WORKERS)]
        self._tasks.append(loop.create_task(self._follow_types()))
        log.info("garbage collector started: %d objects in %d resources", len(self.nodes), len(self._watched))

    async def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self.storage._gc_enabled = False
        try:
            self.storage.after_write.remove(self._on_write)
        except ValueError:
            pass
        tasks = [*self._tasks, *self._watched.values()]
        self._tasks = []
        self._watched = {}
        await cancel_and_wait(tasks)
        self._queue.close()
        self._queue = _WorkQueue()
        self.nodes.clear()
        self.dependents.clear()
        self._graph_fields.clear()
        self._unresolved.clear()
        self.synced = False

    def idle(self) -> bool:
        """No work queued or in progress (delayed retries and rechecks aside); for tests and diagnostics."""
        return self._queue.idle()

    # ------------------------------------------------------------------ types
    def _current_rts(self) -> dict[str, ResourceType]:
        """One resource type per storage prefix (the versions of a resource share their objects)."""
        if self._rts_generation != self.types.generation:
            rts: dict[str, ResourceType] = {}
            for rt in self.types.all():
                if "delete" in rt.verbs and "list" in rt.verbs and (rt.group, rt.plural) not in IGNORED_RESOURCES:
                    rts.setdefault(rt.key_prefix(None), rt)
            self._rts = rts
            self._rts_generation = self.types.generation
        return self._rts

    def _on_write(self, rt: ResourceType, event: str, obj: dict[str, Any]) -> None:
        # a write in this process may have changed the served types (CRDs): look now, not at the next poll
        if self.types.generation != self._types_generation:
            self._types_changed.set()

    async def _follow_types(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._types_changed.wait(), _TYPES_POLL)
            except TimeoutError:
                pass
            self._types_changed.clear()
            if self.types.generation == self._types_generation:
                continue
            try:
                self._sync_types()
            except Exception:
                log.exception("garbage collector: following the served types failed")

    def _sync_types(self) -> None:
        self._types_generation = self.types.generation
        wanted = self._current_rts()
        loop = asyncio.get_running_loop()
        for prefix in [p for p in self._watched if p not in wanted]:
            self._watched.pop(prefix).cancel()
            for node in [n for n in self.nodes.values() if n.prefix == prefix]:
                self._on_deleted(node)
        for prefix in wanted:
            task = self._watched.get(prefix)
            if task is None or task.done():
                self._watched[prefix] = loop.create_task(self._follow(prefix, None))
        # references that could not be resolved may resolve now
        pending, self._unresolved = self._unresolved, set()
        for item in pending:
            self._queue.add(item)

    # ------------------------------------------------------------------ list + watch
    async def _relist(self, prefix: str, rt: ResourceType) -> str:
        listed = await self.storage.list(rt, None)
        items = [o for o in listed.get("items") or [] if isinstance(o, dict)]
        seen: set[str] = set()
        for obj in items:
            node = _node_of(prefix, rt, obj)
            if node is not None:
                seen.add(node.uid)
                self._graph_fields.pop(node.uid, None)
                self._on_upsert(node)
        for node in [n for n in self.nodes.values() if n.prefix == prefix and n.uid not in seen]:
            self._on_deleted(node)
        return str(listed["metadata"]["resourceVersion"])

    async def _follow(self, prefix: str, rv: str | None) -> None:
        failures = 0
        while True:
            rt = self._current_rts().get(prefix)
            if rt is None:
                return
            events = None
            try:
                if rv is None:
                    rv = await self._relist(prefix, rt)
                events = await self.storage.watch(rt, WatchSpec(resource_version=rv))
                async for etype, obj in events:
                    failures = 0
                    if etype == "ERROR":
                        break
                    if etype not in ("ADDED", "MODIFIED", "DELETED") or not isinstance(obj, dict):
                        continue
                    md = meta(obj)
                    rv = as_str(md.get("resourceVersion")) or rv
                    if etype == "MODIFIED" and self._unchanged(md):
                        continue  # owners, deletion state and finalizers as before: nothing for the graph
                    node = _node_of(prefix, rt, obj)
                    if node is None:
                        continue
                    if etype == "DELETED":
                        self._on_deleted(node)
                    else:
                        self._on_upsert(node)
                        self._graph_fields[node.uid] = _graph_fields(md)
                rv = None  # the watch ended (410 Gone / closed): list again
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                if e.code != 410:
                    log.warning("garbage collector: watching %s failed: %s", rt.qualified_resource, e)
                rv = None
            except Exception:
                log.exception("garbage collector: watching %s failed", rt.qualified_resource)
                rv = None
            finally:
                if events is not None:
                    try:
                        await events.aclose()  # type: ignore[attr-defined]
                    except Exception:
                        pass
            await asyncio.sleep(min(_BACKOFF_BASE * (2**failures), _BACKOFF_MAX))
            failures += 1

    # ------------------------------------------------------------------ graph changes
    def _link(self, node: Node) -> None:
        for ref in node.owners:
            self.dependents.setdefault(ref.uid, set()).add(node.uid)

    def _unlink(self, node: Node) -> None:
        for ref in node.owners:
            deps = self.dependents.get(ref.uid)
            if deps is not None:
                deps.discard(node.uid)
                if not deps:
                    del self.dependents[ref.uid]

    def _owner_present(self, ref: OwnerRef, dependent: Node) -> bool:
        owner = self.nodes.get(ref.uid)
        return owner is not None and _compatible(owner, dependent) and not owner.foreground

    def _on_upsert(self, node: Node) -> None:
        old = self.nodes.get(node.uid)
        if old is not None:
            self._unlink(old)
        self.nodes[node.uid] = node
        self._link(node)
        if not self.synced:
            return
        # as a dependent: an owner that is gone (or being deleted in foreground) makes it a candidate
        if node.owners and not node.deleting and not all(self._owner_present(r, node) for r in node.owners):
            self._queue.add(_item(_DELETE, node))
        # owners waiting for their dependents notice references that went away or stopped blocking
        if old is not None and (old.owners != node.owners or old.deleting != node.deleting):
            self._poke_foreground_owners(old.owners)
        # as an owner
        if node.foreground:
            self._queue.add(_item(_FOREGROUND, node))
        if node.orphan:
            self._queue.add(_item(_ORPHAN, node))

    def _unchanged(self, md: dict[str, Any]) -> bool:
        """Whether a modified object's node is as it was: what builds it (owner references, deletion state,
        finalizers) equals what the last event of this object carried. Kubernetes' graph builder does nothing
        for such an update either (it acts on changed references and on deletion transitions only)."""
        uid = md.get("uid")
        if not isinstance(uid, str) or uid not in self.nodes:
            return False
        return self._graph_fields.get(uid) == _graph_fields(md)

    def _on_deleted(self, node: Node) -> None:
        self._graph_fields.pop(node.uid, None)
        current = self.nodes.get(node.uid)
        if current is not None:
            self._unlink(current)
            del self.nodes[node.uid]
            node = current
        if not self.synced:
            return
        self._poke_foreground_owners(node.owners)
        for dep_uid in list(self.dependents.get(node.uid, ())):
            dep = self.nodes.get(dep_uid)
            if dep is not None and not dep.deleting:
                self._queue.add(_item(_DELETE, dep))

    def _poke_foreground_owners(self, refs: Iterable[OwnerRef]) -> None:
        for ref in refs:
            owner = self.nodes.get(ref.uid)
            if owner is not None and owner.foreground:
                self._queue.add(_item(_FOREGROUND, owner))

    def _resync(self) -> None:
        """After the initial list: queue everything that is already due."""
        for node in list(self.nodes.values()):
            if node.foreground:
                self._queue.add(_item(_FOREGROUND, node))
            if node.orphan:
                self._queue.add(_item(_ORPHAN, node))
            if node.owners and not node.deleting and not all(self._owner_present(r, node) for r in node.owners):
                self._queue.add(_item(_DELETE, node))

    def _dependents_of(self, owner_uid: str, owner_namespace: str | None) -> list[Node]:
        out = []
        probe = Node(owner_uid, "", owner_namespace, "", (), False, frozenset())
        for uid in self.dependents.get(owner_uid, ()):
            dep = self.nodes.get(uid)
            if dep is not None and _compatible(probe, dep):
                out.append(dep)
        return out

    # ------------------------------------------------------------------ workers
    async def _worker(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._process(item)
                self._queue.forget(item)
            except asyncio.CancelledError:
                raise
            except _Requeue:
                self._queue.add_rate_limited(item)
            except ApiError as e:
                delay = self._queue.add_rate_limited(item)
                log.warning("garbage collector: %s %s/%s (%s) failed: %s; retrying in %.2fs",
                            item.kind, item.namespace or "", item.name, item.uid, e, delay)
            except Exception:
                delay = self._queue.add_rate_limited(item)
                log.exception("garbage collector: %s %s/%s (%s) failed; retrying in %.2fs",
                              item.kind, item.namespace or "", item.name, item.uid, delay)
            finally:
                self._queue.done(item)

    async def _process(self, item: _Item) -> None:
        rt = self._current_rts().get(item.prefix)
        if rt is None:
            return  # the resource is no longer served
        obj = await self._get_same(rt, item.namespace, item.name, item.uid)
        if obj is None:
            return
        if item.kind == _DELETE:
            await self._attempt_to_delete(item, rt, obj)
        elif item.kind == _FOREGROUND:
            await self._process_foreground(item, rt, obj)
        elif item.kind == _ORPHAN:
            await self._process_orphan(item, rt, obj)

    async def _get_same(self, rt: ResourceType, namespace: str | None, name: str, uid: str) -> dict[str, Any] | None:
        """The stored object if it still is the one with ``uid``."""
        try:
            obj = await self.storage.get(rt, namespace, name)
        except ApiError as e:
            if e.code == 404:
                return None
            raise
        if as_str(meta(obj).get("uid")) != uid:
            return None
        return obj

    # ------------------------------------------------------------------ dependents
    async def _owner_state(self, ref: dict[str, Any], dep_rt: ResourceType, dep_namespace: str | None,
                           cache: dict[str, str]) -> str:
        """How the owner of ``ref`` stands: solid, dangling (absent), waiting (being deleted in foreground,
        waiting for its dependents) or unresolvable (unknown kind, or namespaced owner of a cluster-scoped
        dependent)."""
        uid = ref["uid"]
        if uid in cache:
            return cache[uid]
        api_version, kind, name = as_str(ref.get("apiVersion")), as_str(ref.get("kind")), as_str(ref.get("name"))
        group, _, version = api_version.rpartition("/")
        rt = self.types.by_kind(group, version, kind) if kind else None
        if rt is None and kind:
            rt = next((t for t in self.types.all() if t.group == group and t.kind == kind), None)
        if rt is None or (rt.namespaced and not dep_rt.namespaced):
            state = "unresolvable"
        else:
            try:
                owner: dict[str, Any] | None = await self.storage.get(rt, dep_namespace if rt.namespaced else None,
                                                                      name) if name else None
            except ApiError as e:
                if e.code != 404:
                    raise
                owner = None
            if owner is None or as_str(meta(owner).get("uid")) != uid:
                state = "dangling"
            elif meta(owner).get("deletionTimestamp") and FOREGROUND_FINALIZER in _finalizers(owner):
                state = "waiting"
            else:
                state = "solid"
        cache[uid] = state
        return state

    async def _attempt_to_delete(self, item: _Item, rt: ResourceType, obj: dict[str, Any]) -> None:
        md = meta(obj)
        if md.get("deletionTimestamp"):
            return  # on its way out; its own finalizers decide when
        refs = owner_refs_of(obj)
        if not refs:
            return
        cache: dict[str, str] = {}
        states = {r["uid"]: await self._owner_state(r, rt, item.namespace, cache) for r in refs}
        solid = {u for u, s in states.items() if s == "solid"}
        dangling = {u for u, s in states.items() if s == "dangling"}
        waiting = {u for u, s in states.items() if s == "waiting"}
        unresolvable = {u for u, s in states.items() if s == "unresolvable"}
        if solid:
            if dangling or waiting:
                gone = dangling | waiting
                log.info("garbage collector: removing owner references %s from %s %s/%s", sorted(gone),
                         rt.kind, item.namespace or "", item.name)
                await self._rewrite_owner_refs(rt, obj, lambda rs: [r for r in rs if r.get("uid") not in gone])
            return
        if unresolvable:
            # kube does not collect an object whose owners cannot be looked up; retry when types change
            self._unresolved.add(item)
            return
        policy = "Background"
        if waiting and self.dependents.get(item.uid):
            # some owner waits for its dependents and this one has dependents itself: delete it in foreground.
            # If one of those is in foreground deletion too, stop blocking the owners to break cycles.
            if any(self.nodes[d].foreground for d in self.dependents.get(item.uid, ()) if d in self.nodes):
                def unblock(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
                    return [{**r, "blockOwnerDeletion": False} if r.get("uid") in waiting else r for r in rs]

                obj = await self._rewrite_owner_refs(rt, obj, unblock) or obj
            policy = "Foreground"
        else:
            fins = _finalizers(obj)
            if ORPHAN_FINALIZER in fins:
                policy = "Orphan"
            elif FOREGROUND_FINALIZER in fins:
                policy = "Foreground"
        log.info("garbage collector: deleting %s %s/%s (no owner left), propagationPolicy %s", rt.kind,
                 item.namespace or "", item.name, policy)
        options = {"propagationPolicy": policy,
                   "preconditions": {"uid": item.uid, "resourceVersion": meta(obj).get("resourceVersion")}}
        try:
            await self.storage.delete(rt, item.namespace, item.name, options)
        except ApiError as e:
            if e.code == 404:
                return
            if e.code == 409:
                raise _Requeue() from None  # changed meanwhile: look again
            raise

    async def _rewrite_owner_refs(
        self, rt: ResourceType, obj: dict[str, Any],
        change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    ) -> dict[str, Any] | None:
        """Patch the object's ownerReferences to ``change(refs)`` with a resourceVersion precondition;
        re-read and retry on conflicts. Returns the new object (None when it is gone)."""

        def rewrite(md: Mapping[str, Any]) -> dict[str, Any] | None:
            raw = md.get("ownerReferences")
            refs = [r for r in raw if isinstance(r, dict)] if isinstance(raw, list) else []
            new_refs = change(refs)
            return None if new_refs == refs else {"ownerReferences": new_refs or None}

        done, written = await self.storage.edit_metadata(rt, obj, rewrite, attempts=_WRITE_RETRIES)
        if not done:
            raise _Requeue()
        return written

    # ------------------------------------------------------------------ owners
    async def _remove_finalizer(self, rt: ResourceType, obj: dict[str, Any], finalizer: str) -> None:
        if not await self.storage.remove_finalizer(rt, obj, finalizer, attempts=_WRITE_RETRIES):
            raise _Requeue()

    async def _process_foreground(self, item: _Item, rt: ResourceType, obj: dict[str, Any]) -> None:
        md = meta(obj)
        if not md.get("deletionTimestamp") or FOREGROUND_FINALIZER not in _finalizers(obj):
            return
        blocking = []
        for dep in self._dependents_of(item.uid, item.namespace):
            if not dep.deleting:
                self._queue.add(_item(_DELETE, dep))
            ref = dep.ref_to(item.uid)
            if ref is not None and ref.block:
                blocking.append(dep)
        if blocking:
            self._queue.add_after(item, _FOREGROUND_RECHECK)
            return
        log.info("garbage collector: dependents of %s %s/%s are gone, removing finalizer %s", rt.kind,
                 item.namespace or "", item.name, FOREGROUND_FINALIZER)
        await self._remove_finalizer(rt, obj, FOREGROUND_FINALIZER)

    async def _process_orphan(self, item: _Item, rt: ResourceType, obj: dict[str, Any]) -> None:
        md = meta(obj)
        if not md.get("deletionTimestamp") or ORPHAN_FINALIZER not in _finalizers(obj):
            return
        failed = False
        for dep in self._dependents_of(item.uid, item.namespace):
            dep_rt = self._current_rts().get(dep.prefix)
            if dep_rt is None:
                continue
            try:
                dep_obj = await self._get_same(dep_rt, dep.namespace, dep.name, dep.uid)
                if dep_obj is not None:
                    await self._rewrite_owner_refs(
                        dep_rt, dep_obj, lambda rs: [r for r in rs if r.get("uid") != item.uid])
            except (ApiError, _Requeue) as e:
                log.warning("garbage collector: orphaning %s %s/%s failed: %s", dep_rt.kind, dep.namespace or "",
                            dep.name, e)
                failed = True
        if failed:
            raise _Requeue()
        log.info("garbage collector: dependents of %s %s/%s orphaned, removing finalizer %s", rt.kind,
                 item.namespace or "", item.name, ORPHAN_FINALIZER)
        await self._remove_finalizer(rt, obj, ORPHAN_FINALIZER)
