"""Scheduling errors, mirroring the error kinds Karmada's scheduler distinguishes.

The kind decides what a scheduler controller does with the binding (as in Karmada):

* :class:`FitError` (condition reason ``NoClusterFit``): no cluster passed the filters. ``spec.clusters``
  is cleared and the binding is **not** retried until some event re-enqueues it.
* :class:`UnschedulableError` (``Unschedulable``): e.g. not enough capacity for a dynamic division;
  nothing is written and the binding is retried from the unschedulable pool.
* :class:`SchedulerError` (``SchedulerError``): any other failure (spread-constraint selection, ...);
  nothing is written and the binding is retried with backoff.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "FilterFailure",
    "FitError",
    "ModelError",
    "SchedulerError",
    "SchedulingError",
    "UnschedulableError",
]


class ModelError(ValueError):
    """An input dict does not have the shape of the Karmada object it should be."""


class SchedulingError(Exception):
    """Base of the scheduling failures; ``reason`` is the ``Scheduled`` condition reason."""

    reason = "SchedulerError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SchedulerError(SchedulingError):
    """A failure that is neither a fit error nor an unschedulable one (retried with backoff)."""

    reason = "SchedulerError"


class UnschedulableError(SchedulingError):
    """The clusters exist but cannot take the replicas (e.g. not enough available replicas)."""

    reason = "Unschedulable"


@dataclass(frozen=True)
class FilterFailure:
    """Why one cluster was filtered out: the filter plugin's name and Karmada's reason text."""

    plugin: str
    reason: str


NO_CLUSTER_AVAILABLE = "0/{total} clusters are available: {detail}."


class FitError(SchedulingError):
    """No cluster passed every filter.

    ``total`` is the number of clusters known to the scheduler (clusters being deleted included, as
    Karmada counts its snapshot); ``failures`` maps each filtered-out cluster to its first failing filter.
    """

    reason = "NoClusterFit"

    def __init__(self, total: int, failures: Mapping[str, FilterFailure]) -> None:
        self.total = total
        self.failures = dict(failures)
        super().__init__(self._render())

    def _render(self) -> str:
        if self.total == 0 or not self.failures:
            return NO_CLUSTER_AVAILABLE.format(total=self.total, detail="no cluster exists")
        histogram: dict[str, int] = {}
        for failure in self.failures.values():
            histogram[failure.reason] = histogram.get(failure.reason, 0) + 1
        parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
        return NO_CLUSTER_AVAILABLE.format(total=self.total, detail=", ".join(parts))
