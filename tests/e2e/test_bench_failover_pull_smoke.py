"""``flotilla bench failover --pull`` completes and its invariants hold: member1, the one that fails, is a Pull
member with its own agent process, which applied its workloads and removed them after the taint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_bench_failover_smoke import bench, check_invariants

pytestmark = pytest.mark.timeout(150)


def test_pull_member_tainted_moves_every_workload_with_its_state(tmp_path: Path) -> None:
    result = bench(tmp_path, "--workloads", "20", "--fault", "taint", "--pull")
    check_invariants(result, 20)
    assert result["pull"] is True
    assert "--pull" in result["command"]
    assert result["cpu_seconds_agent"] > 0  # the agent, not the control plane, applied member1's Works
