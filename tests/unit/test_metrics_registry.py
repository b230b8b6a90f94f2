"""The dependency-free metrics registry: the Prometheus text format 0.0.4 it prints, read back by an independent
parser (:func:`parse_exposition`, also used by the integration tests), and the failover metrics' recording API."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from enum import Enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flotilla.client.workqueue import FakeClock, WorkQueue
from flotilla.observability.metrics import (
    ControllerMetrics,
    MetricsRegistry,
    WorkqueueMetrics,
    exponential_buckets,
    format_value,
    parse_bind_address,
    trigger_of_producer,
)

# ----------------------------------------------------------------------------------------------- a parser


@dataclass
class Family:
    name: str
    type: str = "untyped"
    help: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def value(self, sample: str, **labels: str) -> float:
        found = [v for n, ls, v in self.samples if n == sample and ls == labels]
        assert len(found) == 1, f"{sample}{labels}: {len(found)} samples in {self.samples}"
        return found[0]


_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count", "")}


def _unescape(text: str, quote: bool) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text):
                raise ValueError(f"dangling backslash in {text!r}")
            nxt = text[i + 1]
            if nxt == "n":
                out.append("\n")
            elif nxt == "\\":
                out.append("\\")
            elif nxt == '"' and quote:
                out.append('"')
            else:
                raise ValueError(f"bad escape \\{nxt} in {text!r}")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _parse_labels(text: str, pos: int) -> tuple[dict[str, str], int]:
    """Labels from ``text[pos] == '{'``; the labels and the position after ``}``."""
    labels: dict[str, str] = {}
    pos += 1
    while True:
        if text[pos] == "}":
            return labels, pos + 1
        eq = text.index("=", pos)
        name = text[pos:eq]
        assert name.isidentifier() and name not in labels, f"bad or repeated label name {name!r}"
        assert text[eq + 1] == '"', f"label value of {name} not quoted"
        i, raw = eq + 2, []
        while text[i] != '"':
            if text[i] == "\\":
                raw.append(text[i:i + 2])
                i += 2
            else:
                assert text[i] != "\n"
                raw.append(text[i])
                i += 1
        labels[name] = _unescape("".join(raw), quote=True)
        pos = i + 1
        if text[pos] == ",":
            pos += 1
        else:
            assert text[pos] == "}", f"expected , or }} at {pos} in {text!r}"


def parse_exposition(text: str) -> dict[str, Family]:
    """The text format 0.0.4, strictly: HELP/TYPE at most once and before the family's samples, every sample
    of a declared family (histograms through ``_bucket``/``_sum``/``_count``), label names unique per sample."""
    families: dict[str, Family] = {}
    seen_samples: set[str] = set()
    assert text == "" or text.endswith("\n"), "the exposition must end with a line feed"
    for line in text.split("\n")[:-1] if text else []:
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                fam = families.setdefault(parts[2], Family(parts[2]))
                assert parts[2] not in seen_samples, f"{parts[1]} for {parts[2]} after its samples"
                rest = parts[3] if len(parts) == 4 else ""
                if parts[1] == "HELP":
                    assert fam.help is None, f"second HELP for {fam.name}"
                    fam.help = _unescape(rest, quote=False)
                else:
                    assert fam.type == "untyped", f"second TYPE for {fam.name}"
                    assert rest in ("counter", "gauge", "histogram", "summary", "untyped"), rest
                    fam.type = rest
            continue
        brace = line.find("{")
        space = line.find(" ")
        end = brace if 0 <= brace < space else space
        name = line[:end]
        labels: dict[str, str] = {}
        pos = end
        if line[pos] == "{":
            labels, pos = _parse_labels(line, pos)
        fields = line[pos:].split()
        assert 1 <= len(fields) <= 2, f"bad sample line {line!r}"
        value = float(fields[0])
        family = None
        for fam in families.values():
            suffixes = _SUFFIXES.get(fam.type, ("",))
            if any(name == fam.name + s for s in suffixes):
                family = fam
        assert family is not None, f"sample {name} of no declared family"
        seen_samples.add(family.name)
        family.samples.append((name, labels, value))
    return families


def check_histograms(families: dict[str, Family]) -> None:
    """Every histogram child: cumulative buckets ending with +Inf, which equals _count."""
    for fam in families.values():
        if fam.type != "histogram":
            continue
        children: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for name, labels, value in fam.samples:
            if name.endswith("_bucket"):
                le = labels.pop("le")
                children.setdefault(tuple(sorted(labels.items())), []).append((float(le), value))
        for key, buckets in children.items():
            bounds = [b for b, _ in buckets]
            assert bounds == sorted(bounds) and bounds[-1] == math.inf, (fam.name, bounds)
            counts = [c for _, c in buckets]
            assert counts == sorted(counts), (fam.name, counts)
            assert fam.value(fam.name + "_count", **dict(key)) == counts[-1]


# ----------------------------------------------------------------------------------------------- the format


def test_counter_prints_help_type_and_one_sample_per_label_combination() -> None:
    r = MetricsRegistry()
    c = r.counter("evictions_total", "Evictions.", ["trigger", "result"])
    c.labels("cluster_taint", "success").inc()
    c.labels(trigger="cluster_taint", result="success").inc(2)
    c.labels("application", "error").inc()
    text = r.render()
    assert text == (
        "# HELP evictions_total Evictions.\n"
        "# TYPE evictions_total counter\n"
        'evictions_total{trigger="application",result="error"} 1\n'
        'evictions_total{trigger="cluster_taint",result="success"} 3\n'
    )
    fam = parse_exposition(text)["evictions_total"]
    assert fam.type == "counter" and fam.help == "Evictions."
    assert fam.value("evictions_total", trigger="cluster_taint", result="success") == 3
    assert c.value("cluster_taint", "success") == 3 and c.value("nope", "nope") == 0


def test_label_values_escape_backslash_quote_and_line_feed() -> None:
    r = MetricsRegistry()
    value = 'a\\b"c\nd'
    r.gauge("g", "x", ["v"]).labels(value).set(1)
    text = r.render()
    assert 'g{v="a\\\\b\\"c\\nd"} 1\n' in text
    assert parse_exposition(text)["g"].samples == [("g", {"v": value}, 1.0)]


def test_help_text_escapes_backslash_and_line_feed_but_not_quotes() -> None:
    r = MetricsRegistry()
    r.counter("c_total", 'C:\\path "quoted"\nsecond line')
    text = r.render()
    assert '# HELP c_total C:\\\\path "quoted"\\nsecond line\n' in text
    assert parse_exposition(text)["c_total"].help == 'C:\\path "quoted"\nsecond line'


def test_histogram_prints_cumulative_buckets_inf_sum_and_count() -> None:
    r = MetricsRegistry()
    h = r.histogram("latency_seconds", "Latency.", ["name"], buckets=[1, 0.1, 10])
    for v in (0.05, 0.1, 0.5, 3, 100):
        h.labels("q").observe(v)
    text = r.render()
    assert text == (
        "# HELP latency_seconds Latency.\n"
        "# TYPE latency_seconds histogram\n"
        'latency_seconds_bucket{name="q",le="0.1"} 2\n'  # 0.1 itself counts in le="0.1"
        'latency_seconds_bucket{name="q",le="1"} 3\n'
        'latency_seconds_bucket{name="q",le="10"} 4\n'
        'latency_seconds_bucket{name="q",le="+Inf"} 5\n'
        'latency_seconds_sum{name="q"} 103.65\n'
        'latency_seconds_count{name="q"} 5\n'
    )
    families = parse_exposition(text)
    check_histograms(families)
    assert h.count("q") == 5 and h.sum("q") == pytest.approx(103.65)


def test_histogram_ignores_nan_and_counts_infinity_in_the_inf_bucket() -> None:
    r = MetricsRegistry()
    h = r.histogram("h", "x", buckets=[1])
    h.observe(math.nan)
    assert h.count() == 0
    h.observe(math.inf)
    h.observe(-5)
    fam = parse_exposition(r.render())["h"]
    assert fam.value("h_bucket", le="1") == 1 and fam.value("h_bucket", le="+Inf") == 2
    assert fam.value("h_sum") == math.inf


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
    with pytest.raises(ValueError, match="already registered"):
        r.gauge("x_total", "x", ["a"])
    with pytest.raises(ValueError, match="already registered"):
        r.counter("x_total", "x", ["b"])
    h = r.histogram("h", "h", buckets=[1, 2])
    assert r.histogram("h", "h", buckets=[2, 1]) is h
    with pytest.raises(ValueError, match="already registered"):
        r.histogram("h", "h", buckets=[1, 3])


@pytest.mark.parametrize(("name", "labels"), [
    ("1abc", []), ("a-b", []), ("", []), ("ok", ["bad-label"]), ("ok", ["__reserved"]), ("ok", ["a", "a"]),
    ("ok", ["1a"]),
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
    assert r.histogram("h4", "x", buckets=[1, math.inf]).buckets == (1.0,)  # +Inf is implied


def test_wrong_labels_raise_value_error() -> None:
    r = MetricsRegistry()
    c = r.counter("c_total", "x", ["a", "b"])
    with pytest.raises(ValueError):
        c.labels("only-one")
    with pytest.raises(ValueError):
        c.labels(a="1", c="2")
    with pytest.raises(ValueError):
        c.labels("1", b="2")
    with pytest.raises(ValueError, match="labels"):
        c.inc()  # a labelled metric has no sample of its own


def test_label_values_are_text_whatever_is_passed() -> None:
    r = MetricsRegistry()
    c = r.counter("c_total", "x", ["v"])
    c.labels(3).inc()
    c.labels(None).inc()
    fam = parse_exposition(r.render())["c_total"]
    assert fam.value("c_total", v="3") == 1 and fam.value("c_total", v="") == 1


@pytest.mark.parametrize("amount", [-1.0, math.nan])
def test_a_counter_never_goes_down(amount: float) -> None:
    c = MetricsRegistry().counter("c_total", "x")
    c.inc(3)
    with pytest.raises(ValueError):
        c.inc(amount)
    assert c.value() == 3


@pytest.mark.parametrize(("value", "text"), [
    (0, "0"), (1.0, "1"), (-2.0, "-2"), (0.25, "0.25"), (1e21, "1e+21"), (1.5e-9, "1.5e-09"),
    (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN"), (123456789.5, "123456789.5"),
])
def test_values_print_as_go_does(value: float, text: str) -> None:
    assert format_value(value) == text
    parsed = float(text)
    assert (math.isnan(parsed) and math.isnan(value)) or parsed == value


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
    r.remove_collector(refresh)
    r.remove_collector(refresh)  # a second removal is harmless
    assert parse_exposition(r.render())["live"].value("live") == 2


def test_concurrent_increments_from_threads_are_all_counted() -> None:
    r = MetricsRegistry()
    c = r.counter("c_total", "x", ["t"])
    h = r.histogram("h", "x", buckets=[1])

    def work() -> None:
        for _ in range(2000):
            c.labels("same").inc()
            h.observe(0.5)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.value("same") == 8000 and h.count() == 8000


@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(lambda s: s != "le" and not s.startswith("__")),
                       st.text(), min_size=1, max_size=4),
       st.floats(allow_nan=False), st.lists(st.floats(min_value=-1e6, max_value=1e6), max_size=10),
       st.text())
def test_round_trip_of_any_labels_values_and_help(labels: dict[str, str], gauge: float, observations: list[float],
                                                  help_text: str) -> None:
    r = MetricsRegistry()
    names = sorted(labels)
    r.gauge("g", help_text, names).labels(**labels).set(gauge)
    child = r.histogram("h_seconds", help_text, names, buckets=[-1, 0, 1, 100]).labels(**labels)
    for v in observations:
        child.observe(v)
    r.counter("c_total", help_text, names).labels(**labels).inc()
    families = parse_exposition(r.render())
    assert families["g"].help == help_text
    assert families["g"].samples == [("g", labels, gauge)]
    assert families["c_total"].value("c_total", **labels) == 1
    assert families["h_seconds"].value("h_seconds_count", **labels) == len(observations)
    assert families["h_seconds"].value("h_seconds_bucket", le="0", **labels) == sum(1 for v in observations if v <= 0)
    check_histograms(families)


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
    q: WorkQueue[str] = WorkQueue("t", clock=clock, prometheus=False)
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
    with pytest.raises(ValueError, match="1 label values given, 2 expected"):
        c.labels("binding")
    with pytest.raises(ValueError, match="not both"):
        c.labels("binding", code="200")
    unhashable = c.labels(["a"], "b")  # an unhashable value is looked up by its string, as before
    assert c.labels("['a']", "b") is unhashable

    class Code(str, Enum):  # noqa: UP042  (deliberately: str() of it is not its value)
        OK = "ok"

    assert c.labels("binding", Code.OK) is c.labels("binding", str(Code.OK))  # str() of it, not its value
