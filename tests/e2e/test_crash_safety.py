"""Crash safety (short version of ``flotilla soak crash``; the long one is ``make soak``): the control plane gets
SIGKILL in the middle of a mass Directly-with-state failover, restarts on the same SQLite data directory, and the
end state keeps every promise (one healthy copy in an allowed member, the state injected, no task duplicated or
left, no Work or member object left behind, never two copies running)."""

from __future__ import annotations

import pytest

from flotilla.reliability.crash import CrashParams, run_crash_trials

pytestmark = pytest.mark.timeout(300)


async def test_sigkill_of_the_control_plane_during_a_mass_failover_converges_with_every_invariant(tmp_path) -> None:
    p = CrashParams(trials=3, workloads=45, members=3, kind="mix", seed=11, kill_window=1.2, timeout=120,
                    setup_timeout=120, data_dir=str(tmp_path / "trials"))
    result = await run_crash_trials(p)
    assert len(result["trials"]) == 3
    for trial in result["trials"]:
        assert trial["problems"] == [], trial
        assert trial["converged_after_restart_s"] is not None
    # the kills landed at different points of the failover (the seed's moments are spread over the window)
    assert len({t["kill_after_fault_s"] for t in result["trials"]}) == 3
