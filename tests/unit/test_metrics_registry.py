"""Flotilla's metrics on prometheus_client: the names, labels and help each owner exposes, separate registries,
the read-back calls, the refresh hooks and the failover metrics' recording API. The exposition is read back with
the library's parser (:mod:`tests.support.metrics`); the text format itself is the library's and not tested here."""

from __future__ import annotations

import math
from enum import Enum

import prometheus_client
import pytest

from flotilla.client.workqueue import FakeClock, WorkQueue
from flotilla.observability.metrics import (
    ControllerMetrics,
    MetricsRegistry,
    WorkqueueMetrics,
    exponential_buckets,
    parse_bind_address,
    trigger_of_producer,
)
from tests.support.metrics import check_histograms, parse_exposition, sample_names

# ----------------------------------------------------------------------------------------------- the registry


def test_counter_is_exposed_under_its_declared_name_with_help_type_and_one_sample_per_label_combination() -> None:
    r = MetricsRegistry()
    c = r.counter("evictions_total", "Evictions.", ["trigger", "result"])
    c.labels("cluster_taint", "success").inc()
    c.labels(trigger="cluster_taint", result="success").inc(2)
    c.labels("application", "error").inc()
    text = r.render()
    assert "# HELP evictions_total Evictions.\n# TYPE evictions_total counter\n" in text
    assert sample_names(text) == {"evictions_total"}  # no evictions_created, no evictions_total_total
    fam = parse_exposition(text)["evictions_total"]
    assert fam.type == "counter" and fam.help == "Evictions."
    assert fam.value("evictions_total", trigger="cluster_taint", result="success") == 3
    assert fam.value("evictions_total", trigger="application", result="error") == 1
    assert len(fam.samples) == 2
    assert c.value("cluster_taint", "success") == 3 and c.value("nope", "nope") == 0


def test_a_counter_name_must_end_in_total_as_it_is_exposed() -> None:
    with pytest.raises(ValueError, match="_total"):
        MetricsRegistry().counter("evictions", "x")


def test_histogram_has_the_declared_buckets_cumulative_counts_sum_and_count() -> None:
    r = MetricsRegistry()
    h = r.histogram("latency_seconds", "Latency.", ["name"], buckets=[0.1, 1, 10])
    for v in (0.05, 0.1, 0.5, 3, 100):
        h.labels("q").observe(v)
    families = parse_exposition(r.render())
    fam = families["latency_seconds"]
    assert fam.type == "histogram" and fam.help == "Latency."
    buckets = [(ls["le"], v) for n, ls, v in fam.samples if n == "latency_seconds_bucket"]
    assert [(float(le), v) for le, v in buckets] == [(0.1, 2), (1, 3), (10, 4), (math.inf, 5)]  # 0.1 counts in 0.1
    assert fam.value("latency_seconds_sum", name="q") == pytest.approx(103.65)
    assert fam.value("latency_seconds_count", name="q") == 5
    check_histograms(families)
    assert h.count("q") == 5 and h.sum("q") == pytest.approx(103.65)
    assert h.count("other") == 0 and h.sum("other") == 0


def test_unlabelled_metrics_show_zero_and_labelled_ones_without_children_only_metadata() -> None:
    r = MetricsRegistry()
    r.counter("plain_total", "p")
    r.gauge("by_name", "b", ["name"])
    r.histogram("plain_seconds", "s", buckets=[1])
    families = parse_exposition(r.render())
    assert families["plain_total"].samples == [("plain_total", {}, 0.0)]
    assert families["by_name"].samples == [] and families["by_name"].type == "gauge"
    assert families["plain_seconds"].value("plain_seconds_count") == 0
    check_histograms(families)


def test_gauge_goes_up_and_down_and_children_can_be_removed() -> None:
    r = MetricsRegistry()
    g = r.gauge("depth", "d", ["name"])
    g.labels("a").set(5)
    g.labels("a").inc()
    g.labels("a").dec(2)
    g.labels("b").set(-1.5)
    assert g.value("a") == 4 and g.value("b") == -1.5
    g.remove("a")
    assert parse_exposition(r.render())["depth"].samples == [("depth", {"name": "b"}, -1.5)]
    g.clear()
    assert parse_exposition(r.render())["depth"].samples == []


def test_registering_again_returns_the_same_metric_and_a_conflict_raises() -> None:
    r = MetricsRegistry()
    c = r.counter("x_total", "x", ["a"])
    assert r.counter("x_total", "other help", ["a"]) is c
    assert r.get("x_total") is c and r.get("nope") is None
    with pytest.raises(ValueError, match="already registered"):
        r.gauge("x_total", "x", ["a"])
    with pytest.raises(ValueError, match="already registered"):
        r.counter("x_total", "x", ["b"])
    h = r.histogram("h", "h", buckets=[1, 2])
    assert r.histogram("h", "h", buckets=[1.0, 2.0]) is h
    with pytest.raises(ValueError, match="already registered"):
        r.histogram("h", "h", buckets=[1, 3])
    assert r.names() == ["h", "x_total"]


@pytest.mark.parametrize(("name", "labels"), [
    ("1abc_total", []), ("a-b_total", []), ("", []), ("ok_total", ["bad-label"]), ("ok_total", ["__reserved"]),
    ("ok_total", ["a", "a"]), ("ok_total", ["1a"]), ("é_total", []),
])
def test_invalid_metric_and_label_names_are_refused(name: str, labels: list[str]) -> None:
    with pytest.raises(ValueError):
        MetricsRegistry().counter(name, "x", labels)


def test_histogram_refuses_an_le_label_and_bad_buckets() -> None:
    r = MetricsRegistry()
    with pytest.raises(ValueError, match="le"):
        r.histogram("h1", "x", ["le"])
    with pytest.raises(ValueError):
        r.histogram("h2", "x", buckets=[])
    with pytest.raises(ValueError):
        r.histogram("h3", "x", buckets=[math.nan])
    with pytest.raises(ValueError):
        r.histogram("h5", "x", buckets=[2, 1])
    r.histogram("h4", "x", buckets=[1, math.inf])  # +Inf is implied: given, it is not repeated
    assert [ls["le"] for n, ls, _ in parse_exposition(r.render())["h4"].samples if n == "h4_bucket"] == ["1.0", "+Inf"]


def test_wrong_labels_raise_value_error() -> None:
    r = MetricsRegistry()
    c = r.counter("c_total", "x", ["a", "b"])
    with pytest.raises(ValueError):
        c.labels("only-one")
    with pytest.raises(ValueError):
        c.labels(a="1", c="2")
    with pytest.raises(ValueError):
        c.labels("1", b="2")
    with pytest.raises(ValueError, match="label"):
        c.inc()  # a labelled metric has no sample of its own


def test_label_values_are_text_whatever_is_passed() -> None:
    r = MetricsRegistry()
    c = r.counter("c_total", "x", ["v"])
    c.labels(3).inc()
    c.labels(None).inc()
    c.labels(v=None).inc()
    fam = parse_exposition(r.render())["c_total"]
    assert fam.value("c_total", v="3") == 1 and fam.value("c_total", v="") == 2
    assert c.value(3) == 1 and c.value(None) == 2 and c.value(v="") == 2


def test_exponential_buckets_as_client_golang() -> None:
    assert exponential_buckets(0.001, 2, 4) == (0.001, 0.002, 0.004, 0.008)
    for bad in ((0, 2, 3), (1, 1, 3), (1, 2, 0)):
        with pytest.raises(ValueError):
            exponential_buckets(*bad)


def test_collectors_run_before_each_render_and_a_failing_one_is_skipped() -> None:
    r = MetricsRegistry()
    g = r.gauge("live", "x")
    calls = []

    def refresh() -> None:
        calls.append(1)
        g.set(len(calls))

    def broken() -> None:
        raise RuntimeError("boom")

    r.add_collector(broken)
    r.add_collector(refresh)
    assert parse_exposition(r.render())["live"].value("live") == 1
    assert parse_exposition(r.render())["live"].value("live") == 2
    assert r.get_sample_value("live") == 3  # any collection of the registry refreshes first
    r.remove_collector(refresh)
    r.remove_collector(refresh)  # a second removal is harmless
    assert parse_exposition(r.render())["live"].value("live") == 3


def test_registries_are_separate_and_none_is_the_librarys_global_one() -> None:
    a, b = ControllerMetrics(), ControllerMetrics()
    a.failover.record_eviction(trigger="application", reason="ApplicationFailure", result="success")
    assert a.failover.evictions.value("application", "ApplicationFailure", "success") == 1
    assert b.failover.evictions.value("application", "ApplicationFailure", "success") == 0
    assert parse_exposition(b.render())["flotilla_evictions_total"].samples == []
    assert a.registry is not prometheus_client.REGISTRY and b.registry is not prometheus_client.REGISTRY
    assert "flotilla_" not in prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
    assert "workqueue_" not in prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()


def test_a_served_registry_has_the_process_metrics_and_a_plain_one_does_not() -> None:
    from flotilla.agent.metrics import AgentMetrics
    from flotilla.apiserver.metrics import ApiServerMetrics

    for served in (ControllerMetrics().render(), AgentMetrics().render(),
                   ApiServerMetrics(lambda g, v, r: True).registry.render()):
        assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                "process_start_time_seconds"} <= sample_names(served)
    assert not any(n.startswith("process_") for n in sample_names(MetricsRegistry().render()))
    r = MetricsRegistry()
    r.add_process_metrics()
    r.add_process_metrics()  # once only
    assert "process_cpu_seconds_total" in sample_names(r.render())


#: Every metric a controller-manager exposes before any controller ran (docs/cli.md lists them): the name in the
#: ``# TYPE`` line, its type and its label names.
CONTROLLER_MANAGER_METRICS = {
    "eviction_queue_depth": ("gauge", ("name",)),
    "eviction_kind_total": ("gauge", ("member_cluster", "resource_kind")),
    "eviction_processing_latency_seconds": ("histogram", ("name",)),
    "eviction_processing_total": ("counter", ("name", "result")),
    "flotilla_eviction_enqueue_to_done_seconds": ("histogram", ("name",)),
    "flotilla_evictions_total": ("counter", ("trigger", "reason", "result")),
    "flotilla_state_preservation_failures_total": ("counter", ("trigger",)),
    "flotilla_state_preservation_timeouts_total": ("counter", ("trigger",)),
    "flotilla_taint_to_eviction_seconds": ("histogram", ()),
    "flotilla_eviction_to_healthy_seconds": ("histogram", ("trigger",)),
    "flotilla_graceful_eviction_tasks_removed_total": ("counter", ("trigger", "reason")),
    "flotilla_eviction_rate_limit": ("gauge", ("name",)),
    "flotilla_eviction_rate_limiter_mode": ("gauge", ("name", "mode")),
    "flotilla_clusters_fenced_total": ("counter", ("trigger",)),
    "flotilla_state_restore_total": ("counter", ("outcome",)),
    "flotilla_state_restore_failures_total": ("counter", ("reason",)),
    "flotilla_state_restore_age_at_fault_seconds": ("histogram", ()),
    "workqueue_depth": ("gauge", ("name",)),
    "workqueue_adds_total": ("counter", ("name",)),
    "workqueue_retries_total": ("counter", ("name",)),
    "workqueue_queue_duration_seconds": ("histogram", ("name",)),
    "workqueue_work_duration_seconds": ("histogram", ("name",)),
    "flotilla_events_dropped_total": ("counter", ("reason", "cause")),
    "flotilla_interpreter_customization_failures_total": ("counter", ("customization", "operation", "reason")),
    "flotilla_forward_first_waits_total": ("counter", ("role",)),
    "flotilla_forward_first_wait_seconds_total": ("counter", ("role",)),
}


def test_the_controller_manager_exposes_exactly_its_names_types_and_labels() -> None:
    m = ControllerMetrics()
    families = {n: f for n, f in parse_exposition(m.render()).items() if not n.startswith("process_")}
    assert {n: f.type for n, f in families.items()} == {n: t for n, (t, _) in CONTROLLER_MANAGER_METRICS.items()}
    for name, (_, labels) in CONTROLLER_MANAGER_METRICS.items():
        assert m.registry.get(name).labelnames == labels, name
        assert families[name].help, name


# ----------------------------------------------------------------------------------------------- failover metrics


def test_failover_recording_api_for_the_application_failover_controller() -> None:
    m = ControllerMetrics()
    f = m.failover
    f.record_eviction(trigger="application", reason="ApplicationFailure", result="success")
    f.record_eviction(trigger="application", reason="ApplicationFailure", result="blocked")
    f.record_state_preservation_failure("application")
    f.record_state_preservation_timeout("application")
    families = parse_exposition(m.render())
    evictions = families["flotilla_evictions_total"]
    assert evictions.value("flotilla_evictions_total", trigger="application", reason="ApplicationFailure",
                           result="success") == 1
    assert evictions.value("flotilla_evictions_total", trigger="application", reason="ApplicationFailure",
                           result="blocked") == 1
    assert families["flotilla_state_preservation_failures_total"].value(
        "flotilla_state_preservation_failures_total", trigger="application") == 1
    assert families["flotilla_state_preservation_timeouts_total"].value(
        "flotilla_state_preservation_timeouts_total", trigger="application") == 1


def test_durations_are_never_negative_or_nan() -> None:
    f = ControllerMetrics().failover
    f.observe_taint_to_eviction(-3.0)  # whole-second timestamps, clock skew
    f.observe_eviction_to_healthy("cluster_taint", math.nan)
    assert f.taint_to_eviction.count() == 1 and f.taint_to_eviction.sum() == 0
    assert f.eviction_to_healthy.count("cluster_taint") == 1 and f.eviction_to_healthy.sum("cluster_taint") == 0


def test_eviction_queue_gauges_are_replaced_and_forgotten() -> None:
    m = ControllerMetrics()
    f = m.failover
    f.set_eviction_queue("taint-manager", 2, {("m1", "ResourceBinding"): 2, ("m2", "ClusterResourceBinding"): 1})
    f.set_eviction_queue("taint-manager", 1, {("m1", "ResourceBinding"): 1})
    f.set_rate_limiter("taint-manager", "Secondary", 1.0, ["Primary", "Secondary", "Halted"])
    families = parse_exposition(m.render())
    assert families["eviction_kind_total"].samples == [
        ("eviction_kind_total", {"member_cluster": "m1", "resource_kind": "ResourceBinding"}, 1.0)]
    assert families["eviction_queue_depth"].value("eviction_queue_depth", name="taint-manager") == 1
    modes = families["flotilla_eviction_rate_limiter_mode"]
    assert modes.value("flotilla_eviction_rate_limiter_mode", name="taint-manager", mode="Secondary") == 1
    assert modes.value("flotilla_eviction_rate_limiter_mode", name="taint-manager", mode="Halted") == 0
    f.clear_live_state("taint-manager")
    families = parse_exposition(m.render())
    for name in ("eviction_kind_total", "eviction_queue_depth", "flotilla_eviction_rate_limit",
                 "flotilla_eviction_rate_limiter_mode"):
        assert families[name].samples == [], name


@pytest.mark.parametrize(("producer", "trigger"), [
    ("TaintManager", "cluster_taint"), ("resource-binding-application-failover-controller", "application"),
    ("cluster-resource-binding-application-failover-controller", "application"), ("someone", "unknown"),
    (None, "unknown"), (42, "unknown"), ({"a": 1}, "unknown"),
])
def test_trigger_of_a_task_producer(producer: object, trigger: str) -> None:
    assert trigger_of_producer(producer) == trigger


async def test_a_workqueue_records_depth_adds_retries_and_durations_into_the_registry() -> None:
    r = MetricsRegistry()
    wq = WorkqueueMetrics(r)
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("ctl", clock=clock, metrics=wq)
    q.add("a")
    q.add("a")  # deduplicated: not an add
    q.add("b")
    assert wq.depth.value("ctl") == 2
    key = q.get_nowait()
    clock.advance(0.5)
    q.done(key)
    q.add_rate_limited("a")
    families = parse_exposition(r.render())
    assert families["workqueue_adds_total"].value("workqueue_adds_total", name="ctl") == 2
    assert families["workqueue_retries_total"].value("workqueue_retries_total", name="ctl") == 1
    assert families["workqueue_depth"].value("workqueue_depth", name="ctl") == 1
    assert families["workqueue_queue_duration_seconds"].value("workqueue_queue_duration_seconds_count",
                                                               name="ctl") == 1
    assert families["workqueue_work_duration_seconds"].value("workqueue_work_duration_seconds_sum",
                                                              name="ctl") == 0.5
    check_histograms(families)


def test_a_workqueue_exposes_its_keys_and_when_a_processed_key_became_ready() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("t", clock=clock)
    q.add("ready")
    q.add_after("later", 5)
    q.add("busy")
    clock.advance(1)
    assert q.get_nowait() == "ready"
    assert q.ready_since("ready") == 1000.0  # added at the clock's start, taken a second later
    assert q.ready_since("busy") is None  # not being processed
    assert q.keys() == {"ready", "later", "busy"}
    q.done("ready")
    assert q.ready_since("ready") is None and q.keys() == {"later", "busy"}


# ----------------------------------------------------------------------------------------------- bind address


@pytest.mark.parametrize(("text", "address"), [
    ("0", None), (" 0 ", None), ("127.0.0.1:8080", ("127.0.0.1", 8080)), (":9090", ("0.0.0.0", 9090)),
    ("localhost:0", ("localhost", 0)), ("[::1]:8080", ("::1", 8080)), ("0.0.0.0:65535", ("0.0.0.0", 65535)),
])
def test_metrics_bind_address(text: str, address: tuple[str, int] | None) -> None:
    assert parse_bind_address(text) == address


@pytest.mark.parametrize("text", ["", "8080", "host:", "host:http", "::1:8080", "h:65536", "h:-1", "h:8080x"])
def test_bad_metrics_bind_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="--metrics-bind-address"):
        parse_bind_address(text)


def test_labels_finds_the_same_child_by_strings_values_or_names() -> None:
    c = MetricsRegistry().counter("flotilla_fast_path_total", "x", ["controller", "code"])
    child = c.labels("binding", 200)  # made from the strings "binding", "200"
    assert c.labels("binding", "200") is child  # the fast path: the strings of an existing child
    assert c.labels("binding", 200) is child and c.labels(controller="binding", code="200") is child
    assert c.labels(None, "x") is c.labels("", "x")
    with pytest.raises(ValueError, match="label count"):
        c.labels("binding")
    with pytest.raises(ValueError, match="both"):
        c.labels("binding", code="200")
    unhashable = c.labels(["a"], "b")  # an unhashable value is looked up by its string, as before
    assert c.labels("['a']", "b") is unhashable

    class Code(str, Enum):  # noqa: UP042  (deliberately: str() of it is not its value)
        OK = "ok"

    assert c.labels("binding", Code.OK) is c.labels("binding", str(Code.OK))  # str() of it, not its value
