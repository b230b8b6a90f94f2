"""One application-failover pass for one binding, as a pure function: which clusters the workload leaves, the
state each eviction carries (extracted from the failed copy's reflected status, or handed on from the previous
failover when the copy never became Healthy), the merge patch and the Events. The application-failover
controller reads its caches, calls :func:`plan_binding` and writes the patch it returns."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flotilla.failover.application import (
    UNHEALTHY_SINCE_ANNOTATION,
    ApplicationFailoverDecision,
    decide_for_binding,
    record_patch,
)
from flotilla.failover.eviction import (
    TaskBuildError,
    TaskOptions,
    application_failover_task_options,
    cluster_names,
    graceful_evict_clusters,
)
from flotilla.failover.state import (
    STATE_PRESERVATION_FAILING_SINCE_ANNOTATION,
    EventSpec,
    failing_since,
    parse_injected_state_record,
    preserve_state_for_eviction,
    rules_of,
)
from flotilla.kube.objects import as_map
from flotilla.kube.times import format_time

__all__ = ["Plan", "binding_wants_failover", "plan_binding"]


@dataclass
class Plan:
    """One pass for one binding: the merge patch (``None``: nothing to write), what it evicts, the
    events to record once it is written, why nothing was evicted (``build_error``; ``blocked`` by a failed
    state extraction) and when to look again (``retry_after``; ``backoff``: retry with the queue's backoff)."""

    patch: dict[str, Any] | None
    decision: ApplicationFailoverDecision
    evicted: list[str] = field(default_factory=list)
    events: list[EventSpec] = field(default_factory=list)
    build_error: TaskBuildError | None = None
    retry_after: float | None = None
    blocked: bool = False
    backoff: bool = False


def _min(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def plan_binding(
    binding: Mapping[str, Any],
    now: datetime,
    *,
    binding_kind: str,
    health_interpretable: bool,
    graceful_eviction_enabled: bool = True,
    state_preservation_timeout: float = 0.0,
    state_preservation_enabled: bool = True,
    stamp_tasks: bool = False,
) -> Plan:
    """Everything :class:`ApplicationFailoverController` writes for ``binding`` (pure; no I/O).

    ``state_preservation_enabled``: the gate ``StatefulFailoverInjection`` (off: the rules are ignored).
    ``stamp_tasks``: new tasks are written with their ``creationTimestamp`` (the graceful-eviction controller
    runs beside this one and would stamp them on its first pass: this saves that write and its generation).
    """
    md = as_map(binding.get("metadata"))
    spec = as_map(binding.get("spec"))
    annotations = as_map(md.get("annotations"))
    decision = decide_for_binding(binding, now, health_interpretable=health_interpretable)
    plan = Plan(patch=None, decision=decision, retry_after=decision.requeue_after(now))
    failover = as_map(spec.get("failover"))
    application = as_map(failover.get("application"))
    rules = rules_of(failover, "application") if state_preservation_enabled else []
    record = parse_injected_state_record(binding)
    before = cluster_names(spec)  # once, before any cluster of this batch is removed
    failing = failing_since(annotations)
    failing_after = dict(failing)
    evictions: list[tuple[str, TaskOptions]] = []
    carried: dict[str, EventSpec] = {}
    for cluster in decision.evict:
        state: dict[str, str] | None = None
        if rules:
            # D5: a copy that never became Healthy after an injection hands on the previous state
            kept = preserve_state_for_eviction(rules, binding, cluster, record=record,
                                               first_failure_at=failing.get(cluster), now=now,
                                               timeout=state_preservation_timeout)
            if kept.carried is not None:
                carried[cluster] = kept.carried
            state = kept.state
            if kept.failure is not None:
                plan.events.append(kept.failure.event)
            if not kept.proceed:
                # as Karmada: a failed extraction fails the whole pass, nothing is evicted
                failing_after.setdefault(cluster, now)
                plan.blocked = True
                plan.retry_after = _min(plan.retry_after, kept.retry_after)
                plan.backoff = plan.backoff or kept.retry_after is None
                continue
        try:
            options = application_failover_task_options(
                application, binding_kind=binding_kind, preserved_label_state=state,
                clusters_before_failover=before, graceful_eviction_enabled=graceful_eviction_enabled,
                creation_timestamp=now if stamp_tasks else None)
        except TaskBuildError as e:
            # Karmada: no eviction at all when any task cannot be built; the timers keep running
            plan.build_error = e
            plan.backoff = True
            continue
        evictions.append((cluster, options))
    if plan.blocked or plan.build_error is not None:
        evictions = []
    evicted: list[str] = []
    patch: dict[str, Any] = {}
    if evictions:
        result = graceful_evict_clusters(spec, evictions)
        if result.changed:
            patch = result.spec_patch()
            evicted = list(result.removed)
    plan.events.extend(carried[c] for c in evicted if c in carried)
    remaining = decision.record_after(evicted)
    record = record_patch(annotations, remaining)
    if record is not None:
        patch.setdefault("metadata", {}).setdefault("annotations", {}).update(record["metadata"]["annotations"])
    # first extraction failures are kept only for clusters still waiting to be evicted
    failing_after = {c: t for c, t in failing_after.items() if c in remaining}
    encoded = _encode(failing_after)
    if encoded != annotations.get(STATE_PRESERVATION_FAILING_SINCE_ANNOTATION) and (
            encoded is not None or STATE_PRESERVATION_FAILING_SINCE_ANNOTATION in annotations):
        patch.setdefault("metadata", {}).setdefault("annotations", {})[
            STATE_PRESERVATION_FAILING_SINCE_ANNOTATION] = encoded
    if patch:
        patch.setdefault("metadata", {})["resourceVersion"] = md.get("resourceVersion")
        plan.patch = patch
    plan.evicted = evicted
    return plan


def _encode(entries: Mapping[str, datetime]) -> str | None:
    if not entries:
        return None
    return json.dumps({k: format_time(v) for k, v in sorted(entries.items())}, separators=(",", ":"))


def binding_wants_failover(binding: Mapping[str, Any]) -> bool:
    """The binding has ``spec.failover.application``, or still carries a record to clean up."""
    spec = as_map(binding.get("spec"))
    if isinstance(as_map(spec.get("failover")).get("application"), Mapping):
        return True
    annotations = as_map(as_map(binding.get("metadata")).get("annotations"))
    return UNHEALTHY_SINCE_ANNOTATION in annotations or STATE_PRESERVATION_FAILING_SINCE_ANNOTATION in annotations
