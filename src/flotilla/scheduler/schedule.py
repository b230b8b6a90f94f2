"""The whole scheduling decision for one binding: filter, score, select, assign.

:func:`schedule` is what a scheduler controller calls. It never raises for a scheduling failure; the
:class:`ScheduleResult` says what to write:

* success: ``spec.clusters = result.target_clusters`` (and, with ``clusterAffinities``,
  ``status.schedulerObservingAffinityName = result.affinity_name``), condition ``Scheduled=True``;
* :class:`~flotilla.scheduler.errors.FitError`: ``spec.clusters`` is **cleared**
  (``result.writes_clusters`` is true, ``target_clusters`` empty), ``Scheduled=False/NoClusterFit``, no retry;
* any other error: nothing is written to the spec, ``Scheduled=False/<reason>``, retry.

With ``clusterAffinities`` the terms are tried from the one the binding currently uses (the first one
after an explicit reschedule) to the last; the first success wins and an earlier term is never
returned to on its own. If every term fails, the first term's error decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from .division import assign_replicas
from .errors import FilterFailure, FitError, SchedulerError, SchedulingError, UnschedulableError
from .estimation import allocatable_replicas, multi_template_applicable
from .framework import FilterContext, run_filters, score_clusters
from .model import (
    BindingSpec,
    BindingStatus,
    Cluster,
    Placement,
    TargetCluster,
    parse_binding,
    parse_binding_status,
    parse_clusters,
    parse_placement,
    target_clusters_from,
)
from .selection import build_candidates, select_clusters

__all__ = [
    "AffinityAttempt",
    "FitError",
    "ScheduleResult",
    "SchedulerError",
    "SchedulingError",
    "UnschedulableError",
    "reschedule_required",
    "run_algorithm",
    "schedule",
]

SUCCESS_MESSAGE = "Binding has been scheduled successfully."


@dataclass(frozen=True)
class AffinityAttempt:
    """A ``clusterAffinities`` term that was tried and failed (Karmada emits a warning Event for each)."""

    affinity_name: str
    error: SchedulingError


@dataclass(frozen=True)
class ScheduleResult:
    """The outcome of :func:`schedule`.

    ``clusters``: the new ``spec.clusters`` (empty on failure). ``error``: ``None`` on success.
    ``affinity_name``: on success with ``clusterAffinities``, the term used (write it to
    ``status.schedulerObservingAffinityName``); otherwise ``None`` (leave the status alone).
    ``attempts``: the terms that failed before the result. ``failures``: per cluster, why it was
    filtered out, for a fit error.
    """

    clusters: tuple[TargetCluster, ...] = ()
    error: SchedulingError | None = None
    affinity_name: str | None = None
    attempts: tuple[AffinityAttempt, ...] = ()
    failures: Mapping[str, FilterFailure] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def writes_clusters(self) -> bool:
        """Whether ``spec.clusters`` must be replaced by :attr:`target_clusters` (success or fit error)."""
        return self.error is None or isinstance(self.error, FitError)

    @property
    def target_clusters(self) -> list[dict[str, Any]]:
        """``spec.clusters`` as plain dicts: ``[{"name": ..., "replicas": ...}]``."""
        return [c.to_dict() for c in self.clusters]

    @property
    def reason(self) -> str:
        """The ``Scheduled`` condition reason: Success, NoClusterFit, Unschedulable or SchedulerError."""
        return "Success" if self.error is None else self.error.reason

    @property
    def message(self) -> str:
        return SUCCESS_MESSAGE if self.error is None else self.error.message

    @property
    def event_message(self) -> str:
        """Karmada's event text: ``Binding has been scheduled successfully. Result: {m1:2, m2:1}``."""
        if self.error is not None:
            return self.error.message
        result = ", ".join(f"{c.name}:{c.replicas}" for c in self.clusters)
        return f"{SUCCESS_MESSAGE} Result: {{{result}}}"

    def condition(self) -> dict[str, str]:
        """The ``Scheduled`` condition (without timestamps)."""
        return {
            "type": "Scheduled",
            "status": "True" if self.error is None else "False",
            "reason": self.reason,
            "message": self.message,
        }


def reschedule_required(triggered_at: datetime | None, last_scheduled: datetime | None) -> bool:
    """An explicit reschedule is pending: ``rescheduleTriggeredAt`` after ``lastScheduledTime`` (both set)."""
    if triggered_at is None or last_scheduled is None:
        return False
    return triggered_at > last_scheduled


def run_algorithm(
    spec: BindingSpec,
    clusters: Iterable[Cluster],
    *,
    now: datetime,
    affinity_name: str = "",
    fresh: bool = False,
    extra_estimates: Mapping[str, int] | None = None,
    enable_empty_workload_propagation: bool = False,
    multiple_pod_templates: bool = False,
) -> list[TargetCluster]:
    """One scheduling attempt (Karmada's ``genericScheduler.Schedule``); raises :class:`SchedulingError`.

    Clusters being deleted are skipped (but counted in a fit error's total).
    """
    all_clusters = list(clusters)
    ctx = FilterContext(spec=spec, now=_aware(now), affinity_name=affinity_name)
    failures: dict[str, FilterFailure] = {}
    feasible: list[Cluster] = []
    for cluster in all_clusters:
        if cluster.deleting:
            continue
        failure = run_filters(ctx, cluster)
        if failure is None:
            feasible.append(cluster)
        else:
            failures[cluster.name] = failure
    if not feasible:
        raise FitError(len(all_clusters), failures)
    scores = score_clusters(spec, feasible)
    # MultiplePodTemplatesScheduling: a multi-component workload bound to one cluster is estimated, and selected,
    # as whole sets of its components (one set needed), as in Karmada
    sets = multiple_pod_templates and multi_template_applicable(spec)
    allocatable = allocatable_replicas(feasible, spec, extra_estimates, component_sets=sets)
    candidates = build_candidates(feasible, spec, affinity_name, scores, allocatable)
    try:
        selected = select_clusters(spec.placement, candidates, 1 if sets else spec.replicas)
    except SchedulingError as e:
        raise type(e)(f"failed to select clusters: {e.message}") from e
    try:
        result = assign_replicas(selected, spec, affinity_name=affinity_name, fresh=fresh)
    except SchedulingError as e:
        raise type(e)(f"failed to assign replicas: {e.message}") from e
    if enable_empty_workload_propagation:
        present = {c.name for c in result}
        result.extend(TargetCluster(c.name, 0) for c in selected if c.name not in present)
    return result


def _aware(now: datetime) -> datetime:
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def schedule(
    binding: Mapping[str, Any] | BindingSpec,
    placement: Mapping[str, Any] | Placement | None,
    clusters: Iterable[Mapping[str, Any] | Cluster],
    *,
    now: datetime,
    previous: Mapping[str, Any] | BindingStatus | Sequence[Mapping[str, Any] | TargetCluster] | None = None,
    extra_estimates: Mapping[str, int] | None = None,
    enable_empty_workload_propagation: bool = False,
    multiple_pod_templates: bool = False,
) -> ScheduleResult:
    """Decide where a binding goes.

    ``binding``: a ResourceBinding/ClusterResourceBinding dict (``{spec, status}``), its ``spec`` alone,
    or a parsed :class:`BindingSpec`. Its ``spec.clusters`` is the previous assignment (kept where Karmada
    keeps it) and its ``gracefulEvictionTasks`` keep evicted clusters out.
    ``placement``: the placement to use; ``None`` means the binding's own ``spec.placement``.
    ``clusters``: every Cluster object known (dicts or :class:`Cluster`), ready or not.
    ``now``: the current time (only the D11 expired-toleration check uses it).
    ``previous``: the binding's status from earlier passes (``schedulerObservingAffinityName``,
    ``lastScheduledTime``), as a dict or :class:`BindingStatus`; defaults to the status inside ``binding``.
    A list (of ``{name, replicas}`` dicts or :class:`TargetCluster`) is taken instead as the previous
    assignment and replaces the binding's ``spec.clusters``.
    ``extra_estimates``: per-cluster replica estimates from other estimators (min-merged, -1 ignored).
    ``enable_empty_workload_propagation``: Karmada's flag of that name (selected clusters that got no
    replicas are kept with 0).
    ``multiple_pod_templates``: the ``MultiplePodTemplatesScheduling`` gate (a workload of several components bound
    to one cluster is estimated in whole component sets).
    """
    spec, embedded_status = parse_binding(binding)
    if placement is not None:
        spec = replace(spec, placement=parse_placement(placement))
    status = embedded_status or BindingStatus()
    if isinstance(previous, Mapping | BindingStatus):
        status = parse_binding_status(previous)
    elif previous is not None:
        spec = replace(spec, clusters=target_clusters_from(previous))
    cluster_list = parse_clusters(clusters)
    fresh = reschedule_required(spec.reschedule_triggered_at, status.last_scheduled_time)
    options: dict[str, Any] = {
        "now": now,
        "fresh": fresh,
        "extra_estimates": extra_estimates,
        "enable_empty_workload_propagation": enable_empty_workload_propagation,
        "multiple_pod_templates": multiple_pod_templates,
    }

    terms = spec.placement.cluster_affinities
    if terms is None:
        try:
            result = run_algorithm(spec, cluster_list, affinity_name=status.affinity_name, **options)
        except SchedulingError as e:
            return _failure(e.with_traceback(None))
        return ScheduleResult(clusters=tuple(result))

    start = 0
    if status.affinity_name and not fresh:
        start = next((i for i, t in enumerate(terms) if t.name == status.affinity_name), 0)
    attempts: list[AffinityAttempt] = []
    for term in terms[start:]:
        try:
            result = run_algorithm(spec, cluster_list, affinity_name=term.name, **options)
        except SchedulingError as e:
            # kept as a value, without its traceback: its frames hold ``attempts``, which would hold it back (a
            # reference cycle of every cluster's FilterFailure, left to the garbage collector, per failed term)
            attempts.append(AffinityAttempt(term.name, e.with_traceback(None)))
            continue
        return ScheduleResult(clusters=tuple(result), affinity_name=term.name, attempts=tuple(attempts))
    if not attempts:  # pragma: no cover - terms is never empty after parsing
        return _failure(SchedulerError("no cluster affinity term to schedule with"))
    first = attempts[0].error
    return replace(_failure(first), attempts=tuple(attempts))


def _failure(error: SchedulingError) -> ScheduleResult:
    failures = error.failures if isinstance(error, FitError) else {}
    return ScheduleResult(error=error, failures=failures)
