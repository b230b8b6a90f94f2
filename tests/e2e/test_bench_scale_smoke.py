"""``flotilla bench scale`` completes and its invariants hold (never a timing or a size: that is the benchmark's
job).

A small run as a user would make it: 50 workloads on 5 members (two member processes), the idle window, then
the failover of the first member. It must exit 0 with every workload placed, an idle window measured (CPU and
RSS of the control plane and of each member process) and every workload of the failed member recovered with its
state.
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


def test_steady_state_idle_window_and_failover(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    r = subprocess.run([FLOTILLA, "bench", "scale", "--members", "5", "--workloads", "50", "--kind", "mix",
                        "--member-processes", "2", "--idle-seconds", "3", "--failover", "--setup-timeout", "90",
                        "--timeout", "60", "--json", str(out)], capture_output=True, text=True, timeout=110)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["members"] == 5 and result["workloads"] == 50 and result["member_processes"] == 2
    assert result["problems"] == []
    assert result["setup"]["placed"] == 50
    idle = result["idle"]
    assert idle["window_seconds"] >= 3
    assert set(idle["cpu_cores"]) >= {"control_plane", "members", "driver", "irq", "other"}
    assert isinstance(result["idle_cpu_percent"], (int, float))
    assert idle["workqueue_adds_per_s"].get("cluster-status", 0) > 0  # the health probes go on at idle
    assert result["rss_mb"] > 0 and result["peak_rss_mb"] >= result["rss_mb"]
    processes = result["memory"]["member_processes"]
    assert [p["members"] for p in processes] == [3, 2] and all(p["rss_mb"] > 0 for p in processes)

    fo = result["failover"]
    assert fo["failed_member"] == "p1-member1"
    assert fo["workloads"] == 10  # its even share
    assert fo["all_recovered"] is True and fo["recovered"] == 10
    assert fo["state_injected"] == 10
    assert fo["max_concurrent_copies"] <= 1
    for stage in ("evicted", "rescheduled", "work_created", "created", "healthy"):
        assert fo["stages_ms"][stage]["count"] == 10, stage
    assert "steady state" in r.stdout and "failover of p1-member1" in r.stdout
