"""The planned-move controller (``--controllers`` name ``plannedMove``; D21): savepoints on planned moves.

Decisions are in :mod:`flotilla.failover.moves`; this controller reads the caches and writes the binding's move
record (``failover.flotilla.io/move``) and, once the savepoint is seen, the records the binding render and the
restore step read (``failover.flotilla.io/move-savepoint``, ``failover.flotilla.io/restore``).

For a binding:

* no move under way and :func:`~flotilla.failover.moves.move_candidate` finds one (its only copy is in a Ready
  cluster it leaves: ``flotilla failover move``, a taint eviction, a placement change): the record is written in
  phase ``Savepointing`` (``Skipped`` when the policy or the template turns savepoints on moves off) and the
  Event ``PlannedMoveStarted`` (``PlannedMoveSkipped``) goes to the binding;
* ``Savepointing``: the target is filled in once the scheduler chose it; the move fails
  (:func:`~flotilla.failover.moves.failure_reason`: old cluster not Ready, old Work gone, no savepoint within
  ``--move-savepoint-timeout``) with a Warning ``PlannedMoveFailed``; or the savepoint reported by the old copy
  (:func:`~flotilla.failover.moves.reflected_savepoint`) is recorded: phase ``Done``, Event ``SavepointTaken``;
* ``Done``: once the new copy reports Healthy, ``completedAt`` is added and ``PlannedMoveCompleted`` is emitted.

Every write is a metadata merge patch with the binding's resourceVersion as precondition (read again on 409).
Metrics: ``flotilla_planned_moves_total{trigger, outcome}`` (completed, failed, skipped) and
``flotilla_move_savepoint_seconds`` (move start to savepoint seen).

Triggers: a binding added or updated (its status carries the old copy's savepoint), a Work of the binding added
or deleted, a Cluster's Ready condition changing (moves out of it fail), and the move's timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, ClassVar

from flotilla.api import labels as L
from flotilla.api.resources import (
    CLUSTER_PROPAGATION_POLICIES,
    CLUSTER_RESOURCE_BINDINGS,
    CLUSTERS,
    PROPAGATION_POLICIES,
    RESOURCE_BINDINGS,
)
from flotilla.client import Informer
from flotilla.client.events import NORMAL, WARNING
from flotilla.cluster.health import is_ready
from flotilla.failover.moves import (
    EVENT_PLANNED_MOVE_COMPLETED,
    EVENT_PLANNED_MOVE_FAILED,
    EVENT_PLANNED_MOVE_SKIPPED,
    EVENT_PLANNED_MOVE_STARTED,
    EVENT_SAVEPOINT_TAKEN,
    MOVE_SAVEPOINT_ANNOTATION,
    PHASE_DONE,
    PHASE_FAILED,
    PHASE_SAVEPOINTING,
    PHASE_SKIPPED,
    RESTORE_ANNOTATION,
    Move,
    completed_patch,
    current_savepoint,
    failure_reason,
    move_candidate,
    move_patch,
    move_savepoint_record,
    new_copy_healthy,
    parse_move,
    reflected_savepoint,
    restore_record,
    savepoint_on_move_enabled,
)
from flotilla.kube.objects import meta_of
from flotilla.propagation.works import (
    CLUSTER_RESOURCE_BINDING_KIND,
    RESOURCE_BINDING_KIND,
    binding_ref,
)
from flotilla.runtime.base import Controller
from flotilla.runtime.binding_works import binding_and_work_informers, mark_planned_moves_running, works_of
from flotilla.runtime.patching import patch_with_retry

log = logging.getLogger(__name__)

__all__ = ["PlannedMoveController"]

#: seconds between looks at a move waiting for its target cluster (the binding's updates wake it sooner)
WAIT_REQUEUE = 5.0


def _key(binding: Mapping[str, Any]) -> str:
    ref = binding_ref(binding)
    return f"{ref.kind}/{ref.key}"


class _MoveMetrics:
    """``flotilla_planned_moves_total`` and ``flotilla_move_savepoint_seconds`` on the manager's registry."""

    def __init__(self, registry: Any) -> None:
        self.moves = registry.get("flotilla_planned_moves_total") or registry.counter(
            "flotilla_planned_moves_total", "Planned moves (D21) by trigger (PlannedMove, ClusterTaint, "
            "PlacementChange) and outcome (completed: the new copy is Healthy after starting from the savepoint; "
            "failed: it went on as an unplanned failover; skipped: savepoints on moves turned off).",
            ["trigger", "outcome"])
        self.savepoint_seconds = registry.get("flotilla_move_savepoint_seconds") or registry.histogram(
            "flotilla_move_savepoint_seconds", "Time from a planned move's start to the old copy's savepoint "
            "being seen in its reflected status.",
            buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300))


class PlannedMoveController(Controller):
    name: ClassVar[str] = "plannedMove"
    workers: ClassVar[int] = 2

    def setup(self) -> None:
        self._rbs, self._crbs, self._works = binding_and_work_informers(self)
        mark_planned_moves_running(self.ctx)
        self._clusters = self.informer(CLUSTERS)
        self._pps = self.informer(PROPAGATION_POLICIES)
        self._cpps = self.informer(CLUSTER_PROPAGATION_POLICIES)
        self._metrics = _MoveMetrics(self.ctx.metrics.registry)
        self._announced: set[tuple[str, str]] = set()
        for inf in (self._rbs, self._crbs):
            inf.add_handler(on_add=lambda obj: self.enqueue(_key(obj)),
                            on_update=lambda old, new: self.enqueue(_key(new)))
        self._works.add_handler(on_add=self._work_changed, on_delete=self._work_changed)
        self._clusters.add_handler(on_update=self._cluster_updated)

    # ------------------------------------------------------------------ handlers
    def _work_changed(self, work: Mapping[str, Any]) -> None:
        annotations = meta_of(work).get("annotations") or {}
        namespace = annotations.get(L.RESOURCE_BINDING_NAMESPACE_ANNOTATION)
        name = annotations.get(L.RESOURCE_BINDING_NAME_ANNOTATION)
        if namespace and name:
            self.enqueue(f"{RESOURCE_BINDING_KIND}/{namespace}/{name}")
        elif annotations.get(L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION):
            self.enqueue(f"{CLUSTER_RESOURCE_BINDING_KIND}/{annotations[L.CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION]}")

    def _cluster_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if is_ready(old) == is_ready(new):
            return
        name = meta_of(new).get("name")
        for binding in [*self._rbs.store.list(), *self._crbs.store.list()]:
            move = parse_move(binding)
            if move is not None and move.savepointing and move.from_cluster == name:
                self.enqueue(_key(binding))

    # ------------------------------------------------------------------ reading
    def _binding_informer(self, kind: str) -> Informer:
        return self._crbs if kind == CLUSTER_RESOURCE_BINDING_KIND else self._rbs

    def _works_of(self, binding: Mapping[str, Any]) -> list[dict[str, Any]]:
        return works_of(self._works, binding_ref(binding))

    def _clusters_by_name(self) -> dict[str, dict[str, Any]]:
        return {str(meta_of(c).get("name")): c for c in self._clusters.store.list()}

    def _policy_of(self, binding: Mapping[str, Any]) -> Mapping[str, Any] | None:
        annotations = meta_of(binding).get("annotations") or {}
        name = annotations.get(L.PROPAGATION_POLICY_NAME_ANNOTATION)
        if name:
            return self._pps.store.get(f"{annotations.get(L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION)}/{name}")
        name = annotations.get(L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION)
        return self._cpps.store.get(name) if name else None

    async def _template_of(self, binding: Mapping[str, Any]) -> dict[str, Any] | None:
        resource = (binding.get("spec") or {}).get("resource") or {}
        try:
            res = await self.client.resource_for(str(resource.get("apiVersion") or ""),
                                                 str(resource.get("kind") or ""))
            ns = (resource.get("namespace") or None) if res.namespaced else None
            return await self.client.get_or_none(res, str(resource.get("name") or ""), ns)
        except Exception as e:  # noqa: BLE001 - the policy alone decides then
            log.debug("%s: template not read: %s", _key(binding), e)
            return None

    # ------------------------------------------------------------------ writing
    async def _patch(self, binding: Mapping[str, Any], expect: Move | None,
                     make: Any) -> dict[str, Any] | None:
        """Patch the binding's metadata; ``make(move)`` builds the annotations from the move found on the binding,
        which must still be ``expect`` (same start and phase); None when the binding moved on."""
        res = CLUSTER_RESOURCE_BINDINGS if binding_ref(binding).cluster_scoped else RESOURCE_BINDINGS
        meta = meta_of(binding)

        def make_patch(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            current = parse_move(obj)
            if expect is None:
                if current is not None and current.savepointing:
                    return None
            elif current is None or (current.started_at, current.phase) != (expect.started_at, expect.phase):
                return None
            return make(obj, meta_of(obj).get("resourceVersion"))

        return await patch_with_retry(self.client, res, binding, str(meta.get("name")), meta.get("namespace"),
                                      make_patch)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> float | None:
        kind, _, rest = key.partition("/")
        binding = self._binding_informer(kind).store.get(rest)
        if binding is None or meta_of(binding).get("deletionTimestamp"):
            return None
        works = self._works_of(binding)
        clusters = self._clusters_by_name()
        now = self.ctx.now()
        move = parse_move(binding)
        if move is not None and move.savepointing:
            return await self._follow(binding, move, works, clusters, now)
        if move is not None and move.phase == PHASE_DONE and move.completed_at is None and move.to_cluster:
            if new_copy_healthy(binding, move.to_cluster):
                await self._complete(binding, move, now)
            return None
        candidate = move_candidate(binding, works, clusters)
        if candidate is None:
            return None
        enabled = savepoint_on_move_enabled(self._policy_of(binding), await self._template_of(binding))
        nonce = move.nonce + 1 if move is not None else 1
        phase = PHASE_SAVEPOINTING if enabled else PHASE_SKIPPED
        reason = (f"{candidate.trigger}: leaving {candidate.from_cluster} while it is Ready" if enabled else
                  "savepoints on moves are turned off (restore.flotilla.io/savepoint-on-move: \"false\")")
        new = Move(candidate.from_cluster, candidate.to_cluster, phase, now, nonce=nonce, reason=reason,
                   trigger=candidate.trigger, previous_path=current_savepoint(binding, candidate.from_cluster))
        written = await self._patch(binding, None, lambda obj, rv: move_patch(new, resource_version=rv))
        if written is None or parse_move(written) != new:
            return 0.5
        if enabled:
            self._announce(written, new)
            return None
        self._metrics.moves.labels(new.trigger, "skipped").inc()
        self.ctx.recorder.event(written, NORMAL, EVENT_PLANNED_MOVE_SKIPPED,
                                f"moving out of {new.from_cluster} without a savepoint: {reason}; the new copy "
                                "restores the newest checkpoint")
        return None

    def _announce(self, binding: Mapping[str, Any], move: Move) -> None:
        mark = (_key(binding), f"{move.from_cluster}@{move.started_at.isoformat()}")
        if mark in self._announced:
            return
        self._announced.add(mark)
        target = move.to_cluster or "the cluster the scheduler chooses"
        self.ctx.recorder.event(binding, NORMAL, EVENT_PLANNED_MOVE_STARTED,
                                f"planned move ({move.trigger}) from {move.from_cluster} to {target}: stopping the "
                                f"job in {move.from_cluster} with a savepoint")
        log.info("%s: planned move from %s to %s started (%s)", _key(binding), move.from_cluster, target,
                 move.trigger)

    async def _follow(self, binding: dict[str, Any], move: Move, works: list[dict[str, Any]],
                      clusters: Mapping[str, Mapping[str, Any]], now: datetime) -> float | None:
        self._announce(binding, move)
        timeout = float(getattr(self.options, "move_savepoint_timeout", 120.0))
        why = failure_reason(move, binding, works, clusters, now, timeout)
        if why is not None:
            failed = replace(move, phase=PHASE_FAILED, reason=why)
            written = await self._patch(binding, move, lambda obj, rv: move_patch(failed, resource_version=rv))
            if written is not None and parse_move(written) == failed:
                self._metrics.moves.labels(move.trigger, "failed").inc()
                self.ctx.recorder.event(written, WARNING, EVENT_PLANNED_MOVE_FAILED,
                                        f"planned move from {move.from_cluster} failed: {why}")
                log.warning("%s: planned move from %s failed: %s", _key(binding), move.from_cluster, why)
            return None
        spec = binding.get("spec") or {}
        targets = [c.get("name") for c in spec.get("clusters") or [] if isinstance(c, Mapping)]
        to = move.to_cluster
        if to is None and len(targets) == 1 and targets[0] != move.from_cluster:
            to = str(targets[0])
        remaining = max(0.1, timeout - (now - move.started_at).total_seconds())
        found = reflected_savepoint(binding, move.from_cluster, move.started_at, move.previous_path)
        if found is None or to is None:
            if to != move.to_cluster:
                moving = replace(move, to_cluster=to)
                await self._patch(binding, move, lambda obj, rv: move_patch(moving, resource_version=rv))
            return min(remaining, WAIT_REQUEUE) if found is not None else remaining
        path, at = found
        done = replace(move, to_cluster=to, phase=PHASE_DONE, path=path,
                       reason=f"savepoint taken in {move.from_cluster}")

        def make(obj: Mapping[str, Any], rv: Any) -> dict[str, Any]:
            return move_patch(done, {MOVE_SAVEPOINT_ANNOTATION: move_savepoint_record(done, path, at),
                                     RESTORE_ANNOTATION: restore_record(done, obj, path, at, now)},
                              resource_version=rv)

        written = await self._patch(binding, move, make)
        if written is None or parse_move(written) != done:
            return 0.5
        self._metrics.savepoint_seconds.observe(max(0.0, (now - move.started_at).total_seconds()))
        self.ctx.recorder.event(written, NORMAL, EVENT_SAVEPOINT_TAKEN,
                                f"the job in {move.from_cluster} stopped with savepoint {path}; the new copy in {to} "
                                "starts from it")
        log.info("%s: savepoint %s taken in %s; moving to %s", _key(binding), path, move.from_cluster, to)
        return None

    async def _complete(self, binding: dict[str, Any], move: Move, now: datetime) -> None:
        written = await self._patch(binding, move, lambda obj, rv: completed_patch(move, now, rv))
        if written is None:
            return
        self._metrics.moves.labels(move.trigger, "completed").inc()
        took = (now - move.started_at).total_seconds()
        self.ctx.recorder.event(written, NORMAL, EVENT_PLANNED_MOVE_COMPLETED,
                                f"the workload runs in {move.to_cluster}, started from savepoint {move.path} "
                                f"({took:.1f}s after the move started)")

