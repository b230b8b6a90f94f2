"""``flotilla bench failover`` completes and its invariants hold (never a timing: speed is the benchmark's job).

Two small runs as a user would make them: 20 mixed workloads moved off a NoExecute-tainted member, and 10 off a
powered-off member (fenced once the not-ready taint appears). Each must exit 0 with every workload recovered,
every new copy created with the old copy's state, and never two copies of one workload running at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FLOTILLA = str(Path(sys.executable).parent / "flotilla")

pytestmark = pytest.mark.timeout(150)


def bench(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "result.json"
    r = subprocess.run([FLOTILLA, "bench", "failover", "--members", "3", "--kind", "mix", "--json", str(out),
                        "--timeout", "90", "--setup-timeout", "90", "--ceiling-writes", "500", *args],
                       capture_output=True, text=True, timeout=140)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def check_invariants(result: dict[str, Any], workloads: int) -> None:
    assert result["workloads"] == workloads
    assert result["members"] == 3
    assert result["all_recovered"] is True
    assert result["recovered"] == workloads
    assert result["state_injected"] == workloads
    assert result["max_concurrent_copies"] <= 1
    assert result["problems"] == []
    for key in ("total_seconds", "throughput_per_s", "store_ceiling_writes_per_s", "ceiling_ratio", "cpu_seconds",
                "peak_rss_mb"):
        assert isinstance(result[key], (int, float)), key
    assert set(result["latency_ms"]) >= {"p50", "p90", "p99"}
    for stage in ("evicted", "rescheduled", "work_created", "created", "healthy"):
        assert result["stages_ms"][stage]["count"] == workloads, stage


def test_taint_moves_every_workload_with_its_state(tmp_path: Path) -> None:
    result = bench(tmp_path, "--workloads", "20", "--fault", "taint")
    check_invariants(result, 20)
    assert result["workloads_with_running_history"] > 0  # the StatefulSets and Flink jobs were checked


def test_powered_off_member_is_fenced_then_emptied(tmp_path: Path) -> None:
    result = bench(tmp_path, "--workloads", "10", "--fault", "down")
    check_invariants(result, 10)
    assert result["fault"]["fenced"] is True
    assert result["fault"]["fenced_s"] >= result["fault"]["not_ready_taint_s"]
