"""The work status controller: member object status -> ``Work.status.manifestStatuses``.

Per Ready member cluster it watches each resource type that the applied Works of that cluster carry,
label-selected on ``karmada.io/managed=true`` (so only objects Flotilla placed are cached), through the informers
it shares with the execution controller (:mod:`.member_informers`: one list and watch per member and kind). Every
event of such an object that names its Work (annotations ``work.karmada.io/namespace`` / ``name``) enqueues the
object; processing it (once its Work is ``Applied``, as Karmada: the Work's Applied condition arriving enqueues
its objects again) reflects the status and the health through the resource interpreter and records
``{identifier, status, health}`` in the Work's status subresource when that entry changed (merge patch with the
Work's resourceVersion as precondition, retried on 409; the next write starts from the Work as this controller
last wrote it when the cache has not caught up yet). Under load the execution controller leaves a successful
apply's ``Applied``/``Dispatching`` conditions to this controller (:mod:`.applied_handoff`): they go out in the same
patch as the Work's first report, and the Work counts as applied here until then. The echo of its own report does
not queue the Work again.

Its handlers follow the clusters: they are added when an applied Work of a Ready cluster needs a kind, removed
for resource types no applied Work of the cluster carries any more, and all removed when the cluster stops
being Ready or its Cluster object goes (then the shared informers stop too). A cluster that is Ready again gets
its handlers back, which are first told of every cached object, so every object is reflected again. While a
cluster is not Ready, its Works keep the last observed status; the binding status controller reports it as stale
(D14).

Drift by deletion: when a managed object disappears from a member (deleted, or its ``karmada.io/managed``
label removed) while its Work, applied and not being deleted (checked live, not in the cache), still lists it,
the controller stamps the Work's annotation ``work.flotilla.io/reapply-requested`` with the time (a metadata
merge patch: no generation bump) and records a Warning Event ``MemberObjectMissing`` on the Work. That is the
request to apply the Work again, made through the Work only: the execution controller re-applies a Work
when this annotation changes (besides its own drift handling). Member-side edits of a managed object are
the execution controller's drift correction alone.

Member object events of a Work the cache shows being deleted (or, for a deletion, gone) are not queued (nothing
to record nor to re-apply); nor are Work events of a Work not applied or being deleted (a ``work|`` pass does
nothing then).

Queue keys: ``work|<ns>|<name>`` (set up informers for a Work), ``cluster|<name>`` (start/stop informers for a
cluster) and ``obj|<cluster>|<apiVersion>|<kind>|<ns>|<name>|<work ns>|<work name>`` (reflect one object).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from flotilla.api.labels import MANAGED_LABEL
from flotilla.api.resources import WORKS
from flotilla.client import ApiException, Client, Informer, Resource, is_conflict, is_not_found
from flotilla.client.events import WARNING
from flotilla.client.informer import HandlerRegistration
from flotilla.cluster.health import is_ready
from flotilla.interpreter import (
    InterpreterError,
    Operation,
)
from flotilla.kube.jsondiff import with_precondition
from flotilla.kube.resources import object_key
from flotilla.propagation import status as st
from flotilla.propagation.written import WrittenObjects
from flotilla.runtime.applied_handoff import LeftConditions, applied_handoff
from flotilla.runtime.base import Controller, ControllerContext
from flotilla.runtime.interpreters import shared_interpreter
from flotilla.runtime.keyed_locks import KeyedLocks
from flotilla.runtime.member_informers import member_informers
from flotilla.runtime.members import MemberClientError

log = logging.getLogger(__name__)

__all__ = ["WorkStatusController"]

CLUSTER_RECHECK = 30.0  # seconds: how often a Ready cluster's member client is checked for replacement
STATUS_RETRIES = 5
#: seconds a Work's first report waits for a member informer just started to list the member's objects
INFORMER_SYNC_WAIT = 2.0
#: seconds after an apply that the conditions left for a Work's first report wait for its copies to be seen
FIRST_REPORT_WAIT = 1.0
INFORMER_CLEANUP_DELAY = 5.0  # seconds after a Work's deletion before its cluster's informers are looked at

_Obj = dict[str, Any]


# ============================================================================================ interpreter


# ============================================================================================ member watches


class _MemberWatch:
    """This controller's handlers on the shared informers of one member cluster, keyed by (apiVersion, kind)."""

    def __init__(self, cluster: str, client: Client) -> None:
        self.cluster = cluster
        self.client = client
        self.resources: dict[tuple[str, str], Resource] = {}
        self.informers: dict[tuple[str, str], Informer] = {}
        self.handlers: dict[tuple[str, str], HandlerRegistration] = {}

    async def resource(self, api_version: str, kind: str) -> Resource:
        key = (api_version, kind)
        res = self.resources.get(key)
        if res is None:
            res = await self.client.resource_for(api_version, kind)
            self.resources[key] = res
        return res

    def unwatch(self, key: tuple[str, str]) -> None:
        """No more events of that kind for this controller (the shared informer may go on for others)."""
        inf, reg = self.informers.pop(key, None), self.handlers.pop(key, None)
        if inf is not None and reg is not None:
            inf.remove_handler(reg)

    def stop(self) -> None:
        for key in list(self.informers):
            self.unwatch(key)


def _object_key(cluster: str, api_version: str, kind: str, obj: Mapping[str, Any]) -> str | None:
    ref = st.work_ref_of(obj)
    if ref is None:
        return None
    md = obj.get("metadata") or {}
    return "|".join(("obj", cluster, api_version, kind, str(md.get("namespace") or ""), str(md.get("name") or ""),
                     ref[0], ref[1]))


# ============================================================================================ controller


class WorkStatusController(Controller):
    name: ClassVar[str] = "work-status"
    role: ClassVar[str] = "reports"
    workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self._watches: dict[str, _MemberWatch] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        #: the Works as this controller last wrote them (its next write starts from there, not from a cache
        #: that has not seen the previous one yet: no 409 for consecutive status changes of one object)
        self._written = WrittenObjects()
        #: a successful apply's conditions that the execution controller left, under load, for this controller's
        #: first report of the Work (:mod:`.applied_handoff`)
        self._handoff = applied_handoff(ctx.extras)
        #: the member informers this controller shares with the execution controller
        self._member_informers = member_informers(ctx.extras)
        #: one report of a Work at a time (its own key and its objects' keys are queued separately)
        self._reporting = KeyedLocks()
        #: Work key -> the object keys whose pass found the Work not applied yet: looked at again once it is
        self._awaiting_applied: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        self.works = self.works_informer()
        self.clusters = self.clusters_informer()
        self.interpreters = shared_interpreter(self.ctx)
        self.works.add_handler(on_add=self._on_work_add, on_update=self._on_work_update,
                               on_delete=self._on_work_delete)
        self.clusters.add_handler(on_add=self._on_cluster, on_update=self._on_cluster_update,
                                  on_delete=self._on_cluster)
        self._handoff.take_from_now_on(self._conditions_left)

    def _conditions_left(self, work_key: str) -> None:
        namespace, _, name = work_key.partition("/")
        self.enqueue(f"work|{namespace}|{name}")

    def _applied(self, work: _Obj) -> LeftConditions | bool:
        """Whether the Work is applied: True by its ``Applied`` condition; the conditions the execution controller
        left for its first report when they are still to be written; else False."""
        if st.work_applied(work)[0]:
            return True
        md = work.get("metadata") or {}
        return self._handoff.left_for(f"{md.get('namespace')}/{md.get('name')}", work) or False

    def _on_work_add(self, work: _Obj) -> None:
        if _syncable(work):  # a Work just created is not applied yet: its Applied condition is the event
            self._enqueue_work(work)

    def _on_work_update(self, old: _Obj, new: _Obj) -> None:
        if _syncable(new):
            md = new.get("metadata") or {}
            self._release_awaiting(f"{md.get('namespace')}/{md.get('name')}")
        if st.work_needs_informer_sync(old, new) and _syncable(new) and not self._own_echo(new):
            self._enqueue_work(new)

    def _release_awaiting(self, work_key: str) -> None:
        """The Work is applied: its objects whose passes found it not applied yet are looked at again. (Its own
        echo would not do it: the pass that wrote the Applied condition may have read the objects before them.)"""
        for key in self._awaiting_applied.pop(work_key, ()):
            self.enqueue(key)

    def _own_echo(self, work: _Obj) -> bool:
        """Whether the Work is as this controller wrote it (the Applied condition it wrote with the first report:
        the informers and the objects were looked at by that very pass)."""
        md = work.get("metadata") or {}
        return self._written.wrote(f"{md.get('namespace')}/{md.get('name')}", work)

    def _on_work_delete(self, work: _Obj) -> None:
        md = work.get("metadata") or {}
        self._handoff.drop(f"{md.get('namespace')}/{md.get('name')}")  # conditions left for it go with it
        self._awaiting_applied.pop(f"{md.get('namespace')}/{md.get('name')}", None)
        cluster = st.work_cluster(work)
        if cluster and cluster in self._watches:
            # drop informers no Work needs any more; a moment later, so that one pass over the cluster's Works
            # serves every Work deleted meanwhile (a failover deletes them all at once)
            self.enqueue(f"cluster|{cluster}", INFORMER_CLEANUP_DELAY)

    def _enqueue_work(self, work: _Obj) -> None:
        md = work.get("metadata") or {}
        if md.get("namespace") and md.get("name"):
            self.enqueue(f"work|{md['namespace']}|{md['name']}")

    def _on_cluster(self, cluster: _Obj) -> None:
        name = (cluster.get("metadata") or {}).get("name")
        if name:
            self.enqueue(f"cluster|{name}")

    def _on_cluster_update(self, old: _Obj, new: _Obj) -> None:
        if st.ready_changed(old, new) or (old.get("metadata") or {}).get("generation") != (
                new.get("metadata") or {}).get("generation"):
            self._on_cluster(new)

    def _member_handlers(self, cluster: str, api_version: str, kind: str) -> dict[str, Any]:
        def enqueue(obj: _Obj) -> None:
            key = _object_key(cluster, api_version, kind, obj)
            if key is not None:
                self.enqueue(key)

        def work_of(obj: _Obj) -> _Obj | None:
            ref = st.work_ref_of(obj)
            return self.works.store.get(f"{ref[0]}/{ref[1]}") if ref is not None else None

        def updated(obj: _Obj) -> None:
            work = work_of(obj)
            if work is None or not (work.get("metadata") or {}).get("deletionTimestamp"):
                enqueue(obj)  # (the status of a Work being deleted is not recorded any more)

        def deleted(obj: _Obj) -> None:
            # the object of a Work gone or going from the cache went with it: nothing to reflect nor to re-apply
            work = work_of(obj)
            if work is not None and not (work.get("metadata") or {}).get("deletionTimestamp"):
                enqueue(obj)

        return {"on_add": enqueue, "on_update": lambda old, new: updated(new), "on_delete": deleted}

    # ------------------------------------------------------------------ lifecycle
    async def stop(self) -> None:
        self._handoff.stop_taking(self._conditions_left)
        await super().stop()
        watches, self._watches = list(self._watches.values()), {}
        for watch in watches:
            watch.stop()
        await self._member_informers.stop()

    def _lock(self, cluster: str) -> asyncio.Lock:
        lock = self._locks.get(cluster)
        if lock is None:
            lock = self._locks[cluster] = asyncio.Lock()
        return lock

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> float | None:
        kind, _, rest = key.partition("|")
        if kind == "work":
            ns, _, name = rest.partition("|")
            return await self._sync_work(ns, name)
        if kind == "cluster":
            return await self._sync_cluster(rest)
        if kind == "obj":
            parts = rest.split("|")
            if len(parts) == 7:
                return await self._sync_object(*parts)
        log.warning("work-status: ignoring malformed key %r", key)
        return None

    # ---- clusters
    async def _drop_watch(self, cluster: str) -> None:
        watch = self._watches.pop(cluster, None)
        if watch is not None:
            watch.stop()
            log.info("work-status: stopped watching cluster %s", cluster)

    async def _watch_for(self, cluster_obj: _Obj) -> tuple[_MemberWatch, bool]:
        """The cluster's watch, (re)built when missing or when its member client was replaced; ``True`` if new.
        Call with the cluster's lock held."""
        name = str((cluster_obj.get("metadata") or {}).get("name"))
        client = await self.ctx.members.client_for(cluster_obj)
        watch = self._watches.get(name)
        if watch is not None and watch.client is client:
            return watch, False
        await self._drop_watch(name)
        watch = self._watches[name] = _MemberWatch(name, client)
        return watch, True

    def _works_of(self, cluster: str) -> list[_Obj]:
        return self.works.store.by_index("namespace", f"karmada-es-{cluster}")

    async def _sync_cluster(self, name: str) -> float | None:
        cluster_obj = self.clusters.store.get(name)
        async with self._lock(name):
            if cluster_obj is None or not is_ready(cluster_obj) or not self.serves(cluster_obj):
                await self._drop_watch(name)
                if cluster_obj is None:
                    self._member_informers.forget(name)
                return None
            if name not in self._watches:
                # nothing watched yet: the Works of the cluster set up what they need
                for work in self._works_of(name):
                    self._enqueue_work(work)
                return None
            try:
                watch, rebuilt = await self._watch_for(cluster_obj)
            except MemberClientError as e:
                log.warning("work-status: cluster %s: %s", name, e)
                await self._drop_watch(name)
                return CLUSTER_RECHECK
            if rebuilt:
                for work in self._works_of(name):
                    self._enqueue_work(work)
                return CLUSTER_RECHECK
            needed = set()
            for work in self._works_of(name):
                if not (work.get("metadata") or {}).get("deletionTimestamp") and self._applied(work):
                    for m in ((work.get("spec") or {}).get("workload") or {}).get("manifests") or ():
                        if isinstance(m, Mapping):
                            needed.add((str(m.get("apiVersion") or ""), str(m.get("kind") or "")))
            for key in [k for k in watch.informers if k not in needed]:
                watch.unwatch(key)
                log.info("work-status: cluster %s: no applied Work carries %s %s any more; not watched any more",
                         name, *key)
        return CLUSTER_RECHECK

    # ---- Works
    async def _sync_work(self, namespace: str, name: str) -> float | None:
        work = self._written.fresh(f"{namespace}/{name}", self.works.store.get(f"{namespace}/{name}"))
        if work is None or (work.get("metadata") or {}).get("deletionTimestamp"):
            return None
        applied = self._applied(work)
        if not applied:
            return None  # the Applied condition arriving (or being left for this controller) wakes the Work again
        left = applied if isinstance(applied, LeftConditions) else None
        try:
            cached, error = await self._watch_work(work)
        except Exception:
            if left is not None:  # the conditions do not wait for the member's informers
                await self._report(work, [], left)
            raise
        if left is not None:
            # the conditions left by the execution controller go out with the status of the Work's copies (its
            # first report; an informer just started lists them first). A copy applied moments ago may not be in
            # the cache yet: its event reports it with the conditions; after FIRST_REPORT_WAIT they go out anyway
            await asyncio.gather(*(inf.wait_synced(INFORMER_SYNC_WAIT) for inf, *_ in cached if not inf.has_synced))
            found = [(inf, obj) for inf, *_, obj_key in cached if (obj := inf.store.get(obj_key)) is not None]
            waited = time.monotonic() - left.at
            if len(found) < len(cached) and waited < FIRST_REPORT_WAIT:
                self.enqueue(f"work|{namespace}|{name}", FIRST_REPORT_WAIT - waited)
            else:
                await self._report(work, found, left)
        else:
            # objects seen before their Work existed (or was applied) are looked at again now
            cluster = str(st.work_cluster(work))
            for inf, api_version, kind, obj_key in cached:
                obj = inf.store.get(obj_key)
                if obj is not None:
                    key = _object_key(cluster, api_version, kind, obj)
                    if key is not None:
                        self.enqueue(key)
        if error:
            raise RuntimeError(error)
        return None

    async def _watch_work(self, work: _Obj) -> tuple[list[tuple[Informer, str, str, str]], str]:
        """Start the member informers the Work's manifests need: ``(informer, apiVersion, kind, cache key)`` per
        manifest (none while its cluster is not Ready: the cluster becoming Ready is a Cluster event), and what
        could not be watched (``""``: nothing). Raises when the member cannot be reached."""
        cluster = st.work_cluster(work)
        if cluster is None:
            return [], ""
        cluster_obj = self.clusters.store.get(cluster)
        if cluster_obj is None or not is_ready(cluster_obj) or not self.serves(cluster_obj):
            return [], ""  # (a Pull cluster's Works are reported by its agent)
        manifests = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
        errors: list[str] = []
        cached: list[tuple[Informer, str, str, str]] = []
        async with self._lock(cluster):
            watch = self._watches.get(cluster)
            if watch is None:
                try:
                    watch, _ = await self._watch_for(cluster_obj)
                except MemberClientError as e:
                    raise RuntimeError(f"cluster {cluster}: {e}") from e
                self.enqueue(f"cluster|{cluster}", CLUSTER_RECHECK)
            for m in manifests:
                if not isinstance(m, Mapping):
                    continue
                api_version, kind, obj_ns, obj_name = st.object_ref(m)
                try:
                    res = await watch.resource(api_version, kind)
                except ApiException as e:
                    errors.append(f"{api_version} {kind}: {e}")
                    continue
                inf = watch.informers.get((api_version, kind))
                if inf is None:
                    inf = self._member_informers.informer(cluster, watch.client, res)
                    watch.handlers[(api_version, kind)] = inf.add_handler(
                        **self._member_handlers(cluster, api_version, kind))
                    watch.informers[(api_version, kind)] = inf
                    log.info("work-status: cluster %s: watching %s", cluster, res)
                cached.append((inf, api_version, kind,
                               f"{obj_ns}/{obj_name}" if obj_ns and res.namespaced else obj_name))
        if not errors:
            return cached, ""
        md = work.get("metadata") or {}
        return cached, f"work {md.get('namespace')}/{md.get('name')}: cannot watch in cluster {cluster}: " + \
            "; ".join(errors)

    # ---- member objects
    async def _sync_object(self, cluster: str, api_version: str, kind: str, obj_ns: str, obj_name: str,
                           work_ns: str, work_name: str) -> float | None:
        watch = self._watches.get(cluster)
        inf = watch.informers.get((api_version, kind)) if watch is not None else None
        if watch is None or inf is None:
            return None  # cluster gone or not Ready, or nothing carries this kind any more
        obj = inf.store.get(f"{obj_ns}/{obj_name}" if obj_ns else obj_name)
        if obj is None:
            return await self._object_missing(cluster, api_version, kind, obj_ns, obj_name, work_ns, work_name)
        ref = st.work_ref_of(obj)
        if ref is None:
            return None
        work_key = f"{ref[0]}/{ref[1]}"
        work = self._written.fresh(work_key, self.works.store.get(work_key))
        if work is None or (work.get("metadata") or {}).get("deletionTimestamp"):
            return None
        applied = self._applied(work)
        if not applied:
            # as Karmada ("work hadn't been applied yet"): its Applied condition arriving looks at the object again,
            # so the status goes on a Work that already carries what the execution controller wrote
            key = _object_key(cluster, api_version, kind, obj)
            if key is not None:
                self._awaiting_applied.setdefault(work_key, set()).add(key)
            return None
        await self._report(work, [(inf, obj)], applied if isinstance(applied, LeftConditions) else None)
        return None

    async def _reflect(self, work: _Obj, inf: Informer, obj: _Obj) -> tuple[_Obj, str, Any, str]:
        """``(object, plural, status, health)`` of a member object (InterpreterError: after a Warning Event).
        Customization scripts run in the Lua worker threads, not on the event loop."""
        interpreter = self.interpreters.get()
        try:
            status = await interpreter.offload(Operation.INTERPRET_STATUS, obj, lambda: interpreter.reflect_status(obj))
        except InterpreterError as e:
            api_version, kind, obj_ns, obj_name = st.object_ref(obj)
            self.ctx.recorder.event(work, WARNING, "ReflectStatusFailed",
                                    f"Reflecting the status of {kind} {_display(obj_ns, obj_name)} in cluster "
                                    f"{st.work_cluster(work)} failed: {e}")
            raise
        health = await interpreter.offload(Operation.INTERPRET_HEALTH, obj, lambda: interpreter.health(obj))
        return obj, inf.res.plural, status, str(health)

    async def _report(self, work: _Obj, objects: list[tuple[Informer, _Obj]], left: LeftConditions | None) -> None:
        """Record the status of these member objects in their Work, in one status patch with the conditions the
        execution controller ``left`` (if any; then also when no object is given).

        The passes that report one Work (its own key and its objects' keys) take turns, and each reflects the objects
        as the cache holds them once its turn has come: a pass that read an object before a newer report went out
        never writes the older status over it."""
        md = work.get("metadata") or {}
        ns, name = str(md.get("namespace")), str(md.get("name"))
        key = f"{ns}/{name}"
        async with self._reporting.hold(key):
            work = self._written.fresh(key, self.works.store.get(key)) or work
            if left is not None:
                left = self._handoff.left_for(key, work)  # (None: a pass before this one wrote them)
                if left is None and not objects:
                    return
            objects = [(inf, inf.store.get(object_key(obj)) or obj) for inf, obj in objects]
            await self._report_turn(key, work, objects, left)

    async def _report_turn(self, key: str, work: _Obj, objects: list[tuple[Informer, _Obj]],
                           left: LeftConditions | None) -> None:
        reflected: list[tuple[_Obj, str, Any, str]] = []
        failed: InterpreterError | None = None
        for inf, obj in objects:
            try:
                reflected.append(await self._reflect(work, inf, obj))
            except InterpreterError as e:
                failed = e  # the others (and the conditions left) are written; this pass is retried after
        ns, _, name = key.partition("/")
        for _ in range(STATUS_RETRIES):
            status = st.work_report_patch(work, reflected, left.conditions if left else (), left.now if left else "")
            if status is None:
                if left is not None:
                    self._handoff.written(key, left)
                break
            patch = with_precondition({"status": status}, work)
            try:
                written = await self.client.patch(WORKS, name, patch, namespace=ns, subresource="status")
            except ApiException as e:
                if is_not_found(e):
                    self._written.forget(key)
                    return
                if not is_conflict(e):
                    raise
            else:
                self._written.record(key, work, written)
                if left is not None:
                    self._handoff.written(key, left)
                    self._release_awaiting(key)  # the Applied condition went out with this report
                break
            found = await self.client.get_or_none(WORKS, name, ns, resource_version="0")  # as patch_with_retry
            if found is None:
                return
            work = found
            if (work.get("metadata") or {}).get("deletionTimestamp"):
                return
            if left is not None:  # the execution controller may have written (or replaced) them meanwhile
                left = self._handoff.left_for(key, work)
                if left is None and not st.work_applied(work)[0]:
                    return
        else:
            raise RuntimeError(f"work {ns}/{name}: status kept conflicting after {STATUS_RETRIES} attempts")
        if failed is not None:
            raise failed

    async def _object_missing(self, cluster: str, api_version: str, kind: str, obj_ns: str, obj_name: str,
                              work_ns: str, work_name: str) -> float | None:
        """A managed object left the member's cache: ask for the Work to be applied again if it still wants it."""
        cached = self.works.store.get(f"{work_ns}/{work_name}")
        if cached is None or (cached.get("metadata") or {}).get("deletionTimestamp"):
            return None  # gone or going (its deletion removed the object): nothing to ask for
        # live, not cached: the Work may have started deleting (which deletes the object) a moment ago
        work = await self.client.get_or_none(WORKS, work_name, work_ns)
        if work is None:
            return None
        if (work.get("metadata") or {}).get("deletionTimestamp") or not st.work_applied(work)[0]:
            return None
        manifests = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
        if st.manifest_index(manifests, api_version, kind, obj_ns, obj_name) < 0:
            return None
        if not is_ready(self.clusters.store.get(cluster)):
            return None
        await self.client.patch(WORKS, work_name, st.reapply_patch(self.ctx.now()), namespace=work_ns)
        self.ctx.recorder.event(
            work, WARNING, "MemberObjectMissing",
            f"{kind} {_display(obj_ns, obj_name)} is gone from cluster {cluster} (deleted, or its "
            f"{MANAGED_LABEL} label removed) while this Work still wants it; asked for the Work to be applied again")
        log.info("work-status: %s %s missing in cluster %s; re-apply of Work %s/%s requested", kind,
                 _display(obj_ns, obj_name), cluster, work_ns, work_name)
        return None


def _syncable(work: _Obj) -> bool:
    """Whether a ``work|`` pass can do anything for the Work: it is applied and not being deleted."""
    return not (work.get("metadata") or {}).get("deletionTimestamp") and st.work_applied(work)[0]


def _display(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name

