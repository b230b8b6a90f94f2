"""The demo's checks and summary (pure), for both stories."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flotilla.local.demo import FENCE_AFTER, FENCE_BOUND, FENCE_MARGIN, PERMIT_HOLD
from flotilla.local.demo_command import DEMO_EPILOG
from flotilla.local.demo_report import MANUAL, DemoFacts, checks, render_summary, summary_table
from flotilla.member.history import copies_at_most

CUT = 1_000_000.0  # the partition, in the running history's wall-clock seconds


def good_manual() -> DemoFacts:
    return DemoFacts(story=MANUAL, job_id="j1", old_member="member1", new_member="member2", records_at_fault=300,
                     newest_checkpoint="/c/j1/chk-2", newest_checkpoint_offset=200, injected_label="j1",
                     restored_from="/c/j1/chk-2", initial_savepoint_path="file:///c/j1/chk-2", restored_offset=200, records_at_end=900, detection_seconds=3.5,
                     taint_seconds=3.6, eviction_seconds=3.7, failover_seconds=9.0, stale_copy_removed=True,
                     copies_max=1)


def good_automatic() -> DemoFacts:
    return DemoFacts(job_id="j1", old_member="member1", new_member="member2", records_at_fault=1385,
                     newest_checkpoint="/c/j1/chk-6", newest_checkpoint_offset=1200, injected_label="j1",
                     restored_from="/c/j1/chk-6", initial_savepoint_path="file:///c/j1/chk-6",
                     restored_offset=1200, records_at_end=3151, failover_seconds=17.4,
                     stale_copy_removed=True, copies_max=1, permit_hold=12.0, fence_after=4.0, fence_margin=4.0,
                     cut_at=CUT, old_copy_started_at=CUT - 4.0, old_copy_stopped_at=CUT + 10.6,
                     old_member_starts=[CUT - 4.0], fenced_since=CUT + 16.0, fence_status="True/LeaseExpired",
                     fence_events=1, fence_seconds=16.1, heal_seconds=17.5, stale_gone_seconds=35.1)


def failed(facts: DemoFacts, change: dict[str, Any]) -> list[str]:
    for k, v in change.items():
        setattr(facts, k, v)
    return [c.what for c in checks(facts) if not c.ok]


def test_every_check_holds_for_a_clean_manual_failover() -> None:
    assert all(c.ok for c in checks(good_manual()))
    rows = dict(summary_table(good_manual()))
    assert rows["records reprocessed (since that checkpoint)"] == "100"
    assert rows["copies running at once"] == "never two"
    assert rows["failover (power off -> job RUNNING again)"] == "9.0 s"
    assert "[ok] no record lost" in render_summary(good_manual())


def test_each_broken_promise_of_the_manual_story_fails_its_own_check() -> None:
    cases = {
        "the job id moved with the job": {"injected_label": None},
        "the job resumed from its newest checkpoint": {"restored_from": "/c/j1/chk-1"},
        "the control plane gave the new copy its newest checkpoint": {"initial_savepoint_path": ""},
        "no record lost": {"restored_offset": 300},
        "the job makes progress after the failover": {"records_at_end": 200},
        "never two copies running at once": {"copies_max": 2},
        "the stale copy was removed when the failed member came back": {"stale_copy_removed": False},
    }
    for what, change in cases.items():
        assert what in failed(good_manual(), change), what
    assert "FAILED" in render_summary(DemoFacts(story=MANUAL))


def test_every_check_holds_for_a_clean_automatic_fence() -> None:
    facts = good_automatic()
    assert all(c.ok for c in checks(facts)), [c for c in checks(facts) if not c.ok]
    rows = dict(summary_table(facts))
    assert rows["fence bound (permit-hold + fence-after + margin)"] == "12 + 4 + 4 = 20 s"
    assert rows["cut -> guard stopped the job on member1"] == "10.6 s"  # from the running history
    assert rows["cut -> member1 fenced automatically"] == "16.1 s"
    assert rows["cut -> job RUNNING on member2"] == "17.4 s"
    assert rows["cut -> partition healed"] == "17.5 s"
    assert rows["cut -> stale copy gone from member1"] == "35.1 s"
    assert rows["records reprocessed (since that checkpoint)"] == "185"
    assert rows["copies running at once"] == "never two"
    assert "[ok] the guard stopped the job before the fence" in render_summary(facts)


def test_each_broken_promise_of_the_automatic_story_fails_its_own_check() -> None:
    behind = "the job kept running on member1 behind the cut until its guard stopped it"
    by_itself = "the control plane fenced member1 by itself"
    before = "the guard stopped the job before the fence"
    purged = "the stale copy was purged without running again"
    cases: list[tuple[str, dict[str, Any]]] = [
        (behind, {"old_copy_stopped_at": None}),  # never stopped
        (behind, {"old_copy_stopped_at": CUT - 1.0}),  # stopped before the cut: not the guard
        (behind, {"old_copy_started_at": CUT + 1.0}),  # not running at the cut
        (by_itself, {"fence_status": ""}),  # no Fenced condition
        (by_itself, {"fence_status": "True/Manual"}),
        (by_itself, {"fence_events": 0}),
        (by_itself, {"fenced_by_hand": True}),
        (before, {"old_copy_stopped_at": CUT + 16.2}),  # in the second the fence landed: not provably before
        (before, {"fenced_since": None}),
        ("the job id moved with the job", {"injected_label": "other"}),
        ("the job resumed from its newest checkpoint", {"restored_from": "/c/j1/chk-5"}),
        ("no record lost", {"restored_offset": 1400}),
        ("the job makes progress after the failover", {"records_at_end": 1200}),
        ("never two copies running at once", {"copies_max": 2}),
        ("never two copies running at once", {"overlaps": [("a", "b")]}),
        (purged, {"stale_copy_removed": False}),
        (purged, {"old_member_starts": [CUT - 4.0, CUT + 20.0]}),  # it ran again after the guard's stop
    ]
    for what, change in cases:
        assert what in failed(good_automatic(), change), (what, change)
    assert "FAILED" in render_summary(DemoFacts())
    assert dict(summary_table(DemoFacts()))["cut -> guard stopped the job on the old member"] == "-"


@dataclass
class Iv:
    start: float
    end: float | None


def test_copies_at_most_counts_simultaneous_runs_only() -> None:
    assert copies_at_most([]) == 0
    assert copies_at_most([Iv(0, 5), Iv(5, 9)]) == 1  # touching ends do not overlap
    assert copies_at_most([Iv(0, 5), Iv(4, None)]) == 2
    assert copies_at_most([Iv(0, 10), Iv(1, 2), Iv(3, 4), Iv(3.5, 11)]) == 3


def test_the_help_states_the_timings_the_default_story_runs_with() -> None:
    assert f"--fence-after {FENCE_AFTER:g} --permit-hold {PERMIT_HOLD:g} --fence-margin {FENCE_MARGIN:g}" in DEMO_EPILOG
    assert f"{PERMIT_HOLD:g} + {FENCE_AFTER:g} + {FENCE_MARGIN:g} = {FENCE_BOUND:g} s" in " ".join(DEMO_EPILOG.split())
