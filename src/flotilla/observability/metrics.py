"""Prometheus metrics without a dependency: a registry, the failover metrics, and a ``/metrics`` server.

**Registry.** :class:`MetricsRegistry` holds counters, gauges and histograms, each with a fixed list of label
names; ``metric.labels(*values)`` (or ``labels(name=value, ...)``) gives the child for one combination of
label values, created on first use. A metric without labels is used directly (``metric.inc()``).
:meth:`MetricsRegistry.render` prints the Prometheus text exposition format 0.0.4: ``# HELP`` and ``# TYPE``
for every metric (also one that has no sample yet), then its samples; label values escape ``\\``, ``"`` and
line feeds, help texts ``\\`` and line feeds; a histogram prints cumulative ``_bucket{le="..."}`` samples
ending with ``le="+Inf"``, then ``_sum`` and ``_count``. Registering a name again with the same type and
labels returns the metric already there (so a restarted controller finds its counters), with another type
or other labels raises ``ValueError``. Collectors (:meth:`MetricsRegistry.add_collector`) run before each
render to refresh gauges that mirror live state; one that raises is logged and skipped. A lock guards the
children, so the registry may also be read from another thread; everything else runs on one event loop.

**Failover metrics.** :class:`FailoverMetrics` declares them (Karmada's names where Karmada has the metric:
``eviction_queue_depth``, ``eviction_kind_total``, ``eviction_processing_latency_seconds``,
``eviction_processing_total``; ``flotilla_*`` otherwise) and offers the recording calls the controllers make,
e.g. ``record_eviction(trigger=TRIGGER_APPLICATION, reason="ApplicationFailure", result=RESULT_SUCCESS)``.
:class:`WorkqueueMetrics` holds client-go's ``workqueue_*`` metrics, fed by every controller's work queue.
:class:`EventMetrics` counts the Events the event recorder could not write (``flotilla_events_dropped_total``).
:class:`InterpreterMetrics` counts failing ResourceInterpreterCustomization scripts
(``flotilla_interpreter_customization_failures_total{customization, operation, reason}``).
:class:`ControllerMetrics` bundles them for a controller-manager (``ControllerContext.metrics``).

**Server.** :class:`MetricsServer` serves ``GET /metrics`` (``text/plain; version=0.0.4``) and ``/healthz``
with aiohttp; :func:`parse_bind_address` reads ``--metrics-bind-address``.
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

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
    "format_value",
    "parse_bind_address",
    "trigger_of_producer",
]

#: The ``Content-Type`` of the text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Prometheus' default histogram buckets (seconds).
DEFAULT_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """``count`` upper bounds ``start * factor**i`` (client_golang's ``ExponentialBuckets``)."""
    if start <= 0 or factor <= 1 or count < 1:
        raise ValueError("exponential buckets need start > 0, factor > 1 and count >= 1")
    return tuple(start * factor**i for i in range(count))


def format_value(value: float) -> str:
    """A sample value as Go prints it: ``1``, ``0.25``, ``1e+21``, ``+Inf``, ``-Inf``, ``NaN``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels_text(names: Sequence[str], values: Sequence[str], extra: tuple[str, str] | None = None) -> str:
    pairs = [f'{n}="{_escape_label_value(v)}"' for n, v in zip(names, values, strict=True)]
    if extra is not None:
        pairs.append(f'{extra[0]}="{_escape_label_value(extra[1])}"')
    return "{" + ",".join(pairs) + "}" if pairs else ""


# ----------------------------------------------------------------------------------------------- metrics


class _Metric:
    """A metric family: name, help, label names and one child per combination of label values."""

    type: ClassVar[str] = ""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (),
                 lock: threading.RLock | None = None) -> None:
        if not _METRIC_NAME.fullmatch(name):
            raise ValueError(f"invalid metric name {name!r}")
        names = tuple(labelnames)
        for label in names:
            if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
                raise ValueError(f"invalid label name {label!r} for metric {name}")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate label names for metric {name}: {names}")
        self.name = name
        self.documentation = documentation
        self.labelnames = names
        self._lock = lock or threading.RLock()
        self._children: dict[tuple[str, ...], Any] = {}

    def _key(self, values: Sequence[Any], kw: Mapping[str, Any]) -> tuple[str, ...]:
        if values and kw:
            raise ValueError(f"{self.name}: give label values by position or by name, not both")
        if kw:
            if set(kw) != set(self.labelnames):
                raise ValueError(f"{self.name}: labels {sorted(kw)} given, {list(self.labelnames)} expected")
            values = [kw[n] for n in self.labelnames]
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(values)} label values given, {len(self.labelnames)} expected")
        return tuple("" if v is None else str(v) for v in values)

    def _new_child(self) -> Any:
        raise NotImplementedError

    def labels(self, *values: Any, **kw: Any) -> Any:
        """The child for these label values (created on first use)."""
        if not kw:
            for v in values:
                if type(v) is not str:  # str() of it makes the key (of a (str, Enum) member: not its value)
                    break
            else:
                child = self._children.get(values)  # exactly the key of an existing child
                if child is not None:
                    return child
        key = self._key(values, kw)
        with self._lock:
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self._new_child()
            return child

    def _only(self) -> Any:
        if self.labelnames:
            raise ValueError(f"{self.name} has labels {list(self.labelnames)}: use .labels(...)")
        return self.labels()

    def remove(self, *values: Any, **kw: Any) -> None:
        """Forget the child for these label values (no error if there is none)."""
        key = self._key(values, kw)
        with self._lock:
            self._children.pop(key, None)

    def clear(self) -> None:
        """Forget every child."""
        with self._lock:
            self._children.clear()

    def children(self) -> list[tuple[dict[str, str], Any]]:
        """``(labels, child)`` for every child, sorted by label values."""
        with self._lock:
            items = sorted(self._children.items())
        return [(dict(zip(self.labelnames, key, strict=True)), child) for key, child in items]

    def _sample_lines(self, key: tuple[str, ...], child: Any) -> list[str]:
        raise NotImplementedError

    def render(self) -> str:
        lines = [f"# HELP {self.name} {_escape_help(self.documentation)}", f"# TYPE {self.name} {self.type}"]
        with self._lock:
            if not self._children and not self.labelnames:
                self._children[()] = self._new_child()
            for key in sorted(self._children):
                lines.extend(self._sample_lines(key, self._children[key]))
        return "\n".join(lines) + "\n"


class _CounterChild:
    __slots__ = ("_lock", "value")

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if not amount >= 0:  # also refuses NaN
            raise ValueError(f"a counter only goes up (inc by {amount!r})")
        with self._lock:
            self.value += amount


class Counter(_Metric):
    """A value that only goes up (``inc``)."""

    type = "counter"

    def _new_child(self) -> _CounterChild:
        return _CounterChild(self._lock)

    def inc(self, amount: float = 1.0) -> None:
        self._only().inc(amount)

    def value(self, *values: Any, **kw: Any) -> float:
        """The current value for these label values (0 if never incremented)."""
        key = self._key(values, kw)
        with self._lock:
            child = self._children.get(key)
            return child.value if child is not None else 0.0

    def _sample_lines(self, key: tuple[str, ...], child: _CounterChild) -> list[str]:
        return [f"{self.name}{_labels_text(self.labelnames, key)} {format_value(child.value)}"]


class _GaugeChild(_CounterChild):
    __slots__ = ()

    def inc(self, amount: float = 1.0) -> None:
        with self._lock:
            self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        with self._lock:
            self.value -= amount

    def set(self, value: float) -> None:
        with self._lock:
            self.value = float(value)


class Gauge(Counter):
    """A value that goes up and down (``set``, ``inc``, ``dec``)."""

    type = "gauge"

    def _new_child(self) -> _GaugeChild:
        return _GaugeChild(self._lock)

    def inc(self, amount: float = 1.0) -> None:
        self._only().inc(amount)

    def dec(self, amount: float = 1.0) -> None:
        self._only().dec(amount)

    def set(self, value: float) -> None:
        self._only().set(value)


class _HistogramChild:
    __slots__ = ("_lock", "bounds", "counts", "count", "sum")

    def __init__(self, lock: threading.RLock, bounds: tuple[float, ...]) -> None:
        self._lock = lock
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is +Inf
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose upper bound is >= it; NaN is ignored."""
        value = float(value)
        if math.isnan(value):
            return
        with self._lock:
            self.counts[bisect.bisect_left(self.bounds, value)] += 1
            self.count += 1
            self.sum += value

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= it)`` for every bucket, ``+Inf`` last."""
        with self._lock:
            out, running = [], 0
            for bound, n in zip((*self.bounds, math.inf), self.counts, strict=True):
                running += n
                out.append((bound, running))
            return out


def _bucket_bounds(name: str, buckets: Iterable[float]) -> tuple[float, ...]:
    """Sorted unique finite upper bounds (``+Inf`` is implied and dropped if given)."""
    bounds = sorted({float(b) for b in buckets if not math.isinf(float(b))})
    if not bounds or any(math.isnan(b) for b in bounds):
        raise ValueError(f"{name}: buckets must be finite numbers, at least one")
    return tuple(bounds)


class Histogram(_Metric):
    """Observations counted in buckets (``observe``), with their sum and count."""

    type = "histogram"

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (),
                 lock: threading.RLock | None = None, buckets: Iterable[float] = DEFAULT_BUCKETS) -> None:
        super().__init__(name, documentation, labelnames, lock)
        if "le" in self.labelnames:
            raise ValueError(f"{name}: a histogram cannot have a label named 'le'")
        self.buckets = _bucket_bounds(name, buckets)

    def _new_child(self) -> _HistogramChild:
        return _HistogramChild(self._lock, self.buckets)

    def observe(self, value: float) -> None:
        self._only().observe(value)

    def count(self, *values: Any, **kw: Any) -> int:
        """How many observations these label values have (0 if none)."""
        key = self._key(values, kw)
        with self._lock:
            child = self._children.get(key)
            return child.count if child is not None else 0

    def sum(self, *values: Any, **kw: Any) -> float:
        key = self._key(values, kw)
        with self._lock:
            child = self._children.get(key)
            return child.sum if child is not None else 0.0

    def _sample_lines(self, key: tuple[str, ...], child: _HistogramChild) -> list[str]:
        lines = [f"{self.name}_bucket{_labels_text(self.labelnames, key, ('le', format_value(bound)))} {n}"
                 for bound, n in child.cumulative()]
        labels = _labels_text(self.labelnames, key)
        lines.append(f"{self.name}_sum{labels} {format_value(child.sum)}")
        lines.append(f"{self.name}_count{labels} {child.count}")
        return lines


class MetricsRegistry:
    """The metrics of one process (or of one test); see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._metrics: dict[str, _Metric] = {}
        self._collectors: list[Callable[[], None]] = []

    def _register(self, cls: type[_Metric], name: str, documentation: str, labelnames: Sequence[str],
                  **kw: Any) -> Any:
        with self._lock:
            existing = self._metrics.get(name)
            if existing is None:
                metric = cls(name, documentation, labelnames, self._lock, **kw)
                self._metrics[name] = metric
                return metric
            same = type(existing) is cls and existing.labelnames == tuple(labelnames)
            if same and isinstance(existing, Histogram):
                same = existing.buckets == _bucket_bounds(existing.name, kw.get("buckets", DEFAULT_BUCKETS))
            if not same:
                raise ValueError(f"metric {name} is already registered as a {existing.type} with labels "
                                 f"{list(existing.labelnames)} (and its own buckets)")
            return existing

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        result: Counter = self._register(Counter, name, documentation, labelnames)
        return result

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Gauge:
        result: Gauge = self._register(Gauge, name, documentation, labelnames)
        return result

    def histogram(self, name: str, documentation: str, labelnames: Sequence[str] = (),
                  buckets: Iterable[float] = DEFAULT_BUCKETS) -> Histogram:
        result: Histogram = self._register(Histogram, name, documentation, labelnames, buckets=tuple(buckets))
        return result

    def get(self, name: str) -> _Metric | None:
        with self._lock:
            return self._metrics.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._metrics)

    def add_collector(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` before every render (to set gauges from live state)."""
        with self._lock:
            self._collectors.append(fn)

    def remove_collector(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if fn in self._collectors:
                self._collectors.remove(fn)

    def collect(self) -> None:
        """Run the collectors; one that raises is logged, not propagated."""
        with self._lock:
            collectors = list(self._collectors)
        for fn in collectors:
            try:
                fn()
            except Exception:
                log.exception("metrics: collector %r failed", fn)

    def render(self) -> str:
        """Every metric in the text exposition format 0.0.4, sorted by name."""
        self.collect()
        with self._lock:
            metrics = [self._metrics[n] for n in sorted(self._metrics)]
            return "".join(m.render() for m in metrics)


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
        for labels, _ in self.rate_limiter_mode.children():
            if labels["name"] == name:
                self.rate_limiter_mode.remove(**labels)


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
    """What a controller-manager's controllers record into: the registry and the metrics declared on it."""

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

    def forward_first_waited(self, role: str, seconds: float) -> None:
        self.forward_first_waits.labels(role).inc()
        self.forward_first_wait_seconds.labels(role).inc(seconds)

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

        body = self.registry.render()
        return web.Response(body=body.encode(), headers={"Content-Type": CONTENT_TYPE})

    async def _healthz(self, request: Any) -> Any:
        from aiohttp import web

        return web.Response(text="ok")
