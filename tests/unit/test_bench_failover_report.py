"""``flotilla bench failover``: report formatting, manifests, invariants and the control plane's flags."""

from __future__ import annotations

from typing import Any

import pytest

from flotilla.bench import workloads as W
from flotilla.bench.failover import FailoverParams, result_problems
from flotilla.bench.report import render_report, stage_table
from flotilla.bench.stats import STAGES


def _result(**over: Any) -> dict[str, Any]:
    stage = {"count": 3, "p50": 100.0, "p90": 200.0, "p99": 300.0, "max": 310.0}
    result: dict[str, Any] = {
        "workloads": 3, "members": 3, "kind": "mix", "purge_mode": "Directly", "state": True, "storage": "sqlite",
        "transport": "http", "fault": {"kind": "down", "what": "member1 powered off", "fenced": True,
                                       "not_ready_s": 1.2, "not_ready_taint_s": 1.3, "fenced_s": 1.31},
        "setup": {"create_seconds": 0.1, "placed_seconds": 1.0},
        "store_ceiling": {"backend": "sqlite", "value_bytes": 2597, "tasks": 200, "writes_per_s": 30000.0,
                          "creates_per_s": 35000.0, "updates_per_s": 26000.0},
        "store_ceiling_writes_per_s": 30000.0,
        "stages_ms": {key: dict(stage) for key, _ in STAGES},
        "steps_ms": {"evicted->rescheduled": dict(stage)},
        "writes": {"background_per_s": 0.5, "net_of_background": 120, "until_settled": 121, "settled_after_s": 4.0,
                   "until_last_healthy": 100, "by_resource": {"resourcebindings": 60, "events": 40}},
        "writes_per_workload": 40.0, "ceiling_ratio": 0.004, "total_seconds": 2.5, "throughput_per_s": 1.2,
        "throughput_after_first_eviction_per_s": 2.5, "first_eviction_seconds": 1.3,
        "cpu_seconds": 1.5, "cpu_window_seconds": 2.5, "cpu_cores": {"control_plane": 0.6, "other": 0.0},
        "peak_rss_mb": 80.0, "state_injected": 3, "max_concurrent_copies": 1, "workloads_with_running_history": 2,
        "all_recovered": True, "recovered": 3, "machine": {"nproc": 2, "loadavg_1m": 0.5},
    }
    result.update(over)
    return result


def test_stage_table_has_every_stage_and_percentile() -> None:
    lines = stage_table(_result())
    assert lines[0].split()[-4:] == ["p50", "p90", "p99", "max"]
    for _, label in STAGES:
        assert any(line.startswith(label) and "3/3" in line for line in lines)
    assert any("evicted->rescheduled" in line for line in lines)


def test_report_summary_says_the_headline_numbers() -> None:
    text = render_report(_result())
    assert "total failover time   2.50 s" in text
    assert "30,000 writes/s" in text
    assert "store ceiling ratio   0.004" in text
    assert "fenced (flotilla fence member1) at 1.31 s" in text
    assert "peak RSS 80 MB" in text
    assert "all recovered         yes (3/3)" in text
    assert "NO" in render_report(_result(all_recovered=False, recovered=2))


def test_report_tolerates_a_sparse_result() -> None:
    text = render_report({"workloads": 0})
    assert "summary" in text


def test_invariants() -> None:
    p = FailoverParams(workloads=3, purge_mode="Directly", state=True)
    assert result_problems(_result(), p) == []
    problems = result_problems(_result(all_recovered=False, recovered=1, state_injected=2,
                                       max_concurrent_copies=2), p)
    assert len(problems) == 3
    # Gracefully keeps the old copy until the new one is Healthy: two copies at once is by design
    assert result_problems(_result(max_concurrent_copies=2), FailoverParams(workloads=3, purge_mode="Gracefully")) == []
    assert result_problems(_result(state_injected=0), FailoverParams(workloads=3, state=False)) == []
    # state is injected only with Directly (Karmada's rule)
    assert result_problems(_result(state_injected=0), FailoverParams(workloads=3, purge_mode="Gracefully")) == []


def test_command_line_spells_every_option() -> None:
    p = FailoverParams(workloads=20, kind="flink", state=False, controller_flags=["--concurrent-syncs=9"],
                       json="out.json")
    cmd = p.command_line()
    for part in ("--workloads 20", "--kind flink", "--no-state", "--fault taint", "--storage sqlite",
                 "--controller-flag=--concurrent-syncs=9", "--json out.json"):
        assert part in cmd


def test_policy_pins_to_member1_with_fallback_and_state_rules() -> None:
    spec = W.KINDS["flink"]
    pp = W.policy(spec, ["member1", "member2", "member3"], purge_mode="Directly", state=True, run="r1")
    placement = pp["spec"]["placement"]
    assert placement["clusterAffinities"] == [{"affinityName": "primary", "clusterNames": ["member1"]},
                                              {"affinityName": "fallback", "clusterNames": ["member2", "member3"]}]
    assert placement["spreadConstraints"] == [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    assert "clusterTolerations" not in placement
    failover = pp["spec"]["failover"]["cluster"]
    assert failover["purgeMode"] == "Directly"
    assert failover["statePreservation"]["rules"] == [{"aliasLabelName": "failover.flink.io/job-id",
                                                       "jsonPath": "{ .jobStatus.jobId }"}]
    selector = pp["spec"]["resourceSelectors"][0]
    assert selector["kind"] == "FlinkDeployment" and selector["labelSelector"]["matchLabels"] == {W.RUN_LABEL: "r1"}
    no_state = W.policy(W.KINDS["deployment"], ["member1", "member2"], purge_mode="Gracefully", state=False, run="r")
    assert no_state["spec"]["failover"]["cluster"] == {"purgeMode": "Gracefully"}


@pytest.mark.parametrize("kind", ["deployment", "statefulset", "flink"])
def test_workloads_carry_the_run_label(kind: str) -> None:
    spec = W.KINDS[kind]
    obj = W.workload(spec, "w00001", "r1")
    assert obj["kind"] == spec.kind and obj["metadata"]["labels"][W.RUN_LABEL] == "r1"
    assert obj["metadata"]["namespace"] == W.NAMESPACE
    assert spec.binding_name("w00001") == f"w00001-{spec.kind.lower()}"


def test_mix_takes_the_kinds_in_turn() -> None:
    kinds = [k.name for k in W.workload_kinds("mix", 5)]
    assert kinds == ["deployment", "statefulset", "flink", "deployment", "statefulset"]
    assert {k.name for k in W.workload_kinds("statefulset", 3)} == {"statefulset"}


def test_expected_state_mirrors_the_rules() -> None:
    assert W.expected_state(W.KINDS["deployment"], {"replicas": 1, "readyReplicas": 1}) == "1"
    assert W.expected_state(W.KINDS["flink"], {"jobStatus": {"jobId": "abc", "state": "RUNNING"}}) == "abc"
    assert W.expected_state(W.KINDS["flink"], {"jobStatus": {}}) is None
    assert W.expected_state(W.KINDS["statefulset"], None) is None


def test_control_plane_flags_use_the_controller_managers_parser() -> None:
    from flotilla.bench.control_plane import controller_config

    cfg = controller_config(["--", "--resource-eviction-rate", "1e6", "--concurrent-syncs", "9"], "kc")
    assert cfg.options.resource_eviction_rate == 1e6
    assert cfg.options.concurrent_syncs == 9
    assert cfg.options.cluster_failure_threshold == 1.0  # the bench timings
    assert cfg.metrics_address is None
    with pytest.raises(ValueError):
        controller_config(["--no-such-flag"], "kc")


def test_write_counter_counts_by_resource_and_keeps_the_revision() -> None:
    from flotilla.bench.control_plane import WriteCounter
    from flotilla.observability.metrics import MetricsRegistry

    class RT:
        plural = "works"

    registry = MetricsRegistry()
    count = WriteCounter(registry)
    count(RT(), "ADDED", {"metadata": {"resourceVersion": "7"}})
    count(RT(), "ADDED", {"metadata": {"resourceVersion": "9"}})
    count(RT(), "DELETED", {"metadata": {}})
    from tests.support.metrics import parse_exposition

    text = registry.render()
    writes = parse_exposition(text)["flotilla_bench_apiserver_writes_total"]
    assert writes.value("flotilla_bench_apiserver_writes_total", resource="works", event="ADDED") == 2
    assert "flotilla_bench_store_revision 9" in text


def test_plot_without_matplotlib_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from flotilla.bench.plot import require_matplotlib

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(SystemExit, match=r"needs matplotlib.*\.\[bench\]"):
        require_matplotlib()


def test_report_shows_where_the_slowest_workloads_spent_their_time() -> None:
    row = {"name": "wl-7", "kind": "FlinkDeployment", "new_cluster": "member2", "evicted": 120,
           "rescheduled": 130, "work_created": 2100, "created": 2150, "healthy": None}
    text = render_report(_result(slowest=[row]))
    lines = text.splitlines()
    at = lines.index("slowest workloads (ms since the fault)")
    assert "wl-7" in lines[at + 2] and "FlinkDeployment" in lines[at + 2] and "2,150" in lines[at + 2]
    assert lines[at + 2].rstrip().endswith("-")  # never Healthy
