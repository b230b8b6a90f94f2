"""The Applied hand-off between the execution and work-status controllers (what is left, for whom, until when)."""

from __future__ import annotations

from typing import Any

from flotilla.runtime.applied_handoff import AppliedHandoff, applied_handoff

APPLIED = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "ok"}


def _work(uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "w", "namespace": "karmada-es-m1", "uid": uid, "generation": 1}}


def test_nothing_is_accepted_without_a_taker() -> None:
    assert not AppliedHandoff().accepting()


def test_left_conditions_are_announced_to_the_taker_and_found_for_the_same_work() -> None:
    handoff, told = AppliedHandoff(), []
    handoff.take_from_now_on(told.append)
    handoff.leave("karmada-es-m1/w", _work(), [APPLIED], "2026-01-01T00:00:00Z")
    assert told == ["karmada-es-m1/w"]
    left = handoff.left_for("karmada-es-m1/w", _work())
    assert left is not None and left.conditions == (APPLIED,) and left.now == "2026-01-01T00:00:00Z"


def test_a_recreated_work_with_another_uid_does_not_get_the_old_conditions() -> None:
    handoff = AppliedHandoff()
    handoff.take_from_now_on(lambda key: None)
    handoff.leave("ns/w", _work("old"), [APPLIED], "t")
    assert handoff.left_for("ns/w", _work("new")) is None


def test_written_forgets_only_the_conditions_that_went_out() -> None:
    handoff = AppliedHandoff()
    handoff.take_from_now_on(lambda key: None)
    handoff.leave("ns/w", _work(), [APPLIED], "t1")
    first = handoff.left_for("ns/w", _work())
    assert first is not None
    handoff.leave("ns/w", _work(), [APPLIED], "t2")  # a newer apply replaced them meanwhile
    handoff.written("ns/w", first)
    newer = handoff.left_for("ns/w", _work())
    assert newer is not None and newer.now == "t2"
    handoff.written("ns/w", newer)
    assert handoff.left_for("ns/w", _work()) is None and len(handoff) == 0


def test_drop_and_stop_taking() -> None:
    handoff = AppliedHandoff()

    def taker(key: str) -> None:
        pass

    handoff.take_from_now_on(taker)
    handoff.leave("ns/w", _work(), [APPLIED], "t")
    handoff.drop("ns/w")
    assert handoff.left_for("ns/w", _work()) is None
    handoff.stop_taking(lambda key: None)  # another taker's stop changes nothing
    assert handoff.accepting()
    handoff.stop_taking(taker)
    assert not handoff.accepting()


def test_one_handoff_per_controller_manager() -> None:
    extras: dict[str, Any] = {}
    assert applied_handoff(extras) is applied_handoff(extras)
    assert applied_handoff({}) is not applied_handoff(extras)
