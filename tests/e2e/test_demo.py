"""``flotilla demo`` (what ``make demo`` runs) passes, in both stories: a real run, every check held, the summary
printed, and the members' running history (``D/members/history.jsonl``, kept after the run) with the job never in
two members at once."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from flotilla.local.demo import FENCE_BOUND, FENCE_PENDING, LEASE_RENEW_INTERVAL, SLACK
from flotilla.local.stack import LAPTOP_TIMINGS
from flotilla.member.history import Interval, overlaps, read_history

FLOTILLA = str(Path(sys.executable).parent / "flotilla")
MONITOR_PERIOD = LAPTOP_TIMINGS["cluster_monitor_period"]
# the fence comes no earlier than the bound after the last renewal the control plane saw, which was at most one
# renew interval before the cut (less a poll of the demo's), and no later than the bound, one monitor period, the
# fence-pending phase and the slack of a loaded machine after the cut
FENCE_EARLIEST = FENCE_BOUND - LEASE_RENEW_INTERVAL - 1.0
FENCE_LATEST = FENCE_BOUND + MONITOR_PERIOD + FENCE_PENDING + SLACK
AUTOMATIC_TIMEOUT = 220.0  # the whole default story, start to summary (about a minute on an idle machine)
MANUAL_TIMEOUT = 200.0


def job_runs(data_dir: Path) -> list[Interval]:
    history = data_dir / "members" / "history.jsonl"
    return [iv for iv in read_history(history) if iv.kind == "FlinkDeployment" and iv.name == "wordcount"]


def seconds(out: str, row: str) -> float:
    """A ``... X.Y s`` row of the summary table."""
    m = re.search(rf"^  {re.escape(row)}\s+(\d+\.\d) s$", out, re.MULTILINE)
    assert m is not None, f"no summary row {row!r} in:\n{out}"
    return float(m.group(1))


def run_demo(data_dir: Path, *args: str, timeout: float) -> str:
    r = subprocess.run([FLOTILLA, "demo", "--data-dir", str(data_dir), *args], capture_output=True, text=True,
                       timeout=timeout)
    out = r.stdout
    assert r.returncode == 0, f"demo failed ({r.returncode}):\n{out}\n{r.stderr}"
    assert "every check held" in out
    assert "FAILED" not in out
    assert re.search(r"^  copies running at once\s+never two$", out, re.MULTILINE), out
    assert (data_dir / "demo.log").is_file()
    return out


@pytest.mark.timeout(AUTOMATIC_TIMEOUT + 20)
def test_demo_fences_the_cut_off_member_by_itself_and_moves_the_job_never_running_twice(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    out = run_demo(data_dir, timeout=AUTOMATIC_TIMEOUT)
    for step in ("3 simulated members in Pull mode",
                 "--fence-after 4 --permit-hold 12 --fence-margin 4",
                 "labelled guard.flotilla.io/guarded=true",
                 "member1 is cut off from the control plane (flotilla sim fault member1 --mode partition)",
                 "the job is still RUNNING on member1 behind the cut",
                 "member1's guard stopped the job",
                 "the control plane fenced member1 by itself: taint cluster.flotilla.io/out-of-service:NoExecute, "
                 "condition Fenced=True (LeaseExpired): No renewal of Lease karmada-cluster/member1 seen for",
                 "2 of 3 clusters live",
                 "the control plane had marked member1 fence-pending",
                 "member2's agent acknowledged it", "member3's agent acknowledged it",
                 "acknowledged by 2 of the 2 other agents",
                 "Event ClusterFencedAutomatically (Warning) on Cluster member1",
                 "evicted: graceful eviction task from member1, purgeMode Directly",
                 "created with label failover.flink.io/job-id=",
                 "the partition heals (flotilla sim fault member1 --mode recover)",
                 "member1 holds no copy of the job any more",
                 "[ok] the control plane fenced member1 by itself",
                 "[ok] the guard stopped the job before the fence",
                 "[ok] the stale copy was purged without running again"):
        assert step in out, f"missing step {step!r} in:\n{out}"
    assert "flotilla fence member1" not in out, "nobody fences by hand in the default story"

    stopped = seconds(out, "cut -> guard stopped the job on member1")
    fenced = seconds(out, "cut -> member1 fenced automatically")
    new_home = re.search(r"^  new member\s+(member[23])$", out, re.MULTILINE)
    assert new_home is not None, out
    running = seconds(out, f"cut -> job RUNNING on {new_home.group(1)}")
    healed = seconds(out, "cut -> partition healed")
    gone = seconds(out, "cut -> stale copy gone from member1")
    assert stopped < fenced <= running <= healed <= gone, out
    assert FENCE_EARLIEST <= fenced <= FENCE_LATEST, (fenced, FENCE_EARLIEST, FENCE_LATEST)

    runs = job_runs(data_dir)
    assert {iv.member for iv in runs} == {"member1", new_home.group(1)}, runs
    assert overlaps(runs) == [], f"two copies ran at once: {overlaps(runs)}"
    on_member1 = [iv for iv in runs if iv.member == "member1"]
    assert len(on_member1) == 1 and on_member1[0].end is not None, on_member1  # stopped once, never again


def test_demo_manual_fence_moves_the_flink_job_after_the_operator_fences(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    out = run_demo(data_dir, "--manual-fence", timeout=MANUAL_TIMEOUT)
    for step in ("member1 loses power", "member1 is not Ready", "tainted member1 cluster.karmada.io/not-ready:NoExecute",
                 "evicted: graceful eviction task from member1, purgeMode Directly", "flotilla fence member1",
                 "created with label failover.flink.io/job-id=", "member1 holds no copy of the job any more"):
        assert step in out, f"missing step {step!r} in:\n{out}"
    assert "ClusterFencedAutomatically" not in out
    runs = job_runs(data_dir)
    assert {iv.member for iv in runs} >= {"member1"} and len({iv.member for iv in runs}) == 2, runs
    assert overlaps(runs) == [], f"two copies ran at once: {overlaps(runs)}"


def test_demo_refuses_a_data_dir_it_did_not_make(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("do not delete")
    r = subprocess.run([FLOTILLA, "demo", "--data-dir", str(precious)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "was not made by flotilla; pass another --data-dir" in r.stdout
    assert (precious / "thesis.txt").read_text() == "do not delete"
