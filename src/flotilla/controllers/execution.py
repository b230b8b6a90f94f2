"""The execution controller: a Work's manifests are created, updated or deleted in its member cluster.

Karmada's execution controller and object watcher for Push clusters, and in ``flotilla
agent`` for the agent's Pull cluster (``ControllerOptions.agent_cluster``: only the Works of its execution
namespace are watched; :mod:`flotilla.cluster.scope`). Decisions are in :mod:`flotilla.propagation.apply`; this
module talks to the control plane and the members.

Triggers: a Work's creation and every change of its generation (its spec, or its deletion), plus
drift: every member object carrying ``karmada.io/managed=true`` and the ``work.karmada.io/namespace``
/ ``name`` annotations is watched once a Work put it there (through the member informers shared with the
work-status controller, :mod:`.member_informers`), and its Work is synced again when it is
re-created with another resourceVersion than the one Flotilla wrote, changed (pruned content) by
someone else, or deleted. A cluster becoming Ready does not wake anything (as in Karmada, retries are
backoff-driven).

Reconcile (Work in ``karmada-es-<cluster>``):

* being deleted: :func:`~flotilla.propagation.apply.work_deletion_action` says whether to keep the
  member objects (``preserveResourcesOnDeletion``: only Karmada's metadata is removed from them),
  delete them (Ready cluster), wait (not Ready: the Work and its finalizer stay, retried with
  backoff), or release the Work without contacting the member (cluster terminating or gone; the
  fenced clusters of D2 plug in here through :meth:`ExecutionController.fenced`); then the finalizer
  ``karmada.io/execution-controller`` is removed;
* otherwise: the finalizer is added if missing, the ``Dispatching`` condition follows
  ``spec.suspendDispatching`` (suspended Works are not applied), a cluster that is not Ready fails
  the attempt ("cluster(<name>) not ready", retried with backoff), and each manifest is applied
  (the namespace is created in the member when missing); the ``Applied`` condition (True
  ``AppliedSuccessful`` / False ``AppliedFailed`` "Failed to apply all manifests (k/n): ...") is
  written through the status subresource, in the same merge patch as ``Dispatching`` (alone when the
  cluster cannot be reached in this pass). ``manifestStatuses`` belong to the work-status controller.

Member objects are looked at in the drift informer's cache once it has synced (as Karmada's object
watcher does): an object missing there is created without a GET first (one that is not ours answers
AlreadyExists, and the next attempt reads it), a stale copy answers 409 to the update, a managed one is
deleted with its uid as precondition; a manifest applied last whose member object did not change since
(same resourceVersion as written) is not looked at again at all.

Fencing (D2, :mod:`flotilla.failover.fencing`): a Cluster carrying
``cluster.flotilla.io/out-of-service:NoExecute`` is fenced. A Work deleted there is released without
contacting the member; the Work gets the ``work.flotilla.io/abandoned-on-fenced-cluster`` annotation and
the ``Abandoned`` condition before its finalizer goes, and a Warning Event ``WorkAbandoned``. Nothing is
applied to a fenced cluster. The controller-manager also releases the Works deleted on a fenced *Pull* cluster
(whose Works are otherwise its agent's): a fenced cluster's agent may never come back. A cluster seen turning not Ready or fenced (or one where a Work was abandoned) has a
recovery purge pending: the member objects labelled ``karmada.io/managed=true`` of the kinds Flotilla placed there
(those of its Works, and of the Works abandoned there) that no current Work wants are deleted
(:func:`~flotilla.failover.fencing.stale_objects_on_recovery`). D17: the purge runs as soon as the member's API
answers again, fenced or not, Ready or not yet (:func:`~flotilla.failover.fencing.recovery_purge_step`): the fence
keeps new applies away, not these deletions. The purge is queued as ``purge-cluster:<name>`` when the cluster turns
not Ready or fenced, when a Work is abandoned there, when it is Ready and unfenced again (one more purge then,
before any Work is applied there) and at every healthy answer of its health probe on the cluster-status
controller's probe board (:class:`~flotilla.failover.brake.ProbeBoard`, same process) while one is pending. While
the board says the member does not answer, the purge does not contact it; a purge that fails (the member or the
control plane does not answer) is tried again with a backoff capped at the status period
(:func:`~flotilla.failover.fencing.purge_retry_delay`). Every Work of the cluster waits for a pending purge before
it is applied. The purge decides from a fresh, complete list of the cluster's Works
(:func:`~flotilla.failover.fencing.recovery_works`), never from the informer's cache, which is empty after a restart
or while lists are refused. In ``flotilla agent`` the same holds for the agent's Pull cluster: its own
cluster-status controller probes the member, and after a partition from the control plane the purge runs as soon
as the fresh list of Works can be read, before anything is applied.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from flotilla.api import labels as L
from flotilla.api.resources import RESOURCE_INTERPRETER_CUSTOMIZATIONS, WORKS
from flotilla.client import (
    ApiException,
    Client,
    Informer,
    Resource,
    is_already_exists,
    is_conflict,
    is_not_found,
)
from flotilla.client.informer import HandlerRegistration
from flotilla.cluster.health import is_ready
from flotilla.failover.brake import PROBE_BOARD, ProbeBoard
from flotilla.failover.events import EVENT_STALE_OBJECTS_DELETED
from flotilla.failover.fencing import (
    ObjectIdentity,
    PurgeStep,
    is_fenced,
    purge_retry_delay,
    recovery_purge_step,
    recovery_works,
    stale_objects_on_recovery,
    wanted_identities,
    work_deletion_decision,
)
from flotilla.interpreter import Operation
from flotilla.kube.conditions import set_conditions
from flotilla.kube.objects import meta_of
from flotilla.kube.resources import NAMESPACES
from flotilla.kube.times import format_time
from flotilla.policy.naming import generate_execution_space_name
from flotilla.propagation.apply import (
    ApplyAction,
    DeleteAction,
    LazyRecord,
    WorkDeletion,
    applied_condition,
    content_changed,
    decide_apply,
    decide_delete,
    dispatching_condition,
    object_key,
    preserved_manifest,
    work_deletion_action,
)
from flotilla.propagation.works import InterpreterCache, work_cluster
from flotilla.propagation.written import WrittenObjects
from flotilla.runtime.applied_handoff import applied_handoff
from flotilla.runtime.base import Controller
from flotilla.runtime.interpreter_failures import customization_failures
from flotilla.runtime.member_informers import MANAGED_SELECTOR, member_informers
from flotilla.runtime.patching import Written, write_once

log = logging.getLogger(__name__)

__all__ = ["PURGE_KEY_PREFIX", "ApplyError", "ClusterNotReady", "ExecutionController"]

_ATTEMPTS = 5
#: Queue key of a cluster's recovery purge (Work keys always have a slash; this prefix has none).
PURGE_KEY_PREFIX = "purge-cluster:"
#: first retry of a recovery purge that failed (doubled per failure, capped at the status period)
_PURGE_RETRY_BASE = 0.2


class ClusterNotReady(Exception):
    """The Work's cluster is not Ready (or unknown): retried with backoff."""


class ApplyError(Exception):
    """Some manifests of a Work could not be applied (or removed)."""


@dataclass
class _MemberWatch:
    """This controller's handlers on the shared informers of one member's managed objects, per resource."""

    client: Client
    handlers: dict[Resource, tuple[Informer, HandlerRegistration]] = field(default_factory=dict)

    def remove_handlers(self) -> None:
        for inf, reg in self.handlers.values():
            inf.remove_handler(reg)
        self.handlers = {}


def _manifests(work: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = work.get("spec")
    workload = spec.get("workload") if isinstance(spec, dict) else None
    manifests = workload.get("manifests") if isinstance(workload, dict) else None
    return [m for m in manifests if isinstance(m, dict)] if isinstance(manifests, list) else []


def _describe(manifest: Mapping[str, Any]) -> str:
    meta = meta_of(manifest)
    ns = meta.get("namespace")
    return f"{manifest.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


def _work_of(obj: Mapping[str, Any]) -> str | None:
    """The key of the Work that manages a member object, from its annotations."""
    labels = meta_of(obj).get("labels")
    if not isinstance(labels, dict) or labels.get(L.MANAGED_LABEL) != L.MANAGED_LABEL_VALUE:
        return None
    annotations = meta_of(obj).get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    ns, name = annotations.get(L.WORK_NAMESPACE_ANNOTATION), annotations.get(L.WORK_NAME_ANNOTATION)
    return f"{ns}/{name}" if ns and name else None


class ExecutionController(Controller):
    name: ClassVar[str] = "execution"
    role: ClassVar[str] = "forward"
    #: Karmada's --concurrent-work-syncs is 5; a pass here is mostly waiting for the member and the store (a create
    #: or delete there, a status or finalizer write here), so more run at once: a failover's burst of Work deletions
    #: and creations would otherwise queue for seconds behind 5 of them
    workers: ClassVar[int] = 32

    def setup(self) -> None:
        self._works = self.works_informer()
        self._clusters = self.clusters_informer()
        self._rics = self.informer(RESOURCE_INTERPRETER_CUSTOMIZATIONS)
        self._interpreters = InterpreterCache(customization_failures(self.ctx))
        #: (cluster, object key) -> resourceVersion Flotilla last wrote or saw unchanged (drift filter)
        self._versions: dict[tuple[str, str], str] = {}
        #: (cluster, object key) -> digests of the last write (spares no-op PUTs)
        self._records: dict[tuple[str, str], LazyRecord] = {}
        #: (cluster, object key) -> digest of the Work manifest last applied (with an unchanged member object in
        #: the drift cache, an unchanged manifest needs no GET and no write)
        self._applied: dict[tuple[str, str], bytes] = {}
        #: the Works as this controller last wrote their status (read your own writes: no 409 on the next one)
        self._written = WrittenObjects()
        self._watches: dict[str, _MemberWatch] = {}
        #: the member informers this controller shares with the work-status controller
        self._member_informers = member_informers(self.ctx.extras)
        #: clusters whose recovery purge is pending (D2, D17) -> a counter bumped each time one is asked for (a
        #: purge that ran while another was asked for leaves it pending)
        self._recovering: dict[str, int] = {}
        #: clusters seen not Ready or fenced (their return to Ready and unfenced asks for one more purge)
        self._lost: set[str] = set()
        #: cluster -> recovery purges failed in a row (retry delay)
        self._purge_failures: dict[str, int] = {}
        #: cluster -> (apiVersion, kind) of every manifest Flotilla placed or abandoned there (purge listing)
        self._kinds: dict[str, set[tuple[str, str]]] = {}
        self._purge_locks: dict[str, asyncio.Lock] = {}
        #: a successful apply's conditions, left under load for the work-status controller's first report
        self._handoff = applied_handoff(self.ctx.extras)
        self._works.add_handler(on_add=self._work_added, on_update=self._work_updated)
        self._clusters.add_handler(on_add=self._cluster_changed,
                                   on_update=self._cluster_updated,
                                   on_delete=self._cluster_deleted)
        #: the cluster-status controller's probes in this process (None: it runs elsewhere): a healthy answer
        #: wakes a pending recovery purge (D17)
        self._board: ProbeBoard | None = self.ctx.extras.get(PROBE_BOARD)
        self._unlisten = self._board.add_listener(self._probe_answered) if self._board is not None else None

    async def stop(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        await super().stop()
        watches, self._watches = list(self._watches.values()), {}
        for watch in watches:
            watch.remove_handlers()
        await self._member_informers.stop()

    # ------------------------------------------------------------------ control-plane events
    def _work_added(self, work: dict[str, Any]) -> None:
        if work_cluster(work) is not None:
            self.enqueue_object(work)

    def _work_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        o, n = meta_of(old), meta_of(new)
        if work_cluster(new) is not None and (o.get("generation") != n.get("generation")
                                              or o.get("deletionTimestamp") != n.get("deletionTimestamp")):
            self.enqueue_object(new)

    def _cluster_changed(self, cluster: dict[str, Any]) -> None:
        name = str(meta_of(cluster).get("name") or "")
        if not name or not self.serves(cluster):
            return
        if not is_ready(cluster) or is_fenced(cluster):
            if name not in self._lost:  # lost: purge as soon as its API answers again (D17), fenced or not
                self._lost.add(name)
                self._want_purge(name)
        else:
            if name in self._lost:  # back: one more purge before anything else is applied there
                self._lost.discard(name)
                self._want_purge(name)
            elif name in self._recovering:
                self.enqueue(PURGE_KEY_PREFIX + name)

    def _want_purge(self, name: str) -> None:
        """Ask for a recovery purge of the cluster (it runs once its API answers: :meth:`_purge_pending`). Not for
        a cluster this controller does not serve: a Pull cluster's purge is its agent's, and the controller-manager
        never calls a Pull cluster's API (it only releases the Works deleted on it while it is fenced)."""
        cluster = self._clusters.store.get(name)
        if cluster is not None and not self.serves(cluster):
            return
        self._recovering[name] = self._recovering.get(name, 0) + 1
        self.enqueue(PURGE_KEY_PREFIX + name)

    def _probe_answered(self, cluster: str, healthy: bool) -> None:
        """The cluster-status controller's probe of ``cluster`` answered: healthy, a pending purge runs now."""
        if healthy and cluster in self._recovering:
            self.enqueue(PURGE_KEY_PREFIX + cluster)

    def _cluster_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._cluster_changed(new)
        if is_fenced(new) and not is_fenced(old):
            # D2: the deletions waiting for this member can complete now; after a long outage their retries are
            # backed off for minutes, and the failover of a Directly workload waits for them
            name = str(meta_of(new).get("name") or "")
            for work in self._works.store.list():
                if work_cluster(work) == name and meta_of(work).get("deletionTimestamp"):
                    self.enqueue_object(work)

    def _cluster_deleted(self, cluster: dict[str, Any]) -> None:
        name = str(meta_of(cluster).get("name") or "")
        self._recovering.pop(name, None)
        self._lost.discard(name)
        self._purge_failures.pop(name, None)
        self._kinds.pop(name, None)
        watch = self._watches.pop(name, None)
        if watch is not None:
            watch.remove_handlers()
        self._member_informers.forget(name)

    # ------------------------------------------------------------------ member events (drift)
    def _member_added(self, cluster: str, obj: dict[str, Any]) -> None:
        work = _work_of(obj)
        recorded = self._versions.get((cluster, object_key(obj)))
        if work is None or recorded is None:  # no sync of ours yet: the Work's own reconcile comes
            return
        if meta_of(obj).get("resourceVersion") != recorded:
            self.enqueue(work)

    def _member_updated(self, cluster: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        work = _work_of(old) or _work_of(new)
        recorded = self._versions.get((cluster, object_key(new)))
        if work is None or recorded is None or meta_of(new).get("resourceVersion") == recorded:
            return
        if content_changed(old, new):
            self.enqueue(work)

    def _member_deleted(self, cluster: str, obj: dict[str, Any]) -> None:
        work = _work_of(obj)
        if work is None:
            return
        cached = self._works.store.get(work)
        if cached is not None and not meta_of(cached).get("deletionTimestamp"):
            self.enqueue(work)  # a Work that still wants it: re-create it (a Work being deleted removed it)

    def _watch(self, cluster: str, member: Client, res: Resource) -> None:
        watch = self._watches.get(cluster)
        if watch is None or watch.client is not member:
            if watch is not None:  # the member's client was rebuilt (new endpoint or credentials)
                watch.remove_handlers()
            watch = self._watches[cluster] = _MemberWatch(member)
        if res in watch.handlers:
            return
        inf = self._member_informers.informer(cluster, member, res)
        reg = inf.add_handler(on_add=lambda obj: self._member_added(cluster, obj),
                              on_update=lambda old, new: self._member_updated(cluster, old, new),
                              on_delete=lambda obj: self._member_deleted(cluster, obj))
        watch.handlers[res] = (inf, reg)

    # ------------------------------------------------------------------ reconcile
    def fenced(self, cluster: Mapping[str, Any] | None) -> bool:
        """Whether a deleted Work of the cluster is released without contacting it (fencing, D2): the
        cluster carries the out-of-service taint. (Applying and the recovery purge look at the taint itself.)"""
        return is_fenced(cluster)

    async def reconcile(self, key: str) -> float | None:
        if key.startswith(PURGE_KEY_PREFIX):
            return await self._purge_pending(key.removeprefix(PURGE_KEY_PREFIX))
        work = self._written.fresh(key, self._works.store.get(key))
        if work is None:
            self._handoff.drop(key)
            return None
        cluster_name = work_cluster(work)
        if cluster_name is None:
            return None
        cluster = self._clusters.store.get(cluster_name)
        if cluster is not None and not self.serves(cluster):
            if self.agent_cluster is None and meta_of(work).get("deletionTimestamp") and self.fenced(cluster):
                # D2 for a Pull cluster: fenced, its agent may never come back; the Work is released here as for
                # a Push cluster (abandoned, the member not contacted) so that a Directly failover can proceed
                self._handoff.drop(key)
                await self._finish_deletion(work, cluster_name, cluster)
            return None  # a Pull cluster's Works are its agent's (and the agent's are its own cluster's only)
        if meta_of(work).get("deletionTimestamp"):
            self._handoff.drop(key)
            await self._finish_deletion(work, cluster_name, cluster)
            return None
        if L.EXECUTION_CONTROLLER_FINALIZER not in (meta_of(work).get("finalizers") or []):
            updated = await self._add_finalizer(work)
            if updated is None:
                return None
            work = updated
        spec = work.get("spec") if isinstance(work.get("spec"), dict) else {}
        suspended = spec.get("suspendDispatching") is True
        dispatching = dispatching_condition(suspended)
        if suspended:
            await self._set_conditions(work, [dispatching])
            return None
        # The Dispatching condition goes out with Applied in one status write; when nothing is applied in this
        # pass (the cluster cannot be reached now), it is written alone first, as before.
        try:
            if cluster is None:
                raise ClusterNotReady(f"cluster({cluster_name}) not found")
            if not is_ready(cluster):
                raise ClusterNotReady(f"cluster({cluster_name}) not ready")
            if is_fenced(cluster):
                raise ClusterNotReady(f"cluster({cluster_name}) is fenced")
            self._note_kinds(cluster_name, work)
            if cluster_name in self._recovering and not await self._purge_if_recovered(cluster_name):
                raise ClusterNotReady(f"cluster({cluster_name}) not ready")
            member = await self.ctx.members.client_for(cluster)
        except Exception:
            if await self._set_conditions(work, [dispatching]) is None:
                return None
            raise
        succeeded, errors = 0, []
        for manifest in _manifests(work):
            try:
                await self._apply(cluster_name, member, manifest)
                succeeded += 1
            except Exception as e:  # noqa: BLE001 - reported in the Applied condition and retried
                errors.append(str(e) or type(e).__name__)
        condition = applied_condition(succeeded, errors)
        if errors or not self._leave_conditions(key, work, [dispatching, condition]):
            await self._set_conditions(work, [dispatching, condition])
        where = f"work({key}) to cluster({cluster_name})"
        if errors:
            self.ctx.recorder.event(work, "Warning", "SyncFailed", f"Failed to sync {where}: {condition['message']}")
            raise ApplyError(f"Failed to sync {where}: {condition['message']}")
        self.ctx.recorder.event(work, "Normal", "SyncSucceed", f"Sync {where} successful.")
        return None

    # ------------------------------------------------------------------ applying one manifest
    async def _resource(self, member: Client, manifest: Mapping[str, Any]) -> tuple[Resource, str | None, str]:
        res = await member.resource_for(str(manifest.get("apiVersion") or ""), str(manifest.get("kind") or ""))
        meta = meta_of(manifest)
        namespace = (meta.get("namespace") or None) if res.namespaced else None
        return res, namespace, str(meta.get("name") or "")

    @staticmethod
    async def _observe(member: Client, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        return await member.get_or_none(res, name, namespace)

    def _cached(self, cluster: str, member: Client, res: Resource, name: str,
                namespace: str | None) -> tuple[bool, dict[str, Any] | None]:
        """``(known, obj)``: the managed member object as the drift informer has it; ``known`` is False when that
        cache cannot answer (not started for this client, or not synced yet)."""
        watch = self._watches.get(cluster)
        handler = watch.handlers.get(res) if watch is not None and watch.client is member else None
        if handler is None:
            return False, None
        inf = handler[0]
        if not inf.has_synced:
            return False, None
        return True, inf.store.get(f"{namespace}/{name}" if namespace else name)

    async def _apply(self, cluster: str, member: Client, manifest: dict[str, Any]) -> None:
        res, namespace, name = await self._resource(member, manifest)
        self._watch(cluster, member, res)
        okey = (cluster, object_key(manifest))
        digest = _manifest_digest(manifest)
        known, cached = self._cached(cluster, member, res, name, namespace)
        if (known and cached is not None and self._applied.get(okey) == digest
                and meta_of(cached).get("resourceVersion") == self._versions.get(okey)):
            return  # this manifest was applied last, and the member object has not changed since
        interpreter = self._interpreters.get(self._rics.store.list())
        for attempt in range(_ATTEMPTS):
            if attempt == 0 and known:
                # decided on the drift cache, as Karmada's object watcher does: an object missing there is not one
                # of ours and is created straight away (one that is someone else's answers AlreadyExists), a stale
                # copy answers 409 to the update; either way the next attempt reads the member object itself
                observed = cached
            else:
                observed = await self._observe(member, res, name, namespace)
            record = self._records.get(okey)
            # a Retain customization runs in the Lua worker threads, not on the event loop
            decision = await interpreter.offload(Operation.RETAIN, manifest, functools.partial(
                decide_apply, manifest, observed, cluster=cluster, interpreter=interpreter,
                last_applied=record.record() if record is not None and observed is not None else None))
            if decision.action is ApplyAction.REFUSE:
                raise ApplyError(decision.message)
            assert decision.obj is not None
            if decision.action is ApplyAction.UNCHANGED:
                assert observed is not None
                self._remember(okey, decision.obj, observed, digest)
                return
            try:
                if decision.action is ApplyAction.CREATE:
                    answer = await self._create(member, res, decision.obj, namespace)
                    log.info("created %s in cluster %s", _describe(manifest), cluster)
                else:
                    answer = await member.update(res, decision.obj)
                    log.info("updated %s in cluster %s", _describe(manifest), cluster)
            except ApiException as e:
                if is_conflict(e) or is_already_exists(e) or (is_not_found(e) and observed is not None):
                    continue  # someone else wrote in between: look again
                raise
            self._remember(okey, decision.obj, answer, digest)
            return
        raise ApplyError(f"{_describe(manifest)} in cluster {cluster}: gave up after {_ATTEMPTS} conflicting writes")

    def _remember(self, okey: tuple[str, str], sent: Mapping[str, Any], answer: Mapping[str, Any],
                  digest: bytes | None = None) -> None:
        self._versions[okey] = str(meta_of(answer).get("resourceVersion") or "")
        self._records[okey] = LazyRecord(sent, answer)
        if digest is None:
            self._applied.pop(okey, None)
        else:
            self._applied[okey] = digest

    def _forget(self, okey: tuple[str, str]) -> None:
        self._versions.pop(okey, None)
        self._records.pop(okey, None)
        self._applied.pop(okey, None)

    @staticmethod
    async def _create(member: Client, res: Resource, obj: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        """Create ``obj``; a missing namespace is created first (then the create is tried once more)."""
        try:
            return await member.create(res, obj, namespace)
        except ApiException as e:
            if not (namespace and is_not_found(e)):
                raise
        # Labelled managed so that a namespace Work propagated later may take it over.
        ns_obj = {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": namespace, "labels": {L.MANAGED_LABEL: L.MANAGED_LABEL_VALUE}}}
        try:
            await member.create(NAMESPACES, ns_obj)
            log.info("created namespace %s in a member for %s", namespace, obj.get("kind"))
        except ApiException as e:
            if not is_already_exists(e):
                raise
        return await member.create(res, obj, namespace)

    # ------------------------------------------------------------------ Work deletion
    async def _finish_deletion(self, work: dict[str, Any], cluster_name: str,
                               cluster: Mapping[str, Any] | None) -> None:
        if L.EXECUTION_CONTROLLER_FINALIZER not in (meta_of(work).get("finalizers") or []):
            return
        action = work_deletion_action(work, cluster, fenced=self.fenced(cluster))
        if action is WorkDeletion.WAIT:
            raise ClusterNotReady(f"cluster({cluster_name}) not ready")
        if action in (WorkDeletion.PRESERVE, WorkDeletion.DELETE):
            assert cluster is not None
            member = await self.ctx.members.client_for(cluster)
            for manifest in _manifests(work):
                if action is WorkDeletion.PRESERVE:
                    await self._release(cluster_name, member, manifest)
                else:
                    await self._delete(cluster_name, member, manifest)
        elif action is WorkDeletion.ABANDON:
            work = await self._record_abandoned(work, cluster_name, cluster)
        else:
            log.info("work %s/%s: cluster %s is going away and not ready; not deleting its objects",
                     meta_of(work).get("namespace"), meta_of(work).get("name"), cluster_name)
        for manifest in _manifests(work):
            self._forget((cluster_name, object_key(manifest)))
        await self._remove_finalizer(work)

    async def _record_abandoned(self, work: dict[str, Any], cluster_name: str,
                                cluster: Mapping[str, Any] | None) -> dict[str, Any]:
        """D2: the Work records (annotation, condition, Event) that its objects were left on a fenced cluster;
        the kinds are remembered for the recovery purge. Returns the Work as stored after."""
        self._note_kinds(cluster_name, work)
        self._want_purge(cluster_name)  # its objects are stale there: deleted once the member answers (D17)
        decision = work_deletion_decision(cluster if cluster is not None else cluster_name, True, work=work,
                                          now=self.ctx.now())
        meta = meta_of(work)
        current: dict[str, Any] = work
        if decision.annotations:
            try:
                current = await self.client.patch(WORKS, str(meta.get("name")),
                                                  {"metadata": {"annotations": dict(decision.annotations)}},
                                                  namespace=str(meta.get("namespace")))
            except ApiException as e:
                if not is_not_found(e):
                    raise
        if decision.condition is not None:
            current = await self._set_conditions(current, [decision.condition]) or current
        if decision.event is not None:
            self.ctx.recorder.event(current, decision.event.type, decision.event.reason, decision.event.message)
        log.warning("work %s/%s: %s", meta.get("namespace"), meta.get("name"), decision.reason)
        return current

    # ------------------------------------------------------------------ recovery purge (D2)
    def _note_kinds(self, cluster: str, work: Mapping[str, Any]) -> None:
        kinds = self._kinds.setdefault(cluster, set())
        for manifest in _manifests(work):
            if manifest.get("apiVersion") and manifest.get("kind"):
                kinds.add((str(manifest["apiVersion"]), str(manifest["kind"])))

    def _purge_retry_cap(self) -> float:
        return max(float(self.options.cluster_status_update_frequency), _PURGE_RETRY_BASE)

    async def _purge_pending(self, cluster_name: str) -> float | None:
        """The ``purge-cluster:<name>`` key: run the cluster's pending recovery purge if its API answers. A purge
        that fails, or waits for a member known not to answer, is looked at again after a delay (a healthy
        probe answer wakes it sooner); no work-queue backoff, which grows to many minutes in a long outage."""
        try:
            done = await self._purge_if_recovered(cluster_name)
        except Exception as e:  # noqa: BLE001 - the member or the control plane did not answer: tried again
            failures = self._purge_failures[cluster_name] = self._purge_failures.get(cluster_name, 0) + 1
            delay = purge_retry_delay(failures, _PURGE_RETRY_BASE, self._purge_retry_cap())
            log.info("cluster %s: recovery purge not done (%s); trying again in %.1fs", cluster_name,
                     str(e) or type(e).__name__, delay)
            return delay
        self._purge_failures.pop(cluster_name, None)
        return None if done else self._purge_retry_cap()

    async def _purge_if_recovered(self, cluster_name: str) -> bool:
        """Run the recovery purge of a cluster if one is pending and its API answers (D17: fenced or not, Ready or
        not yet; :func:`~flotilla.failover.fencing.recovery_purge_step`).

        True when nothing is pending any more (done now or before); False while the member is known not to
        answer. Raises when the purge could not finish."""
        lock = self._purge_locks.setdefault(cluster_name, asyncio.Lock())
        async with lock:
            asked = self._recovering.get(cluster_name)
            cluster = self._clusters.store.get(cluster_name)
            answering = self._board.last_answer(cluster_name) if self._board is not None else None
            step = recovery_purge_step(cluster, pending=asked is not None,
                                       ready=cluster is not None and is_ready(cluster), answering=answering)
            if step is PurgeStep.WAIT:
                return False
            if step is PurgeStep.PURGE:
                assert cluster is not None
                await self._purge(cluster_name, cluster)
            if self._recovering.get(cluster_name) == asked:  # none asked for meanwhile
                self._recovering.pop(cluster_name, None)
            return True

    async def _purge(self, cluster_name: str, cluster: Mapping[str, Any]) -> None:
        # never from the informer's cache (empty or not synced after a restart or a refused list: every object of
        # the member would look stale, Karmada #5406) but from a fresh, complete list of the execution namespace
        namespace = generate_execution_space_name(cluster_name)
        listed = await self.client.list(WORKS, namespace)
        fresh = recovery_works(listed)
        if fresh is None:
            raise ClusterNotReady(f"cluster({cluster_name}): no complete list of the Works of {namespace}; "
                                  "not purging")
        works = [dict(w) for w in fresh]
        for work in works:
            self._note_kinds(cluster_name, work)
        wanted = wanted_identities(works)
        for work in works:  # objects a deleted Work releases (preserveResourcesOnDeletion) are not stale
            spec = work.get("spec") if isinstance(work.get("spec"), dict) else {}
            if meta_of(work).get("deletionTimestamp") and spec.get("preserveResourcesOnDeletion") is True:
                wanted.update(ObjectIdentity.of(m) for m in _manifests(work))
        member = await self.ctx.members.client_for(cluster)
        objects: list[dict[str, Any]] = []
        listed: set[Resource] = set()
        resources: dict[tuple[str, str], Resource] = {}
        for api_version, kind in sorted(self._kinds.get(cluster_name, ())):
            try:
                res = await member.resource_for(api_version, kind)
            except ApiException as e:
                if is_not_found(e):  # the kind is not served there (any more): nothing of it to delete
                    continue
                raise
            resources[(api_version, kind)] = res
            if res in listed:
                continue
            listed.add(res)
            found = await member.list(res, None, label_selector=MANAGED_SELECTOR)
            objects += [{**item, "apiVersion": api_version, "kind": kind} for item in found.get("items") or []
                        if isinstance(item, dict)]
        stale = stale_objects_on_recovery(objects, wanted)
        for obj in stale:
            res = resources[(str(obj["apiVersion"]), str(obj["kind"]))]
            meta = meta_of(obj)
            namespace = (meta.get("namespace") or None) if res.namespaced else None
            try:
                await member.delete(res, str(meta.get("name")), namespace, propagation_policy="Background")
            except ApiException as e:
                if not is_not_found(e):
                    raise
            self._forget((cluster_name, object_key(obj)))
            log.info("deleted stale %s in recovered cluster %s", ObjectIdentity.of(obj), cluster_name)
        if stale:
            names = ", ".join(str(ObjectIdentity.of(o)) for o in stale)
            self.ctx.recorder.event(dict(cluster), "Normal", EVENT_STALE_OBJECTS_DELETED,
                                    f"cluster({cluster_name}) is back: deleted {len(stale)} object(s) no Work "
                                    f"wants any more before applying anything: {names}")

    async def _delete(self, cluster: str, member: Client, manifest: dict[str, Any]) -> None:
        res, namespace, name = await self._resource(member, manifest)
        known, cached = self._cached(cluster, member, res, name, namespace)
        if known and cached is not None and meta_of(cached).get("uid"):
            # managed (the drift cache holds only those): delete that very object, no GET first
            written = await write_once(member.delete(res, name, namespace, propagation_policy="Background",
                                                     preconditions={"uid": str(meta_of(cached)["uid"])}))
            if written is Written.DONE:
                log.info("deleted %s in cluster %s", _describe(manifest), cluster)
            if written is not Written.CONFLICT:
                return
            # replaced by another object meanwhile: look at it
        elif known and cached is None and (cluster, object_key(manifest)) not in self._versions:
            return  # never written by this controller and no managed object of that name: nothing to delete
        observed = await self._observe(member, res, name, namespace)
        action = decide_delete(observed)
        if action is DeleteAction.DELETE:
            try:
                await member.delete(res, name, namespace, propagation_policy="Background")
                log.info("deleted %s in cluster %s", _describe(manifest), cluster)
            except ApiException as e:
                if not is_not_found(e):
                    raise
        elif action is DeleteAction.NOT_MANAGED:
            log.info("not deleting %s in cluster %s: it is not managed by the control plane",
                     _describe(manifest), cluster)

    async def _release(self, cluster: str, member: Client, manifest: dict[str, Any]) -> None:
        """Keep the member object but remove the claim and Karmada's managed metadata from it."""
        res, namespace, name = await self._resource(member, manifest)
        desired = preserved_manifest(manifest)
        for _ in range(_ATTEMPTS):
            observed = await self._observe(member, res, name, namespace)
            interpreter = self._interpreters.get(self._rics.store.list())
            decision = await interpreter.offload(Operation.RETAIN, desired, functools.partial(
                decide_apply, desired, observed, cluster=cluster, interpreter=interpreter))
            if decision.action is not ApplyAction.UPDATE:  # gone, someone else's, or already clean
                break
            assert decision.obj is not None
            if await write_once(member.update(res, decision.obj)) is not Written.CONFLICT:
                break
        else:
            raise ApplyError(f"{_describe(manifest)} in cluster {cluster}: gave up after {_ATTEMPTS} conflicting writes")

    # ------------------------------------------------------------------ writing the Work
    async def _refetch(self, work: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = meta_of(work)
        return await self.client.get_or_none(WORKS, str(meta.get("name")), str(meta.get("namespace")))

    async def _patch_finalizers(self, work: Mapping[str, Any], finalizers: list[str]) -> dict[str, Any]:
        """Write the Work's finalizers (a merge patch guarded by its resourceVersion: the body is not sent back)."""
        meta = meta_of(work)
        result: dict[str, Any] = await self.client.patch(
            WORKS, str(meta.get("name")),
            {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta.get("resourceVersion")}},
            namespace=str(meta.get("namespace")))
        return result

    async def _add_finalizer(self, work: dict[str, Any]) -> dict[str, Any] | None:
        current: dict[str, Any] | None = work
        for _ in range(_ATTEMPTS):
            if current is None or meta_of(current).get("deletionTimestamp"):
                return None
            finalizers = list(meta_of(current).get("finalizers") or [])
            if L.EXECUTION_CONTROLLER_FINALIZER in finalizers:
                return current
            try:
                return await self._patch_finalizers(current, [*finalizers, L.EXECUTION_CONTROLLER_FINALIZER])
            except ApiException as e:
                if not (is_conflict(e) or is_not_found(e)):
                    raise
            current = await self._refetch(current)
        raise ApplyError(f"work {meta_of(work).get('namespace')}/{meta_of(work).get('name')}: could not add finalizer")

    async def _remove_finalizer(self, work: dict[str, Any]) -> None:
        current: dict[str, Any] | None = work
        for _ in range(_ATTEMPTS):
            if current is None:
                return
            finalizers = list(meta_of(current).get("finalizers") or [])
            if L.EXECUTION_CONTROLLER_FINALIZER not in finalizers:
                return
            remaining = [f for f in finalizers if f != L.EXECUTION_CONTROLLER_FINALIZER]
            if await write_once(self._patch_finalizers(current, remaining)) is not Written.CONFLICT:
                return
            current = await self._refetch(current)
        raise ApplyError(f"work {meta_of(work).get('namespace')}/{meta_of(work).get('name')}: could not remove finalizer")

    def _leave_conditions(self, key: str, work: dict[str, Any], conditions: list[Mapping[str, Any]]) -> bool:
        """Under load (forward queues with keys ready) and with a work-status controller to take them, leave a
        successful apply's conditions to ride on the Work's first status report (:mod:`.applied_handoff`)
        instead of writing them now. Whether they were left (or were set already: nothing to write)."""
        if not (self._handoff.accepting() and self.ctx.forward_first.busy()):
            return False
        now = format_time(self.ctx.now())
        status = work.get("status") if isinstance(work.get("status"), dict) else {}
        if set_conditions(status.get("conditions"), conditions, now)[1]:
            self._handoff.leave(key, work, conditions, now)
        else:
            self._handoff.drop(key)
        return True

    async def _set_conditions(self, work: dict[str, Any],
                              conditions: list[Mapping[str, Any]]) -> dict[str, Any] | None:
        """Write status conditions in one merge patch of ``status.conditions`` (status subresource, the Work's
        resourceVersion as precondition; nothing is written when they are set already); the Work as stored
        after (``None``: it is gone). Conditions left to the work-status controller before are dropped."""
        current: dict[str, Any] | None = work
        meta = meta_of(work)
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        self._handoff.drop(key)
        now = format_time(self.ctx.now())
        for _ in range(_ATTEMPTS):
            if current is None:
                return None
            status = current.get("status") if isinstance(current.get("status"), dict) else {}
            new, changed = set_conditions(status.get("conditions"), conditions, now)
            if not changed:
                return current
            body = {"metadata": {"resourceVersion": meta_of(current).get("resourceVersion")},
                    "status": {"conditions": new}}
            try:
                result: dict[str, Any] = await self.client.patch(WORKS, str(meta.get("name")), body,
                                                                 namespace=str(meta.get("namespace")),
                                                                 subresource="status")
            except ApiException as e:
                if not (is_conflict(e) or is_not_found(e)):
                    raise
            else:
                self._written.record(key, current, result)
                return result
            current = await self._refetch(current)
        log.warning("work %s/%s: could not write conditions %s after %d conflicts",
                    meta.get("namespace"), meta.get("name"), [c.get("type") for c in conditions], _ATTEMPTS)
        return current


def _manifest_digest(manifest: Mapping[str, Any]) -> bytes:
    """A digest of a Work manifest as written (canonical JSON)."""
    return hashlib.sha256(orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)).digest()
