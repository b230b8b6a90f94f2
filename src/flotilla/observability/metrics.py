"""Prometheus metrics on ``prometheus_client``: a registry per owner, the failover metrics, a ``/metrics`` server.

**Registry.** :class:`MetricsRegistry` is a ``prometheus_client`` ``CollectorRegistry`` of its own: the
controller-manager, every agent and every API server hold one, never the library's global default registry, so
several of them in one process (``flotilla up``) stay apart. ``counter``, ``gauge`` and ``histogram`` declare the
library's metrics on it (:class:`Counter`, :class:`Gauge`, :class:`Histogram`: the library's classes plus
read-back calls for tests); ``metric.labels(*values)`` (or ``labels(name=value, ...)``) gives the
child for one combination of label values, created on first use (``None`` stands for the empty value), and a
metric without labels is used directly (``metric.inc()``). Declaring a name again with the same type, labels
and buckets returns the metric already there (a restarted controller finds its counters); another type, other
labels or buckets raise ``ValueError``. A counter's name must end in ``_total``: the library prints counters
under their name with ``_total``, so this keeps the declared name and the exposed one the same. Names follow
Prometheus' classic rules (letters, digits, ``_`` and ``:``), as every scraper reads them.

:meth:`MetricsRegistry.add_collector` adds a callable run before each collection (a scrape, a read-back) to set
gauges that mirror live state; one that raises is logged and skipped. :meth:`MetricsRegistry.add_process_metrics`
adds the library's ``process_*`` metrics (CPU, memory, open files) to a registry a process serves.
:meth:`MetricsRegistry.render` prints the text exposition format 0.0.4 with the library's ``generate_latest``
(served as :data:`CONTENT_TYPE`). Importing this module turns off the library's ``*_created`` series, which
Flotilla has never exposed.

**Failover metrics.** :class:`FailoverMetrics` declares them (Karmada's names where Karmada has the metric:
``eviction_queue_depth``, ``eviction_kind_total``, ``eviction_processing_latency_seconds``,
``eviction_processing_total``; ``flotilla_*`` otherwise) and offers the recording calls the controllers make,
e.g. ``record_eviction(trigger=TRIGGER_APPLICATION, reason="ApplicationFailure", result=RESULT_SUCCESS)``.
:class:`WorkqueueMetrics` holds client-go's ``workqueue_*`` metrics, fed by every controller's work queue.
:class:`EventMetrics` counts the Events the event recorder could not write (``flotilla_events_dropped_total``).
:class:`InterpreterMetrics` counts failing ResourceInterpreterCustomization scripts
(``flotilla_interpreter_customization_failures_total{customization, operation, reason}``).
:class:`ControllerMetrics` bundles them for a controller-manager (``ControllerContext.metrics``).

**Server.** :class:`MetricsServer` serves ``GET /metrics`` and ``/healthz`` with aiohttp on the event loop;
:func:`parse_bind_address` reads ``--metrics-bind-address``.
"""

from __future__ import annotations

import logging
import math
import re
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import prometheus_client
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_BUCKETS",
    "DROP_CAUSES",
    "DROP_CLOSED",
    "DROP_INVALID",
    "DROP_NO_LOOP",
    "DROP_QUEUE_FULL",
    "DROP_SPAM_FILTER",
    "DROP_WRITE_FAILED",
    "FAILOVER_SECONDS_BUCKETS",
    "FENCE_TRIGGER_LEASE",
    "RESULT_BLOCKED",
    "RESULT_ERROR",
    "RESULT_SUCCESS",
    "TRIGGER_APPLICATION",
    "TRIGGER_CLUSTER_TAINT",
    "ControllerMetrics",
    "Counter",
    "EventMetrics",
    "FailoverHistoryMetrics",
    "FailoverMetrics",
    "Gauge",
    "Histogram",
    "InterpreterMetrics",
    "MetricsRegistry",
    "MetricsServer",
    "WorkqueueMetrics",
    "exponential_buckets",
    "parse_bind_address",
    "trigger_of_producer",
]

# Flotilla exposes counters and histograms without their creation time (as it always has): one switch for the
# process, read by the library when it creates and when it collects a metric.
prometheus_client.disable_created_metrics()

#: The ``Content-Type`` of the exposition: the text format 0.0.4, which ``generate_latest`` prints. (The
#: library's ``CONTENT_TYPE_LATEST`` names its 1.0.0 text format; for classic names the text is the same, and
#: 0.0.4 is what every Prometheus reads.)
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
#: Prometheus' default histogram buckets (seconds).
DEFAULT_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """``count`` upper bounds ``start * factor**i`` (client_golang's ``ExponentialBuckets``)."""
    if start <= 0 or factor <= 1 or count < 1:
        raise ValueError("exponential buckets need start > 0, factor > 1 and count >= 1")
    return tuple(start * factor**i for i in range(count))


# ----------------------------------------------------------------------------------------------- metrics


class _ReadBack:
    """What Flotilla adds to the library's metric classes: ``None`` as the empty label value, the label names,
    and reading a value back (for tests: it collects the whole metric, so it is not meant for a hot path)."""

    _labelnames: tuple[str, ...]
    _name: str

    def labels(self, *values: Any, **kw: Any) -> Any:
        if None in values:
            values = tuple("" if v is None else v for v in values)
        elif kw and None in kw.values():
            kw = {k: "" if v is None else v for k, v in kw.items()}
        return super().labels(*values, **kw)  # type: ignore[misc]

    @property
    def labelnames(self) -> tuple[str, ...]:
        return self._labelnames

    def _label_dict(self, values: Sequence[Any], kw: Mapping[str, Any]) -> dict[str, str]:
        if values and kw:
            raise ValueError(f"{self._name}: give label values by position or by name, not both")
        if kw:
            if set(kw) != set(self._labelnames):
                raise ValueError(f"{self._name}: labels {sorted(kw)} given, {list(self._labelnames)} expected")
            values = [kw[n] for n in self._labelnames]
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name}: {len(values)} label values given, {len(self._labelnames)} expected")
        return {n: "" if v is None else str(v) for n, v in zip(self._labelnames, values, strict=True)}

    def _sample(self, suffix: str, values: Sequence[Any], kw: Mapping[str, Any]) -> float:
        """The sample ``<name><suffix>`` of these label values; 0 if the child does not exist."""
        want = self._label_dict(values, kw)
        for family in self.collect():  # type: ignore[attr-defined]
            for sample in family.samples:
                if sample.name == self._name + suffix and sample.labels == want:
                    return float(sample.value)
        return 0.0


class Counter(_ReadBack, prometheus_client.Counter):
    """A value that only goes up (``inc``); the library's counter plus :meth:`value`."""

    def value(self, *values: Any, **kw: Any) -> float:
        """The current value for these label values (0 if never incremented)."""
        return self._sample("_total", values, kw)


class Gauge(_ReadBack, prometheus_client.Gauge):
    """A value that goes up and down (``set``, ``inc``, ``dec``); the library's gauge plus :meth:`value`."""

    def value(self, *values: Any, **kw: Any) -> float:
        return self._sample("", values, kw)


class Histogram(_ReadBack, prometheus_client.Histogram):
    """Observations counted in buckets (``observe``); the library's histogram plus :meth:`count` and
    :meth:`sum`."""

    def count(self, *values: Any, **kw: Any) -> int:
        """How many observations these label values have (0 if none)."""
        return int(self._sample("_count", values, kw))

    def sum(self, *values: Any, **kw: Any) -> float:
        return self._sample("_sum", values, kw)


def _check_names(name: str, labelnames: Sequence[str]) -> tuple[str, ...]:
    if not _METRIC_NAME.fullmatch(name):
        raise ValueError(f"invalid metric name {name!r}")
    names = tuple(labelnames)
    for label in names:
        if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
            raise ValueError(f"invalid label name {label!r} for metric {name}")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate label names for metric {name}: {names}")
    return names


class MetricsRegistry(CollectorRegistry):
    """The metrics of one owner (a controller-manager, an agent, an API server, or a test); see the module
    docstring."""

    def __init__(self) -> None:
        super().__init__()
        self._declared_lock = threading.Lock()
        # the name each metric was declared under -> (metric, its kind, label names, buckets)
        self._declared: dict[str, tuple[Any, str, tuple[str, ...], tuple[float, ...]]] = {}
        self._collectors: list[Callable[[], None]] = []
        self._process: ProcessCollector | None = None

    def _declare(self, cls: type[Any], kind: str, name: str, documentation: str, labelnames: Sequence[str],
                 buckets: tuple[float, ...] = ()) -> Any:
        names = _check_names(name, labelnames)
        if kind == "counter" and not name.endswith("_total"):
            raise ValueError(f"counter {name}: a counter's name ends in _total (it is exposed so)")
        with self._declared_lock:
            existing = self._declared.get(name)
            if existing is None:
                kw: dict[str, Any] = {"buckets": buckets} if kind == "histogram" else {}
                metric = cls(name, documentation, names, registry=self, **kw)
                self._declared[name] = (metric, kind, names, buckets)
                return metric
            metric, old_kind, old_names, old_buckets = existing
            if (old_kind, old_names, old_buckets) != (kind, names, buckets):
                raise ValueError(f"metric {name} is already registered as a {old_kind} with labels "
                                 f"{list(old_names)} (and its own buckets)")
            return metric

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        result: Counter = self._declare(Counter, "counter", name, documentation, labelnames)
        return result

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Gauge:
        result: Gauge = self._declare(Gauge, "gauge", name, documentation, labelnames)
        return result

    def histogram(self, name: str, documentation: str, labelnames: Sequence[str] = (),
                  buckets: Iterable[float] = DEFAULT_BUCKETS) -> Histogram:
        """A histogram with these upper bounds (in increasing order; ``+Inf`` is added)."""
        bounds = tuple(float(b) for b in buckets)
        if any(math.isnan(b) for b in bounds):
            raise ValueError(f"{name}: a bucket bound is NaN")
        result: Histogram = self._declare(Histogram, "histogram", name, documentation, labelnames, bounds)
        return result

    def get(self, name: str) -> Any:
        """The metric declared under ``name``, or None."""
        with self._declared_lock:
            found = self._declared.get(name)
        return found[0] if found is not None else None

    def names(self) -> list[str]:
        """The names metrics were declared under, sorted."""
        with self._declared_lock:
            return sorted(self._declared)

    def add_process_metrics(self) -> None:
        """Expose the library's ``process_*`` metrics of this process here (once; again is harmless)."""
        with self._declared_lock:
            if self._process is None:
                self._process = ProcessCollector(registry=self)

    def add_collector(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` before every collection (to set gauges from live state)."""
        with self._declared_lock:
            self._collectors.append(fn)

    def remove_collector(self, fn: Callable[[], None]) -> None:
        with self._declared_lock:
            if fn in self._collectors:
                self._collectors.remove(fn)

    def refresh(self) -> None:
        """Run the callables of :meth:`add_collector`; one that raises is logged, not propagated."""
        with self._declared_lock:
            collectors = list(self._collectors)
        for fn in collectors:
            try:
                fn()
            except Exception:
                log.exception("metrics: collector %r failed", fn)

    def collect(self) -> Iterator[Metric]:
        """The library's collection, after :meth:`refresh`."""
        self.refresh()
        yield from super().collect()

    def render(self) -> str:
        """Every metric in the text exposition format 0.0.4."""
        return generate_latest(self).decode()


# ----------------------------------------------------------------------------------------------- failover metrics

#: ``trigger`` label values: an eviction caused by a cluster's NoExecute taint, or by the application's health.
TRIGGER_CLUSTER_TAINT = "cluster_taint"
TRIGGER_APPLICATION = "application"
#: ``result`` label values of ``flotilla_evictions_total``.
RESULT_SUCCESS = "success"
RESULT_ERROR = "error"
RESULT_BLOCKED = "blocked"  # waiting for state preservation (D6)

#: Buckets (seconds) for failover durations: half a second to two hours.
FAILOVER_SECONDS_BUCKETS: tuple[float, ...] = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)

_PRODUCER_TRIGGERS = {
    "TaintManager": TRIGGER_CLUSTER_TAINT,
    "resource-binding-application-failover-controller": TRIGGER_APPLICATION,
    "cluster-resource-binding-application-failover-controller": TRIGGER_APPLICATION,
}


#: ``trigger`` of ``flotilla_clusters_fenced_total``: the automatic fence of a guarded Pull cluster.
FENCE_TRIGGER_LEASE = "lease"


def trigger_of_producer(producer: Any) -> str:
    """The ``trigger`` label for a graceful-eviction task's ``producer`` (``unknown`` for anything else)."""
    return _PRODUCER_TRIGGERS.get(producer, "unknown") if isinstance(producer, str) else "unknown"


def _seconds(value: float) -> float:
    """A duration to observe: never negative (clock skew, whole-second timestamps), 0 for NaN."""
    return value if value > 0 else 0.0


class FailoverMetrics:
    """The failover metrics and the calls that record them (every call is safe with any argument)."""

    def __init__(self, registry: MetricsRegistry) -> None:
        r = registry
        # Karmada's names (pkg/metrics/cluster.go), for the taint manager's queue
        self.eviction_queue_depth = r.gauge(
            "eviction_queue_depth", "Current depth of the eviction queue (keys ready to be processed).", ["name"])
        self.eviction_kind_total = r.gauge(
            "eviction_kind_total", "Number of keys in the eviction queue (ready, delayed or being processed) by "
            "member cluster and binding kind.", ["member_cluster", "resource_kind"])
        self.eviction_processing_latency = r.histogram(
            "eviction_processing_latency_seconds", "Time one pass of the eviction worker over a key takes.",
            ["name"], buckets=exponential_buckets(0.001, 2, 15))
        self.eviction_processing_total = r.counter(
            "eviction_processing_total", "Passes of the eviction worker over a key, by result (error: the pass "
            "raised and the key is retried with backoff).", ["name", "result"])
        # Flotilla's
        self.eviction_enqueue_to_done = r.histogram(
            "flotilla_eviction_enqueue_to_done_seconds", "Time from a key becoming ready in the eviction queue to "
            "the end of its processing (waiting for a worker included, toleration delays not).", ["name"],
            buckets=exponential_buckets(0.001, 2, 15))
        self.evictions = r.counter(
            "flotilla_evictions_total", "Eviction attempts by trigger (cluster_taint, application), reason (the "
            "task's reason) and result (success, error, blocked: waiting for state preservation).",
            ["trigger", "reason", "result"])
        self.state_preservation_failures = r.counter(
            "flotilla_state_preservation_failures_total", "Failed state extractions for an eviction (D6; each "
            "failed attempt counts), by trigger.", ["trigger"])
        self.state_preservation_timeouts = r.counter(
            "flotilla_state_preservation_timeouts_total", "Evictions that went ahead without preserved state once "
            "--state-preservation-timeout passed (D6), by trigger.", ["trigger"])
        self.taint_to_eviction = r.histogram(
            "flotilla_taint_to_eviction_seconds", "Time from the timeAdded of the NoExecute taint that caused an "
            "eviction to the eviction being written.", buckets=FAILOVER_SECONDS_BUCKETS)
        self.eviction_to_healthy = r.histogram(
            "flotilla_eviction_to_healthy_seconds", "Time from an eviction task's creationTimestamp to its removal "
            "because every target cluster reports the workload Healthy, by trigger.", ["trigger"],
            buckets=FAILOVER_SECONDS_BUCKETS)
        self.tasks_removed = r.counter(
            "flotilla_graceful_eviction_tasks_removed_total", "Graceful-eviction tasks removed, by trigger and "
            "reason (Healthy, Timeout, SuppressDeletionFalse).", ["trigger", "reason"])
        self.rate_limit = r.gauge(
            "flotilla_eviction_rate_limit", "Evictions per second the eviction rate limiter allows now "
            "(0 while halted) (D10).", ["name"])
        self.rate_limiter_mode = r.gauge(
            "flotilla_eviction_rate_limiter_mode", "1 for the eviction rate limiter's current pacing mode "
            "(Primary, Secondary, Halted), 0 for the others (D10).", ["name", "mode"])
        self.clusters_fenced = r.counter(
            "flotilla_clusters_fenced_total", "Clusters fenced (taint cluster.flotilla.io/out-of-service:NoExecute "
            "added) by the control plane's controllers, by trigger (lease: a guarded Pull cluster's Lease went "
            "unrenewed past its bound).", ["trigger"])

        # native restore (D20)
        self.state_restores = r.counter(
            "flotilla_state_restore_total", "Native restores resolved for a failed-over workload, by outcome "
            "(Restored: from a snapshot; Fresh: from empty state) (D20).", ["outcome"])
        self.state_restore_failures = r.counter(
            "flotilla_state_restore_failures_total", "Failed native-restore lookups (each attempt counts), by "
            "reason (NoCheckpointFound, StorageUnreachable, CredentialsRefused, CheckpointTooOld, "
            "StorageNotConfigured, NoJobId) (D20).", ["reason"])
        self.state_restore_age = r.histogram(
            "flotilla_state_restore_age_at_fault_seconds", "Age at the fault of the snapshot a native restore "
            "resumed from: the state gap (D20).", buckets=FAILOVER_SECONDS_BUCKETS)

    # -- the calls controllers make ----------------------------------------------------------------

    def record_state_restore(self, outcome: str, age_at_fault: float | None = None) -> None:
        """A native restore resolved (``Restored`` with the snapshot's age at the fault, or ``Fresh``) (D20)."""
        self.state_restores.labels(outcome).inc()
        if age_at_fault is not None:
            self.state_restore_age.observe(_seconds(age_at_fault))

    def record_state_restore_failure(self, reason: str) -> None:
        """A native-restore lookup failed (D20); call once per attempt."""
        self.state_restore_failures.labels(reason).inc()

    def record_eviction(self, *, trigger: str, reason: str, result: str) -> None:
        """One eviction attempt: ``result`` is :data:`RESULT_SUCCESS`, :data:`RESULT_ERROR` (writing it failed;
        retried) or :data:`RESULT_BLOCKED` (held back until state can be preserved, D6)."""
        self.evictions.labels(trigger, reason, result).inc()

    def record_state_preservation_failure(self, trigger: str) -> None:
        """A state extraction failed (D6); call once per failed attempt."""
        self.state_preservation_failures.labels(trigger).inc()

    def record_state_preservation_timeout(self, trigger: str) -> None:
        """An eviction goes ahead without state because ``--state-preservation-timeout`` passed (D6)."""
        self.state_preservation_timeouts.labels(trigger).inc()

    def observe_taint_to_eviction(self, seconds: float) -> None:
        self.taint_to_eviction.observe(_seconds(seconds))

    def observe_eviction_to_healthy(self, trigger: str, seconds: float) -> None:
        self.eviction_to_healthy.labels(trigger).observe(_seconds(seconds))

    def record_cluster_fenced(self, trigger: str) -> None:
        """A cluster fenced by a controller (``trigger``: :data:`FENCE_TRIGGER_LEASE`)."""
        self.clusters_fenced.labels(trigger).inc()

    def record_task_removed(self, trigger: str, reason: str) -> None:
        self.tasks_removed.labels(trigger, reason).inc()

    def record_processing(self, name: str, *, ok: bool, seconds: float, since_ready: float | None) -> None:
        """One pass of an eviction worker over a key (Karmada's ``RecordEvictionProcessingMetrics``)."""
        self.eviction_processing_latency.labels(name).observe(_seconds(seconds))
        self.eviction_processing_total.labels(name, RESULT_SUCCESS if ok else RESULT_ERROR).inc()
        if since_ready is not None:
            self.eviction_enqueue_to_done.labels(name).observe(_seconds(since_ready))

    def set_eviction_queue(self, name: str, depth: int, pending: Mapping[tuple[str, str], int]) -> None:
        """The queue's ready keys and its keys per (member cluster, binding kind); replaces the previous ones."""
        self.eviction_queue_depth.labels(name).set(depth)
        self.eviction_kind_total.clear()
        for (cluster, kind), n in pending.items():
            self.eviction_kind_total.labels(cluster, kind).set(n)

    def set_rate_limiter(self, name: str, mode: str, rate: float, modes: Iterable[str]) -> None:
        """The rate limiter of the controller ``name``: its mode (one of ``modes``) and rate in force."""
        self.rate_limit.labels(name).set(rate)
        for m in modes:
            self.rate_limiter_mode.labels(name, m).set(1 if m == mode else 0)

    def clear_live_state(self, name: str) -> None:
        """Forget the gauges that describe a running taint manager (it stopped)."""
        self.eviction_queue_depth.remove(name)
        self.eviction_kind_total.clear()
        self.rate_limit.remove(name)
        self.rate_limiter_mode.remove_by_labels({"name": name})


class FailoverHistoryMetrics:
    """The failover history's metrics (D22), recorded once per failover whose new copy runs; ``trigger`` is
    ``cluster_taint``, ``application``, ``planned_move`` or ``unknown``."""

    def __init__(self, registry: MetricsRegistry) -> None:
        r = registry
        self.completed = r.counter(
            "flotilla_failovers_completed_total", "Failovers whose new copy runs, by trigger.", ["trigger"])
        self.time_to_running = r.histogram(
            "flotilla_failover_time_to_running_seconds", "Time from a failover's start (its eviction task's "
            "creationTimestamp, or a planned move's start) to its new copy running, by trigger.", ["trigger"],
            buckets=FAILOVER_SECONDS_BUCKETS)
        self.state_gap = r.histogram(
            "flotilla_failover_state_gap_seconds", "Age at the fault of the checkpoint a failover's new copy "
            "was restored from, by trigger.", ["trigger"], buckets=FAILOVER_SECONDS_BUCKETS)
        self.records_reprocessed = r.histogram(
            "flotilla_failover_records_reprocessed", "Records a failover's new copy processes a second time "
            "(simulated Flink jobs only), by trigger.", ["trigger"],
            buckets=(0, 10, 100, 1000, 10_000, 100_000, 1_000_000))

    def record_completed(self, trigger: str, *, time_to_running: float | None, state_gap: float | None,
                         records_reprocessed: int | None) -> None:
        self.completed.labels(trigger).inc()
        if time_to_running is not None:
            self.time_to_running.labels(trigger).observe(_seconds(time_to_running))
        if state_gap is not None:
            self.state_gap.labels(trigger).observe(_seconds(state_gap))
        if records_reprocessed is not None:
            self.records_reprocessed.labels(trigger).observe(max(0.0, float(records_reprocessed)))


#: ``cause`` label values of ``flotilla_events_dropped_total``: the per-object spam filter held it back; the
#: recorder's queue was full; the recorder was closed (or closing with writes left); the event was invalid (no
#: object name, an unknown type); it was recorded outside an event loop; the API server refused the write.
DROP_SPAM_FILTER = "spam_filter"
DROP_QUEUE_FULL = "queue_full"
DROP_CLOSED = "closed"
DROP_INVALID = "invalid"
DROP_NO_LOOP = "no_loop"
DROP_WRITE_FAILED = "write_failed"
DROP_CAUSES = (DROP_SPAM_FILTER, DROP_QUEUE_FULL, DROP_CLOSED, DROP_INVALID, DROP_NO_LOOP, DROP_WRITE_FAILED)


class EventMetrics:
    """What the event recorder (:class:`flotilla.client.events.EventRecorder`) could not write."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self.dropped = registry.counter(
            "flotilla_events_dropped_total", "Occurrences of Events that were not written (neither as an Event nor "
            "in the count of one), by the Event's reason and cause (spam_filter: the per-object budget was spent; "
            "queue_full, closed, invalid, no_loop, write_failed).", ["reason", "cause"])

    def record_dropped(self, reason: str, cause: str, n: int = 1) -> None:
        self.dropped.labels(reason, cause).inc(max(0, n))


class WorkqueueMetrics:
    """client-go's workqueue metrics; a :class:`~flotilla.client.workqueue.WorkQueue` records into it when given
    as its ``metrics`` (the same attribute names as its prometheus_client hook)."""

    def __init__(self, registry: MetricsRegistry) -> None:
        r = registry
        durations = exponential_buckets(1e-8, 10, 10)
        self.depth = r.gauge("workqueue_depth", "Current depth of workqueue", ["name"])
        self.adds = r.counter("workqueue_adds_total", "Total number of adds handled by workqueue", ["name"])
        self.retries = r.counter("workqueue_retries_total", "Total number of retries handled by workqueue",
                                 ["name"])
        self.latency = r.histogram("workqueue_queue_duration_seconds",
                                   "How long in seconds an item stays in workqueue before being requested",
                                   ["name"], buckets=durations)
        self.work = r.histogram("workqueue_work_duration_seconds",
                                "How long in seconds processing an item from workqueue takes", ["name"],
                                buckets=durations)


class InterpreterMetrics:
    """The resource interpreter's metrics: failing ResourceInterpreterCustomization script calls."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self.customization_failures = registry.counter(
            "flotilla_interpreter_customization_failures_total",
            "ResourceInterpreterCustomization script calls that failed, by customization, operation and reason "
            "(error: the script raised or returned something unusable; timeout: it ran out of its time budget; "
            "memory: out of its memory budget)",
            ["customization", "operation", "reason"])

    def record_customization_failure(self, customization: str, operation: str, reason: str) -> None:
        """Count one failing call (safe from any thread)."""
        self.customization_failures.labels(customization, operation, reason).inc()


class ControllerMetrics:
    """What a controller-manager's controllers record into: the registry (with the ``process_*`` metrics, as
    the controller-manager serves it) and the metrics declared on it."""

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self.registry = registry if registry is not None else MetricsRegistry()
        self.failover = FailoverMetrics(self.registry)
        self.workqueue = WorkqueueMetrics(self.registry)
        self.events = EventMetrics(self.registry)
        self.interpreter = InterpreterMetrics(self.registry)
        #: the forward-first order (flotilla.runtime.forward_first): passes that waited, and for how long
        self.forward_first_waits = self.registry.counter(
            "flotilla_forward_first_waits_total",
            "Passes of reporting or clean-up controllers that waited for the forward (or reporting) queues",
            ["role"])
        self.forward_first_wait_seconds = self.registry.counter(
            "flotilla_forward_first_wait_seconds_total",
            "Seconds passes of reporting or clean-up controllers waited for the forward (or reporting) queues",
            ["role"])
        self.registry.add_process_metrics()

    def forward_first_waited(self, role: str, seconds: float) -> None:
        self.forward_first_waits.labels(role).inc()
        self.forward_first_wait_seconds.labels(role).inc(_seconds(seconds))

    def render(self) -> str:
        return self.registry.render()


# ----------------------------------------------------------------------------------------------- the server


def parse_bind_address(text: str) -> tuple[str, int] | None:
    """``--metrics-bind-address``: ``None`` for ``0`` (disabled), else ``(host, port)``.

    Accepts ``host:port``, ``:port`` (every interface, as Go), ``[ipv6]:port``; port 0 picks a free one.
    Raises ``ValueError`` with a readable message for anything else.
    """
    value = text.strip()
    if value == "0":
        return None
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"--metrics-bind-address: expected host:port or 0, got {text!r}")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"--metrics-bind-address: port out of range in {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"--metrics-bind-address: write an IPv6 address in brackets ([::1]:8080), got {text!r}")
    return host or "0.0.0.0", port


class MetricsServer:
    """``GET /metrics`` and ``/healthz`` over HTTP (aiohttp) for a registry."""

    def __init__(self, registry: MetricsRegistry, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._runner: Any = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> MetricsServer:
        """Listen; raises ``OSError`` if the address cannot be bound (in use, not local, unknown host)."""
        from aiohttp import web

        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self.port), family=family)
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, access_log=None)
        try:
            await runner.setup()
            await web.SockSite(runner, sock).start()
        except BaseException:
            await runner.cleanup()
            sock.close()
            raise
        self.port = int(sock.getsockname()[1])
        self._runner = runner
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: Any) -> Any:
        from aiohttp import web

        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE})

    async def _healthz(self, request: Any) -> Any:
        from aiohttp import web

        return web.Response(text="ok")
