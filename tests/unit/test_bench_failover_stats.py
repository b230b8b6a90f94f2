"""Pure helpers of ``flotilla bench failover``: percentiles, stages, ceiling ratio, copies, metrics, profiles."""

from __future__ import annotations

import pytest

from flotilla.bench import stats
from flotilla.bench.ceiling import padded_value
from flotilla.bench.stats import Timeline


def test_percentile_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 101)]  # 1..100
    assert stats.percentile(samples, 50) == 50.0
    assert stats.percentile(samples, 90) == 90.0
    assert stats.percentile(samples, 99) == 99.0
    assert stats.percentile(samples, 100) == 100.0
    assert stats.percentile([], 50) == 0.0
    assert stats.percentile([7.0], 99) == 7.0
    assert stats.percentile([3.0, 1.0, 2.0], 50) == 2.0  # order does not matter


def test_latency_summary_in_milliseconds() -> None:
    s = stats.latency_summary([0.001, 0.002, 0.010])
    assert s == {"count": 3, "p50": 2.0, "p90": 10.0, "p99": 10.0, "max": 10.0}
    assert stats.latency_summary([]) == {"count": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}


def _timeline(name: str, **stages: float) -> Timeline:
    tl = Timeline(name=name, kind="Deployment", binding=f"{name}-deployment")
    for key, value in stages.items():
        setattr(tl, key, value)
    return tl


def test_stage_summaries_count_only_reached_stages() -> None:
    t0 = 100.0
    tls = [_timeline("a", evicted=100.1, rescheduled=100.2, work_created=100.3, created=100.4, healthy=100.5),
           _timeline("b", evicted=100.3, rescheduled=100.6)]
    s = stats.stage_summaries(tls, t0)
    assert s["evicted"]["count"] == 2 and s["evicted"]["max"] == pytest.approx(300.0)
    assert s["healthy"]["count"] == 1 and s["healthy"]["p50"] == pytest.approx(500.0)
    assert [k for k, _ in stats.STAGES] == list(s)
    steps = stats.step_summaries(tls)
    assert steps["evicted->rescheduled"]["count"] == 2
    assert steps["evicted->rescheduled"]["max"] == pytest.approx(300.0)
    assert steps["created->healthy"]["count"] == 1


def test_recovered_curve_is_cumulative_in_time_order() -> None:
    assert stats.recovered_curve([12.0, None, 11.0, 10.5], 10.0) == [(0.5, 1), (1.0, 2), (2.0, 3)]
    assert stats.recovered_curve([], 0.0) == []


def test_ceiling_ratio() -> None:
    # 10 writes per workload x 50 workloads/s = 500 writes/s of a 10,000 writes/s store
    assert stats.ceiling_ratio(10, 50, 10_000) == pytest.approx(0.05)
    assert stats.ceiling_ratio(10, 50, 0) == 0.0


def test_max_concurrent_copies_per_workload() -> None:
    ivs = [
        # w1: the old copy ends before the new one starts: one at a time
        {"kind": "StatefulSet", "namespace": "bench", "name": "w1", "member": "member1", "uid": "a",
         "start": 1.0, "end": 5.0},
        {"kind": "StatefulSet", "namespace": "bench", "name": "w1", "member": "member2", "uid": "b",
         "start": 5.0, "end": None},
        # w2 in another namespace overlaps, but is not the benchmark's
        {"kind": "StatefulSet", "namespace": "other", "name": "w2", "member": "member1", "uid": "c",
         "start": 1.0, "end": None},
        {"kind": "StatefulSet", "namespace": "other", "name": "w2", "member": "member2", "uid": "d",
         "start": 2.0, "end": None},
    ]
    assert stats.max_concurrent_copies(ivs, "bench") == (1, 1)
    assert stats.max_concurrent_copies(ivs, "other") == (2, 1)
    ivs.append({"kind": "FlinkDeployment", "namespace": "bench", "name": "w1", "member": "member3", "uid": "e",
                "start": 0.0, "end": 9.0})  # same name, another kind: another workload
    assert stats.max_concurrent_copies(ivs, "bench") == (1, 2)
    assert stats.max_concurrent_copies([], "bench") == (0, 0)


METRICS = """\
# HELP flotilla_bench_apiserver_writes_total Writes
# TYPE flotilla_bench_apiserver_writes_total counter
flotilla_bench_apiserver_writes_total{resource="resourcebindings",event="MODIFIED"} 10
flotilla_bench_apiserver_writes_total{resource="works",event="ADDED"} 4
flotilla_bench_apiserver_writes_total{resource="works",event="DELETED"} 1
workqueue_adds_total{name="binding"} 7
odd{label="a \\"quoted\\" value"} 1.5
"""


def test_parse_prometheus_and_deltas() -> None:
    before = stats.parse_prometheus(METRICS)
    assert before[("workqueue_adds_total", (("name", "binding"),))] == 7.0
    assert before[("odd", (("label", 'a "quoted" value'),))] == 1.5
    after = stats.parse_prometheus(METRICS.replace("} 10", "} 25").replace("} 4", "} 6")
                                   + 'flotilla_bench_apiserver_writes_total{resource="events",event="ADDED"} 3\n')
    name = "flotilla_bench_apiserver_writes_total"
    assert stats.counter_delta(before, after, name) == {"": 15 + 2 + 0 + 3}
    assert stats.counter_delta(before, after, name, by="resource") == {"resourcebindings": 15, "works": 2,
                                                                       "events": 3}


def test_profile_top_ranks_functions_not_lines() -> None:
    raw = "\n".join([
        "main (flotilla/cli/main.py:1);loop (asyncio/base_events.py:607);handle (flotilla/apiserver/app.py:10);"
        "encode (flotilla/apiserver/objects.py:5) 6",
        "main (flotilla/cli/main.py:1);loop (asyncio/base_events.py:607);handle (flotilla/apiserver/app.py:12);"
        "encode (flotilla/apiserver/objects.py:7) 2",
        "main (flotilla/cli/main.py:1);loop (asyncio/base_events.py:607);select (selectors.py:468) 2",
        "garbage",
    ])
    top = stats.profile_top(raw)
    assert top["samples"] == 10
    assert top["self"][0] == ("encode (flotilla/apiserver/objects.py)", 80.0)
    assert ("select (selectors.py)", 20.0) in top["self"]
    inclusive = dict(top["inclusive"])
    assert inclusive["handle (flotilla/apiserver/app.py)"] == 80.0
    assert not any("cli/main.py" in name or "base_events" in name for name in inclusive)
    assert stats.profile_top("")["samples"] == 0


def test_timeline_state_ok_needs_the_expected_value() -> None:
    tl = _timeline("a")
    tl.expected_state = "1"
    assert not tl.state_ok
    tl.injected = "2"
    assert not tl.state_ok
    tl.injected = "1"
    assert tl.state_ok


@pytest.mark.parametrize("size", [64, 1000, 2597])
def test_padded_value_has_the_size_asked(size: int) -> None:
    import orjson

    value = padded_value(3, size)
    assert len(value) == size
    assert orjson.loads(value)["kind"] == "BenchBinding"
    assert padded_value(3, size) != padded_value(4, size) != padded_value(3, size, "u")


def test_histogram_means_per_label() -> None:
    before = stats.parse_prometheus('h_sum{name="a"} 1\nh_count{name="a"} 10\nh_sum{name="b"} 0\nh_count{name="b"} 0\n')
    after = stats.parse_prometheus('h_sum{name="a"} 3\nh_count{name="a"} 14\nh_sum{name="b"} 0\nh_count{name="b"} 0\n')
    assert stats.histogram_means(before, after, "h") == {"a": 500.0}  # 2 s over 4 observations


def test_parse_prometheus_skips_a_line_it_cannot_read_and_keeps_the_others() -> None:
    text = 'workqueue_adds_total{name="binding"} 7\ngarbage line here\nh_count{name="a"} 3\nbroken{x="1" 2\n'
    assert stats.parse_prometheus(text) == {("workqueue_adds_total", (("name", "binding"),)): 7.0,
                                            ("h_count", (("name", "a"),)): 3.0}
    assert stats.parse_prometheus("") == {}


def test_slowest_lists_the_last_healthy_first_and_the_never_healthy_before_them() -> None:
    t0 = 1000.0
    fast = _timeline("fast", evicted=t0 + 0.1, healthy=t0 + 1.0)
    slow = _timeline("slow", evicted=t0 + 0.1, created=t0 + 2.0, healthy=t0 + 60.0)
    stuck = _timeline("stuck", evicted=t0 + 0.2)
    rows = stats.slowest([fast, slow, stuck], t0, count=2)
    assert [r["name"] for r in rows] == ["stuck", "slow"]
    assert rows[0]["healthy"] is None and rows[0]["evicted"] == 200
    assert rows[1]["created"] == 2000 and rows[1]["healthy"] == 60000 and rows[1]["kind"] == "Deployment"
