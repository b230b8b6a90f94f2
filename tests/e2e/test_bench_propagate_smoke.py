"""``flotilla bench propagate`` completes and its invariants hold (never a timing: speed is the benchmark's job).

A small run as a user would make it: 20 templates (a share of them FlinkDeployments) applied at once and
duplicated to 2 members. It must exit 0 with every member object seen, every binding Healthy, every stage
stamped for every template, and the report's numbers in the JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FLOTILLA = str(Path(sys.executable).parent / "flotilla")

pytestmark = pytest.mark.timeout(120)


def bench(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "result.json"
    r = subprocess.run([FLOTILLA, "bench", "propagate", "--json", str(out), "--timeout", "90", *args],
                       capture_output=True, text=True, timeout=110)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(out.read_text())
    return result, r.stdout


def test_templates_reach_every_member_and_become_healthy(tmp_path: Path) -> None:
    result, stdout = bench(tmp_path, "--templates", "20", "--members", "2", "--flink-share", "0.2")
    assert result["templates"] == 20 and result["members"] == 2
    assert result["flinkdeployments"] == 4
    assert result["member_objects_expected"] == 40  # duplicated: every template in both members
    assert result["member_objects"] == 40
    assert result["all_propagated"] is True and result["all_healthy"] is True
    assert result["healthy"] == 20
    assert result["problems"] == []
    for stage in ("bound", "scheduled", "works", "first_member", "all_members", "healthy"):
        assert result["stages_ms"][stage]["count"] == 20, stage
    assert result["latency_ms"]["count"] == 40
    assert result["latency_ms"]["p50"] <= result["latency_ms"]["p99"] <= result["latency_ms"]["max"]
    for key in ("total_seconds", "throughput_per_s", "cpu_seconds", "peak_rss_mb", "create_seconds"):
        assert isinstance(result[key], (int, float)), key
    assert result["peak_rss_mb"] > 0 and result["cpu_seconds"] > 0
    assert result["writes"]["by_resource"]["resourcebindings"] >= 20
    assert "template -> member object" in stdout


def test_single_placement_puts_each_template_in_one_member(tmp_path: Path) -> None:
    result, _ = bench(tmp_path, "--templates", "12", "--members", "3", "--placement", "single")
    assert result["member_objects_expected"] == 12 and result["member_objects"] == 12
    assert result["all_healthy"] is True and result["problems"] == []


def test_floor_carries_every_template_to_every_member_without_the_controllers(tmp_path: Path) -> None:
    result, stdout = bench(tmp_path, "--templates", "20", "--members", "2", "--flink-share", "0.2", "--floor")
    assert result["floor"] is True
    assert result["member_objects"] == 40 and result["all_propagated"] is True
    assert result["floor_templates"] == {"carried": 20}
    assert result["problems"] == []
    # only the forward path's writes: per template the create, the claim, the binding and its spec.clusters,
    # and one Work per member; no status, no Events
    assert result["writes"]["by_resource"].get("events", 0) == 0
    assert result["writes"]["by_resource"]["resourcebindings"] == 40
    assert result["writes"]["by_resource"]["works"] == 40
    assert result["healthy"] == 0
    for stage in ("bound", "scheduled", "works", "first_member", "all_members"):
        assert result["stages_ms"][stage]["count"] == 20, stage
    assert "the forward-path floor" in stdout and "not measured" in stdout


def test_floor_refuses_the_single_placement(tmp_path: Path) -> None:
    r = subprocess.run([FLOTILLA, "bench", "propagate", "--templates", "3", "--placement", "single", "--floor"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--placement duplicated" in r.stderr + r.stdout
