"""The demo's checks and summary (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from flotilla.local.demo import copies_at_most
from flotilla.local.demo_report import DemoFacts, checks, render_summary, summary_table


def good() -> DemoFacts:
    return DemoFacts(job_id="j1", old_member="member1", new_member="member2", records_at_fault=300,
                     newest_checkpoint="/c/j1/chk-2", newest_checkpoint_offset=200, injected_label="j1",
                     restored_from="/c/j1/chk-2", restored_offset=200, records_at_end=900, detection_seconds=3.5,
                     taint_seconds=3.6, eviction_seconds=3.7, failover_seconds=9.0, stale_copy_removed=True,
                     copies_max=1)


def test_every_check_holds_for_a_clean_failover() -> None:
    assert all(c.ok for c in checks(good()))
    rows = dict(summary_table(good()))
    assert rows["records reprocessed (since that checkpoint)"] == "100"
    assert rows["copies running at once"] == "never two"
    assert rows["failover (power off -> job RUNNING again)"] == "9.0 s"
    assert "[ok] no record lost" in render_summary(good())


def test_each_broken_promise_fails_its_own_check() -> None:
    cases = {
        "the job id moved with the job": {"injected_label": None},
        "the job resumed from its newest checkpoint": {"restored_from": "/c/j1/chk-1"},
        "no record lost": {"restored_offset": 300},
        "the job makes progress after the failover": {"records_at_end": 200},
        "never two copies running at once": {"copies_max": 2},
        "the stale copy was removed when the failed member came back": {"stale_copy_removed": False},
    }
    for what, change in cases.items():
        facts = good()
        for k, v in change.items():
            setattr(facts, k, v)
        failed = [c.what for c in checks(facts) if not c.ok]
        assert what in failed, (what, failed)
    assert "FAILED" in render_summary(DemoFacts())


@dataclass
class Iv:
    start: float
    end: float | None


def test_copies_at_most_counts_simultaneous_runs_only() -> None:
    assert copies_at_most([]) == 0
    assert copies_at_most([Iv(0, 5), Iv(5, 9)]) == 1  # touching ends do not overlap
    assert copies_at_most([Iv(0, 5), Iv(4, None)]) == 2
    assert copies_at_most([Iv(0, 10), Iv(1, 2), Iv(3, 4), Iv(3.5, 11)]) == 3
