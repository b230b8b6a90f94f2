"""The failover-history controller (D22): records every failover of a binding on the binding.

One controller for ResourceBindings and ClusterResourceBindings (keys ``rb|<ns>|<name>`` and ``crb|<name>``).
The decision is :func:`flotilla.failover.history.plan_history`: an entry is written ``InProgress`` as soon as
a failover shows on the binding (a stamped eviction task or a planned move), and completed once the new copy
runs. The annotation ``failover.flotilla.io/history`` is written with a metadata-only merge patch guarded by
the binding's resourceVersion (re-read and decided again on 409), so an entry is never lost or written twice,
even across a restart of the controller-manager.

After a successful write, each completed entry gives a Normal ``FailoverCompleted`` Event on the binding and
on its resource template (from, to, trigger, time to running, state gap) and the samples
``flotilla_failover_time_to_running_seconds{trigger}`` and, when the restore reported one,
``flotilla_failover_state_gap_seconds{trigger}`` (the restored checkpoint's age at the fault) and
``flotilla_failover_records_reprocessed{trigger}``; each superseded entry a Warning ``FailoverSuperseded``.

Triggers: a binding added or updated while it has eviction tasks, a move annotation or an entry in progress
(or when it just lost its tasks). The controller remembers in memory the last ``records-processed`` each copy
reported (simulated Flink jobs), because the old copy's ``aggregatedStatus`` item may be gone when the
failover is seen. Runs whatever the feature gates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS
from flotilla.failover.history import (
    EVENT_FAILOVER_COMPLETED,
    EVENT_FAILOVER_SUPERSEDED,
    MOVE_ANNOTATION,
    PHASE_IN_PROGRESS,
    HistoryUpdate,
    completed_message,
    job_progress,
    metric_trigger,
    parse_history,
    plan_history,
    superseded_message,
)
from flotilla.failover.purge import eviction_tasks
from flotilla.kube.objects import as_map
from flotilla.observability.metrics import FailoverHistoryMetrics
from flotilla.runtime.base import Controller, binding_key, cached_binding, template_ref
from flotilla.runtime.patching import patch_with_retry

log = logging.getLogger(__name__)

__all__ = ["FailoverHistoryController", "needs_history_pass"]

_Obj = dict[str, Any]


def _has_failover_signals(binding: Mapping[str, Any] | None) -> bool:
    if binding is None:
        return False
    annotations = as_map(as_map(binding.get("metadata")).get("annotations"))
    if eviction_tasks(as_map(binding.get("spec"))) or annotations.get(MOVE_ANNOTATION):
        return True
    return any(e.get("phase") == PHASE_IN_PROGRESS for e in parse_history(annotations))


def needs_history_pass(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a binding event can change its history: it shows a failover (a task, a move, an entry in
    progress) now or just stopped showing one."""
    return _has_failover_signals(new) or _has_failover_signals(old)


class FailoverHistoryController(Controller):
    name: ClassVar[str] = "failoverHistory"
    workers: ClassVar[int] = 2

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.rbs: Any = None
        self.crbs: Any = None
        #: binding key -> cluster -> the last records-processed its copy reported (simulated Flink jobs)
        self.progress: dict[str, dict[str, int]] = {}
        self.metrics = FailoverHistoryMetrics(self.ctx.metrics.registry)

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        self.rbs = self.informer(RESOURCE_BINDINGS)
        self.crbs = self.informer(CLUSTER_RESOURCE_BINDINGS)
        for inf, scoped in ((self.rbs, False), (self.crbs, True)):
            inf.add_handler(on_add=lambda b, s=scoped: self._on_binding(s, None, b),
                            on_update=lambda old, new, s=scoped: self._on_binding(s, old, new),
                            on_delete=lambda b, s=scoped: self._forget(s, b))

    def _on_binding(self, cluster_scoped: bool, old: _Obj | None, new: _Obj) -> None:
        key = binding_key(new, cluster_scoped)
        if key is None:
            return
        self._note_progress(key, new)
        if needs_history_pass(old, new):
            self.enqueue(key)

    def _note_progress(self, key: str, binding: Mapping[str, Any]) -> None:
        for item in as_map(binding.get("status")).get("aggregatedStatus") or []:
            item = as_map(item)
            processed = job_progress(item.get("status"))[0]
            cluster = item.get("clusterName")
            if processed is not None and isinstance(cluster, str):
                self.progress.setdefault(key, {})[cluster] = processed

    def _forget(self, cluster_scoped: bool, binding: _Obj) -> None:
        key = binding_key(binding, cluster_scoped)
        if key is not None:
            self.progress.pop(key, None)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> float | None:
        binding, res = cached_binding(self.name, key, self.rbs, self.crbs)
        if binding is None:
            return None
        md = as_map(binding.get("metadata"))
        name, namespace = str(md.get("name")), md.get("namespace") or None
        decided: dict[str, HistoryUpdate] = {}
        progress = self.progress.get(key)

        def make_patch(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            decided.pop("u", None)
            if as_map(obj.get("metadata")).get("deletionTimestamp"):
                return None
            update = plan_history(obj, self.ctx.now(), progress=progress)
            decided["u"] = update
            return update.annotation_patch(as_map(obj.get("metadata")).get("resourceVersion"))

        patched = await patch_with_retry(self.client, res, binding, name, namespace, make_patch)
        update = decided.get("u")
        if patched is None or update is None or not update.changed:
            return None
        target = {"apiVersion": res.api_version, "kind": res.kind, **patched}
        template = template_ref(patched)
        for entry in update.superseded:
            self._event(target, template, "Warning", EVENT_FAILOVER_SUPERSEDED, superseded_message(entry))
        for entry in update.completed:
            self._event(target, template, "Normal", EVENT_FAILOVER_COMPLETED, completed_message(entry))
            self._observe(entry)
            log.info("%s %s: failover from %s to %s completed in %ss", res.kind, key, entry.get("from"),
                     entry.get("to"), entry.get("timeToRunning"))
        if update.started:
            log.info("%s %s: failover recorded: %s", res.kind, key,
                     ", ".join(f"{e.get('from')} ({e.get('trigger')})" for e in update.started))
        return None

    def _event(self, target: Mapping[str, Any], template: Mapping[str, Any] | None, type_: str, reason: str,
               message: str) -> None:
        self.ctx.recorder.event(target, type_, reason, message)
        if template is not None:
            self.ctx.recorder.event(template, type_, reason, message)

    def _observe(self, entry: Mapping[str, Any]) -> None:
        gap = as_map(entry.get("stateGap"))
        self.metrics.record_completed(metric_trigger(entry.get("trigger")),
                                      time_to_running=_float(entry.get("timeToRunning")),
                                      state_gap=_float(gap.get("ageAtFault")),
                                      records_reprocessed=_int(gap.get("recordsReprocessed")))


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
