"""``flotilla soak partition`` end to end, small: one partition trial on a real ``flotilla up --guard`` stack.

The trial must pass, move both workloads (a FlinkDeployment and a StatefulSet) with their state within the bound
the fencing settings give, and its overlap check must have had the real history of both members to look at: the
same history, with the new copy's start moved before the old copy's stop, is flagged.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from flotilla.member.history import read_history
from flotilla.reliability.partition import NAMESPACE, Timings
from flotilla.reliability.trial_checks import WorkloadOutcome, overlap_problems, workload_problems
from tests.support.pipeline import FLOTILLA

TIMINGS = Timings()  # the command's defaults: fence-after 4, permit-hold 12, margin 4 (bound 20 s)


@pytest.mark.timeout(170)
def test_one_partition_trial_moves_its_workloads_once_with_their_state(tmp_path: Path) -> None:
    data, out = tmp_path / "soak", tmp_path / "soak.json"
    r = subprocess.run([FLOTILLA, "soak", "partition", "--trials", "1", "--workloads", "2", "--faults", "partition",
                        "--seed", "3", "--data-dir", str(data), "--json", str(out)],
                       capture_output=True, text=True, timeout=160)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "1 of 1 trials held every invariant" in r.stdout, r.stdout
    report = json.loads(out.read_text())
    trial = report["trials"][0]
    assert trial["passed"] and trial["problems"] == [], trial
    (fault,) = trial["faults"]
    home = fault["members"][0]
    assert fault["fault"] == "partition"
    assert set(trial["fenced_s"]) == {home} and home in trial["unfenced"], trial
    assert trial["fenced_s"][home] <= TIMINGS.bound + TIMINGS.monitor_period + TIMINGS.fence_pending, trial
    assert {w["kind"] for w in trial["workloads"]} == {"FlinkDeployment", "StatefulSet"}
    for w in trial["workloads"]:
        assert w["home"] == home and w["moved"] and w["end"] not in (None, home), w
        assert w["stopped_s"] is not None and w["running_elsewhere_s"] is not None, w
        assert w["stopped_s"] < w["running_elsewhere_s"] <= TIMINGS.move_deadline, w
        assert w["runs_seen"].get(home, 0) >= 1 and w["runs_seen"].get(w["end"], 0) >= 1, w  # both members seen

    # the check ran on the real history: shifting the new copy's start before the old copy's stop is caught
    history = read_history(data / "stack" / "members" / "history.jsonl")
    for w in trial["workloads"]:
        outcome = WorkloadOutcome(kind=w["kind"], namespace=NAMESPACE, name=w["name"], home=home, state_label="",
                                  expected_state=None, clusters=[w["end"]])
        mine = [iv for iv in history if iv.workload == outcome.workload]
        assert overlap_problems(outcome, mine) == []
        old_stop = max(iv.end for iv in mine if iv.member == home and iv.end is not None)
        tampered = [dataclasses.replace(iv, start=old_stop - 1.0) if iv.member == w["end"] else iv for iv in mine]
        assert any("two copies ran at once" in p for p in workload_problems(outcome, tampered)), tampered


@pytest.mark.parametrize("argv, says", [
    (["--faults", "partition,bogus"], "unknown fault bogus"),
    (["--members", "2"], "--members must be at least 3"),
    (["--permit-hold", "5"], "must be longer than the Lease renew interval"),
    (["--trials", "0"], "--trials"),
])
def test_bad_soak_partition_flags_are_usage_errors(argv: list[str], says: str) -> None:
    r = subprocess.run([FLOTILLA, "soak", "partition", *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert says in r.stderr, r.stderr
