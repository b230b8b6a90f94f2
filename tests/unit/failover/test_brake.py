"""D10: what the eviction brake counts as unhealthy - Ready conditions, and the probes that fail or hang.

The last tests simulate members that fail at the same instant, probed at different moments of the status period,
with the failure threshold of the cluster-status controller: from the moment the first member is Ready=False
(the moment its workloads are evicted) the brake must be halted, which it is not when it counts Ready conditions
only (members going down together would then be evicted towards each other).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.failover.brake import BrakeCount, ProbeBoard, brake_count, halted_recheck, recovering
from flotilla.failover.ratelimit import EvictionMode, EvictionRateLimiter, eviction_mode

PERIOD = 0.5
THRESHOLD = 2.0
TIMEOUT = 10.0


def test_d10_board_failing_from_the_first_failed_answer_until_a_healthy_one() -> None:
    board = ProbeBoard(PERIOD)
    board.started("m1", 0.0)
    board.answered("m1", True, 0.01)
    assert board.suspect("m1", 0.02) is None
    board.started("m1", 0.5)
    board.answered("m1", False, 0.51)
    assert board.suspect("m1", 0.52) == "failing"
    board.started("m1", 1.0)
    assert board.suspect("m1", 1.0) == "failing"
    board.answered("m1", True, 1.01)
    assert board.suspect("m1", 1.02) is None


def test_d10_board_overdue_once_a_probe_has_waited_a_whole_period() -> None:
    board = ProbeBoard(PERIOD)
    board.started("m1", 0.0)
    assert board.suspect("m1", PERIOD - 0.01) is None
    # a whole period, not more: a member failing its probes a threshold after this one started is Ready=False
    # at that very moment (the case the simulation below found at the boundary)
    assert board.suspect("m1", PERIOD) == "overdue"
    board.answered("m1", True, 1.5)  # a slow member answers after all: no longer suspect
    assert board.suspect("m1", 1.6) is None


def test_d10_board_forgets_and_knows_nothing_of_unprobed_clusters() -> None:
    board = ProbeBoard(PERIOD)
    board.answered("m1", False, 0.0)
    board.forget("m1")
    assert board.suspect("m1", 1.0) is None
    assert board.suspect("never-probed", 1.0) is None
    with pytest.raises(ValueError, match="greater than 0"):
        ProbeBoard(0)


def test_d10_count_suspects_only_among_ready_clusters() -> None:
    board = ProbeBoard(PERIOD)
    board.answered("down", False, 0.0)  # Ready=False already: unhealthy, not counted twice
    board.answered("failing", False, 0.0)
    board.started("frozen", 0.0)
    board.answered("fine", True, 0.0)
    clusters = [("down", False), ("failing", True), ("frozen", True), ("fine", True), ("pull", True)]
    assert brake_count(clusters, board, 1.0) == BrakeCount(total=5, unhealthy=1, suspect=2)
    assert brake_count(clusters, None, 1.0) == BrakeCount(total=5, unhealthy=1, suspect=0)
    assert BrakeCount(5, 1, 2).counted == 3


def test_d10_suspects_take_part_in_the_mode_and_the_message() -> None:
    limiter = EvictionRateLimiter()
    assert limiter.decide(0.0, 1, 3) == 0.0 and limiter.mode is EvictionMode.PRIMARY
    assert limiter.decide(0.0, 1, 3, suspect=1) == 0.0 and limiter.mode is EvictionMode.SECONDARY
    assert "2 of 3 clusters are unhealthy (1 of them is still Ready, but its probes fail or hang)" in \
        limiter.message(1, 3, 1)
    assert limiter.decide(0.0, 1, 3, suspect=2) is None and limiter.mode is EvictionMode.HALTED
    message = limiter.message(1, 3, 2)
    assert "every cluster (3/3) is unhealthy (2 of them are still Ready, but their probes fail or hang)" in message
    assert limiter.message(3, 3) == ("evictions halted: every cluster (3/3) is unhealthy, so the fault is most "
                                     "likely the control plane's own network")


def test_d10_halted_by_suspects_is_looked_at_again_within_period_plus_threshold() -> None:
    assert halted_recheck(BrakeCount(3, 3, 0), 10.0, PERIOD, THRESHOLD) == 10.0
    assert halted_recheck(BrakeCount(3, 1, 2), 10.0, PERIOD, THRESHOLD) == PERIOD + THRESHOLD
    assert halted_recheck(BrakeCount(3, 1, 2), 10.0, 10.0, 30.0) == 10.0


# ---------------------------------------------------------------------------- members failing together


@dataclass
class Member:
    """A member that fails at t=0, probed with the cluster-status controller's rules."""

    phase: float  # its first probe after the fault, in [0, PERIOD)
    hangs: bool  # frozen (a probe waits for TIMEOUT) rather than refused (answered at once)

    def events(self, threshold: float) -> tuple[list[tuple[float, str]], float]:
        """``(time, "start"|"fail")`` of its probes until it is Ready=False, and when that happens."""
        out: list[tuple[float, str]] = []
        start = self.phase
        first_fail: float | None = None
        while True:
            answer = start + (TIMEOUT if self.hangs else 0.0)
            out += [(start, "start"), (answer, "fail")]
            first_fail = answer if first_fail is None else first_fail
            if answer - first_fail >= threshold:
                return out, answer  # the failure threshold counts from the first failed answer
            start = answer + PERIOD


def brake_modes_after_first_flip(members: list[Member], threshold: float, *, board_on: bool) -> list[EvictionMode]:
    """The brake's mode at every step from the first Ready=False on, until every member is Ready=False."""
    board = ProbeBoard(PERIOD)
    names = [f"m{i}" for i in range(len(members))]
    for name in names:
        board.answered(name, True, -0.1)  # healthy before the fault
    timeline: list[tuple[float, int, str]] = []
    flips: dict[str, float] = {}
    for i, (name, member) in enumerate(zip(names, members, strict=True)):
        events, flips[name] = member.events(threshold)
        timeline += [(t, i, kind) for t, kind in events]
    first_flip = min(flips.values())
    checkpoints = sorted({t for t, _, _ in timeline} | set(flips.values()))
    modes: list[EvictionMode] = []
    timeline.sort()
    done = 0
    for now in checkpoints:
        while done < len(timeline) and timeline[done][0] <= now:
            t, i, kind = timeline[done]
            if kind == "start":
                board.started(names[i], t)
            else:
                board.answered(names[i], False, t)
            done += 1
        if now < first_flip:
            continue
        count = brake_count(((n, now < flips[n]) for n in names), board if board_on else None, now)
        modes.append(eviction_mode(count.counted, count.total))
    return modes


members_failing_together = st.lists(
    st.builds(Member, phase=st.floats(0, PERIOD, exclude_max=True), hangs=st.booleans()), min_size=2, max_size=5)


@settings(max_examples=300, deadline=None)
@given(members=members_failing_together, periods=st.integers(2, 8))
def test_d10_members_failing_together_halt_evictions_from_the_first_not_ready_one(members: list[Member],
                                                                                   periods: int) -> None:
    """Refused or frozen, probed at any moment of the period: halted from the first Ready=False on (with a
    failure threshold of at least two status periods, as every default and the e2e test have)."""
    modes = brake_modes_after_first_flip(members, periods * PERIOD, board_on=True)
    assert modes and set(modes) == {EvictionMode.HALTED}


def test_d10_ready_conditions_alone_leave_the_gap() -> None:
    """The same fault counted from Ready conditions only (the brake before the fix): the first member to be
    Ready=False is evicted at the primary rate, towards members that are down too."""
    members = [Member(0.0, hangs=False), Member(0.3, hangs=False), Member(0.1, hangs=True)]
    modes = brake_modes_after_first_flip(members, THRESHOLD, board_on=False)
    assert modes[0] is EvictionMode.PRIMARY and EvictionMode.SECONDARY in modes and modes[-1] is EvictionMode.HALTED
    assert set(brake_modes_after_first_flip(members, THRESHOLD, board_on=True)) == {EvictionMode.HALTED}


def test_d10_one_member_down_while_the_others_answer_is_not_delayed() -> None:
    """A normal failover: the others answer their probes, so nothing is suspect and the primary rate applies."""
    board = ProbeBoard(PERIOD)
    for t in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5):
        for name in ("m1", "m2"):
            board.started(name, t)
            board.answered(name, True, t + 0.005)
        board.started("m0", t)
        board.answered("m0", False, t + 0.001)
    count = brake_count([("m0", False), ("m1", True), ("m2", True)], board, 2.6)
    assert count == BrakeCount(3, 1, 0)
    assert EvictionRateLimiter().decide(2.6, count.unhealthy, count.total, count.suspect) == 0.0


def test_d10_a_not_ready_cluster_that_answers_again_is_recovering() -> None:
    board = ProbeBoard(PERIOD)
    assert not recovering(board, "m1", ready=False)  # never answered
    board.answered("m1", False, 0.0)
    assert not recovering(board, "m1", ready=False)  # down: evictions from it go ahead
    board.answered("m1", True, 0.5)
    assert recovering(board, "m1", ready=False)  # Ready within the success threshold: its evictions wait
    assert not recovering(board, "m1", ready=True)
    assert not recovering(None, "m1", ready=False)  # no cluster-status controller here: Ready decides alone


def test_d17_board_tells_its_listeners_every_answer_and_keeps_the_last_one() -> None:
    board = ProbeBoard(PERIOD)
    heard: list[tuple[str, bool]] = []
    remove = board.add_listener(lambda cluster, healthy: heard.append((cluster, healthy)))
    assert board.last_answer("member1") is None  # never probed here
    board.started("member1", 0.0)
    assert board.last_answer("member1") is None and heard == []  # in flight: no answer yet
    board.answered("member1", False, 1.0)
    board.answered("member1", True, 2.0)
    assert heard == [("member1", False), ("member1", True)] and board.last_answer("member1") is True
    remove()
    board.answered("member1", False, 3.0)
    assert len(heard) == 2 and board.last_answer("member1") is False


def test_d17_a_failing_listener_does_not_fail_the_probe() -> None:
    board = ProbeBoard(PERIOD)
    board.add_listener(lambda cluster, healthy: 1 / 0)  # type: ignore[func-returns-value]
    board.answered("member1", True, 1.0)
    assert board.answering("member1")
